// Before CUPTI is started in the program's process (cuptiSubscribe and what follows), it is started
// once beside the same CUDA driver in a process of its own (cutrace-cupti-trial, installed beside the
// recorder). A CUPTI that crashes or hangs there (CUPTI 13.2 beside a driver it cannot use recurses
// until its stack overflows inside cuptiSubscribe) is never started here: the run goes on with API
// calls only and says why, rather than the program dying. The trial's verdict is kept in the session
// for the session's other processes with the same driver and CUPTI, so that a job pays for it once.
#pragma once

#include <cstddef>

namespace cutrace::preload {

// True when CUPTI at `cupti_path` may be started beside the driver at `driver_path`: the trial
// returned, or could not be run or give a verdict (then nothing is known against it). False, with
// the reason in `why`, when the trial crashed or hung. Runs on the thread that starts CUPTI, inside
// the tracer: the trial process sends no SIGCHLD and is invisible to the program's wait().
bool cupti_trial_passes(const char* driver_path, const char* cupti_path, char* why, size_t why_size);

}  // namespace cutrace::preload
