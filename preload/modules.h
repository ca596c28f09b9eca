// The objects a process loaded: reported into the trace (module records), and checked for imports of
// wrapped functions that bypass the shim.
//
// The trace needs the loaded objects for two things: the tools tell from them which CUDA libraries a
// process used, so that a trace missing their calls says why instead of staying silently empty, and
// backtraces are symbolised against them later. The shim does not wrap dlopen (a dlopen made from
// the shim would search the shim's DT_RUNPATH instead of the caller's, and libraries that PyTorch and
// JAX find through their own RUNPATH would no longer load); it looks for changes to the loader's list
// at the moments a newly loaded library starts to matter: a lookup through a handle, the first
// recorded call of the process, and its exit.
//
// A library loaded with RTLD_DEEPBIND binds its imports to its own dependencies before the global
// scope, so its calls into the CUDA runtime skip LD_PRELOAD. For objects loaded after start-up, the
// shim rewrites such imports of wrapped functions (their GOT slots) to point at the wrappers.
#pragma once

#include <cstdint>

#include "runtime.h"

namespace cutrace::preload {

// Looks for objects loaded or unloaded since the last look (the dlclose wrapper looks at once). When
// the process already reports to the session, each new object gets a module record, and each one gone
// an unload record; when it does not yet, a new CUDA library makes it start (so
// that a library loaded through ctypes and never called still shows in the trace). Redirects the
// imports of wrapped functions of every object loaded after start-up that bypass the shim. Cheap when
// nothing was loaded: one call of dl_iterate_phdr that stops at the first object. Never call it while
// holding the loader's lock (from a dl_iterate_phdr callback).
void note_loaded_objects(ThreadState& ts);

// Writes a module record for every loaded object (the process's first ring was just claimed).
void report_all_objects(ThreadState& ts);

// Whether the process has a CUDA library loaded, or its executable carries GPU code (a program
// built with nvcc, whose static runtime the shim cannot see until it reaches the driver).
bool process_uses_cuda();

// A fork()ed child reports its objects afresh, as a process of its own.
void forget_reported_objects();

}  // namespace cutrace::preload
