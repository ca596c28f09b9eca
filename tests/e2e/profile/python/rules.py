"""An asynchronous copy into pageable memory made from Python through ctypes, for test_analyze.py:
cuda_memcpy_async must flag the copy of fetch_batch, at the line marked COPY, with this file's name."""
import ctypes

BYTES = 1000000
DEVICE_TO_HOST = 2
cudart = ctypes.CDLL("libcudart.so.13")


def fetch_batch(host, device):
    r = cudart.cudaMemcpyAsync(host, device, ctypes.c_size_t(BYTES), DEVICE_TO_HOST, None)  # COPY
    assert r == 0, r


def main():
    device = ctypes.c_void_p()
    assert cudart.cudaMalloc(ctypes.byref(device), ctypes.c_size_t(BYTES)) == 0
    fetch_batch(ctypes.create_string_buffer(BYTES), device)
    assert cudart.cudaFree(device) == 0


main()
