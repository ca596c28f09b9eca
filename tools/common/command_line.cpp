#include "common/command_line.h"

#include <cctype>

namespace cutrace::cli {
namespace {

// Words people give a switch that are not its value: taking one as the command would end in
// "command 'maybe' not found" after setting everything up.
bool looks_like_a_mistyped_switch_value(std::string_view word) {
  for (const char* w : {"yes", "no", "y", "n", "on", "off", "1", "0", "maybe", "enable", "disable", "enabled",
                        "disabled", "none", "all", "t", "f"})
    if (equals_ignoring_case(word, w)) return true;
  return false;
}

}  // namespace

std::vector<std::string> comma_items(std::string_view list) {
  std::vector<std::string> items;
  for (size_t from = 0;;) {
    const size_t comma = list.find(',', from);
    items.emplace_back(list.substr(from, comma == std::string_view::npos ? std::string_view::npos : comma - from));
    if (comma == std::string_view::npos) return items;
    from = comma + 1;
  }
}

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

bool is_switch_word(std::string_view word) {
  return equals_ignoring_case(word, "true") || equals_ignoring_case(word, "false");
}

Scanner::Scanner(int argc, const char* const* argv, std::span<const OptionSpec> options, Rules rules)
    : argc_(argc), argv_(argv), options_(options), rules_(rules) {}

bool Scanner::next(Arg& arg) {
  while (index_ < argc_) {
    const std::string_view word = argv_[index_];
    if (!options_ended_ && word == "--") {
      options_ended_ = true;
      ++index_;
      if (rules_.operand_ends_options) return false;
      continue;
    }
    arg = Arg{};
    arg.word = std::string(word);
    // A lone "-" is an operand (a file named "-"), not an option.
    if (options_ended_ || word.size() < 2 || word[0] != '-') {
      if (rules_.operand_ends_options) {
        options_ended_ = true;
        return false;  // the command starts here: rest() has it
      }
      arg.kind = Arg::Kind::kOperand;
      ++index_;
      return true;
    }
    ++index_;
    taken_.push_back(arg.word);
    if (word.starts_with("--")) {
      const std::string_view body = word.substr(2);
      const size_t eq = body.find('=');
      arg.long_name = std::string(body.substr(0, eq));
      if (eq != std::string_view::npos) {
        arg.has_attached = true;
        arg.attached = std::string(body.substr(eq + 1));
      }
      arg.spelled = "--" + arg.long_name;
      for (const OptionSpec& o : options_)
        if (o.long_name == arg.long_name) arg.spec = &o;
    } else {
      arg.short_name = word[1];
      arg.spelled = std::string(word.substr(0, 2));
      if (word.size() > 2) {
        arg.has_attached = true;
        arg.attached = std::string(word.substr(2));
      }
      for (const OptionSpec& o : options_)
        if (o.short_name && o.short_name == arg.short_name) arg.spec = &o;
      // `-fw` bundles are not nsys syntax, and only value options take attached text.
      if (arg.spec && arg.has_attached && (!rules_.short_values_attach || arg.spec->arity == Arity::kNone))
        arg.spec = nullptr;
    }
    arg.kind = arg.spec ? Arg::Kind::kOption : Arg::Kind::kUnknownOption;
    return true;
  }
  return false;
}

bool Scanner::value(const Arg& arg, std::string& out) {
  if (arg.has_attached) {
    out = arg.attached;
    return !(rules_.empty_value_is_missing && out.empty());
  }
  if (index_ >= argc_ || (rules_.empty_value_is_missing && argv_[index_][0] == '\0')) return false;
  out = argv_[index_++];
  taken_.push_back(out);
  return true;
}

bool Scanner::switch_value(const Arg& arg, bool& out, std::string& bad) {
  std::string word;
  if (arg.has_attached) {
    word = arg.attached;
  } else if (index_ < argc_ && is_switch_word(argv_[index_])) {
    word = argv_[index_++];
    taken_.push_back(word);
  } else if (rules_.catch_mistyped_switch_values && index_ < argc_ && looks_like_a_mistyped_switch_value(argv_[index_])) {
    word = argv_[index_];
  } else {
    out = true;
    return true;
  }
  if (!is_switch_word(word)) {
    bad = word;
    return false;
  }
  out = equals_ignoring_case(word, "true");
  return true;
}

std::vector<std::string> Scanner::rest() const {
  std::vector<std::string> out;
  for (int i = index_; i < argc_; ++i) out.emplace_back(argv_[i]);
  return out;
}

}  // namespace cutrace::cli
