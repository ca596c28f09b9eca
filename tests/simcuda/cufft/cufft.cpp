// The simulated cuFFT: plans of rank 1 to 3 of the six transform types, their work area sizes, and
// each transform as one kernel per dimension launched through the driver on the plan's stream (see
// simcuda.h and libs/driver_client.h). The transforms compute nothing.
#include <cufft.h>
#include <cufftXt.h>
#include <library_types.h>

#include <array>
#include <cstdint>
#include <map>
#include <mutex>

#include "libs/driver_client.h"
#include "simcuda.h"

#define SIMCUDA_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using simcuda::lib::DriverClient;

enum KernelIndex : size_t { kFft };

DriverClient& driver() {
  static DriverClient* d = new DriverClient({simcuda::kFftKernel});
  return *d;
}

struct Plan {
  bool made = false;
  int rank = 0;
  std::array<long long, 3> n{};
  long long batch = 1;
  cufftType type = CUFFT_C2C;
  cudaStream_t stream = nullptr;
  bool auto_allocate = true;
  void* work_area = nullptr;
  size_t work_size = 0;
};

// Plans by handle; the real library's handles are small integers too, never reused here.
struct Plans {
  std::mutex mutex;
  std::map<cufftHandle, Plan> by_handle;
  cufftHandle next = 1;
};

Plans& plans() {
  static Plans* p = new Plans;
  return *p;
}

bool valid_type(cufftType t) {
  switch (t) {
    case CUFFT_R2C:
    case CUFFT_C2R:
    case CUFFT_C2C:
    case CUFFT_D2Z:
    case CUFFT_Z2D:
    case CUFFT_Z2Z:
      return true;
  }
  return false;
}

bool double_precision(cufftType t) { return t == CUFFT_D2Z || t == CUFFT_Z2D || t == CUFFT_Z2Z; }

// The simulation's work area rule: one complex element of the plan's precision per point of every
// transform of the batch, which the tests predict.
size_t work_size_of(int rank, const long long* n, long long batch, cufftType type) {
  size_t points = size_t(batch);
  for (int i = 0; i < rank; ++i) points *= size_t(n[i]);
  return points * (double_precision(type) ? 16 : 8);
}

// The checks every planning call makes of its shape, as the real library answers them.
cufftResult check_shape(int rank, const long long* n, long long batch, cufftType type) {
  if (!valid_type(type)) return CUFFT_INVALID_TYPE;
  if (rank < 1 || rank > 3 || n == nullptr || batch < 1) return CUFFT_INVALID_SIZE;
  for (int i = 0; i < rank; ++i) {
    if (n[i] < 1) return CUFFT_INVALID_SIZE;
  }
  return CUFFT_SUCCESS;
}

// The transform type of an Xt plan's data types (input, output; execution of the same precision).
bool type_of_data_types(cudaDataType in, cudaDataType out, cudaDataType exec, cufftType* type) {
  struct Row {
    cudaDataType in, out, exec;
    cufftType type;
  };
  constexpr Row kRows[] = {
      {CUDA_C_32F, CUDA_C_32F, CUDA_C_32F, CUFFT_C2C}, {CUDA_R_32F, CUDA_C_32F, CUDA_C_32F, CUFFT_R2C},
      {CUDA_C_32F, CUDA_R_32F, CUDA_C_32F, CUFFT_C2R}, {CUDA_C_64F, CUDA_C_64F, CUDA_C_64F, CUFFT_Z2Z},
      {CUDA_R_64F, CUDA_C_64F, CUDA_C_64F, CUFFT_D2Z}, {CUDA_C_64F, CUDA_R_64F, CUDA_C_64F, CUFFT_Z2D},
  };
  for (const Row& r : kRows) {
    if (r.in == in && r.out == out && r.exec == exec) {
      *type = r.type;
      return true;
    }
  }
  return false;
}

