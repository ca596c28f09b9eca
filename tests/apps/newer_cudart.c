/* Only linked against, never loaded: libcudart.so.13 of a runtime newer than any real one, with the real
   version node and one function no real runtime exports (newer_runtime_call.cpp). */
int cudaGetDeviceCount(int* count) {
  *count = 0;
  return 0;
}

int cudaSimNewerFunction(int value) { return value == 0; }
