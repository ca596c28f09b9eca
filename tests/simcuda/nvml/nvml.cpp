// libnvidia-ml.so.1 over the simulated device: what a framework asks NVML before it uses CUDA. XLA's
// CUDA plug-in enumerates no device without NVML, and names each by its PCI bus id, the one
// cuDeviceGetPCIBusId gives (driver/api.cpp). The devices are those the process sees (the simulation
// has none beyond them); the driver is the r580 driver of CUDA 13.0, the version cuDriverGetVersion
// reports by default. Functions a program finds missing (dlsym) are what the simulation lacks.
#include <cuda.h>
#include <nvml.h>

#include <atomic>
#include <cstdio>
#include <cstring>

#include "core/config.h"
#include "core/device.h"
#include "core/memory.h"

#define SIMCUDA_NVML_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using simcuda::config;

constexpr char kDriverVersion[] = "580.65.06";
constexpr char kNvmlVersion[] = "13.580.65.06";

std::atomic<int> g_initialized{0};

// A device handle is its ordinal plus one, never null.
nvmlDevice_t handle_of(int device) { return reinterpret_cast<nvmlDevice_t>(uintptr_t(device) + 1); }

nvmlReturn_t device_of(nvmlDevice_t handle, int* device) {
  if (g_initialized.load() == 0) return NVML_ERROR_UNINITIALIZED;
  const uintptr_t v = reinterpret_cast<uintptr_t>(handle);
  if (v == 0 || v > uintptr_t(config().device_count)) return NVML_ERROR_INVALID_ARGUMENT;
  *device = int(v - 1);
  return NVML_SUCCESS;
}

unsigned bus_of(int device) { return unsigned(simcuda::device_attribute(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, device)); }

nvmlReturn_t copy_string(const char* text, char* out, unsigned length) {
  if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (std::strlen(text) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(out, text, std::strlen(text) + 1);
  return NVML_SUCCESS;
}

}  // namespace

SIMCUDA_NVML_EXPORT nvmlReturn_t nvmlInit_v2(void) {
  g_initialized.fetch_add(1);
  return NVML_SUCCESS;
}

SIMCUDA_NVML_EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int) { return nvmlInit_v2(); }

// Each successful init needs its shutdown; one more is an error, as NVML's reference count says.
SIMCUDA_NVML_EXPORT nvmlReturn_t nvmlShutdown(void) {
  int count = g_initialized.load();
  do {
    if (count == 0) return NVML_ERROR_UNINITIALIZED;
  } while (!g_initialized.compare_exchange_weak(count, count - 1));
  return NVML_SUCCESS;
}

SIMCUDA_NVML_EXPORT const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    default: return "Unknown Error";
  }
}

SIMCUDA_NVML_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  if (g_initialized.load() == 0) return NVML_ERROR_UNINITIALIZED;
  return copy_string(kDriverVersion, version, length);
}

SIMCUDA_NVML_EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char* version, unsigned int length) {
  return copy_string(kNvmlVersion, version, length);
}

SIMCUDA_NVML_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* version) {
  if (version == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *version = config().driver_version;
  return NVML_SUCCESS;
}

SIMCUDA_NVML_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* version) {
  return nvmlSystemGetCudaDriverVersion(version);
}

SIMCUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  if (g_initialized.load() == 0) return NVML_ERROR_UNINITIALIZED;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *count = unsigned(config().device_count);
  return NVML_SUCCESS;
}

SIMCUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (g_initialized.load() == 0) return NVML_ERROR_UNINITIALIZED;
  if (device == nullptr || index >= unsigned(config().device_count)) return NVML_ERROR_INVALID_ARGUMENT;
  *device = handle_of(int(index));
  return NVML_SUCCESS;
}

