// Google Benchmark cases for the stack a slow call carries (--cudabacktrace): libunwind's
// unw_backtrace, loaded the way the shim loads it (dlopen RTLD_LOCAL, dlsym), from a given depth of
// the program's own frames, keeping 32 frames (the shim's default for CUDA calls) or 24 (the OS
// runtime's). The goal for 32 frames is 1 us.
#include <benchmark/benchmark.h>
#include <dlfcn.h>

#include <cstdlib>

namespace {

using UnwBacktrace = int (*)(void**, int);

UnwBacktrace unwinder() {
  static const UnwBacktrace fn = [] {
    void* library = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    return library ? reinterpret_cast<UnwBacktrace>(dlsym(library, "unw_backtrace")) : nullptr;
  }();
  return fn;
}

volatile int g_sink = 0;

// `depth` frames of its own, then the backtrace; each frame does work after its call, so none is a
// tail call.
__attribute__((noinline)) int descend(int depth, void** frames, int keep) {
  if (depth == 0) return keep ? unwinder()(frames, keep) : 0;
  const int n = descend(depth - 1, frames, keep);
  g_sink = g_sink + 1;
  return n;
}

void BM_Backtrace(benchmark::State& state) {
  if (!unwinder()) {
    state.SkipWithError("libunwind.so.8 is not installed");
    return;
  }
  const int keep = int(state.range(0));
  void* frames[128];
  int n = 0;
  for (auto _ : state) {
    n = descend(40, frames, keep);
    benchmark::DoNotOptimize(frames);
  }
  state.counters["frames"] = n;
}
// Arg 0: the 40 frames of recursion alone, to subtract from the others.
BENCHMARK(BM_Backtrace)->Arg(0)->Arg(24)->Arg(32)->Arg(64);

}  // namespace

BENCHMARK_MAIN();
