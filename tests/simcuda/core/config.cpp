#include "config.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "simcuda.h"

namespace simcuda {
namespace {

void warn(const char* name, const char* value, const char* expected) {
  std::fprintf(stderr, "simcuda: ignoring %s=%s, which is not %s; unset it or fix its value.\n", name,
               value, expected);
}

uint64_t env_u64(const char* name, uint64_t fallback, uint64_t min, uint64_t max) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  errno = 0;
  char* end = nullptr;
  unsigned long long x = std::strtoull(v, &end, 10);
  if (errno != 0 || *end != '\0' || *v == '-' || x < min || x > max) {
    char expected[96];
    std::snprintf(expected, sizeof expected, "an integer from %llu to %llu", (unsigned long long)min,
                  (unsigned long long)max);
    warn(name, v, expected);
    return fallback;
  }
  return x;
}

double env_positive_double(const char* name, double fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  errno = 0;
  char* end = nullptr;
  double x = std::strtod(v, &end);
  if (errno != 0 || *end != '\0' || !std::isfinite(x) || x <= 0) {
    warn(name, v, "a positive number");
    return fallback;
  }
  return x;
}

// CUDA_VISIBLE_DEVICES as CUDA reads it: comma-separated indices of the installed devices; the list ends
// at the first entry that is not one (or repeats one). UUIDs are not taken here, and end it too.
int visible_devices(int installed, int (&visible)[64]) {
  const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
  if (v == nullptr) {
    for (int i = 0; i < installed; ++i) visible[i] = i;
    return installed;
  }
  int count = 0;
  for (const char* at = v; *at && count < installed;) {
    while (*at == ' ') ++at;
    char* end = nullptr;
    errno = 0;
    const long index = std::strtol(at, &end, 10);
    if (end == at || errno != 0 || index < 0 || index >= installed) break;
    bool repeated = false;
    for (int k = 0; k < count; ++k) repeated |= visible[k] == int(index);
    if (repeated) break;
    visible[count++] = int(index);
    while (*end == ' ') ++end;
    if (*end != ',') break;
    at = end + 1;
  }
  return count;
}

Config read_config() {
  Config c;
  const int installed = int(env_u64("SIMCUDA_DEVICE_COUNT", kDefaultDeviceCount, 0, kMaxDeviceCount));
  c.device_count = visible_devices(installed, c.installed_device);
  c.kernel_ns = env_u64("SIMCUDA_KERNEL_NS", kDefaultKernelNs, 0, 3600ull * 1000000000ull);
  c.copy_gbps = env_positive_double("SIMCUDA_COPY_GBPS", kDefaultCopyGBps);
  c.device_memory_bytes =
      env_u64("SIMCUDA_DEVICE_MEMORY_MIB", kDefaultDeviceMemoryMiB, 1, 1ull << 30) << 20;
  c.driver_version = int(env_u64("SIMCUDA_DRIVER_VERSION", kDefaultDriverVersion, 0, 1000000));
  return c;
}

}  // namespace

const Config& config() {
  static const Config c = read_config();
  return c;
}

}  // namespace simcuda
