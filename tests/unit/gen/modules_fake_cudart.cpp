// For modules_test.cpp: named as a CUDA runtime (libcudart.so.99), so that the library that needs it
// (modules_probe_library.cpp) lists a libcudart.so.* in its DT_NEEDED. It is nothing else of one.
extern "C" __attribute__((visibility("default"))) int modules_fake_cudart_marker() { return 99; }
