/* Stands in for a CUDA runtime of a newer minor version than the build's: libcudart.so.13 with one
   function the installed toolkit does not export, which no wrapper can exist for. */
int cudaGetDevice(int* device) {
  *device = 0;
  return 0;
}

int cudaFutureFunction(void) { return 0; }