// Shapes a created plan (the cufftMakePlan* family): its work size goes to *work_size when not null.
cufftResult make_plan(cufftHandle handle, int rank, const long long* n, long long batch, cufftType type,
                      size_t* work_size) {
  if (cufftResult r = check_shape(rank, n, batch, type); r != CUFFT_SUCCESS) return r;
  if (!driver().ready()) return CUFFT_SETUP_FAILED;
  std::lock_guard lock(plans().mutex);
  auto it = plans().by_handle.find(handle);
  if (it == plans().by_handle.end()) return CUFFT_INVALID_PLAN;
  Plan& plan = it->second;
  plan.made = true;
  plan.rank = rank;
  for (int i = 0; i < rank; ++i) plan.n[size_t(i)] = n[i];
  plan.batch = batch;
  plan.type = type;
  plan.work_size = work_size_of(rank, n, batch, type);
  if (work_size != nullptr) *work_size = plan.work_size;
  return CUFFT_SUCCESS;
}

cufftHandle new_handle() {
  std::lock_guard lock(plans().mutex);
  cufftHandle h = plans().next++;
  plans().by_handle.emplace(h, Plan{});
  return h;
}

// False for a handle that names no plan.
bool forget(cufftHandle h) {
  std::lock_guard lock(plans().mutex);
  return plans().by_handle.erase(h) == 1;
}

// cufftPlan*: a handle and its plan in one call; no handle is left behind when the shape is refused.
cufftResult create_and_make(cufftHandle* handle, int rank, const long long* n, long long batch, cufftType type) {
  if (handle == nullptr) return CUFFT_INVALID_VALUE;
  cufftHandle h = new_handle();
  if (cufftResult r = make_plan(h, rank, n, batch, type, nullptr); r != CUFFT_SUCCESS) {
    forget(h);
    return r;
  }
  *handle = h;
  return CUFFT_SUCCESS;
}

cufftResult estimate(int rank, const long long* n, long long batch, cufftType type, size_t* work_size) {
  if (work_size == nullptr) return CUFFT_INVALID_VALUE;
  if (cufftResult r = check_shape(rank, n, batch, type); r != CUFFT_SUCCESS) return r;
  *work_size = work_size_of(rank, n, batch, type);
  return CUFFT_SUCCESS;
}

// The shape a created plan would have (cufftGetSize*): the handle must exist.
cufftResult size_for(cufftHandle handle, int rank, const long long* n, long long batch, cufftType type,
                     size_t* work_size) {
  {
    std::lock_guard lock(plans().mutex);
    if (plans().by_handle.count(handle) == 0) return CUFFT_INVALID_PLAN;
  }
  return estimate(rank, n, batch, type, work_size);
}

template <class Int>
std::array<long long, 3> dims(int rank, const Int* n) {
  std::array<long long, 3> out{};
  for (int i = 0; i < rank && i < 3 && n != nullptr; ++i) out[size_t(i)] = n[i];
  return out;
}

template <class Fn>
cufftResult with_plan(cufftHandle handle, Fn fn) {
  std::lock_guard lock(plans().mutex);
  auto it = plans().by_handle.find(handle);
  if (it == plans().by_handle.end()) return CUFFT_INVALID_PLAN;
  return fn(it->second);
}

// A transform: the plan must be made and of the type the call names (`type` 0: an Xt call, which
// takes the plan's); C2C and Z2Z need a direction. One kernel per dimension of the plan.
cufftResult execute(cufftHandle handle, const void* idata, const void* odata, cufftType type, int direction) {
  Plan plan;
  if (cufftResult r = with_plan(handle, [&](Plan& p) {
        plan = p;
        return CUFFT_SUCCESS;
      });
      r != CUFFT_SUCCESS) {
    return r;
  }
  if (!plan.made) return CUFFT_INVALID_PLAN;
  if (type != cufftType(0) && plan.type != type) return CUFFT_INVALID_VALUE;
  if (idata == nullptr || odata == nullptr) return CUFFT_INVALID_VALUE;
  const bool complex_to_complex = plan.type == CUFFT_C2C || plan.type == CUFFT_Z2Z;
  if (complex_to_complex && direction != CUFFT_FORWARD && direction != CUFFT_INVERSE)
    return CUFFT_INVALID_VALUE;
  if (!plan.auto_allocate && plan.work_size != 0 && plan.work_area == nullptr) return CUFFT_INVALID_VALUE;
  uint64_t points = uint64_t(plan.batch);
  for (int i = 0; i < plan.rank; ++i) points *= uint64_t(plan.n[size_t(i)]);
  for (int i = 0; i < plan.rank; ++i) {
    CUresult r = driver().launch(kFft, simcuda::lib::tiles(points, 256, 2147483647u), 1, 1, 256, plan.stream);
    if (r != CUDA_SUCCESS) return CUFFT_EXEC_FAILED;
  }
  return CUFFT_SUCCESS;
}

}  // namespace

