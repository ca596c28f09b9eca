#include "arrays.h"

#include <vector>

#include "handles.h"
#include "memory.h"

namespace simcuda {
namespace {

// Ids under a base of their own, as streams and events (handles.h): a destroyed array's handle never
// names a new one, and any other pointer is refused without being dereferenced.
constexpr uintptr_t kArrayBase = 0xa770'0000'0000;

void* handle_of(uint64_t id) { return reinterpret_cast<void*>(kArrayBase + id * handles::kStride); }

}  // namespace

Status check_array_extent(size_t width, size_t height, size_t depth, unsigned flags) {
  constexpr unsigned kKnown = kArrayLayered | kArraySurfaceLoadStore | kArrayCubemap | kArrayTextureGather;
  if ((flags & ~kKnown) != 0 || width == 0) return Status::kInvalidValue;
  const bool layered = (flags & kArrayLayered) != 0;
  bool ok;
  if ((flags & kArrayCubemap) != 0) {
    ok = height == width && (layered ? depth != 0 && depth % 6 == 0 : depth == 6);
  } else if ((flags & kArrayTextureGather) != 0) {
    ok = !layered && height != 0 && depth == 0;
  } else {
    ok = layered ? depth != 0 : height != 0 || depth == 0;
  }
  return ok ? Status::kOk : Status::kInvalidValue;
}

Status ArrayRegistry::create(const CudaArray& shape, void** out) {
  CudaArray a = shape;
  if (Status s = memory().allocate(MemoryKind::kArray, a.device, a.bytes(), 0, &a.data); s != Status::kOk) return s;
  Lock lock(mu_);
  const uint64_t id = ++next_id_;
  arrays_[id] = a;
  *out = handle_of(id);
  return Status::kOk;
}

Status ArrayRegistry::destroy(const void* handle) {
  uint64_t id;
  void* data;
  {
    Lock lock(mu_);
    auto it = handles::decode(kArrayBase, handle, &id) ? arrays_.find(id) : arrays_.end();
    if (it == arrays_.end()) return Status::kInvalidValue;
    data = it->second.data;
    arrays_.erase(it);
  }
  return memory().release(data, {MemoryKind::kArray});
}

std::optional<CudaArray> ArrayRegistry::find(const void* handle) {
  uint64_t id;
  if (!handles::decode(kArrayBase, handle, &id)) return std::nullopt;
  Lock lock(mu_);
  auto it = arrays_.find(id);
  if (it == arrays_.end()) return std::nullopt;
  return it->second;
}

void ArrayRegistry::release_device(int device) {
  std::vector<void*> freed;
  {
    Lock lock(mu_);
    for (auto it = arrays_.begin(); it != arrays_.end();) {
      if (it->second.device == device) {
        freed.push_back(it->second.data);
        it = arrays_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (void* data : freed) memory().release(data, {MemoryKind::kArray});
}

ArrayRegistry& arrays() {
  // Never destroyed, as the memory tracker it allocates from.
  static ArrayRegistry* r = new ArrayRegistry;
  return *r;
}

}  // namespace simcuda
