#include "model/calls.h"

namespace cutrace::model {

using reader::ApiCall;

bool is_shown_call(const ApiCall& call, bool show_internal) {
  return !call.outside_capture() && (show_internal || !call.api->internal);
}

bool is_counted_call(const ApiCall& call, const CallFamily& family, bool show_internal) {
  return is_shown_call(call, show_internal) && (abi::domain_bit(call.api->domain) & family.domains) &&
         !call.inside(family.within);
}

// The function's own name in a demangled one: without its return type, namespaces and classes,
// template arguments and parameters ("void ns::axpy<float>(int, float*)" -> "axpy").
std::string base_kernel_name(std::string_view demangled) {
  // The parameters: the last top-level parenthesised group.
  size_t end = demangled.size();
  if (end && demangled[end - 1] == ')') {
    int depth = 0;
    for (size_t i = end; i-- > 0;) {
      if (demangled[i] == ')') ++depth;
      else if (demangled[i] == '(' && --depth == 0) {
        end = i;
        break;
      }
    }
  }
  std::string_view name = demangled.substr(0, end);
  // Template arguments of the function itself.
  if (!name.empty() && name.back() == '>') {
    int depth = 0;
    for (size_t i = name.size(); i-- > 0;) {
      if (name[i] == '>') ++depth;
      else if (name[i] == '<' && --depth == 0) {
        name = name.substr(0, i);
        break;
      }
    }
  }
  // The qualifiers and the return type before it: what follows the last top-level "::" or space.
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (c == '<' || c == '(') ++depth;
    else if ((c == '>' || c == ')') && depth > 0) --depth;
    else if (depth == 0 && (c == ' ' || (c == ':' && i + 1 < name.size() && name[i + 1] == ':')))
      start = c == ' ' ? i + 1 : i + 2;
  }
  return std::string(name.substr(start));
}

}  // namespace cutrace::model
