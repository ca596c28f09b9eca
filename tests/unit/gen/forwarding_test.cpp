// The generated wrappers and trampolines of libcutrace-preload.so in front of fake_cudart.cpp, with no
// session (CUTRACE_SESSION unset): every call must reach the real function with its arguments intact,
// return its result and errno unchanged, and, when the real library lacks the function, end the process
// as the loader's lazy binding would have without the shim.
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

// An export no header declares (nvcc's registration plumbing): the shim forwards it untimed.
extern "C" int __cudaRegisterUnifiedTable(void*);

namespace {

struct FakeMemcpyCall {
  void* dst;
  const void* src;
  size_t count;
  cudaMemcpyKind kind;
  int calls;
};

}  // namespace

extern "C" FakeMemcpyCall fake_memcpy_call;
extern "C" int fake_untyped_calls;
// Declared here as fake_cudart.cpp defines it; the shim's trampoline knows nothing of the signature.
extern "C" double __cudaGetProcAddress(long, long, long, long, long, long, long, long, double, double, double,
                                       double, double, double, double, double, double);
// Only nvcc-generated code sees these declarations.
extern "C" unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                                                struct CUstream_st* stream);

namespace {

// The shim was loaded ahead of the fake: every call in this file goes through a wrapper.
TEST(Forwarding, CallsBindToTheShim) {
  Dl_info info{};
  ASSERT_NE(dladdr(reinterpret_cast<void*>(&cudaMemcpy), &info), 0);
  EXPECT_NE(std::strstr(info.dli_fname, "libcutrace-preload.so"), nullptr) << info.dli_fname;
  ASSERT_NE(dladdr(reinterpret_cast<void*>(&__cudaGetProcAddress), &info), 0);
  EXPECT_NE(std::strstr(info.dli_fname, "libcutrace-preload.so"), nullptr) << info.dli_fname;
}

TEST(Forwarding, WrapperPassesArgumentsResultAndErrno) {
  char src[8] = {}, dst[8] = {};
  const int before = fake_memcpy_call.calls;
  errno = 0;
  EXPECT_EQ(cudaMemcpy(dst, src, 123, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(errno, 4242);
  EXPECT_EQ(fake_memcpy_call.calls, before + 1);
  EXPECT_EQ(fake_memcpy_call.dst, dst);
  EXPECT_EQ(fake_memcpy_call.src, src);
  EXPECT_EQ(fake_memcpy_call.count, 123u);
  EXPECT_EQ(fake_memcpy_call.kind, cudaMemcpyHostToDevice);
}

TEST(Forwarding, OutParametersReachTheCaller) {
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 64), cudaSuccess);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p), uintptr_t(0x7000000000) + 64);
}

// glibc's words when a lazily bound reference finds no definition; the object named is the one whose
// call it was (this test program).
const char* const kLookupError = "symbol lookup error: .*gen_forwarding_test: undefined symbol: ";

TEST(ForwardingDeathTest, MissingRealFunctionsFailAsTheLoaderWould) {
  EXPECT_EXIT(cudaDeviceSynchronize(), testing::ExitedWithCode(127),
              std::string(kLookupError) + "cudaDeviceSynchronize, version libcudart.so.13\n");
  EXPECT_EXIT(__cudaPushCallConfiguration(dim3(1), dim3(1), 0, nullptr), testing::ExitedWithCode(127),
              std::string(kLookupError) + "__cudaPushCallConfiguration, version libcudart.so.13\n");
  EXPECT_EXIT(cudaGetErrorString(cudaErrorInvalidValue), testing::ExitedWithCode(127),
              std::string(kLookupError) + "cudaGetErrorString");
}

TEST(Forwarding, TrampolinePreservesRegisterAndStackArguments) {
  const double expected = 1 + 2.0 * 2 + 3.0 * 3 + 4.0 * 4 + 5.0 * 5 + 6.0 * 6 + 7.0 * 7 + 8.0 * 8 + 9.0 * 0.5 +
                          10.0 * 1.5 + 11.0 * 2.5 + 12.0 * 3.5 + 13.0 * 4.5 + 14.0 * 5.5 + 15.0 * 6.5 +
                          16.0 * 7.5 + 17.0 * 8.5;
  const int before = fake_untyped_calls;
  // The first call resolves the real function with the arguments saved; later calls jump straight to it.
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(__cudaGetProcAddress(1, 2, 3, 4, 5, 6, 7, 8, 0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5), expected)
        << "call " << i;
  EXPECT_EQ(fake_untyped_calls, before + 3);
}

