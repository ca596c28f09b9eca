// libcutrace-cuda12.so holds the wrappers of another major version's libraries, compiled against that
// version's headers, and shares the shim's state and slow paths. Built with CUTRACE_SHIM_CLIENT, the
// declarations that carry CUTRACE_SHIM_NAME refer to the names the shim exports them under
// (shim_exports.cpp): aliases of its variables, which its own code keeps reaching directly, and
// forwarders to its functions.
#pragma once

#ifdef CUTRACE_SHIM_CLIENT
#define CUTRACE_SHIM_NAME(name) __asm__("cutrace_shim_" name)
#else
#define CUTRACE_SHIM_NAME(name)
#endif
