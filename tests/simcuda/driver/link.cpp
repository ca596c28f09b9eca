// JIT linking (cuLinkCreate .. cuLinkComplete) and cuModuleLoadDataEx's options. Nothing is
// compiled: a link collects the kernels its inputs declare (PTX's .entry directives, cubins' and
// fatbins' kernels) and completes into a module image of the simulation's own format naming them,
// which cuModuleLoadData loads like any other. The log buffers a program passes get empty logs and
// the wall time 0, as from a link with nothing to report. These exports are not in
// cuGetProcAddress's own table, so it hands out the exports themselves.
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "cubin.h"
#include "driver.h"
#include "simcuda.h"

using namespace simcuda;
using namespace simcuda::drv;

namespace {

struct Link {
  std::vector<std::string> kernels;
  std::string image;  // what cuLinkComplete hands out, valid until cuLinkDestroy
};

struct Links {
  std::mutex mu;
  std::unordered_set<Link*> live;
};

Links& links() {
  static Links* l = new Links;  // never destroyed: a link may outlive static destruction
  return *l;
}

bool known(Link* link) {
  std::lock_guard<std::mutex> lock(links().mu);
  return links().live.count(link) != 0;
}

CUresult add_input(Link* link, CUjitInputType type, const void* data, size_t size) {
  if (data == nullptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
  std::vector<std::string> found;
  switch (type) {
    case CU_JIT_INPUT_PTX: found = ptx_kernels(static_cast<const char*>(data), size); break;
    case CU_JIT_INPUT_CUBIN:
    case CU_JIT_INPUT_FATBINARY: found = image_kernels(data); break;
    // Host objects and archives with device code, and LTO IR: nothing the simulation can read.
    case CU_JIT_INPUT_OBJECT:
    case CU_JIT_INPUT_LIBRARY:
    case CU_JIT_INPUT_NVVM: return CUDA_ERROR_NOT_SUPPORTED;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
  std::lock_guard<std::mutex> lock(links().mu);
  for (std::string& name : found) link->kernels.push_back(std::move(name));
  return CUDA_SUCCESS;
}

CUresult add_data(CUlinkState state, CUjitInputType type, void* data, size_t size, unsigned n, CUjit_option* options,
                  void** values) {
  if (CUresult e = check_initialized(); e) return e;
  auto* link = reinterpret_cast<Link*>(state);
  if (!known(link)) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult e = apply_jit_options(n, options, values); e) return e;
  return add_input(link, type, data, size);
}

CUresult add_file(CUlinkState state, CUjitInputType type, const char* path, unsigned n, CUjit_option* options,
                  void** values) {
  if (CUresult e = check_initialized(); e) return e;
  auto* link = reinterpret_cast<Link*>(state);
  if (!known(link)) return CUDA_ERROR_INVALID_HANDLE;
  if (path == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult e = apply_jit_options(n, options, values); e) return e;
  std::ifstream in(path, std::ios::binary);
  if (!in) return CUDA_ERROR_FILE_NOT_FOUND;
  std::string contents((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return add_input(link, type, contents.c_str(), contents.size() + 1);
}

CUresult create(unsigned n, CUjit_option* options, void** values, CUlinkState* out) {
  if (CUresult e = check_initialized(); e) return e;
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult e = apply_jit_options(n, options, values); e) return e;
  auto* link = new Link;
  std::lock_guard<std::mutex> lock(links().mu);
  links().live.insert(link);
  *out = reinterpret_cast<CUlinkState>(link);
  return CUDA_SUCCESS;
}

}  // namespace

namespace simcuda::drv {

CUresult apply_jit_options(unsigned n, CUjit_option* options, void** values) {
  if (n > 0 && (options == nullptr || values == nullptr)) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < n; ++i) {
    switch (options[i]) {
      case CU_JIT_WALL_TIME: *static_cast<float*>(values[i]) = 0; break;
      case CU_JIT_INFO_LOG_BUFFER:
      case CU_JIT_ERROR_LOG_BUFFER:
        if (values[i] != nullptr) *static_cast<char*>(values[i]) = '\0';
        break;
      default:
        if (int(options[i]) < 0 || options[i] >= CU_JIT_NUM_OPTIONS) return CUDA_ERROR_INVALID_VALUE;
    }
  }
  // The log sizes are in-out: what was written, with its NUL.
  for (unsigned i = 0; i < n; ++i) {
    if (options[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES || options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
      values[i] = reinterpret_cast<void*>(uintptr_t(1));
  }
  return CUDA_SUCCESS;
}

}  // namespace simcuda::drv

SIMCUDA_EXPORT CUresult CUDAAPI cuLinkCreate(unsigned int n, CUjit_option* options, void** values, CUlinkState* out) {
  return traced(SIMCUDA_DRIVER_CBID(cuLinkCreate), [&] { return create(n, options, values, out); });
}
SIMCUDA_EXPORT CUresult CUDAAPI cuLinkCreate_v2(unsigned int n, CUjit_option* options, void** values,
                                                CUlinkState* out) {
  return traced(SIMCUDA_DRIVER_CBID(cuLinkCreate_v2), [&] { return create(n, options, values, out); });
}

SIMCUDA_EXPORT CUresult CUDAAPI cuLinkAddData(CUlinkState state, CUjitInputType type, void* data, size_t size,
                                              const char*, unsigned int n, CUjit_option* options, void** values) {
  return traced(SIMCUDA_DRIVER_CBID(cuLinkAddData),
                [&] { return add_data(state, type, data, size, n, options, values); });
}
SIMCUDA_EXPORT CUresult CUDAAPI cuLinkAddData_v2(CUlinkState state, CUjitInputType type, void* data, size_t size,
                                                 const char*, unsigned int n, CUjit_option* options, void** values) {
  return traced(SIMCUDA_DRIVER_CBID(cuLinkAddData_v2),
                [&] { return add_data(state, type, data, size, n, options, values); });
}

SIMCUDA_EXPORT CUresult CUDAAPI cuLinkAddFile(CUlinkState state, CUjitInputType type, const char* path,
                                              unsigned int n, CUjit_option* options, void** values) {
  return traced(SIMCUDA_DRIVER_CBID(cuLinkAddFile), [&] { return add_file(state, type, path, n, options, values); });
}
SIMCUDA_EXPORT CUresult CUDAAPI cuLinkAddFile_v2(CUlinkState state, CUjitInputType type, const char* path,
                                                 unsigned int n, CUjit_option* options, void** values) {
  return traced(SIMCUDA_DRIVER_CBID(cuLinkAddFile_v2),
                [&] { return add_file(state, type, path, n, options, values); });
}

SIMCUDA_EXPORT CUresult CUDAAPI cuLinkComplete(CUlinkState state, void** image, size_t* size) {
  return traced(SIMCUDA_DRIVER_CBID(cuLinkComplete), [&]() -> CUresult {
    if (CUresult e = check_initialized(); e) return e;
    auto* link = reinterpret_cast<Link*>(state);
    if (!known(link)) return CUDA_ERROR_INVALID_HANDLE;
    if (image == nullptr || size == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard<std::mutex> lock(links().mu);
    // No kernel at all is what a link of no input ends in.
    if (link->kernels.empty()) return CUDA_ERROR_INVALID_IMAGE;
    // The simulation's own image (simcuda.h): the magic, each name with its NUL, one more NUL.
    link->image.assign(kModuleMagic, sizeof kModuleMagic);
    for (const std::string& name : link->kernels) link->image.append(name.c_str(), name.size() + 1);
    link->image.push_back('\0');
    *image = link->image.data();
    *size = link->image.size();
    return CUDA_SUCCESS;
  });
}

SIMCUDA_EXPORT CUresult CUDAAPI cuLinkDestroy(CUlinkState state) {
  return traced(SIMCUDA_DRIVER_CBID(cuLinkDestroy), [&]() -> CUresult {
    auto* link = reinterpret_cast<Link*>(state);
    {
      std::lock_guard<std::mutex> lock(links().mu);
      if (links().live.erase(link) == 0) return CUDA_ERROR_INVALID_HANDLE;
    }
    delete link;
    return CUDA_SUCCESS;
  });
}
