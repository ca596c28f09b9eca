"""Real PyTorch on the simulated device: a short training step runs its CUDA path to the end, the same
with cutrace as without, and the trace holds exactly the calls it makes.

torch's wheel loads the CUDA libraries of its nvidia-* wheels by its RUNPATH, so the simulated ones are
preloaded (LD_PRELOAD): a library already loaded under a soname satisfies every later reference to that
soname. CUPTI is among them, so that cutrace's GPU activity comes from the simulated device: the
wheel's CUPTI 13.2 cannot work with a driver that is not NVIDIA's, and cutrace's trial of it keeps it
out (preload/cupti_trial.h), leaving the trace without GPU activity. Kernels never execute
(simcuda.h), so what torch's own kernels compute reads as whatever the memory held, while copies and
cuBLAS/cuBLASLt GEMMs are real: a matmul's result is exact. Skipped (exit 77) without the frameworks
venv (scripts/check-frameworks.sh creates it).
Usage: torch_test.py SIMCUDA_LIB_DIR CUTRACE [PYTHON]"""
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

SCRIPT = r"""
import torch
print("available", torch.cuda.is_available(), torch.cuda.device_count())
print("device", torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0))
print("copied", torch.tensor([1.0, 2.0], device="cuda").cpu().tolist())
a = torch.arange(6, dtype=torch.float32).reshape(2, 3).cuda()
print("matmul", (a @ a.t()).cpu().tolist())
w = torch.tensor([[1.0, -1.0, 0.5], [2.0, 0.0, -0.5]], device="cuda")
b = torch.tensor([0.25, -3.0], device="cuda")
print("linear", torch.nn.functional.linear(a, w, b).cpu().tolist())
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(32, 8).cuda()
y = torch.randn(32, 4).cuda()
for step in range(2):
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
torch.cuda.synchronize()
print("trained", tuple(model[0].weight.shape), tuple(model[2].weight.grad.shape))
"""
EXPECTED = ("available True 1\n"
            "device Simulated CUDA Device 0 (9, 0)\n"
            "copied [1.0, 2.0]\n"
            # [0 1 2; 3 4 5] times its transpose, on the host when the GEMM's kernel ends.
            "matmul [[5.0, 14.0], [14.0, 50.0]]\n"
            # a w^T + b through cuBLASLt's bias epilogue.
            "linear [[0.25, -4.0], [1.75, 0.5]]\n"
            "trained (16, 8) (4, 16)\n")
LIBRARIES = ("libcudart.so.13", "libcuda.so.1", "libcublasLt.so.13", "libcublas.so.13", "libcudnn.so.9",
             "libcupti.so.13")
# What torch 2.15.0 calls for SCRIPT. Five GEMMs with a bias go to cuBLASLt with its bias epilogue
# (the linear above, and each layer's forward in each of the two steps), each with one descriptor, four
# attributes (the two transposes, the epilogue, the bias), three layouts and one heuristic. Seven go to
# cublasGemmEx: the matmul, and per step the second layer's input and weight gradients and the first
# layer's weight gradient (x needs none); torch sets the handle's workspace and math mode before each.
# One handle for each thread that runs GEMMs: the main one and autograd's. cuBLAS's own calls into
# cuBLASLt are cuBLAS's, not the program's, and are not counted.
EXPECTED_CUBLAS = {
    "cublasCreate_v2": 2, "cublasSetWorkspace_v2": 7, "cublasSetMathMode": 7, "cublasGemmEx": 7,
    "cublasLtMatmulDescCreate": 5, "cublasLtMatmulDescSetAttribute": 20, "cublasLtMatmulDescDestroy": 5,
    "cublasLtMatrixLayoutCreate": 15, "cublasLtMatrixLayoutDestroy": 15,
    "cublasLtMatmulAlgoGetHeuristic": 5, "cublasLtMatmul": 5,
}


def stats(cutrace, trace, report):
    r = subprocess.run([cutrace, "stats", "-q", "-r", report, "-f", "json", trace], capture_output=True,
                       text=True, timeout=120)
    if r.returncode not in (0, 4):
        raise RuntimeError(f"cutrace stats -r {report} exited {r.returncode}: {r.stderr}")
    return [row for table in json.loads(r.stdout or "[]") for row in table["rows"]]


def main(lib_dir, cutrace, python=str(Path.home() / ".cache/cutrace/frameworks-cuda13/bin/python")):
    if not Path(python).exists():
        print(f"skipped: no frameworks venv ({python}); scripts/check-frameworks.sh creates it")
        return 77
    env = dict(os.environ, LD_LIBRARY_PATH=lib_dir, PYTHONWARNINGS="ignore",
               LD_PRELOAD=" ".join(str(Path(lib_dir) / name) for name in LIBRARIES))
    plain = subprocess.run([python, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    if plain.returncode != 0 or plain.stdout != EXPECTED:
        print(f"untraced: exit {plain.returncode}, expected:\n{EXPECTED}got:\n{plain.stdout}{plain.stderr[-3000:]}")
        return 1
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        trace = str(Path(tmp) / "step.cutrace")
        traced = subprocess.run([cutrace, "profile", "-o", trace, "-t", "cuda,cublas,cudnn", "--", python, "-c", SCRIPT],
                                env=env, capture_output=True, text=True, timeout=600)
        own_err = "".join(line for line in traced.stderr.splitlines(True) if not line.startswith("cutrace"))
        if (traced.returncode, traced.stdout, own_err) != (plain.returncode, plain.stdout, plain.stderr):
            print(f"traced: exit {traced.returncode}, output:\n{traced.stdout}{traced.stderr[-3000:]}")
            return 1
        cublas = {row["Name"]: int(row["Num Calls"]) for row in stats(cutrace, trace, "cublas_api_sum")}
        if cublas != EXPECTED_CUBLAS:
            failures.append(f"cuBLAS calls: expected {EXPECTED_CUBLAS}, got {cublas}")
        api = {row["Name"]: int(row["Num Calls"]) for row in stats(cutrace, trace, "cuda_api_sum")}
        kernels = stats(cutrace, trace, "cuda_gpu_kern_sum")
        instances = Counter()
        for row in kernels:
            instances[row["Name"]] += int(row["Instances"])
        # Every kernel torch and its libraries launched went through cuLaunchKernel (torch 2.15 launches
        # through the driver's entry points), and the simulated CUPTI saw each one run.
        if sum(instances.values()) != api.get("cuLaunchKernel", 0) or not instances:
            failures.append(f"{sum(instances.values())} kernels ran, {api.get('cuLaunchKernel', 0)} cuLaunchKernel calls")
        gemms = instances.get("cublasLt_matmul_sim_128x128", 0)
        if gemms != EXPECTED_CUBLAS["cublasGemmEx"] + EXPECTED_CUBLAS["cublasLtMatmul"]:
            failures.append(f"{gemms} GEMM kernels for {EXPECTED_CUBLAS['cublasGemmEx']} cublasGemmEx and "
                            f"{EXPECTED_CUBLAS['cublasLtMatmul']} cublasLtMatmul calls")
        for name in ("cudaMalloc", "cudaStreamSynchronize", "cudaDeviceSynchronize", "cuMemcpyHtoDAsync_v2",
                     "cuMemcpyDtoHAsync_v2"):
            if api.get(name, 0) == 0:
                failures.append(f"no {name} recorded")
    for failure in failures:
        print(failure)
    if not failures:
        print(plain.stdout, end="")
        print(f"traced alike; {sum(cublas.values())} cuBLAS calls, {sum(api.values())} CUDA calls, "
              f"{sum(instances.values())} kernels")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
