/* A library that does nothing, loaded with LD_PRELOAD where the launcher's tests need a real file in
   that variable; the tests find it in /proc/PID/maps. */
int cutrace_launcher_test_preload_marker(void) { return 1; }