TEST(ForwardingDeathTest, TrampolineWithoutRealFunctionFailsAsTheLoaderWould) {
  // No header declares __cudaRegisterUnifiedTable and the fake does not define it.
  EXPECT_EXIT(__cudaRegisterUnifiedTable(nullptr), testing::ExitedWithCode(127),
              std::string(kLookupError) + "__cudaRegisterUnifiedTable, version libcudart.so.13\n");
}

TEST(Forwarding, LookupsOfFunctionsNoLibraryProvidesFail) {
  // The shim exports a wrapper of every name, but without it these lookups would find nothing.
  for (const char* name : {"__cudaRegisterUnifiedTable", "cudaDeviceSynchronize"}) {
    dlerror();
    EXPECT_EQ(dlsym(RTLD_DEFAULT, name), nullptr) << name;
    const char* error = dlerror();
    ASSERT_NE(error, nullptr) << name;
    EXPECT_NE(std::strstr(error, "undefined symbol: "), nullptr) << error;
    EXPECT_EQ(dlsym(RTLD_NEXT, name), nullptr) << name;
  }
  // Those the fake provides are found, as the shim's wrappers.
  EXPECT_NE(dlsym(RTLD_DEFAULT, "cudaMemcpy"), nullptr);
}

}  // namespace

// Lookups through a handle hand out the wrappers, so that calls made through dlsym pointers (ctypes,
// dlopen-based loaders) are traced like linked ones.
namespace {

bool in_shim(const void* p) {
  Dl_info info{};
  return p && dladdr(p, &info) && info.dli_fname && std::strstr(info.dli_fname, "libcutrace-preload.so");
}

void* fake_handle() {
  // Loaded already (linked); RTLD_NOLOAD gives its handle without loading anything.
  void* h = dlopen("libgen_fake_cudart.so", RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(h, nullptr) << dlerror();
  return h;
}

TEST(HandleLookups, DlsymOnTheRealLibrarysHandleReturnsTheWrapper) {
  void* h = fake_handle();
  void* p = dlsym(h, "cudaMemcpy");
  EXPECT_TRUE(in_shim(p));
  EXPECT_EQ(p, reinterpret_cast<void*>(&cudaMemcpy));  // the same wrapper the program binds to
  // Calls through it reach the real function.
  char src[8] = {}, dst[8] = {};
  const int before = fake_memcpy_call.calls;
  auto fn = reinterpret_cast<cudaError_t (*)(void*, const void*, size_t, cudaMemcpyKind)>(p);
  EXPECT_EQ(fn(dst, src, 5, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  EXPECT_EQ(fake_memcpy_call.calls, before + 1);
  EXPECT_EQ(fake_memcpy_call.count, 5u);
  dlclose(h);
}

TEST(HandleLookups, DlvsymGivesGlibcsAnswerForAVersionTheLibraryLacks) {
  // The fake defines no version node, so glibc finds no cudaMemcpy@libcudart.so.13 in it; the shim
  // must not invent one. (The simulated runtime defines the node: tests/e2e covers the found case.)
  void* h = fake_handle();
  dlerror();
  EXPECT_EQ(dlvsym(h, "cudaMemcpy", "libcudart.so.13"), nullptr);
  const char* error = dlerror();
  ASSERT_NE(error, nullptr);
  EXPECT_NE(std::strstr(error, "version libcudart.so.13"), nullptr) << error;
  dlclose(h);
}

TEST(HandleLookups, OtherNamesAndMissingNamesAreGlibcsAnswer) {
  void* h = fake_handle();
  // A function of one of its dependencies, found through its scope as glibc finds it.
  EXPECT_EQ(dlsym(h, "fopen"), dlsym(RTLD_DEFAULT, "fopen"));
  dlerror();
  EXPECT_EQ(dlsym(h, "cudaNoSuchFunction"), nullptr);
  const char* error = dlerror();
  ASSERT_NE(error, nullptr);
  EXPECT_NE(std::strstr(error, "cudaNoSuchFunction"), nullptr) << error;
  dlclose(h);
}

TEST(HandleLookups, SuccessfulLookupLeavesDlerrorEmpty) {
  void* h = fake_handle();
  dlerror();
  ASSERT_NE(dlsym(h, "cudaMalloc"), nullptr);
  EXPECT_EQ(dlerror(), nullptr);
  dlclose(h);
}

TEST(HandleLookups, RtldNextIsRelativeToTheCallerNotToTheShim) {
  // From this program, the next cudaMemcpy is the shim's (the first library after the program); a
  // dlsym that made itself glibc's caller would answer with the one after the shim (the fake's).
  void* next = dlsym(RTLD_NEXT, "cudaMemcpy");
  EXPECT_TRUE(in_shim(next));
  EXPECT_EQ(dlsym(RTLD_DEFAULT, "cudaMemcpy"), next);
}

}  // namespace