SIMCUDA_EXPORT cufftResult CUFFTAPI cufftCreate(cufftHandle* handle) {
  if (handle == nullptr) return CUFFT_INVALID_VALUE;
  if (!driver().ready()) return CUFFT_SETUP_FAILED;
  *handle = new_handle();
  return CUFFT_SUCCESS;
}

SIMCUDA_EXPORT cufftResult CUFFTAPI cufftDestroy(cufftHandle plan) {
  return forget(plan) ? CUFFT_SUCCESS : CUFFT_INVALID_PLAN;
}

SIMCUDA_EXPORT cufftResult CUFFTAPI cufftSetStream(cufftHandle plan, cudaStream_t stream) {
  return with_plan(plan, [&](Plan& p) {
    p.stream = stream;
    return CUFFT_SUCCESS;
  });
}

SIMCUDA_EXPORT cufftResult CUFFTAPI cufftSetAutoAllocation(cufftHandle plan, int autoAllocate) {
  return with_plan(plan, [&](Plan& p) {
    p.auto_allocate = autoAllocate != 0;
    return CUFFT_SUCCESS;
  });
}

SIMCUDA_EXPORT cufftResult CUFFTAPI cufftSetWorkArea(cufftHandle plan, void* workArea) {
  return with_plan(plan, [&](Plan& p) {
    p.work_area = workArea;
    return CUFFT_SUCCESS;
  });
}

SIMCUDA_EXPORT cufftResult CUFFTAPI cufftGetSize(cufftHandle handle, size_t* workSize) {
  if (workSize == nullptr) return CUFFT_INVALID_VALUE;
  return with_plan(handle, [&](Plan& p) {
    if (!p.made) return CUFFT_INVALID_PLAN;
    *workSize = p.work_size;
    return CUFFT_SUCCESS;
  });
}

SIMCUDA_EXPORT cufftResult CUFFTAPI cufftPlan1d(cufftHandle* plan, int nx, cufftType type, int batch) {
  const long long n[] = {nx};
  return create_and_make(plan, 1, n, batch, type);
}

SIMCUDA_EXPORT cufftResult CUFFTAPI cufftPlan2d(cufftHandle* plan, int nx, int ny, cufftType type) {
  const long long n[] = {nx, ny};
  return create_and_make(plan, 2, n, 1, type);
}

SIMCUDA_EXPORT cufftResult CUFFTAPI cufftPlan3d(cufftHandle* plan, int nx, int ny, int nz, cufftType type) {
  const long long n[] = {nx, ny, nz};
  return create_and_make(plan, 3, n, 1, type);
}

SIMCUDA_EXPORT cufftResult CUFFTAPI cufftPlanMany(cufftHandle* plan, int rank, int* n, int* /*inembed*/,
                                                  int /*istride*/, int /*idist*/, int* /*onembed*/,
                                                  int /*ostride*/, int /*odist*/, cufftType type, int batch) {
  return create_and_make(plan, rank, n == nullptr ? nullptr : dims(rank, n).data(), batch, type);
}

SIMCUDA_EXPORT cufftResult CUFFTAPI cufftMakePlan1d(cufftHandle plan, int nx, cufftType type, int batch,
                                                    size_t* workSize) {
  const long long n[] = {nx};
  return make_plan(plan, 1, n, batch, type, workSize);
}

