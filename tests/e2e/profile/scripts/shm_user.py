"""A program that keeps a buffer in /dev/shm, as PyTorch's DataLoader workers, NCCL and Python's
multiprocessing do, while THREADS threads use the CUDA runtime at once (each holds its ring while the
buffer is written). Exits 3, as such a program would, when /dev/shm has no room for the buffer.

usage: shm_user.py LIBRARY THREADS KIB
stdout: "threads N calls M" (every thread's calls), then "wrote KIB KiB" or "no room for KIB KiB"."""
import ctypes
import os
import sys
import threading

library, threads, kib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
runtime = ctypes.CDLL(library)
all_in = threading.Barrier(threads + 1)
done = threading.Barrier(threads + 1)
calls = []


def work():
    count = ctypes.c_int(0)
    made = 0
    for _ in range(50):
        made += runtime.cudaGetDeviceCount(ctypes.byref(count)) == 0
    all_in.wait()   # every thread has a ring now
    done.wait()     # and keeps it while the buffer is written
    for _ in range(50):
        made += runtime.cudaGetDeviceCount(ctypes.byref(count)) == 0
    calls.append(made)


workers = [threading.Thread(target=work) for _ in range(threads)]
for w in workers:
    w.start()
all_in.wait()
path = f"/dev/shm/shm_user-{os.getpid()}"
try:
    with open(path, "wb") as f:
        block = b"\1" * 1024
        for _ in range(kib):
            f.write(block)
        f.flush()
        os.fsync(f.fileno())
    status, line = 0, f"wrote {kib} KiB"
except OSError:
    status, line = 3, f"no room for {kib} KiB"
finally:
    if os.path.exists(path):
        os.unlink(path)
done.wait()
for w in workers:
    w.join()
print(f"threads {len(calls)} calls {sum(calls)}")
print(line)
sys.exit(status)
