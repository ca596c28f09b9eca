"""Known Python work on two threads in turn, for --python-sampling. A worker thread spins in
spin_worker for WORKER_S seconds of CPU while the main thread waits in wait_main; then the main thread
spins in spin_main (under busy_main) for MAIN_S seconds while the worker waits in wait_worker. The
waits sleep (the GIL released), so only one thread at a time wants the GIL. With LIBRARY, a forked
child then makes a CUDA call through ctypes on it and spins in spin_child for MAIN_S seconds. Each
line a sample should find carries a "# LINE: <function>" comment.

usage: python_sampling.py MAIN_S WORKER_S [LIBRARY]
With WAIT_FOR_SAMPLER=1 in the environment the work starts only once the sampler's thread
(cutrace-pysample) runs, so that the first spin is sampled from its start, as the second is.
stdout: "main TID", "worker TID" (native thread ids), "busy SECONDS" (the wall time busy_main took),
"child PID TID" with LIBRARY, then "done"."""
import ctypes
import os
import sys
import threading
import time


def spin(seconds):
    end = time.thread_time() + seconds
    n = 0
    while time.thread_time() < end: n += 1  # noqa: E701  # LINE: spin
    return n


def spin_main(seconds):
    return spin(seconds)  # LINE: spin_main


def busy_main(seconds):
    return spin_main(seconds)  # LINE: busy_main


def spin_worker(seconds):
    return spin(seconds)  # LINE: spin_worker


def spin_child(seconds):
    return spin(seconds)  # LINE: spin_child


def wait_for(event):
    while not event.is_set():
        time.sleep(0.002)  # LINE: wait_for


def wait_main(event):
    wait_for(event)  # LINE: wait_main


def wait_worker(event):
    wait_for(event)  # LINE: wait_worker


def worker(seconds, spun, done):
    print("worker", threading.get_native_id(), flush=True)
    spin_worker(seconds)
    spun.set()
    wait_worker(done)


def sampler_running():
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/comm") as f:
                # The kernel keeps 15 characters of a thread's name.
                if f.read().startswith("cutrace-pysamp"):
                    return True
        except FileNotFoundError:
            pass
    return False


def main():
    main_s, worker_s = float(sys.argv[1]), float(sys.argv[2])
    if os.environ.get("WAIT_FOR_SAMPLER") == "1":
        deadline = time.monotonic() + 30
        while not sampler_running() and time.monotonic() < deadline:
            time.sleep(0.005)
    print("main", threading.get_native_id(), flush=True)
    spun, done = threading.Event(), threading.Event()
    thread = threading.Thread(target=worker, args=(worker_s, spun, done))
    thread.start()
    wait_main(spun)
    started = time.perf_counter()
    busy_main(main_s)  # LINE: main
    print("busy", time.perf_counter() - started, flush=True)
    done.set()
    thread.join()
    if len(sys.argv) > 3:
        pid = os.fork()
        if pid == 0:
            count = ctypes.c_int(0)
            ctypes.CDLL(sys.argv[3]).cudaGetDeviceCount(ctypes.byref(count))
            print("child", os.getpid(), threading.get_native_id(), flush=True)
            spin_child(main_s)
            os._exit(0)
        os.waitpid(pid, 0)
    print("done", flush=True)


main()  # LINE: <module>
