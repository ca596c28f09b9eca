/* python3 as an embedding host that says it is CPython 3.14.0: it exports its own Py_Version, which the
 * shim finds before libpython's, as it would find a newer interpreter's. Everything else is the
 * libpython it is linked with. Built by test_python_frames.py. */
#include <Python.h>

__attribute__((visibility("default"))) const unsigned long Py_Version = 0x030E00F0;

int main(int argc, char** argv) { return Py_BytesMain(argc, argv); }
