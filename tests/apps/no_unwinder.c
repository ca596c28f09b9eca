/* Stands in for a libunwind.so.8 without unw_backtrace (a broken or foreign install): found first on
   LD_LIBRARY_PATH, it makes the shim's unwinder unavailable, which the run must say. */
int cutrace_test_not_an_unwinder(void) { return 0; }
