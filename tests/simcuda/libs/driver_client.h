// How the simulated CUDA libraries (cuBLAS, cuBLASLt, cuDNN) reach the driver: as the real CUDA 13
// libraries do, with no runtime in between. Each dlopen()s libcuda.so.1, looks up
// cuGetProcAddress_v2 and obtains through it the entry points it uses, then loads a module holding
// its kernels (named by the simulated driver's image convention, simcuda.h). A tracer therefore sees
// the library's driver calls nested inside the library call that made them.
#pragma once

#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "simcuda.h"

namespace simcuda::lib {

class DriverClient {
 public:
  // `kernels` are the names of the module the library loads.
  explicit DriverClient(std::vector<std::string> kernels) : names_(std::move(kernels)) {}

  // Loads the driver and the module once; false if either failed (the library then reports
  // that it is not initialised).
  bool ready() {
    std::call_once(once_, [this] { ok_ = load(); });
    return ok_;
  }

  CUfunction function(size_t index) const { return functions_[index]; }

  // Launches one of the module's kernels on `stream` with the given device time (0: the kernel's
  // own, from its name), and what the device thread does when it ends (`effect`, if not empty).
  CUresult launch(size_t index, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block,
                  CUstream stream, uint64_t duration_ns = 0, std::function<void()> effect = {}) const {
    void* extra[5];
    size_t n = 0;
    if (duration_ns != 0) {
      extra[n++] = kLaunchParamDurationNs;
      extra[n++] = &duration_ns;
    }
    if (effect) {
      extra[n++] = kLaunchParamEffect;
      extra[n++] = &effect;
    }
    extra[n] = CU_LAUNCH_PARAM_END;
    return launch_(functions_[index], grid_x, grid_y, grid_z, block, 1, 1, 0, stream, nullptr,
                   n != 0 ? extra : nullptr);
  }

 private:
  template <class Fn>
  bool lookup(PFN_cuGetProcAddress_v12000 get, const char* symbol, Fn* out) {
    void* p = nullptr;
    CUdriverProcAddressQueryResult status;
    if (get(symbol, &p, CUDA_VERSION, 0, &status) != CUDA_SUCCESS || p == nullptr) return false;
    *out = reinterpret_cast<Fn>(p);
    return true;
  }

  bool load() {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return false;
    auto get = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(lib, "cuGetProcAddress_v2"));
    PFN_cuInit_v2000 init = nullptr;
    PFN_cuModuleLoadData_v2000 load_module = nullptr;
    PFN_cuModuleGetFunction_v2000 get_function = nullptr;
    if (get == nullptr || !lookup(get, "cuInit", &init) ||
        !lookup(get, "cuModuleLoadData", &load_module) ||
        !lookup(get, "cuModuleGetFunction", &get_function) ||
        !lookup(get, "cuLaunchKernel", &launch_) || init(0) != CUDA_SUCCESS) {
      return false;
    }
    std::string image(kModuleMagic, sizeof kModuleMagic);
    for (const std::string& n : names_) image.append(n.c_str(), n.size() + 1);
    image.push_back('\0');
    image_ = image;
    CUmodule module;
    if (load_module(&module, image_.data()) != CUDA_SUCCESS) return false;
    for (const std::string& n : names_) {
      CUfunction f;
      if (get_function(&f, module, n.c_str()) != CUDA_SUCCESS) return false;
      functions_.push_back(f);
    }
    return true;
  }

  std::vector<std::string> names_;
  std::string image_;
  std::once_flag once_;
  bool ok_ = false;
  PFN_cuLaunchKernel_v4000 launch_ = nullptr;
  std::vector<CUfunction> functions_;
};

// A grid dimension for `n` items in tiles of `tile`, within the device's limits.
inline unsigned tiles(uint64_t n, uint64_t tile, uint64_t limit = 65535) {
  uint64_t t = (n + tile - 1) / tile;
  return unsigned(t == 0 ? 1 : t > limit ? limit : t);
}

}  // namespace simcuda::lib