SIMCUDA_EXPORT cufftResult CUFFTAPI cufftMakePlan2d(cufftHandle plan, int nx, int ny, cufftType type,
                                                    size_t* workSize) {
  const long long n[] = {nx, ny};
  return make_plan(plan, 2, n, 1, type, workSize);
}

SIMCUDA_EXPORT cufftResult CUFFTAPI cufftMakePlan3d(cufftHandle plan, int nx, int ny, int nz, cufftType type,
                                                    size_t* workSize) {
  const long long n[] = {nx, ny, nz};
  return make_plan(plan, 3, n, 1, type, workSize);
}

SIMCUDA_EXPORT cufftResult CUFFTAPI cufftMakePlanMany(cufftHandle plan, int rank, int* n, int* /*inembed*/,
                                                      int /*istride*/, int /*idist*/, int* /*onembed*/,
                                                      int /*ostride*/, int /*odist*/, cufftType type, int batch,
                                                      size_t* workSize) {
  return make_plan(plan, rank, n == nullptr ? nullptr : dims(rank, n).data(), batch, type, workSize);
}

SIMCUDA_EXPORT cufftResult CUFFTAPI cufftMakePlanMany64(cufftHandle plan, int rank, long long int* n,
                                                        long long int* /*inembed*/, long long int /*istride*/,
                                                        long long int /*idist*/, long long int* /*onembed*/,
                                                        long long int /*ostride*/, long long int /*odist*/,
                                                        cufftType type, long long int batch, size_t* workSize) {
  return make_plan(plan, rank, n, batch, type, workSize);
}

SIMCUDA_EXPORT cufftResult CUFFTAPI cufftXtMakePlanMany(cufftHandle plan, int rank, long long int* n,
                                                        long long int* /*inembed*/, long long int /*istride*/,
                                                        long long int /*idist*/, cudaDataType inputtype,
                                                        long long int* /*onembed*/, long long int /*ostride*/,
                                                        long long int /*odist*/, cudaDataType outputtype,
                                                        long long int batch, size_t* workSize,
                                                        cudaDataType executiontype) {
  cufftType type;
  if (!type_of_data_types(inputtype, outputtype, executiontype, &type)) return CUFFT_INVALID_TYPE;
  return make_plan(plan, rank, n, batch, type, workSize);
}

SIMCUDA_EXPORT cufftResult CUFFTAPI cufftEstimate1d(int nx, cufftType type, int batch, size_t* workSize) {
  const long long n[] = {nx};
  return estimate(1, n, batch, type, workSize);
}

SIMCUDA_EXPORT cufftResult CUFFTAPI cufftEstimate2d(int nx, int ny, cufftType type, size_t* workSize) {
  const long long n[] = {nx, ny};
  return estimate(2, n, 1, type, workSize);
}

SIMCUDA_EXPORT cufftResult CUFFTAPI cufftEstimate3d(int nx, int ny, int nz, cufftType type, size_t* workSize) {
  const long long n[] = {nx, ny, nz};
  return estimate(3, n, 1, type, workSize);
}

SIMCUDA_EXPORT cufftResult CUFFTAPI cufftEstimateMany(int rank, int* n, int* /*inembed*/, int /*istride*/,
                                                      int /*idist*/, int* /*onembed*/, int /*ostride*/,
                                                      int /*odist*/, cufftType type, int batch, size_t* workSize) {
  return estimate(rank, n == nullptr ? nullptr : dims(rank, n).data(), batch, type, workSize);
}

SIMCUDA_EXPORT cufftResult CUFFTAPI cufftGetSize1d(cufftHandle handle, int nx, cufftType type, int batch,
                                                   size_t* workSize) {
  const long long n[] = {nx};
  return size_for(handle, 1, n, batch, type, workSize);
}

SIMCUDA_EXPORT cufftResult CUFFTAPI cufftGetSize2d(cufftHandle handle, int nx, int ny, cufftType type,
                                                   size_t* workSize) {
  const long long n[] = {nx, ny};
  return size_for(handle, 2, n, 1, type, workSize);
}

