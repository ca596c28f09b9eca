// The simulated device's properties: one definition for the runtime (cudaGetDeviceProperties,
// cudaDeviceGetAttribute) and the driver (cuDeviceGetAttribute, cuDeviceGetName), so that both
// describe the same part. A Hopper-class part: what programs commonly query is plausible and
// self-consistent.
#pragma once

#include <cstddef>

#include "config.h"

namespace simcuda {

// The value of a CUdevice_attribute for a device (the runtime's cudaDeviceAttr has the same values).
// Attributes the headers define that the simulation does not model read as 0, as an unsupported
// feature does; *known (if given) says whether the attribute is one the headers define.
SIMCUDA_API int device_attribute(int attribute, int device, bool* known = nullptr);
// cudaDeviceProp::name and cuDeviceGetName.
SIMCUDA_API void device_name(int device, char* out, size_t size);
// cudaDeviceProp::uuid and CUPTI's device record: "simcuda-dev0000" and its NUL, 16 bytes.
SIMCUDA_API void device_uuid(int device, char (&out)[16]);
// A device's PCI address as the driver and the runtime write it (cuDeviceGetPCIBusId,
// cudaDeviceGetPCIBusId): domain 0, its CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, device 0, function 0, in 13
// characters with the NUL ("0000:01:00.0"), cut to `size` as snprintf does. XLA names devices by it
// and asks NVML by it.
SIMCUDA_API void device_pci_bus_id(int device, char* out, size_t size);
// The device such an address names ("%x:%x:%x.%x", any case and width), or -1 for none.
SIMCUDA_API int device_of_pci_bus_id(const char* address);

// Peer access between devices, one state for the runtime (cudaDeviceEnablePeerAccess) and the driver
// (cuCtxEnablePeerAccess): kAlreadyRegistered if `from` already reaches `to`'s memory, and
// kNotRegistered for disabling access that is not enabled.
SIMCUDA_API Status enable_peer_access(int from, int to);
SIMCUDA_API Status disable_peer_access(int from, int to);

// What cudaFuncGetAttributes and cuFuncGetAttribute report of every kernel here.
inline constexpr int kKernelRegisters = 32;
// The PTX and binary version of every kernel: built for the device's own compute capability (90).
SIMCUDA_API int kernel_architecture(int device);

// The occupancy calculator's arithmetic, for the runtime's and the driver's occupancy calls: how
// many blocks of `block_size` threads of a kernel of `regs` registers a thread and `static_smem`
// bytes of static shared memory fit on one multiprocessor of the device.
SIMCUDA_API int active_blocks(int device, int block_size, size_t dynamic_smem, int regs, size_t static_smem);

}  // namespace simcuda
