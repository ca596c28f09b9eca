"""Uses the CUDA runtime the way Python programs do without a CUDA package: ctypes.CDLL, which is
dlopen(RTLD_LOCAL) and dlsym on the handle. With --children N, multiprocessing (fork start method,
Python's default on Linux before 3.14) runs N children that make calls of their own after the fork.
With --children-first N, the parent forks its N children before it loads the runtime at all (each
child is the first of its line to use CUDA), and makes its own calls once they have ended.

usage: ctypes_runtime.py LIBRARY ITERATIONS [--children N | --children-first N]
stdout: "calls <function> <n>" for the calls of this process (children print with a "child <pid>"
        prefix), "pid <pid>" for each process."""
import ctypes
import multiprocessing
import os
import sys


def use_runtime(lib, iterations, prefix):
    count = ctypes.c_int(0)
    device = ctypes.c_void_p()
    host = (ctypes.c_char * 256)()
    failures = 0
    for _ in range(iterations):
        failures += lib.cudaGetDeviceCount(ctypes.byref(count)) != 0
        failures += lib.cudaMalloc(ctypes.byref(device), ctypes.c_size_t(256)) != 0
        failures += lib.cudaMemcpy(device, host, ctypes.c_size_t(256), 1) != 0
        failures += lib.cudaFree(device) != 0
    lines = [f"{prefix}pid {os.getpid()}", f"{prefix}failures {failures}"]
    for name, n in (("cudaFree", iterations), ("cudaGetDeviceCount", iterations), ("cudaMalloc", iterations),
                    ("cudaMemcpy", iterations)):
        lines.append(f"{prefix}calls {name} {n}")
    # One write per process: children write to the same pipe, and a single write below PIPE_BUF is
    # never interleaved with another process's.
    os.write(1, ("\n".join(lines) + "\n").encode())


def child(library, iterations):
    # The handle the parent opened is inherited by the fork; a fresh CDLL of the same name returns it.
    use_runtime(ctypes.CDLL(library), iterations, f"child {os.getpid()} ")


def run_children(library, iterations, children):
    context = multiprocessing.get_context("fork")
    procs = [context.Process(target=child, args=(library, iterations)) for _ in range(children)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    if any(p.exitcode != 0 for p in procs):
        sys.exit(1)


def main():
    library, iterations = sys.argv[1], int(sys.argv[2])
    option = sys.argv[3] if len(sys.argv) > 4 else ""
    children = int(sys.argv[4]) if option in ("--children", "--children-first") else 0
    if option == "--children-first":
        run_children(library, iterations, children)
    use_runtime(ctypes.CDLL(library), iterations, "")
    if option == "--children":
        run_children(library, iterations, children)


if __name__ == "__main__":
    main()
