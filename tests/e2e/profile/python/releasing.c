/* A C extension that calls a CUDA function with the GIL released, as PyTorch's generated bindings do
 * around every ATen operator (pybind11::gil_scoped_release): the thread's Python frames stay on its
 * chain, and another thread may run Python meanwhile. Built per interpreter by test_python_frames.py.
 *
 * releasing.memcpy(function, dst, src, bytes, kind) -> int: calls the cudaMemcpy at address
 * `function` (from ctypes, so that the call goes where the program's would) without the GIL. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

typedef int (*memcpy_fn)(void*, const void*, size_t, int);

static PyObject* releasing_memcpy(PyObject* self, PyObject* args) {
  unsigned long long function, dst, src, bytes;
  int kind, result;
  (void)self;
  if (!PyArg_ParseTuple(args, "KKKKi", &function, &dst, &src, &bytes, &kind)) return NULL;
  Py_BEGIN_ALLOW_THREADS
  result = ((memcpy_fn)(uintptr_t)function)((void*)(uintptr_t)dst, (const void*)(uintptr_t)src, (size_t)bytes, kind);
  Py_END_ALLOW_THREADS
  return PyLong_FromLong(result);
}

static PyMethodDef methods[] = {
    {"memcpy", releasing_memcpy, METH_VARARGS, "cudaMemcpy through a function address, with the GIL released"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "releasing", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_releasing(void) { return PyModule_Create(&module); }
