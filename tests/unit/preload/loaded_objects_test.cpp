// The shim's reader of loaded objects must give exactly glibc's answers (it replaces dlsym, RTLD_NEXT
// and dladdr inside the shim, where those calls would disturb the program's dlerror() state), and it
// must find what RTLD_NEXT cannot: functions of libraries loaded with RTLD_LOCAL.
#include "loaded_objects.h"

#include <dlfcn.h>
#include <gnu/libc-version.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <exception>
#include <string>

namespace elf = cutrace::preload::elf;

namespace {

uintptr_t here() { return reinterpret_cast<uintptr_t>(&here); }

elf::Object object_of(const void* p) {
  elf::Object o;
  EXPECT_TRUE(elf::object_containing(reinterpret_cast<uintptr_t>(p), &o));
  return o;
}

TEST(LoadedObjects, FindsTheDefaultVersionAsDlsymDoes) {
  // libc defines dlsym twice: the default dlsym@@GLIBC_2.34 and the compatibility dlsym@GLIBC_2.2.5.
  void* libc_dlsym = dlsym(RTLD_DEFAULT, "dlsym");
  // gnu_get_libc_version: a function only libc defines (a sanitizer runtime intercepts strlen & co.).
  const elf::Object libc = object_of(reinterpret_cast<void*>(&gnu_get_libc_version));
  elf::Dynamic d;
  ASSERT_TRUE(elf::read_dynamic(libc, &d));
  EXPECT_EQ(elf::find_symbol(libc, d, "dlsym"), libc_dlsym);
  EXPECT_EQ(elf::find_symbol(libc, d, "no_such_function_anywhere"), nullptr);
  ASSERT_NE(d.soname, nullptr);
  EXPECT_STREQ(d.soname, "libc.so.6");
  // libc's strlen is a GNU indirect function: glibc calls its resolver, the reader does not (no CUDA
  // library has one) and says it found nothing rather than an address that is not the function.
  EXPECT_EQ(elf::find_symbol(libc, d, "strlen"), nullptr);
}

TEST(LoadedObjects, AgreesWithDlsymOnEveryExportOfAHandle) {
  void* h = dlopen("libm.so.6", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(h, nullptr);
  const elf::Object libm = object_of(reinterpret_cast<void*>(static_cast<double (*)(double)>(&std::cos)));
  elf::Dynamic d;
  ASSERT_TRUE(elf::read_dynamic(libm, &d));
  for (const char* name : {"cos", "sin", "exp", "log", "pow", "atan2", "lgamma", "frexp"}) {
    void* expected = dlsym(h, name);
    ASSERT_NE(expected, nullptr) << name;
    // glibc resolves GNU indirect functions in libm (a few math functions); the reader does not.
    void* found = elf::find_symbol(libm, d, name);
    if (found) {
      EXPECT_EQ(found, expected) << name;
    }
  }
  dlclose(h);
}

TEST(LoadedObjects, FindNextMatchesRtldNext) {
  for (const char* name : {"fopen", "qsort", "pthread_create", "dlopen"})
    EXPECT_EQ(elf::find_next(here(), name), dlsym(RTLD_NEXT, name)) << name;
  EXPECT_EQ(elf::find_next(here(), "no_such_function_anywhere"), nullptr);
}

TEST(LoadedObjects, FindsALocallyLoadedLibraryBySoname) {
  void* h = dlopen(PROBE_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  // RTLD_NEXT searches the global scope only: a library loaded with RTLD_LOCAL is not in it.
  EXPECT_EQ(dlsym(RTLD_NEXT, "preload_probe_answer"), nullptr);
  void* expected = dlsym(h, "preload_probe_answer");
  ASSERT_NE(expected, nullptr);
  EXPECT_EQ(elf::find_in_library(PROBE_SONAME, here(), "preload_probe_answer"), expected);
  // Not by soname: the first object after the caller that defines it.
  EXPECT_EQ(elf::find_in_library("libnot_loaded.so.1", here(), "preload_probe_answer"), expected);
  EXPECT_STREQ(elf::soname_of(reinterpret_cast<uintptr_t>(expected)), PROBE_SONAME);
  EXPECT_EQ(elf::soname_of(0), nullptr);
  dlclose(h);
}

TEST(LoadedObjects, NeverTakesAnotherMajorVersionOfTheLibraryAsked) {
  void* h = dlopen(PROBE_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  const std::string soname = PROBE_SONAME;  // libpreload_test_probe.so.7
  const std::string other = soname.substr(0, soname.size() - 1) + "8";
  EXPECT_EQ(elf::find_in_library(other.c_str(), here(), "cudaMalloc_lookalike"), nullptr);
  EXPECT_NE(elf::find_in_library(soname.c_str(), here(), "cudaMalloc_lookalike"), nullptr);
  dlclose(h);
}

TEST(LoadedObjects, TellsMajorVersionsOfOneLibraryApart) {
  EXPECT_TRUE(elf::other_version_of("libcudart.so.13", "libcudart.so.12"));
  EXPECT_FALSE(elf::other_version_of("libcudart.so.13", "libcudart.so.13"));
  EXPECT_FALSE(elf::other_version_of("libcudart.so.13", "libcudnn.so.9"));
  EXPECT_FALSE(elf::other_version_of("libcublas.so.13", "libcublasLt.so.13"));
  EXPECT_FALSE(elf::other_version_of("libcudnn.so.9", "libcudnn_ops.so.9"));
  EXPECT_FALSE(elf::other_version_of("libcudart.so.13", nullptr));
}

TEST(LoadedObjects, LoadCountsChangeWhenALibraryIsLoaded) {
  uint64_t adds0, subs0, adds1, subs1, adds2, subs2;
  elf::load_counts(&adds0, &subs0);
  void* h = dlopen(PROBE_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr);
  elf::load_counts(&adds1, &subs1);
  dlclose(h);
  elf::load_counts(&adds2, &subs2);
  EXPECT_GT(adds1, adds0);
  EXPECT_GT(subs2, subs1);
}

TEST(LoadedObjects, LeavesDlerrorAlone) {
  // The shim's lookups happen inside the program's own dl calls: a pending error must survive them.
  EXPECT_EQ(dlsym(RTLD_DEFAULT, "no_such_function_anywhere"), nullptr);
  elf::find_next(here(), "no_such_function_anywhere");
  elf::find_in_library("libnot_loaded.so.1", here(), "no_such_function_anywhere");
  elf::soname_of(here());
  const char* error = dlerror();
  ASSERT_NE(error, nullptr);
  EXPECT_NE(std::strstr(error, "no_such_function_anywhere"), nullptr) << error;
  EXPECT_EQ(dlerror(), nullptr);
}

}  // namespace

// The shim's stand-in for _dl_find_object on a glibc older than 2.35 (libc_compat.cpp) must tell the
// unwinder what glibc's own does: the same unwind table (PT_GNU_EH_FRAME), and a span holding the
// address, for the program, the C library, the C++ runtime and a library loaded with dlopen.
TEST(LoadedObjects, UnwindDataAgreesWithTheLoadersFindObject) {
  void* probe = dlopen(PROBE_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(probe, nullptr) << dlerror();
  void* probe_function = dlsym(probe, "preload_probe_answer");
  ASSERT_NE(probe_function, nullptr);
  static int in_the_program = 0;
  const void* addresses[] = {reinterpret_cast<const void*>(&here), &in_the_program,
                             reinterpret_cast<const void*>(&std::strlen), reinterpret_cast<const void*>(&::dlopen),
                             reinterpret_cast<const void*>(static_cast<void (*)()>(&std::terminate)), probe_function};
  for (const void* address : addresses) {
    dl_find_object expected{};
    ASSERT_EQ(_dl_find_object(const_cast<void*>(address), &expected), 0) << address;
    uintptr_t start = 0, end = 0;
    const void* eh_frame = reinterpret_cast<const void*>(1);
    ASSERT_TRUE(elf::unwind_data_of(reinterpret_cast<uintptr_t>(address), &start, &end, &eh_frame)) << address;
    EXPECT_EQ(eh_frame, expected.dlfo_eh_frame) << address;
    EXPECT_LE(start, reinterpret_cast<uintptr_t>(address));
    EXPECT_GT(end, reinterpret_cast<uintptr_t>(address));
    EXPECT_EQ(start, reinterpret_cast<uintptr_t>(expected.dlfo_map_start)) << address;
  }
  uintptr_t start = 0, end = 0;
  const void* eh_frame = nullptr;
  EXPECT_FALSE(elf::unwind_data_of(0x10, &start, &end, &eh_frame));
  dlclose(probe);
}
