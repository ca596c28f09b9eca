/* Stands in for a libunwind.so.8 without unw_backtrace (a broken or foreign install): found first on
   LD_LIBRARY_PATH, it is the unwinder a program loads as its own (own_unwinder_app), which must not
   change the shim's backtraces. */
int cutrace_test_not_an_unwinder(void) { return 0; }
