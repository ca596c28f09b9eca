// The kNames chunk (format.h): every kernel name and kernel handle the recorder saw, per process
// instance, written once just before the kEnd chunk.
//
// A launch names its kernel by a host stub or a cudaKernel_t handle, which only the process's own
// __cudaRegisterFunction and __cudaGetKernel records turn into a name. Those records come from
// whichever thread made them, and threads are drained one after another, so in a long trace a launch
// can sit in an earlier chunk than the record that names its kernel. A reader that reads this chunk
// first (it walks the chunk headers to find it, without decompressing anything else) names every
// launch as it streams.
//
// Payload, little-endian:
//   u32 process_count, then per process:
//     u32 pid, u32 kernel_count, u64 process_start_ticks, u32 handle_count, u32 reserved (0),
//     kernel_count times: u64 stub, u32 name_bytes, then name_bytes bytes of the mangled name,
//     handle_count times: u64 handle, u64 stub
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "cutrace/abi.h"

namespace cutrace::names {

struct ProcessNames {
  uint32_t pid = 0;
  uint64_t start_ticks = 0;
  std::vector<std::pair<uint64_t, std::string>> kernels;  // host stub -> mangled name
  std::vector<std::pair<uint64_t, uint64_t>> handles;     // cudaKernel_t handle -> host stub
};

namespace detail {
template <class T>
void put(std::vector<uint8_t>& out, T v) {
  const size_t at = out.size();
  out.resize(at + sizeof v);
  std::memcpy(out.data() + at, &v, sizeof v);
}
template <class T>
bool get(const uint8_t*& p, const uint8_t* end, T& v) {
  if (size_t(end - p) < sizeof v) return false;
  std::memcpy(&v, p, sizeof v);
  p += sizeof v;
  return true;
}
}  // namespace detail

inline std::vector<uint8_t> encode(const std::vector<ProcessNames>& processes) {
  std::vector<uint8_t> out;
  detail::put(out, uint32_t(processes.size()));
  for (const ProcessNames& p : processes) {
    detail::put(out, p.pid);
    detail::put(out, uint32_t(p.kernels.size()));
    detail::put(out, p.start_ticks);
    detail::put(out, uint32_t(p.handles.size()));
    detail::put(out, uint32_t(0));
    for (const auto& [stub, name] : p.kernels) {
      detail::put(out, stub);
      detail::put(out, uint32_t(name.size()));
      out.insert(out.end(), name.begin(), name.end());
    }
    for (const auto& [handle, stub] : p.handles) {
      detail::put(out, handle);
      detail::put(out, stub);
    }
  }
  return out;
}

// Returns false, with `out` in an unspecified state, when the payload is malformed: counts that run
// past its end, names longer than a string record can hold, bytes left over.
inline bool decode(const uint8_t* p, size_t n, std::vector<ProcessNames>& out) {
  const uint8_t* const end = p + n;
  out.clear();
  uint32_t count;
  if (!detail::get(p, end, count)) return false;
  for (uint32_t i = 0; i < count; ++i) {
    ProcessNames& proc = out.emplace_back();
    uint32_t kernels, handles, reserved;
    if (!detail::get(p, end, proc.pid) || !detail::get(p, end, kernels) || !detail::get(p, end, proc.start_ticks) ||
        !detail::get(p, end, handles) || !detail::get(p, end, reserved))
      return false;
    // Each entry takes at least 12 (kernel) or 16 (handle) bytes: a count the payload cannot hold is
    // refused before anything is reserved for it.
    if (kernels > size_t(end - p) / 12 || handles > size_t(end - p) / 16) return false;
    proc.kernels.reserve(kernels);
    for (uint32_t k = 0; k < kernels; ++k) {
      uint64_t stub;
      uint32_t length;
      if (!detail::get(p, end, stub) || !detail::get(p, end, length) || length > abi::kMaxStringBytes ||
          size_t(end - p) < length)
        return false;
      proc.kernels.emplace_back(stub, std::string(reinterpret_cast<const char*>(p), length));
      p += length;
    }
    proc.handles.reserve(handles);
    for (uint32_t h = 0; h < handles; ++h) {
      uint64_t handle, stub;
      if (!detail::get(p, end, handle) || !detail::get(p, end, stub)) return false;
      proc.handles.emplace_back(handle, stub);
    }
  }
  return p == end;
}

}  // namespace cutrace::names
