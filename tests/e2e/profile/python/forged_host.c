/* python3 as an embedding host whose _PyRuntime states its layout in a form no CPython has: before the
 * interpreter starts, it makes the statement say that an object's type is 9 bytes in (8 in every
 * CPython). The shim must refuse the statement rather than read frames by it. Built by
 * test_python_frames.py against a CPython 3.13 or newer, whose internal headers declare the statement. */
#define Py_BUILD_CORE 1
#include <Python.h>
#include "internal/pycore_runtime.h"

int main(int argc, char** argv) {
  _PyRuntime.debug_offsets.pyobject.ob_type = 9;
  return Py_BytesMain(argc, argv);
}
