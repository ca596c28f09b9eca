// Module records (preload/modules.cpp): the objects a process has loaded, each reported with the
// fields a backtrace is later symbolised by, and each unload right after the dlclose that did it. The
// shim's objects are linked into this program, so its dlclose and dlsym are the shim's wrappers; the
// records go into a one-ring session in this process. What the records say is compared with what
// glibc (dl_iterate_phdr, dlinfo) and the files on disk say.
#include <dlfcn.h>
#include <elf.h>
#include <gtest/gtest.h>
#include <link.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "in_process_session.h"
#include "modules.h"
#include "runtime.h"

namespace {

namespace abi = cutrace::abi;
namespace preload = cutrace::preload;

struct Module {
  abi::ModuleEvent event;
  uint16_t size;
  uint64_t time, base, text_start, text_end;
  uint32_t flags;
  std::vector<uint8_t> build_id;
  std::string path;
};

struct Loaded {
  std::string name;  // the loader's: "" for the program
  uintptr_t bias;
};

std::vector<Loaded> loaded_objects() {
  std::vector<Loaded> out;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        static_cast<std::vector<Loaded>*>(data)->push_back({info->dlpi_name ? info->dlpi_name : "", info->dlpi_addr});
        return 0;
      },
      &out);
  return out;
}

std::string executable() {
  char buffer[4096];
  const ssize_t n = readlink("/proc/self/exe", buffer, sizeof buffer);
  return n > 0 ? std::string(buffer, size_t(n)) : std::string();
}

// The GNU build-id as the file's section headers locate it (the shim reads the mapped PT_NOTE instead).
std::vector<uint8_t> build_id_of_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (file.size() < sizeof(ElfW(Ehdr))) return {};
  ElfW(Ehdr) eh;
  std::memcpy(&eh, file.data(), sizeof eh);
  for (unsigned i = 0; i < eh.e_shnum; ++i) {
    ElfW(Shdr) sh;
    std::memcpy(&sh, file.data() + eh.e_shoff + i * sizeof sh, sizeof sh);
    if (sh.sh_type != SHT_NOTE) continue;
    for (size_t at = sh.sh_offset; at + 12 <= sh.sh_offset + sh.sh_size;) {
      ElfW(Nhdr) note;
      std::memcpy(&note, file.data() + at, sizeof note);
      const size_t name_at = at + sizeof note, desc_at = name_at + ((note.n_namesz + 3) & ~3u);
      if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 && std::memcmp(file.data() + name_at, "GNU", 4) == 0)
        return std::vector<uint8_t>(file.begin() + long(desc_at), file.begin() + long(desc_at + note.n_descsz));
      at = desc_at + ((note.n_descsz + 3) & ~3u);
    }
  }
  return {};
}

uintptr_t address_in_this_program() { return reinterpret_cast<uintptr_t>(&address_in_this_program); }

class Modules : public ::testing::Test {
 protected:
  void SetUp() override {
    session_.attach();
    // As when this process claimed its first ring: the shim reports to the session from now on, and
    // has reported nothing yet.
    preload::testing::set_process_announced(true);
    preload::forget_reported_objects();
  }
  void TearDown() override {
    preload::testing::set_process_announced(false);
    session_.detach();
  }

  // The module records written since the last call (the runtime's name, also reported when one is
  // loaded, is not one).
  std::vector<Module> drain() {
    std::vector<Module> out;
    session_.drain([&](const uint8_t* p, uint32_t) {
      abi::ModuleRecord r;
      std::memcpy(&r, p, sizeof r);
      if (r.header.kind != uint16_t(abi::RecordKind::kModuleMap)) return;
      EXPECT_EQ(r.header.size, abi::align_record(uint32_t(sizeof r + r.path_bytes)));
      out.push_back({abi::ModuleEvent(r.header.aux), r.header.size, r.time, r.base, r.text_start, r.text_end, r.flags,
                     std::vector<uint8_t>(r.build_id, r.build_id + r.build_id_bytes),
                     std::string(reinterpret_cast<const char*>(p + sizeof r), r.path_bytes)});
    });
    return out;
  }

  static void note() { preload::note_loaded_objects(preload::t_thread); }

  static const Module* find(const std::vector<Module>& records, const std::string& path) {
    for (const Module& m : records)
      if (m.path == path) return &m;
    return nullptr;
  }

  cutrace::test::InProcessSession session_;
};

std::string loader_path(void* handle) {
  link_map* map = nullptr;
  EXPECT_EQ(dlinfo(handle, RTLD_DI_LINKMAP, &map), 0);
  return map ? map->l_name : "";
}

uintptr_t loader_bias(void* handle) {
  link_map* map = nullptr;
  EXPECT_EQ(dlinfo(handle, RTLD_DI_LINKMAP, &map), 0);
  return map ? map->l_addr : 0;
}

