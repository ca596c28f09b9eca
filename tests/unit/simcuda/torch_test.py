"""Real PyTorch on the simulated device: a short training step runs its CUDA path to the end, the same
with cutrace as without, and the trace holds exactly the calls it makes. Two stacks: torch 2.15.0
(CUDA 13.2 wheels) on the CUDA 13 libraries, and torch 2.8.0 (CUDA 12.8 wheels) on the CUDA 12
runtime, cuBLAS and CUPTI beside the same driver and cuDNN.

torch's wheel loads the CUDA libraries of its nvidia-* wheels by its RUNPATH, so the simulated ones are
preloaded (LD_PRELOAD): a library already loaded under a soname satisfies every later reference to that
soname. CUPTI is among them, so that cutrace's GPU activity comes from the simulated device: the
wheel's CUPTI 13.2 cannot work with a driver that is not NVIDIA's, and cutrace's trial of it keeps it
out (preload/cupti_trial.h), leaving the trace without GPU activity. Kernels never execute
(simcuda.h), so what torch's own kernels compute reads as whatever the memory held, while copies and
cuBLAS/cuBLASLt GEMMs are real: a matmul's result is exact. Skipped (exit 77) without the frameworks
venv of the stack (scripts/check-frameworks.sh creates both). Then a script's slow
torch.cuda.synchronize() and .item(), which PyTorch makes with the GIL released, name its lines.
Usage: torch_test.py cuda13|cuda12 SIMCUDA_LIB_DIR[:SIMCUDA_LIB12_DIR] CUTRACE [PYTHON]"""
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
# The simulated libraries each stack preloads, in the order given: (directory index, soname).
LIBRARIES = {
    "cuda13": ((0, "libcudart.so.13"), (0, "libcuda.so.1"), (0, "libcublasLt.so.13"), (0, "libcublas.so.13"),
               (0, "libcudnn.so.9"), (0, "libcupti.so.13")),
    "cuda12": ((1, "libcudart.so.12"), (0, "libcuda.so.1"), (1, "libcublasLt.so.12"), (1, "libcublas.so.12"),
               (0, "libcudnn.so.9"), (1, "libcupti.so.12")),
}
# What each torch calls for SCRIPT: 12 GEMMs in all. Five with a bias go to cuBLASLt with its bias
# epilogue (the linear above, and each layer's forward in each of the two steps), each with one
# descriptor, four attributes (the two transposes, the epilogue, the bias), three layouts, and a
# preference with five attributes for its heuristic. Seven go to cuBLAS: the matmul, and per step the
# second layer's input and weight gradients and the first layer's weight gradient (x needs none). One
# cuBLAS handle for each thread that runs GEMMs: the main one and autograd's. cuBLAS's own calls into
# cuBLASLt are cuBLAS's, not the program's, and are not counted.
LT_MATMULS = {
    "cublasLtMatmulDescCreate": 5, "cublasLtMatmulDescSetAttribute": 20, "cublasLtMatmulDescDestroy": 5,
    "cublasLtMatrixLayoutCreate": 15, "cublasLtMatrixLayoutDestroy": 15,
    "cublasLtMatmulPreferenceCreate": 5, "cublasLtMatmulPreferenceSetAttribute": 25,
    "cublasLtMatmulPreferenceDestroy": 5, "cublasLtMatmulAlgoGetHeuristic": 5, "cublasLtMatmul": 5,
}
EXPECTED_CUBLAS = {
    # torch 2.15: cublasGemmEx after setting the handle's workspace and math mode; the handle's stream
    # set before every GEMM and once more as each handle is first used.
    "cuda13": {"cublasCreate_v2": 2, "cublasSetStream_v2": 14, "cublasSetWorkspace_v2": 7, "cublasSetMathMode": 7,
               "cublasGemmEx": 7, **LT_MATMULS},
    # torch 2.8: cublasSgemm_v2 for float, and the handle's stream, workspace and math mode set before
    # every GEMM, cuBLASLt's included.
    "cuda12": {"cublasCreate_v2": 2, "cublasSetStream_v2": 12, "cublasSetWorkspace_v2": 12, "cublasSetMathMode": 12,
               "cublasSgemm_v2": 7, **LT_MATMULS},
}
# Slow synchronising calls, each made with the GIL released, and the script's lines they must name.
SYNC_SCRIPT = """import torch
a = torch.ones(64, 64, device="cuda")
b = a @ a
torch.cuda.synchronize()
total = b.sum().item()
print("done")
"""
GEMM_CALL = {"cuda13": "cublasGemmEx", "cuda12": "cublasSgemm_v2"}
TORCH = {"cuda13": "2.15.0", "cuda12": "2.8.0"}


def stats(cutrace, trace, report):
    r = subprocess.run([cutrace, "stats", "-q", "-r", report, "-f", "json", trace], capture_output=True,
                       text=True, timeout=120)
    if r.returncode not in (0, 4):
        raise RuntimeError(f"cutrace stats -r {report} exited {r.returncode}: {r.stderr}")
    return [row for table in json.loads(r.stdout or "[]") for row in table["rows"]]


