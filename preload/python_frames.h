// The Python frames of the calling thread, for the backtrace of a slow call in a CPython process: what a
// native stack cannot say (which line of the script issued the call), with no sampling and no change to
// the program. Read through CPython's C API (3.9 or newer, which has PyFrame_GetBack and PyFrame_GetCode),
// only while the thread holds the GIL: a thread that released it (PyTorch does around some blocking
// calls) has its frames left out rather than read racily (README.md, "Backtraces of slow calls").
#pragma once

#include <cstdint>

#include "runtime.h"

namespace cutrace::preload {

// Up to `capacity` frames, innermost first, each as (the id of its function and file, its line). The
// names of an id are sent once per process as a kPythonFunction string. 0 when the process runs no
// CPython, the thread does not hold the GIL, or it runs no Python code.
uint32_t python_frames(ThreadState& ts, abi::PythonFrame* out, uint32_t capacity);

// In a forked child: its trace is another process's, which has not been told any name yet.
void forget_python_functions();

// --python-sampling (SessionHeader::python_sampling_hz): in a CPython process (3.9 or newer), starts a
// thread that, python_sampling_hz times a second, takes the GIL and writes the Python stack of every
// other thread running Python code (sys._current_frames()) as PythonSampleRecords. Once per process;
// nothing in other processes. Taking the GIL is what makes the frames safe to read, and what limits the
// rate: a thread running Python hands the GIL over only at its switch interval (5 ms by default).
void start_python_sampling();

}  // namespace cutrace::preload
