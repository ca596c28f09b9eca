// The simulated NVML (tests/simcuda/nvml): the devices the driver has, found by index and by the PCI
// bus id cuDeviceGetPCIBusId gives, as XLA's CUDA plug-in finds them.
#include <cuda.h>
#include <gtest/gtest.h>
#include <nvml.h>

#include <cstring>
#include <string>

namespace {

TEST(Nvml, NamesTheDriversDevicesByIndexAndByPciBusId) {
  unsigned count = 0;
  EXPECT_EQ(nvmlDeviceGetCount_v2(&count), NVML_ERROR_UNINITIALIZED);
  ASSERT_EQ(nvmlInit_v2(), NVML_SUCCESS);
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  int cuda_count = 0;
  ASSERT_EQ(cuDeviceGetCount(&cuda_count), CUDA_SUCCESS);
  ASSERT_EQ(nvmlDeviceGetCount_v2(&count), NVML_SUCCESS);
  ASSERT_EQ(count, unsigned(cuda_count));

  nvmlDevice_t device = nullptr;
  ASSERT_EQ(nvmlDeviceGetHandleByIndex_v2(0, &device), NVML_SUCCESS);
  EXPECT_EQ(nvmlDeviceGetHandleByIndex_v2(count, &device), NVML_ERROR_INVALID_ARGUMENT);
  char bus_id[16] = {};
  ASSERT_EQ(cuDeviceGetPCIBusId(bus_id, sizeof bus_id, 0), CUDA_SUCCESS);
  nvmlDevice_t by_bus = nullptr;
  ASSERT_EQ(nvmlDeviceGetHandleByPciBusId_v2(bus_id, &by_bus), NVML_SUCCESS);
  EXPECT_EQ(by_bus, device);
  nvmlPciInfo_t pci;
  ASSERT_EQ(nvmlDeviceGetPciInfo_v3(device, &pci), NVML_SUCCESS);
  EXPECT_STREQ(pci.busIdLegacy, bus_id);
  ASSERT_EQ(nvmlDeviceGetHandleByPciBusId_v2(pci.busId, &by_bus), NVML_SUCCESS);
  EXPECT_EQ(by_bus, device);
  EXPECT_EQ(nvmlDeviceGetHandleByPciBusId_v2("0000:ff:00.0", &by_bus), NVML_ERROR_NOT_FOUND);

  char name[96] = {}, cuda_name[96] = {};
  ASSERT_EQ(nvmlDeviceGetName(device, name, sizeof name), NVML_SUCCESS);
  ASSERT_EQ(cuDeviceGetName(cuda_name, sizeof cuda_name, 0), CUDA_SUCCESS);
  EXPECT_STREQ(name, cuda_name);
  EXPECT_EQ(nvmlDeviceGetName(device, name, 4), NVML_ERROR_INSUFFICIENT_SIZE);
  char uuid[96] = {};
  ASSERT_EQ(nvmlDeviceGetUUID(device, uuid, sizeof uuid), NVML_SUCCESS);
  EXPECT_EQ(std::string(uuid).rfind("GPU-", 0), 0u);
  EXPECT_EQ(std::strlen(uuid), 40u);
  int major = 0, minor = -1;
  ASSERT_EQ(nvmlDeviceGetCudaComputeCapability(device, &major, &minor), NVML_SUCCESS);
  int cuda_major = 0;
  ASSERT_EQ(cuDeviceGetAttribute(&cuda_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0), CUDA_SUCCESS);
  EXPECT_EQ(major, cuda_major);

  char version[32] = {};
  ASSERT_EQ(nvmlSystemGetDriverVersion(version, sizeof version), NVML_SUCCESS);
  EXPECT_STREQ(version, "580.65.06");
  int cuda_version = 0, driver_version = 0;
  ASSERT_EQ(nvmlSystemGetCudaDriverVersion_v2(&cuda_version), NVML_SUCCESS);
  ASSERT_EQ(cuDriverGetVersion(&driver_version), CUDA_SUCCESS);
  EXPECT_EQ(cuda_version, driver_version);
  nvmlGpuFabricInfoV_t fabric{};
  fabric.version = nvmlGpuFabricInfo_v3;
  ASSERT_EQ(nvmlDeviceGetGpuFabricInfoV(device, &fabric), NVML_SUCCESS);
  EXPECT_EQ(fabric.state, NVML_GPU_FABRIC_STATE_NOT_SUPPORTED);

  ASSERT_EQ(nvmlShutdown(), NVML_SUCCESS);
  EXPECT_EQ(nvmlShutdown(), NVML_ERROR_UNINITIALIZED);
}

}  // namespace
