// Compiled, never linked: nvcc declares the entry points its generated code calls (through
// crt/host_runtime.h and crt/device_functions.h), and the simulated runtime repeats those
// declarations in nvcc_abi.h. Including both here turns any difference into a compile error.
#include "nvcc_abi.h"

__global__ void abi_check_kernel(int* out) { *out = 0; }
