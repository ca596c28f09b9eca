// Google Benchmark cases for the stack a slow call carries (--cudabacktrace) and a CPU sample: the
// shim's own unwinder (preload/unwind_stack.h, the GCC runtime's),
// from a given depth of the program's own frames, keeping 32 frames (the shim's default for CUDA
// calls) or 24 (the OS runtime's); and, for comparison, libunwind's unw_backtrace where libunwind.so.8
// is installed (the unwinder the shim loaded before it carried its own). The goal for 32 frames is 1 us.
#include <benchmark/benchmark.h>
#include <dlfcn.h>

#include <cstdlib>

#include "unwind_stack.h"

namespace {

using Unwinder = int (*)(void**, int);

Unwinder libunwind() {
  static const Unwinder fn = [] {
    void* library = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    return library ? reinterpret_cast<Unwinder>(dlsym(library, "unw_backtrace")) : nullptr;
  }();
  return fn;
}

volatile int g_sink = 0;

// `depth` frames of its own, then the backtrace; each frame does work after its call, so none is a
// tail call.
__attribute__((noinline)) int descend(int depth, Unwinder unwind, void** frames, int keep) {
  if (depth == 0) return keep ? unwind(frames, keep) : 0;
  const int n = descend(depth - 1, unwind, frames, keep);
  g_sink = g_sink + 1;
  return n;
}

void run(benchmark::State& state, Unwinder unwind) {
  const int keep = int(state.range(0));
  void* frames[128];
  int n = 0;
  for (auto _ : state) {
    n = descend(40, unwind, frames, keep);
    benchmark::DoNotOptimize(frames);
  }
  state.counters["frames"] = n;
}

void BM_Backtrace(benchmark::State& state) { run(state, cutrace::preload::unwind_stack); }

void BM_LibunwindBacktrace(benchmark::State& state) {
  if (!libunwind()) {
    state.SkipWithError("libunwind.so.8 is not installed");
    return;
  }
  run(state, libunwind());
}
// Arg 0: the 40 frames of recursion alone, to subtract from the others.
BENCHMARK(BM_Backtrace)->Arg(0)->Arg(24)->Arg(32)->Arg(64);
BENCHMARK(BM_LibunwindBacktrace)->Arg(0)->Arg(24)->Arg(32)->Arg(64);

}  // namespace

BENCHMARK_MAIN();