// Either of NVML's forms: the 8-digit domain of busId or the 4-digit one of busIdLegacy and CUDA.
SIMCUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char* pciBusId, nvmlDevice_t* device) {
  if (g_initialized.load() == 0) return NVML_ERROR_UNINITIALIZED;
  unsigned domain = 0, bus = 0, slot = 0, function = 0;
  if (pciBusId == nullptr || device == nullptr ||
      std::sscanf(pciBusId, "%x:%x:%x.%x", &domain, &bus, &slot, &function) != 4) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  for (int d = 0; d < config().device_count; ++d) {
    if (domain == 0 && bus == bus_of(d) && slot == 0 && function == 0) {
      *device = handle_of(d);
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

SIMCUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t handle, unsigned int* index) {
  int device;
  if (nvmlReturn_t r = device_of(handle, &device); r != NVML_SUCCESS) return r;
  if (index == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *index = unsigned(device);
  return NVML_SUCCESS;
}

SIMCUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t handle, char* name, unsigned int length) {
  int device;
  if (nvmlReturn_t r = device_of(handle, &device); r != NVML_SUCCESS) return r;
  char text[256];
  simcuda::device_name(device, text, sizeof text);
  return copy_string(text, name, length);
}

SIMCUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t handle, char* uuid, unsigned int length) {
  int device;
  if (nvmlReturn_t r = device_of(handle, &device); r != NVML_SUCCESS) return r;
  char bytes[16];
  simcuda::device_uuid(device, bytes);
  const auto* b = reinterpret_cast<const unsigned char*>(bytes);
  char text[48];
  std::snprintf(text, sizeof text, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return copy_string(text, uuid, length);
}

SIMCUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t handle, unsigned int* minor) {
  int device;
  if (nvmlReturn_t r = device_of(handle, &device); r != NVML_SUCCESS) return r;
  if (minor == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *minor = unsigned(device);
  return NVML_SUCCESS;
}

SIMCUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t handle, nvmlPciInfo_t* pci) {
  int device;
  if (nvmlReturn_t r = device_of(handle, &device); r != NVML_SUCCESS) return r;
  if (pci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  std::memset(pci, 0, sizeof *pci);
  pci->bus = bus_of(device);
  pci->pciDeviceId = unsigned(simcuda::device_attribute(CU_DEVICE_ATTRIBUTE_GPU_PCI_DEVICE_ID, device));
  std::snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04x:%02x:%02x.0", pci->domain, pci->bus, pci->device);
  std::snprintf(pci->busId, sizeof pci->busId, "%08x:%02x:%02x.0", pci->domain, pci->bus, pci->device);
  return NVML_SUCCESS;
}

SIMCUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t handle, nvmlMemory_t* memory) {
  int device;
  if (nvmlReturn_t r = device_of(handle, &device); r != NVML_SUCCESS) return r;
  if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  memory->total = config().device_memory_bytes;
  memory->used = simcuda::memory().used(device);
  memory->free = memory->total - memory->used;
  return NVML_SUCCESS;
}

SIMCUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t handle, int* major, int* minor) {
  int device;
  if (nvmlReturn_t r = device_of(handle, &device); r != NVML_SUCCESS) return r;
  if (major == nullptr || minor == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *major = simcuda::device_attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
  *minor = simcuda::device_attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
  return NVML_SUCCESS;
}

// No NVLink fabric: the state a GPU outside one reports.
SIMCUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t handle, nvmlGpuFabricInfoV_t* info) {
  int device;
  if (nvmlReturn_t r = device_of(handle, &device); r != NVML_SUCCESS) return r;
  if (info == nullptr || (info->version != nvmlGpuFabricInfo_v2 && info->version != nvmlGpuFabricInfo_v3)) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  const unsigned version = info->version;
  std::memset(info, 0, info->version == nvmlGpuFabricInfo_v2 ? sizeof(nvmlGpuFabricInfo_v2_t) : sizeof *info);
  info->version = version;
  info->state = NVML_GPU_FABRIC_STATE_NOT_SUPPORTED;
  info->status = NVML_SUCCESS;
  return NVML_SUCCESS;
}
