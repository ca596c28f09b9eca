"""The same programs on a real GPU through the real CUDA runtime, and a PyTorch script: calls succeed
there, so this checks what the simulated device cannot, that interposition on a working runtime
and driver changes nothing the program sees and loses no call.

Skipped on machines without an NVIDIA device (CI has none). Set CUTRACE_GPU_TESTS=require where a GPU
is expected, so that a missing one fails instead of skipping."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REAL_CUDA_LIB, api_sum, app, calls, counts, info, info_totals, profile

GPU_PRESENT = Path("/dev/nvidiactl").exists()
if not GPU_PRESENT and os.environ.get("CUTRACE_GPU_TESTS") == "require":
    pytest.fail("CUTRACE_GPU_TESTS=require but /dev/nvidiactl is missing: no NVIDIA driver here", pytrace=False)
pytestmark = pytest.mark.skipif(not GPU_PRESENT, reason="no NVIDIA GPU on this machine")

AXPY = "void ns::axpy<float>(int, float, float const*, float*)"
SQUARE = "square_kernel(float*, float const*, int)"
REGISTRATION = ("__cudaRegisterFatBinary", "__cudaRegisterFatBinaryEnd", "__cudaRegisterFunction",
                "__cudaUnregisterFatBinary")


def gpu_env():
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = str(REAL_CUDA_LIB)
    env.pop("LD_PRELOAD", None)
    env.pop("CUTRACE_SESSION", None)
    return env


def app_calls(stdout):
    return {p[1]: int(p[2]) for p in (line.split() for line in stdout.splitlines()) if len(p) == 3 and p[0] == "calls"}


def untimed(stdout):
    """The program's output less the times it measured on the device, which differ from run to run."""
    return [line for line in stdout.splitlines() if not line.startswith("elapsed_ms ")]


def run_both(tmp_path, command, env):
    plain = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    traced, trace = profile(tmp_path, command, env=env, check=False, timeout=300)
    assert plain.returncode == 0, plain.stderr
    assert traced.returncode == 0, traced.stderr
    assert untimed(traced.stdout) == untimed(plain.stdout)
    assert traced.stderr.startswith(plain.stderr)
    text = info(trace)
    assert "Status:    complete:" in text, text
    assert info_totals(text)["dropped"] == 0, text
    return traced, trace


def test_vector_add_on_the_gpu_every_call_recorded_and_successful(tmp_path):
    iterations, elements = 20, 1 << 20
    proc, trace = run_both(tmp_path, [app("sim_vector_add"), str(iterations), str(elements)], gpu_env())
    assert f"verified {iterations}" in proc.stdout
    events, _ = calls(trace, tmp_path)
    recorded = counts(events)
    for name, n in app_calls(proc.stdout).items():
        assert recorded.get(name) == n, name
    assert recorded["__cudaRegisterFunction"] == 2
    assert all(e["args"]["result_name"] == "cudaSuccess" for e in events if "result_name" in e["args"])
    events.sort(key=lambda e: e["ts"])
    assert [e["args"]["kernel"] for e in events if e["name"] == "__cudaLaunchKernel"] == [AXPY, SQUARE] * iterations
    # A real copy of 4 MiB back from the device waits for both kernels and the transfer; it cannot
    # take less than a microsecond.
    back = [e for e in events if e["name"] == "cudaMemcpy" and e["args"]["kind"] == "cudaMemcpyDeviceToHost"]
    assert len(back) == iterations and all(e["dur"] > 1 for e in back)
    text = info(trace)
    assert f"CUDA runtime library: {os.path.realpath(REAL_CUDA_LIB / 'libcudart.so.13')}" in text or \
        f"CUDA runtime library: {REAL_CUDA_LIB / 'libcudart.so.13'}" in text, text


def test_streams_and_threads_on_the_gpu(tmp_path):
    proc, trace = run_both(tmp_path, [app("sim_streams"), "262144", "5"], gpu_env())
    expected = app_calls(proc.stdout)
    expected["cudaHostAlloc"] = expected.pop("cudaMallocHost")
    table = api_sum(trace)
    for name, n in expected.items():
        assert table[name]["Num Calls"] == n, name

    threads, per_thread = 32, 200
    (tmp_path / "threads").mkdir()
    proc, trace = run_both(tmp_path / "threads", [app("sim_threads"), str(threads), str(per_thread), "concurrent"],
                           gpu_env())
    table = api_sum(trace)
    for name, n in app_calls(proc.stdout).items():
        assert table[name]["Num Calls"] == n, name
    assert table["cudaMalloc"]["Num Calls"] == threads * per_thread


TORCH_SCRIPT = r"""
import torch
torch.manual_seed(0)
x = torch.randn(1024, 1024, device="cuda")
for _ in range(200):
    x.mul_(0.5).add_(1.0)
y = (x @ x).sum()
torch.cuda.synchronize()
print("device", torch.cuda.get_device_name(0))
print("value", round(float(y), 1))
"""


def torch_with_cuda():
    probe = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.is_available())"],
                           capture_output=True, text=True, timeout=300)
    return probe.returncode == 0 and probe.stdout.strip() == "True"


def test_pytorch_script_on_the_gpu(tmp_path):
    if not torch_with_cuda():
        pytest.skip("no PyTorch with CUDA in this Python")
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.pop("CUTRACE_SESSION", None)
    proc, trace = run_both(tmp_path, [sys.executable, "-c", TORCH_SCRIPT], env)
    events, _ = calls(trace, tmp_path)
    launches = [e for e in events if e["name"] in ("cudaLaunchKernel", "__cudaLaunchKernel", "cudaLaunchKernelExC")]
    # 400 elementwise kernels from the loop, plus the random fill, the product and the sum.
    elementwise = [e for e in launches if "elementwise" in e["args"].get("kernel", "")]
    assert len(elementwise) >= 400, sorted({e["args"].get("kernel") for e in launches})[:20]
    assert all(e["args"]["result_name"] == "cudaSuccess" for e in launches)
    # PyTorch's CUDA library registers its kernels at load time, each with its name.
    table = api_sum(trace)
    assert table["__cudaRegisterFunction"]["Num Calls"] > 1000
    text = info(trace)
    assert "libcudart.so.13" in text, text
