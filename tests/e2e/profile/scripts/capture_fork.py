"""A process that forks inside and outside its capture range, through ctypes on the CUDA runtime.

usage: capture_fork.py LIBRARY CALLS
Parent: cudaProfilerStart; fork child A, which makes CALLS cudaGetDeviceCount and exits; wait;
cudaProfilerStop; fork child B, which makes CALLS cudaGetDeviceCount and exits; wait.
stdout: "done"."""
import ctypes
import os
import sys


def calls(lib, n):
    count = ctypes.c_int(0)
    for _ in range(n):
        lib.cudaGetDeviceCount(ctypes.byref(count))


def fork_and_call(lib, n):
    pid = os.fork()
    if pid == 0:
        calls(lib, n)
        os._exit(0)
    os.waitpid(pid, 0)


def main():
    lib = ctypes.CDLL(sys.argv[1])
    n = int(sys.argv[2])
    lib.cudaProfilerStart()
    fork_and_call(lib, n)  # the child starts inside the parent's range
    lib.cudaProfilerStop()
    fork_and_call(lib, n)  # this one starts outside
    print("done")


if __name__ == "__main__":
    main()
