"""Slow copies from known Python functions, for the Python frames of backtraces: <module> -> main ->
train_step -> copy_batch -> cudaMemcpy of 16 MiB, once through ctypes.PyDLL (which keeps the GIL
during the call, as a C extension such as PyTorch's does) and once through ctypes.CDLL (which releases
it). The lines of the calls carry "# CALL: <function>" comments, by which the tests find them.

usage: python_backtrace.py LIBRARY
stdout: "failed N" (the calls that did not return cudaSuccess)."""
import ctypes
import sys

BYTES = 16 << 20


def copy_batch(lib, device, host):
    return lib.cudaMemcpy(device, host, ctypes.c_size_t(BYTES), 1)  # CALL: copy_batch


def train_step(lib, device, host):
    return copy_batch(lib, device, host)  # CALL: train_step


def main(library):
    holding, releasing = ctypes.PyDLL(library), ctypes.CDLL(library)
    host = ctypes.create_string_buffer(BYTES)
    device = ctypes.c_void_p()
    failed = holding.cudaMalloc(ctypes.byref(device), ctypes.c_size_t(BYTES)) != 0
    failed += train_step(holding, device, host) != 0  # CALL: main
    failed += train_step(releasing, device, host) != 0  # CALL: main (GIL released)
    failed += holding.cudaFree(device) != 0
    print("failed", failed)


main(sys.argv[1])  # CALL: <module>
