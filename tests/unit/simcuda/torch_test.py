"""Real PyTorch on the simulated device: imports, sees the device, initialises CUDA and launches kernels.

torch's wheel loads the CUDA libraries of its nvidia-* wheels by its RUNPATH, so the simulated ones are
preloaded (LD_PRELOAD): a library already loaded under a soname satisfies every later reference to that
soname. Kernels never execute (simcuda.h), so what a kernel computes reads as the zeros of fresh device
memory, while copies are real. Skipped (exit 77) without the frameworks venv
(scripts/check-frameworks.sh creates it).
Usage: torch_test.py SIMCUDA_LIB_DIR [PYTHON]"""
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = r"""
import torch
print("available", torch.cuda.is_available(), torch.cuda.device_count())
print("device", torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0))
x = torch.ones(4, device="cuda")
y = x + 1
print("computed", y.cpu().tolist())
print("copied", torch.tensor([1.0, 2.0], device="cuda").cpu().tolist())
torch.cuda.synchronize()
"""
EXPECTED = ("available True 1\n"
            "device Simulated CUDA Device 0 (9, 0)\n"
            "computed [0.0, 0.0, 0.0, 0.0]\n"
            "copied [1.0, 2.0]\n")
LIBRARIES = ("libcudart.so.13", "libcuda.so.1", "libcublasLt.so.13", "libcublas.so.13", "libcudnn.so.9")


def main(lib_dir, python=str(Path.home() / ".cache/cutrace/frameworks-cuda13/bin/python")):
    if not Path(python).exists():
        print(f"skipped: no frameworks venv ({python}); scripts/check-frameworks.sh creates it")
        return 77
    env = dict(os.environ, LD_LIBRARY_PATH=lib_dir,
               LD_PRELOAD=" ".join(str(Path(lib_dir) / name) for name in LIBRARIES))
    r = subprocess.run([python, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    if r.returncode != 0 or r.stdout != EXPECTED:
        print(f"exit {r.returncode}, expected:\n{EXPECTED}got:\n{r.stdout}{r.stderr[-3000:]}")
        return 1
    print(r.stdout, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
