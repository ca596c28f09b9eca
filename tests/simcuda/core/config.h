// Process-wide settings of the simulated device, from the SIMCUDA_* environment (see simcuda.h).
#pragma once

#include <cstdint>

#define SIMCUDA_API __attribute__((visibility("default")))

namespace simcuda {

struct Config {
  int device_count;  // the devices this process sees: SIMCUDA_DEVICE_COUNT, narrowed by CUDA_VISIBLE_DEVICES
  // Which installed device each of them is (its name, UUID and PCI bus are the installed one's).
  int installed_device[64];
  uint64_t kernel_ns;
  double copy_gbps;
  uint64_t device_memory_bytes;
  int driver_version;
};

// Read on first use; a forked child keeps its parent's values, an exec'd program reads its own.
SIMCUDA_API const Config& config();

// What the simulated device reports back to the API layers, which map it to their own error codes.
enum class Status : uint8_t {
  kOk,
  kInvalidValue,
  kInvalidDevice,
  kInvalidHandle,
  kOutOfMemory,
  kNotReady,
  kAlreadyRegistered,
  kNotRegistered,
};

}  // namespace simcuda
