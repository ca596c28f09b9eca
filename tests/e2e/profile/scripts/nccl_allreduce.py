"""One ncclAllReduce of 1 MiB (Sum) on a one-GPU communicator, through ctypes: NCCL from the PyPI
package nvidia-nccl-cu13 (or libnccl.so.2 wherever the loader finds it), the CUDA runtime from the
library path. Prints what it did, for the test to compare with and without cutrace."""
import ctypes
import sys
from pathlib import Path


def load_nccl():
    try:
        import nvidia.nccl
        for directory in nvidia.nccl.__path__:
            candidate = Path(directory) / "lib" / "libnccl.so.2"
            if candidate.exists():
                return ctypes.CDLL(str(candidate))
    except ImportError:
        pass
    return ctypes.CDLL("libnccl.so.2")


cudart = ctypes.CDLL("libcudart.so.13")
nccl = load_nccl()
comm = ctypes.c_void_p()
devices = (ctypes.c_int * 1)(0)
assert nccl.ncclCommInitAll(ctypes.byref(comm), 1, devices) == 0
count = (1 << 20) // 4
send, recv = ctypes.c_void_p(), ctypes.c_void_p()
assert cudart.cudaMalloc(ctypes.byref(send), count * 4) == 0 and cudart.cudaMalloc(ctypes.byref(recv), count * 4) == 0
# ncclFloat32 = 7, ncclSum = 0, the default stream.
assert nccl.ncclAllReduce(send, recv, ctypes.c_size_t(count), 7, 0, comm, None) == 0
assert cudart.cudaDeviceSynchronize() == 0
assert nccl.ncclCommDestroy(comm) == 0
print("allreduce", count * 4, "bytes")
sys.exit(0)
