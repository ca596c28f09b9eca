// One of two shared objects of nvtx_app that annotate with NVTX v3 on their own: each module has its
// own NVTX state and initialises the injected tool itself. This one uses the default domain.
#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>

extern "C" __attribute__((visibility("default"))) void lib_a_work() {
  nvtxRangePushA("a.work");
  int device = -1;
  cudaGetDevice(&device);
  nvtxRangePop();
}
