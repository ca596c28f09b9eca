#include "cubin.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <set>

namespace simcuda::drv {
namespace {

constexpr uint32_t kFatbinMagic = 0xba55ed50;
constexpr uint16_t kFatbinCubin = 2;

template <class T>
T read(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

bool is_elf64(const unsigned char* p) { return std::memcmp(p, "\x7f" "ELF", 4) == 0 && p[4] == 2; }

// A kernel has its code section (.text.NAME) and its parameter information (.nv.info.NAME); a device
// function that was not inlined has code only.
void cubin_kernels(const unsigned char* elf, std::vector<std::string>* out) {
  const uint64_t section_table = read<uint64_t>(elf + 0x28);
  const uint16_t entry_size = read<uint16_t>(elf + 0x3a);
  const uint16_t count = read<uint16_t>(elf + 0x3c);
  const uint16_t names_index = read<uint16_t>(elf + 0x3e);
  if (entry_size < 0x40 || names_index >= count) return;
  const unsigned char* names_header = elf + section_table + uint64_t(names_index) * entry_size;
  const char* names = reinterpret_cast<const char*>(elf + read<uint64_t>(names_header + 0x18));
  std::vector<std::string> code;
  std::set<std::string> with_info;
  for (uint16_t i = 0; i < count; ++i) {
    const char* name = names + read<uint32_t>(elf + section_table + uint64_t(i) * entry_size);
    if (std::strncmp(name, ".text.", 6) == 0) code.emplace_back(name + 6);
    if (std::strncmp(name, ".nv.info.", 9) == 0) with_info.emplace(name + 9);
  }
  for (const std::string& name : code) {
    if (with_info.count(name) != 0 && std::find(out->begin(), out->end(), name) == out->end()) out->push_back(name);
  }
}

}  // namespace

std::vector<std::string> ptx_kernels(const char* text, size_t size) {
  std::vector<std::string> kernels;
  const char* end = text + size;
  const char* nul = static_cast<const char*>(std::memchr(text, '\0', size));
  if (nul != nullptr) end = nul;
  auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  for (const char* p = text; p < end;) {
    const char* entry = std::search(p, end, ".entry", ".entry" + 6);
    if (entry == end) break;
    p = entry + 6;
    // A directive stands alone: ".entry" after a space or a line's start and before a space.
    if ((entry != text && !is_space(entry[-1])) || p == end || !is_space(*p)) continue;
    while (p < end && is_space(*p)) ++p;
    const char* name = p;
    while (p < end && !is_space(*p) && *p != '(' && *p != '{' && *p != ';') ++p;
    if (p != name) kernels.emplace_back(name, p);
  }
  return kernels;
}

namespace {
// PTX is text that declares its version before anything but comments and blank lines.
bool is_ptx(const char* text) {
  for (const char* p = text; *p != '\0';) {
    if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') {
      ++p;
    } else if (p[0] == '/' && p[1] == '/') {
      while (*p != '\0' && *p != '\n') ++p;
    } else {
      return std::strncmp(p, ".version", 8) == 0;
    }
  }
  return false;
}
}  // namespace

std::vector<std::string> image_kernels(const void* image) {
  std::vector<std::string> kernels;
  const auto* p = static_cast<const unsigned char*>(image);
  if (const auto* text = static_cast<const char*>(image); is_ptx(text)) return ptx_kernels(text, std::strlen(text));
  if (is_elf64(p)) {
    cubin_kernels(p, &kernels);
    return kernels;
  }
  if (read<uint32_t>(p) != kFatbinMagic) return kernels;
  // Container: magic, version (u16), header size (u16), size of the entries (u64); each entry: kind
  // (u16), version (u16), header size (u32), payload size (u64), then the payload. A cubin compressed
  // into its entry does not start with the ELF magic and is skipped.
  const uint16_t header_size = read<uint16_t>(p + 6);
  const uint64_t entries_size = read<uint64_t>(p + 8);
  for (uint64_t offset = header_size; offset + 16 <= header_size + entries_size;) {
    const unsigned char* entry = p + offset;
    const uint16_t kind = read<uint16_t>(entry);
    const uint32_t entry_header = read<uint32_t>(entry + 4);
    const uint64_t payload_size = read<uint64_t>(entry + 8);
    if (entry_header < 16) break;
    if (kind == kFatbinCubin && payload_size >= 0x40 && is_elf64(entry + entry_header)) {
      cubin_kernels(entry + entry_header, &kernels);
    }
    offset += entry_header + payload_size;
  }
  return kernels;
}

}  // namespace simcuda::drv
