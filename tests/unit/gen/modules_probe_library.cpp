// For modules_test.cpp: a library carrying everything a module record flags, loaded and unloaded by the
// test: GPU code (an .nv_fatbin section, as nvcc emits one), a CUDA runtime among its DT_NEEDED (the
// call below keeps the linker's --as-needed from dropping it) and a GNU build-id (linked with one).
extern "C" int modules_fake_cudart_marker();

__attribute__((section(".nv_fatbin"), used)) static const unsigned char kFatbin[16] = {0x50, 0xed, 0x55, 0xba,
                                                                                      1,    0,    0x10};

extern "C" __attribute__((visibility("default"))) int modules_probe_answer() {
  return modules_fake_cudart_marker() + 1;
}
