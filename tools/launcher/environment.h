// The program's environment and the text forms of its command line.
#pragma once

#include <string>
#include <vector>

namespace cutrace::launcher {

// LD_PRELOAD's new value: whatever the user had, verbatim (the loader accepts both ':' and ' ' as
// separators), then `preload` last. Last, so that the shim's RTLD_NEXT reaches the CUDA libraries
// themselves: a tool preloaded by the user still sees every call it saw before (it runs first and
// reaches the shim through its own RTLD_NEXT), the recorded duration does not include that tool's
// time, and a wrapper handed out for a lookup through a handle calls exactly what the lookup found.
std::string add_ld_preload(const std::string& preload, const char* existing);

// `environ` with `preload` (the shim, and the OS runtime wrappers after it with -t osrt) added to
// LD_PRELOAD and CUTRACE_SESSION set, with a non-empty `nvtx_injection` (the shim) as
// NVTX_INJECTION64_PATH (replacing the program's own), and the KEY=VALUE entries of `extra` (replacing
// any of the same name); every other entry is kept, in order.
std::vector<std::string> program_environment(char* const* environ_entries, const std::string& preload,
                                             const std::string& session_name, const std::string& nvtx_injection = {},
                                             const std::vector<std::string>& extra = {});

// `environ` without CUTRACE_SESSION and CUTRACE_SESSION_FD: the recorder of a cutrace run inside another one's program must
// not attach to the outer session as if it were a traced program.
std::vector<std::string> recorder_environment(char* const* environ_entries);

// This host's name ("localhost" should the system not say): %h in -o, the metadata, `status`.
std::string host_name();

// `word` quoted for a POSIX shell, only where it needs it.
std::string shell_quote(const std::string& word);
std::string shell_join(const std::vector<std::string>& words);

}  // namespace cutrace::launcher
