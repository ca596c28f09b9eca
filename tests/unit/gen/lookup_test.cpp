// The generated lookup tables: wrappers by name, and the export each cuGetProcAddress request stands
// for. The expected exports are those the real driver hands out (the k-th version of a symbol in
// cudaTypedefs.h is exported as name, name_v2, ...; per-thread flavours carry _ptds/_ptsz).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "api_ids.h"
#include "api_lookup.h"
#include "cutrace/api_table.h"

namespace {

using cutrace::preload::driver_proc_api;
using cutrace::preload::find_api;

constexpr uint64_t kDefault = 0, kLegacyStream = 1, kPerThread = 2;

std::string export_for(const char* symbol, int version, uint64_t flags) {
  const int32_t id = driver_proc_api(symbol, version, flags);
  return id < 0 ? "(none)" : cutrace::kApiTable[id].name;
}

// The libraries whose wrappers CUDA 12 defines under its own symbol versions (libcutrace-cuda12.so):
// the only ones whose names may also have a plain wrapper. cuFFT's CUDA 12 soname is .so.11, and CUDA
// 13's cuSOLVER and cuSPARSE are .so.12 too: sonames alone do not tell the major version.
const std::set<std::string> kCuda12Versioned = {"libcudart.so.12", "libcublas.so.12", "libcublasLt.so.12",
                                                "libcufft.so.11"};

// The OS runtime's and MPI's wrappers are not the shim's (libcutrace-osrt.so with -t osrt,
// libcutrace-mpi-*.so with -t mpi): a lookup of read or MPI_Send through a handle gets the library's.
// A name wrapped for two major versions finds both ids, the plain (CUDA 13) wrapper's first.
TEST(ApiLookup, FindsEveryWrappedNameAndNothingElse) {
  for (uint32_t id = 0; id < cutrace::kApiCount; ++id) {
    const auto& api = cutrace::kApiTable[id];
    const bool osrt = api.domain == cutrace::abi::ApiDomain::kOsRuntime || api.domain == cutrace::abi::ApiDomain::kMpi;
    int32_t ids[cutrace::preload::kMaxMajorVersions];
    const size_t count = cutrace::preload::find_apis(api.name, ids, cutrace::preload::kMaxMajorVersions);
    if (osrt) {
      EXPECT_EQ(count, 0u) << api.name;
      continue;
    }
    EXPECT_NE(std::find(ids, ids + count, int32_t(id)), ids + count) << api.name << " in " << api.library;
    for (size_t k = 0; k < count; ++k) EXPECT_STREQ(cutrace::kApiTable[ids[k]].name, api.name);
    // find_api gives the first; where CUDA 12 wraps the name too, that is the plain (CUDA 13) wrapper.
    ASSERT_GE(count, 1u) << api.name;
    EXPECT_EQ(find_api(api.name), ids[0]) << api.name;
    if (count > 1) {
      EXPECT_FALSE(kCuda12Versioned.count(cutrace::kApiTable[ids[0]].library)) << api.name;
    }
    if (!kCuda12Versioned.count(api.library)) {
      EXPECT_EQ(ids[0], int32_t(id)) << api.name << " in " << api.library;
    }
  }
#ifdef CUTRACE_TEST_CUDA12
  int32_t ids[cutrace::preload::kMaxMajorVersions];
  ASSERT_EQ(cutrace::preload::find_apis("cudaMalloc", ids, cutrace::preload::kMaxMajorVersions), 2u);
  EXPECT_EQ(ids[0], int32_t(cutrace::kApi_cudaMalloc));
  EXPECT_EQ(ids[1], int32_t(cutrace::kApi_cudart12_cudaMalloc));
  // Only CUDA 12 exports it: its one id is the versioned wrapper's.
  EXPECT_EQ(find_api("cudaMemPrefetchAsync_v2"), int32_t(cutrace::kApi_cudart12_cudaMemPrefetchAsync_v2));
#endif
  EXPECT_EQ(find_api("read"), -1);
  EXPECT_EQ(find_api("cudaMallocc"), -1);
  EXPECT_EQ(find_api(""), -1);
  EXPECT_EQ(find_api("zzz"), -1);
}

TEST(ApiLookup, NewestVersionNotNewerThanTheRequest) {
  EXPECT_EQ(export_for("cuMemAlloc", 2000, kDefault), "cuMemAlloc");
  EXPECT_EQ(export_for("cuMemAlloc", 3020, kDefault), "cuMemAlloc_v2");
  EXPECT_EQ(export_for("cuMemAlloc", 13000, kDefault), "cuMemAlloc_v2");
  EXPECT_EQ(export_for("cuCtxCreate", 11040, kDefault), "cuCtxCreate_v3");
  EXPECT_EQ(export_for("cuCtxCreate", 12050, kDefault), "cuCtxCreate_v4");
  EXPECT_EQ(export_for("cuStreamBeginCapture", 10000, kDefault), "cuStreamBeginCapture");
  EXPECT_EQ(export_for("cuStreamBeginCapture", 10010, kDefault), "cuStreamBeginCapture_v2");
  EXPECT_EQ(export_for("cuGetProcAddress", 11030, kDefault), "cuGetProcAddress");
  EXPECT_EQ(export_for("cuGetProcAddress", 12000, kDefault), "cuGetProcAddress_v2");
  EXPECT_EQ(export_for("cuLaunchKernel", 13000, kDefault), "cuLaunchKernel");
  // Listed in cudaProfilerTypedefs.h, beside cudaTypedefs.h: a library may look the profiler up too.
  EXPECT_EQ(export_for("cuProfilerStart", 13000, kDefault), "cuProfilerStart");
  EXPECT_EQ(export_for("cuProfilerStop", 4000, kDefault), "cuProfilerStop");
}

TEST(ApiLookup, PerThreadFlagPicksThePerThreadFlavour) {
  EXPECT_EQ(export_for("cuLaunchKernel", 13000, kPerThread), "cuLaunchKernel_ptsz");
  EXPECT_EQ(export_for("cuLaunchKernel", 13000, kLegacyStream), "cuLaunchKernel");
  EXPECT_EQ(export_for("cuMemcpyHtoD", 13000, kPerThread), "cuMemcpyHtoD_v2_ptds");
  EXPECT_EQ(export_for("cuStreamBeginCapture", 10000, kPerThread), "cuStreamBeginCapture_ptsz");
  EXPECT_EQ(export_for("cuStreamBeginCapture", 12000, kPerThread), "cuStreamBeginCapture_v2_ptsz");
  // No per-thread flavour: the legacy one.
  EXPECT_EQ(export_for("cuMemAlloc", 13000, kPerThread), "cuMemAlloc_v2");
}

TEST(ApiLookup, UnknownSymbolsAndTooOldVersionsFindNothing) {
  EXPECT_EQ(export_for("cuNoSuchFunction", 13000, kDefault), "(none)");
  EXPECT_EQ(export_for("cuMemAlloc_v2", 13000, kDefault), "(none)");  // requests name the symbol unversioned
  EXPECT_EQ(export_for("cuLaunchKernelEx", 11000, kDefault), "(none)");
  EXPECT_EQ(export_for("cuMemAlloc", 1000, kDefault), "(none)");
  EXPECT_EQ(export_for("", 13000, kDefault), "(none)");
}

}  // namespace
