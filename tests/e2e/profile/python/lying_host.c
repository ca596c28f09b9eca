/* python3 as an embedding host whose C API gives other line numbers than the frames hold: it exports
 * its own PyFrame_GetLineNumber, which the shim's check finds before libpython's (libpython's own
 * calls bind inside it). The check made the first time a slow call holds the GIL must then refuse the
 * frames read without it. Built by test_python_frames.py. */
#define _GNU_SOURCE
#include <Python.h>
#include <dlfcn.h>

__attribute__((visibility("default"))) int PyFrame_GetLineNumber(PyFrameObject* frame) {
  static int (*real)(PyFrameObject*) = NULL;
  if (!real) real = (int (*)(PyFrameObject*))dlsym(RTLD_NEXT, "PyFrame_GetLineNumber");
  return real(frame) + 1000;
}

int main(int argc, char** argv) { return Py_BytesMain(argc, argv); }
