"""GPU work of known durations on the simulated device, through the driver API (ctypes) with NVTX
ranges from the `nvtx` package, for the recipes that look at the device's timeline.

A kernel whose name holds "sleep_us_N" takes N us on the simulated device, a memset of B bytes
ceil(B / 10) ns (SIMCUDA_COPY_GBPS's default), and work queued on one stream behind a long kernel
starts exactly when the work before it ends, so the device times below are exact.

usage: gpu_work.py proj <iterations>
         per iteration on the main thread: push "step"; launch long_sleep_us_20000 and short_sleep_us_3000;
         push "inner"; memset of 5000 bytes (async, same stream); pop; pop; push "host only" (no GPU work);
         pop; synchronise. Meanwhile a second thread holds a range "other thread" open over all the main
         thread's launches and launches nothing.
       gpu_work.py util <busy_us> <idle_ms>
         a kernel of busy_us, synchronise, sleep idle_ms, a second kernel of busy_us, synchronise.
       gpu_work.py launches <count> <us>
         count launches of work_sleep_us_<us>, synchronise.
stdout: "done"."""
import ctypes
import sys
import threading
import time

import nvtx

cuda = ctypes.CDLL("libcuda.so.1")
IMAGE = b"SIMCUDA-MODULE-1\0long_sleep_us_20000\0short_sleep_us_3000\0work_sleep_us_%d\0util_sleep_us_%d\0"


def check(result, what):
    if result != 0:
        raise SystemExit(f"{what} returned {result}")


def setup(work_us=1000, util_us=1000):
    check(cuda.cuInit(0), "cuInit")
    device, context, module = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_void_p()
    check(cuda.cuDeviceGet(ctypes.byref(device), 0), "cuDeviceGet")
    check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), device), "cuDevicePrimaryCtxRetain")
    check(cuda.cuCtxSetCurrent(context), "cuCtxSetCurrent")
    image = ctypes.create_string_buffer(IMAGE % (work_us, util_us))
    check(cuda.cuModuleLoadData(ctypes.byref(module), image), "cuModuleLoadData")
    return context, module


def function(module, name):
    f = ctypes.c_void_p()
    check(cuda.cuModuleGetFunction(ctypes.byref(f), module, name.encode()), "cuModuleGetFunction")
    return f


def launch(f, stream=None):
    check(cuda.cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, stream, None, None), "cuLaunchKernel")


def synchronize():
    check(cuda.cuCtxSynchronize(), "cuCtxSynchronize")


def proj(iterations):
    context, module = setup()
    long_kernel, short_kernel = function(module, "long_sleep_us_20000"), function(module, "short_sleep_us_3000")
    buffer = ctypes.c_uint64()
    check(cuda.cuMemAlloc_v2(ctypes.byref(buffer), ctypes.c_size_t(5000)), "cuMemAlloc")
    opened, finished = threading.Event(), threading.Event()

    def other():
        cuda.cuCtxSetCurrent(context)
        nvtx.push_range("other thread")
        opened.set()
        finished.wait()
        nvtx.pop_range()

    thread = threading.Thread(target=other)
    thread.start()
    opened.wait()
    for _ in range(iterations):
        nvtx.push_range("step")
        launch(long_kernel)
        launch(short_kernel)
        nvtx.push_range("inner")
        check(cuda.cuMemsetD8Async(buffer, 0, ctypes.c_size_t(5000), None), "cuMemsetD8Async")
        nvtx.pop_range()
        nvtx.pop_range()
        nvtx.push_range("host only")
        nvtx.pop_range()
        synchronize()
    finished.set()
    thread.join()


def util(busy_us, idle_ms):
    _, module = setup(util_us=busy_us)
    kernel = function(module, f"util_sleep_us_{busy_us}")
    launch(kernel)
    synchronize()
    time.sleep(idle_ms / 1000)
    launch(kernel)
    synchronize()


def launches(count, us):
    _, module = setup(work_us=us)
    kernel = function(module, f"work_sleep_us_{us}")
    for _ in range(count):
        launch(kernel)
    synchronize()


if __name__ == "__main__":
    {"proj": proj, "util": util, "launches": launches}[sys.argv[1]](*map(int, sys.argv[2:]))
    print("done")
