// The stacks the shim takes (backtraces of slow calls, CPU samples), with the unwinder of the GCC
// runtime it links statically (libgcc_eh, its symbols local to the shim): a program's own libunwind
// or libgcc_s never binds to it nor it to them, and no library has to be installed or loaded. It
// finds each frame's unwind table through glibc's _dl_find_object, which takes no lock, so a sample
// taken in a signal handler while the interrupted thread is inside dlopen cannot deadlock.
#pragma once

#include <unwind.h>

namespace cutrace::preload {

struct UnwindWalk {
  void** frames;
  int capacity;
  int count;
  int skip;  // frames not kept: unwind_stack's own
};

inline _Unwind_Reason_Code note_unwound_frame(struct _Unwind_Context* context, void* arg) {
  auto* walk = static_cast<UnwindWalk*>(arg);
  if (walk->skip > 0) {
    --walk->skip;
    return _URC_NO_REASON;
  }
  if (walk->count >= walk->capacity) return _URC_END_OF_STACK;
  walk->frames[walk->count++] = reinterpret_cast<void*>(_Unwind_GetIP(context));
  return _URC_NO_REASON;
}

// The return addresses of the calling thread's frames, innermost first, from the caller of this
// function on (a signal frame's interrupted instruction is its own address): unw_backtrace's contract.
// Out of line, so that the one frame it leaves out is its own.
__attribute__((noinline)) inline int unwind_stack(void** frames, int capacity) {
  UnwindWalk walk{frames, capacity, 0, 1};
  _Unwind_Backtrace(note_unwound_frame, &walk);
  return walk.count;
}

}  // namespace cutrace::preload