SIMCUDA_EXPORT cufftResult CUFFTAPI cufftGetSize3d(cufftHandle handle, int nx, int ny, int nz, cufftType type,
                                                   size_t* workSize) {
  const long long n[] = {nx, ny, nz};
  return size_for(handle, 3, n, 1, type, workSize);
}

SIMCUDA_EXPORT cufftResult CUFFTAPI cufftGetSizeMany(cufftHandle handle, int rank, int* n, int* /*inembed*/,
                                                     int /*istride*/, int /*idist*/, int* /*onembed*/,
                                                     int /*ostride*/, int /*odist*/, cufftType type, int batch,
                                                     size_t* workArea) {
  return size_for(handle, rank, n == nullptr ? nullptr : dims(rank, n).data(), batch, type, workArea);
}

SIMCUDA_EXPORT cufftResult CUFFTAPI cufftGetSizeMany64(cufftHandle plan, int rank, long long int* n,
                                                       long long int* /*inembed*/, long long int /*istride*/,
                                                       long long int /*idist*/, long long int* /*onembed*/,
                                                       long long int /*ostride*/, long long int /*odist*/,
                                                       cufftType type, long long int batch, size_t* workSize) {
  return size_for(plan, rank, n, batch, type, workSize);
}

SIMCUDA_EXPORT cufftResult CUFFTAPI cufftExecC2C(cufftHandle plan, cufftComplex* idata, cufftComplex* odata,
                                                 int direction) {
  return execute(plan, idata, odata, CUFFT_C2C, direction);
}

SIMCUDA_EXPORT cufftResult CUFFTAPI cufftExecZ2Z(cufftHandle plan, cufftDoubleComplex* idata,
                                                 cufftDoubleComplex* odata, int direction) {
  return execute(plan, idata, odata, CUFFT_Z2Z, direction);
}

SIMCUDA_EXPORT cufftResult CUFFTAPI cufftExecR2C(cufftHandle plan, cufftReal* idata, cufftComplex* odata) {
  return execute(plan, idata, odata, CUFFT_R2C, 0);
}

SIMCUDA_EXPORT cufftResult CUFFTAPI cufftExecC2R(cufftHandle plan, cufftComplex* idata, cufftReal* odata) {
  return execute(plan, idata, odata, CUFFT_C2R, 0);
}

SIMCUDA_EXPORT cufftResult CUFFTAPI cufftExecD2Z(cufftHandle plan, cufftDoubleReal* idata,
                                                 cufftDoubleComplex* odata) {
  return execute(plan, idata, odata, CUFFT_D2Z, 0);
}

SIMCUDA_EXPORT cufftResult CUFFTAPI cufftExecZ2D(cufftHandle plan, cufftDoubleComplex* idata,
                                                 cufftDoubleReal* odata) {
  return execute(plan, idata, odata, CUFFT_Z2D, 0);
}

SIMCUDA_EXPORT cufftResult CUFFTAPI cufftXtExec(cufftHandle plan, void* input, void* output, int direction) {
  return execute(plan, input, output, cufftType(0), direction);
}

SIMCUDA_EXPORT cufftResult CUFFTAPI cufftGetVersion(int* version) {
  if (version == nullptr) return CUFFT_INVALID_VALUE;
  *version = CUFFT_VERSION;
  return CUFFT_SUCCESS;
}

SIMCUDA_EXPORT cufftResult CUFFTAPI cufftGetProperty(libraryPropertyType type, int* value) {
  if (value == nullptr) return CUFFT_INVALID_VALUE;
  switch (type) {
    case MAJOR_VERSION:
      *value = CUFFT_VER_MAJOR;
      return CUFFT_SUCCESS;
    case MINOR_VERSION:
      *value = CUFFT_VER_MINOR;
      return CUFFT_SUCCESS;
    case PATCH_LEVEL:
      *value = CUFFT_VER_PATCH;
      return CUFFT_SUCCESS;
  }
  return CUFFT_INVALID_TYPE;
}
