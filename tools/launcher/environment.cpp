#include "launcher/environment.h"

#include <limits.h>
#include <unistd.h>

#include <cctype>
#include <cstring>
#include <string_view>

#include "cutrace/abi.h"
#include "common/python_handoff.h"

namespace cutrace::launcher {

std::string add_ld_preload(const std::string& preload, const char* existing) {
  if (!existing || !*existing) return preload;
  return std::string(existing) + ":" + preload;
}

std::vector<std::string> program_environment(char* const* environ_entries, const std::string& preload,
                                             const std::string& session_name, const std::string& nvtx_injection,
                                             const std::vector<std::string>& extra) {
  const bool inject_nvtx = !nvtx_injection.empty();
  auto replaced_by_extra = [&extra](std::string_view entry) {
    for (const std::string& e : extra)
      if (entry.substr(0, entry.find('=') + 1) == std::string_view(e).substr(0, e.find('=') + 1)) return true;
    return false;
  };
  const std::string preload_key = "LD_PRELOAD=";
  const std::string nvtx_key = "NVTX_INJECTION64_PATH=";
  const std::string session_key = std::string(abi::kSessionEnvVar) + "=";
  const std::string package_python_key = std::string(cli::kPackagePythonEnvVar) + "=";
  // With duplicate LD_PRELOAD entries the loader uses the last one, so that is the value kept (in the
  // first one's place; the others would only confuse programs that read the environment).
  const char* user_preload = nullptr;
  for (char* const* e = environ_entries; e && *e; ++e)
    if (std::string_view(*e).starts_with(preload_key)) user_preload = *e + preload_key.size();

  std::vector<std::string> env;
  bool have_preload = false, have_session = false;
  for (char* const* e = environ_entries; e && *e; ++e) {
    std::string_view entry(*e);
    if (entry.starts_with(preload_key)) {
      if (have_preload) continue;
      env.push_back(preload_key + add_ld_preload(preload, user_preload));
      have_preload = true;
    } else if (replaced_by_extra(entry)) {
      continue;
    } else if (entry.starts_with(package_python_key)) {
      continue;  // the pip-installed command's own, never the program's
    } else if (inject_nvtx && entry.starts_with(nvtx_key)) {
      continue;  // NVTX loads one tool; while nvtx is traced, it is the shim (as under nsys)
    } else if (entry.starts_with(session_key)) {
      if (have_session) continue;
      env.push_back(session_key + session_name);
      have_session = true;
    } else {
      env.emplace_back(entry);
    }
  }
  if (!have_preload) env.push_back(preload_key + preload);
  if (!have_session) env.push_back(session_key + session_name);
  // The shim is already loaded (LD_PRELOAD), so NVTX's dlopen of this path hands back the same copy.
  if (inject_nvtx) env.push_back(nvtx_key + nvtx_injection);
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

std::vector<std::string> recorder_environment(char* const* environ_entries) {
  const std::string session_key = std::string(abi::kSessionEnvVar) + "=";
  const std::string session_fd_key = std::string(abi::kSessionFdEnvVar) + "=";
  std::vector<std::string> env;
  for (char* const* e = environ_entries; e && *e; ++e)
    if (!std::string_view(*e).starts_with(session_key) && !std::string_view(*e).starts_with(session_fd_key))
      env.emplace_back(*e);
  return env;
}

std::string shell_quote(const std::string& word) {
  if (word.empty()) return "''";
  bool plain = true;
  for (unsigned char c : word) {
    if (!(std::isalnum(c) || std::strchr("@%+=:,./-_", c))) {
      plain = false;
      break;
    }
  }
  if (plain) return word;
  std::string quoted = "'";
  for (char c : word) {
    if (c == '\'')
      quoted += "'\\''";
    else
      quoted += c;
  }
  return quoted + "'";
}

std::string host_name() {
  char host[HOST_NAME_MAX + 1] = {};
  if (gethostname(host, sizeof host - 1) != 0) return "localhost";
  return host;
}

std::string shell_join(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) {
    if (!out.empty()) out += ' ';
    out += shell_quote(w);
  }
  return out;
}

}  // namespace cutrace::launcher
