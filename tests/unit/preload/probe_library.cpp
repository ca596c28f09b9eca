// Loaded with RTLD_LOCAL by loaded_objects_test: functions only a lookup by soname can find.
extern "C" __attribute__((visibility("default"))) int preload_probe_answer() { return 42; }
extern "C" __attribute__((visibility("default"))) int cudaMalloc_lookalike() { return 7; }
