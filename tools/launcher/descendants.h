// The processes a command leaves running after it exits. The launcher is a child subreaper, so
// processes orphaned by the command (daemons, `cmd &` in a script) become its children instead of
// init's, and `--wait all` can wait for them the way nsys does.
#pragma once

#include <sys/types.h>

#include <vector>

namespace cutrace::launcher {

// Makes orphaned descendants children of this process. Returns false where the kernel refuses.
bool become_subreaper();

// Every live descendant of this process except `excluded` and its descendants, found through
// /proc/<pid>/task/<tid>/children. Zombies are not counted.
std::vector<pid_t> live_descendants(pid_t excluded);

// Reaps adopted children that have exited (never `excluded`) and returns when no live descendant but
// `excluded` and its own remains. A signal the launcher receives meanwhile (one no program is there
// to receive) is passed to every remaining descendant.
void wait_for_descendants(pid_t excluded);

}  // namespace cutrace::launcher
