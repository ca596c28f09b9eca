#include "device.h"

#include <cuda.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <set>
#include <utility>

namespace simcuda {

namespace {
// The installed device a process's device number names (CUDA_VISIBLE_DEVICES).
int installed(int device) {
  return device >= 0 && device < config().device_count ? config().installed_device[device] : device;
}
}  // namespace

int device_attribute(int attribute, int device, bool* known) {
  if (known != nullptr) *known = attribute >= 1 && attribute < int(CU_DEVICE_ATTRIBUTE_MAX);
  switch (CUdevice_attribute(attribute)) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return 64;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return 48 << 10;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: return 64 << 10;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: return 65536;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: return 1755000;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: return 512;
    case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP: return 1;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return 132;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT: return 512;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: return 1;
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED: return 1;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: return 0x10 + installed(device);
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: return 2619000;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: return 5120;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: return 50 << 20;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: return 2048;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: return 3;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return 1;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT: return 32;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return 9;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return 0;
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: return 228 << 10;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: return 65536;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: return 1;
    // The driver's virtual memory management (driver/vmm.cpp), with generic compression as Hopper
    // parts have it (bytes read back as written, so nothing of it shows but the allocation's flag),
    // without shareable handles.
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID: return device;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: return 1;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: return 227 << 10;
    case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE: return 30 << 20;
    case CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE: return 134213632;
    case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK: return 1 << 10;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: return 1;
    case CU_DEVICE_ATTRIBUTE_NUMA_ID: return -1;
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID: return -1;
    case CU_DEVICE_ATTRIBUTE_GPU_PCI_DEVICE_ID: return 0x233010de;
    default: return 0;
  }
}

void device_name(int device, char* out, size_t size) {
  std::snprintf(out, size, "Simulated CUDA Device %d", installed(device));
}

namespace {
struct PeerAccess {
  std::mutex mu;
  std::set<std::pair<int, int>> enabled;  // (from, to)
};
PeerAccess& peers() {
  static PeerAccess* p = new PeerAccess;  // never destroyed: used until the last atexit
  return *p;
}
}  // namespace

Status enable_peer_access(int from, int to) {
  std::lock_guard<std::mutex> lock(peers().mu);
  return peers().enabled.emplace(from, to).second ? Status::kOk : Status::kAlreadyRegistered;
}

Status disable_peer_access(int from, int to) {
  std::lock_guard<std::mutex> lock(peers().mu);
  return peers().enabled.erase({from, to}) != 0 ? Status::kOk : Status::kNotRegistered;
}

int kernel_architecture(int device) {
  return device_attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device) * 10 +
         device_attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
}

void device_uuid(int device, char (&out)[16]) {
  std::snprintf(out, sizeof out, "simcuda-dev%04d", installed(device));
}

void device_pci_bus_id(int device, char* out, size_t size) {
  std::snprintf(out, size, "0000:%02x:00.0", device_attribute(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, device));
}

int device_of_pci_bus_id(const char* address) {
  unsigned domain = 0, bus = 0, slot = 0, function = 0;
  if (std::sscanf(address, "%x:%x:%x.%x", &domain, &bus, &slot, &function) != 4) return -1;
  if (domain != 0 || slot != 0 || function != 0) return -1;
  for (int d = 0; d < config().device_count; ++d)
    if (bus == unsigned(device_attribute(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, d))) return d;
  return -1;
}

// The fewest blocks that the threads, the warps' registers (allocated in units of 256 a warp), the
// shared memory (with the bytes each block reserves) and the block limit of one multiprocessor allow.
int active_blocks(int device, int block_size, size_t dynamic_smem, int regs, size_t static_smem) {
  auto attribute = [device](CUdevice_attribute a) { return device_attribute(int(a), device); };
  const int warp = attribute(CU_DEVICE_ATTRIBUTE_WARP_SIZE);
  if (block_size <= 0 || block_size > attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)) return 0;
  const int warps = (block_size + warp - 1) / warp;
  int blocks = std::min(attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR),
                        attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR) / (warps * warp));
  const int regs_per_warp = ((regs * warp + 255) / 256) * 256;
  const int regs_per_sm = attribute(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
  if (regs_per_warp > 0) blocks = std::min(blocks, regs_per_sm / (regs_per_warp * warps));
  const size_t smem_per_block = size_t(attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN));
  const size_t smem_per_sm = size_t(attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR));
  const size_t reserved = size_t(attribute(CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK));
  if (static_smem + dynamic_smem > smem_per_block) return 0;
  blocks = std::min<int>(blocks, int(smem_per_sm / (static_smem + dynamic_smem + reserved)));
  return std::max(blocks, 0);
}

}  // namespace simcuda