TEST_F(Modules, EveryLoadedObjectIsReportedOnceInTheLoadersOrder) {
  const std::vector<Loaded> expected = loaded_objects();
  const uint64_t before = preload::monotonic_ns();
  note();
  const uint64_t after = preload::monotonic_ns();
  const std::vector<Module> r = drain();
  ASSERT_EQ(r.size(), expected.size());
  for (size_t i = 0; i < r.size(); ++i) {
    const Module& m = r[i];
    SCOPED_TRACE(expected[i].name);
    EXPECT_EQ(m.event, abi::ModuleEvent::kLoaded);
    EXPECT_EQ(m.base, expected[i].bias);
    EXPECT_EQ(m.path, i == 0 ? executable() : expected[i].name);
    EXPECT_EQ((m.flags & abi::kModuleFlagMainProgram) != 0, i == 0);
    EXPECT_LT(m.text_start, m.text_end);
    EXPECT_GE(m.text_start, m.base);
    EXPECT_LE(before, m.time);
    EXPECT_LE(m.time, after);
    // The vDSO has no file to compare with.
    if (!m.path.empty() && m.path.find("linux-vdso") == std::string::npos) {
      EXPECT_EQ(m.build_id, build_id_of_file(m.path));
    }
  }
  // This program carries no GPU code and does not need a CUDA runtime (its stand-in is another name).
  EXPECT_EQ(r[0].flags, abi::kModuleFlagMainProgram);
  EXPECT_LE(r[0].text_start, address_in_this_program());
  EXPECT_LT(address_in_this_program(), r[0].text_end);

  // Nothing changed since: nothing more to say.
  note();
  EXPECT_TRUE(drain().empty());
}

TEST_F(Modules, ALibraryLoadedLaterIsReportedWithWhatItCarries) {
  note();
  drain();
  const uint64_t before = preload::monotonic_ns();
  void* h = dlopen(MODULES_PROBE, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  // A lookup through the handle is one of the moments the shim looks (the shim's dlsym).
  void* answer = dlsym(h, "modules_probe_answer");
  ASSERT_NE(answer, nullptr);
  const std::vector<Module> loads = drain();
  // The probe and the runtime it needs, in the loader's order.
  ASSERT_EQ(loads.size(), 2u);
  const std::vector<Loaded> now = loaded_objects();
  ASSERT_GE(now.size(), 2u);
  EXPECT_EQ(loads[0].path, now[now.size() - 2].name);
  EXPECT_EQ(loads[1].path, now[now.size() - 1].name);

  const Module* probe = find(loads, loader_path(h));
  ASSERT_NE(probe, nullptr);
  EXPECT_EQ(probe->event, abi::ModuleEvent::kLoaded);
  EXPECT_EQ(probe->base, loader_bias(h));
  EXPECT_EQ(probe->flags, abi::kModuleFlagDeviceCode | abi::kModuleFlagNeedsCudart);
  EXPECT_EQ(probe->build_id.size(), 20u);  // linked with --build-id=sha1
  EXPECT_EQ(probe->build_id, build_id_of_file(MODULES_PROBE));
  EXPECT_LE(probe->text_start, reinterpret_cast<uintptr_t>(answer));
  EXPECT_LT(reinterpret_cast<uintptr_t>(answer), probe->text_end);
  EXPECT_LE(before, probe->time);
  const Module& runtime = probe == &loads[0] ? loads[1] : loads[0];
  EXPECT_EQ(runtime.path.substr(runtime.path.rfind('/') + 1), "libcudart.so.99");
  EXPECT_EQ(runtime.flags, 0u);
  EXPECT_EQ(runtime.build_id, build_id_of_file(runtime.path));

  // The shim's dlclose looks at once: each unload repeats its load's fields, with no path.
  ASSERT_EQ(dlclose(h), 0);
  const std::vector<Module> unloads = drain();
  ASSERT_EQ(unloads.size(), 2u);
  for (const Module& u : unloads) {
    EXPECT_EQ(u.event, abi::ModuleEvent::kUnloaded);
    EXPECT_EQ(u.path, "");
    EXPECT_EQ(u.size, sizeof(abi::ModuleRecord));
    const Module& load = u.base == probe->base ? *probe : runtime;
    EXPECT_EQ(u.base, load.base);
    EXPECT_EQ(u.text_start, load.text_start);
    EXPECT_EQ(u.text_end, load.text_end);
    EXPECT_EQ(u.flags, load.flags);
    EXPECT_EQ(u.build_id, load.build_id);
    EXPECT_LE(load.time, u.time);
  }
  EXPECT_NE(unloads[0].base, unloads[1].base);
}

TEST_F(Modules, ALibraryLoadedAgainIsReportedAgain) {
  note();
  drain();
  void* h = dlopen(PLAIN_PROBE, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  note();
  const std::vector<Module> first = drain();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].path, loader_path(h));
  // No GPU code, no CUDA runtime needed.
  EXPECT_EQ(first[0].flags, 0u);
  ASSERT_EQ(dlclose(h), 0);
  h = dlopen(PLAIN_PROBE, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  note();
  const std::vector<Module> again = drain();
  ASSERT_EQ(dlclose(h), 0);
  ASSERT_EQ(again.size(), 2u);
  EXPECT_EQ(again[0].event, abi::ModuleEvent::kUnloaded);
  EXPECT_EQ(again[0].base, first[0].base);
  EXPECT_EQ(again[1].event, abi::ModuleEvent::kLoaded);
  EXPECT_EQ(again[1].path, first[0].path);
  EXPECT_LE(again[0].time, again[1].time);
}

TEST_F(Modules, AProcessThatHasNotAnnouncedItselfReportsNothing) {
  preload::testing::set_process_announced(false);
  note();
  void* h = dlopen(MODULES_PROBE, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  note();
  ASSERT_EQ(dlclose(h), 0);
  EXPECT_TRUE(drain().empty());
}

}  // namespace