def slow_calls_name_the_scripts_lines(cutrace, python, env, tmp):
    """torch.cuda.synchronize() and .item() release the GIL around their CUDA calls; with kernels of
    30 ms, each call's stack names the script's line (callsite_sum's Python Stack and Call Site)."""
    script = Path(tmp) / "sync_lines.py"
    script.write_text(SYNC_SCRIPT)
    trace = str(Path(tmp) / "sync.cutrace")
    run = subprocess.run([cutrace, "profile", "-o", trace, "--cudabacktrace", "sync:10000000", "--", python, script],
                         env=dict(env, SIMCUDA_KERNEL_NS="30000000"), capture_output=True, text=True, timeout=600)
    if run.returncode != 0 or run.stdout != "done\n":
        return [f"the synchronising script: exit {run.returncode}, {run.stdout}{run.stderr[-3000:]}"]
    # (call, innermost Python frame, outermost): torch.cuda.synchronize is Python code of torch's
    # (torch/cuda/__init__.py, at a line of its version), .item() a method of C++.
    sites = sorted((row["Name"], row["Call Site"], row["Python Stack"].split(" <- ")[-1])
                   for row in stats(cutrace, trace, "callsite_sum"))
    if (len(sites) == 2 and sites[0][0] == "cudaDeviceSynchronize" and sites[0][1].startswith("synchronize (__init__.py:")
            and sites[0][2] == "<module> (sync_lines.py:4)"
            and sites[1] == ("cudaStreamSynchronize", "<module> (sync_lines.py:5)", "<module> (sync_lines.py:5)")):
        return []
    return [f"slow calls' Python lines: expected cudaDeviceSynchronize from synchronize (__init__.py:N) <- ... <- "
            f"<module> (sync_lines.py:4) and cudaStreamSynchronize from <module> (sync_lines.py:5), got {sites}"]


def main(stack, lib_dirs, cutrace, python=None):
    python = python or str(Path.home() / f".cache/cutrace/frameworks-{stack}/bin/python")
    if not Path(python).exists():
        print(f"skipped: no {stack} frameworks venv ({python}); scripts/check-frameworks.sh creates it")
        return 77
    dirs = lib_dirs.split(":")
    env = dict(os.environ, LD_LIBRARY_PATH=":".join(reversed(dirs)), PYTHONWARNINGS="ignore",
               LD_PRELOAD=" ".join(str(Path(dirs[i]) / name) for i, name in LIBRARIES[stack]))
    version = subprocess.run([python, "-c", "import torch; print(torch.__version__)"], env=env, capture_output=True,
                             text=True, timeout=300).stdout.strip()
    if not version.startswith(TORCH[stack]):
        print(f"the {stack} venv has torch {version or '(none)'}, not {TORCH[stack]}")
        return 1
    expected_cublas = EXPECTED_CUBLAS[stack]
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
        if cublas != expected_cublas:
            failures.append(f"cuBLAS calls: expected {expected_cublas}, got {cublas}")
        api = {row["Name"]: int(row["Num Calls"]) for row in stats(cutrace, trace, "cuda_api_sum")}
        instances = Counter()
        for row in stats(cutrace, trace, "cuda_gpu_kern_sum"):
            instances[row["Name"]] += int(row["Instances"])
        # The simulated CUPTI saw every kernel run that torch launched through the runtime and cuBLAS
        # through the driver (the driver calls inside torch's cudaLaunchKernel are the runtime's own).
        launches = api.get("cudaLaunchKernel", 0) + api.get("cuLaunchKernel", 0)
        if sum(instances.values()) != launches or not instances:
            failures.append(f"{sum(instances.values())} kernels ran, {launches} cudaLaunchKernel and cuLaunchKernel calls")
        # The simulated cuBLAS names a GEMM kernel by its type (sgemm_sim_...) and cuBLASLt's its own.
        gemms = sum(n for name, n in instances.items()
                    if "gemm_sim_" in name or name.startswith("cublasLt_matmul_sim_"))
        if gemms != expected_cublas[GEMM_CALL[stack]] + expected_cublas["cublasLtMatmul"]:
            failures.append(f"{gemms} GEMM kernels for {expected_cublas[GEMM_CALL[stack]]} {GEMM_CALL[stack]} and "
                            f"{expected_cublas['cublasLtMatmul']} cublasLtMatmul calls")
        for name in ("cudaMalloc", "cudaMemcpyAsync", "cudaLaunchKernel", "cudaStreamSynchronize",
                     "cudaDeviceSynchronize"):
            if api.get(name, 0) == 0:
                failures.append(f"no {name} recorded")
        failures += slow_calls_name_the_scripts_lines(cutrace, python, env, tmp)
    for failure in failures:
        print(failure)
    if not failures:
        print(plain.stdout, end="")
        print(f"torch {version} traced alike; {sum(cublas.values())} cuBLAS calls, {sum(api.values())} CUDA calls, "
              f"{sum(instances.values())} kernels")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
