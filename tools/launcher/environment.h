// The program's environment and the text forms of its command line.
#pragma once

#include <string>
#include <vector>

namespace cutrace::launcher {

// LD_PRELOAD's new value: `preload` first, then whatever the user had (the loader accepts both ':' and
// ' ' as separators, so the old value is kept verbatim).
std::string prepend_ld_preload(const std::string& preload, const char* existing);

// `environ` with LD_PRELOAD prepended and CUTRACE_SESSION set; every other entry is kept, in order.
std::vector<std::string> program_environment(char* const* environ_entries, const std::string& preload,
                                             const std::string& session_name);

// `environ` without CUTRACE_SESSION: the recorder of a cutrace run inside another one's program must
// not attach to the outer session as if it were a traced program.
std::vector<std::string> recorder_environment(char* const* environ_entries);

// `word` quoted for a POSIX shell, only where it needs it.
std::string shell_quote(const std::string& word);
std::string shell_join(const std::vector<std::string>& words);

}  // namespace cutrace::launcher
