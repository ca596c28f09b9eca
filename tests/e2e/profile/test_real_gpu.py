"""The same programs on a real GPU through the real CUDA runtime, cuBLAS, CUDA 12 beside 13, backtraces,
a PyTorch training step beside PyTorch's own profiler, and JAX: calls succeed
there, so this checks what the simulated device cannot, that interposition on a working runtime
and driver changes nothing the program sees and loses no call.

Skipped on machines without an NVIDIA device (CI has none). Set CUTRACE_GPU_TESTS=require where a GPU
is expected, so that a missing one fails instead of skipping."""
import collections
import csv
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import CUTRACE, REAL_CUDA_LIB, api_sum, app, calls, counts, info, info_totals, profile, \
    result

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


def test_the_real_cupti_describes_each_gpu_in_target_info_gpu(tmp_path):
    # What the simulated CUPTI cannot show: that the real one delivers its DEVICE records when the shim
    # enables the kind after cuInit, with the fields the table takes.
    import sqlite3
    _, trace = profile(tmp_path, [app("sim_vector_add"), "2"], env=gpu_env(), timeout=300)
    subprocess.run([str(CUTRACE), "export", "--type", "sqlite", "-o", str(tmp_path / "gpus.sqlite"), str(trace)],
                   check=True, capture_output=True, timeout=120)
    db = sqlite3.connect(tmp_path / "gpus.sqlite")
    rows = db.execute("SELECT id, name, smCount, computeMajor, totalMemory, clockRate, uuid FROM TARGET_INFO_GPU").fetchall()
    visible = subprocess.run(["nvidia-smi", "--query-gpu=name,uuid", "--format=csv,noheader"], capture_output=True,
                             text=True).stdout.splitlines()
    assert len(rows) >= 1, rows
    for gpu_id, name, sms, major, memory, clock, uuid in rows:
        assert name and sms > 0 and major >= 5 and memory > 1 << 30 and clock > 100_000_000, rows
        assert any(line.split(", ")[-1] == uuid for line in visible), (uuid, visible)


def test_streams_and_threads_on_the_gpu(tmp_path):
    proc, trace = run_both(tmp_path, [app("sim_streams"), "262144", "5"], gpu_env())
    expected = app_calls(proc.stdout)
    expected["cudaHostAlloc"] = expected.pop("cudaMallocHost")
    recorded = counts(calls(trace, tmp_path)[0])  # by entry point, as the program counts them
    for name, n in expected.items():
        assert recorded.get(name) == n, name

    threads, per_thread = 32, 200
    (tmp_path / "threads").mkdir()
    proc, trace = run_both(tmp_path / "threads", [app("sim_threads"), str(threads), str(per_thread), "concurrent"],
                           gpu_env())
    recorded = counts(calls(trace, tmp_path / "threads")[0])
    for name, n in app_calls(proc.stdout).items():
        assert recorded.get(name) == n, name
    assert recorded["cudaMalloc"] == threads * per_thread


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


# --- What only a working driver shows: libraries, the static runtime, CUDA 12, frameworks, stacks. ---
# Each test also writes what it measured, as JSON, into $CUTRACE_GPU_REPORT (when set) for the record of
# the run: counts and durations are the only check of the simulated device against a real one.

def report(name, data):
    where = os.environ.get("CUTRACE_GPU_REPORT")
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        (Path(where) / f"{name}.json").write_text(json.dumps(data, indent=1, sort_keys=True, default=str))


def rows_of(trace, report_name, show_internal):
    proc = subprocess.run([str(CUTRACE), "stats", "--report", report_name, "--format", "csv", "--show-internal",
                           "true" if show_internal else "false", str(trace)], capture_output=True, text=True, timeout=300)
    assert proc.returncode in (0, 4), proc.stderr
    lines = [l for l in proc.stdout.splitlines() if l and not l.startswith("#")]
    return list(csv.DictReader(io.StringIO("\n".join(lines))))


def api_rows(trace):
    """api_trace with internal calls: every recorded call, in order, with Domain, Depth and args."""
    rows = rows_of(trace, "api_trace", True)
    for r in rows:
        for k in ("Start (ns)", "Duration (ns)", "Depth"):
            r[k] = int(r[k])
        r["args"] = dict(a.split("=", 1) for a in r["Args"].split(", ") if "=" in a) if r["Args"] else {}
    return rows


def library_env(*names):
    """gpu_env, where CUDA_LIB_DIR holds the named real libraries too."""
    for name in names:
        if not (REAL_CUDA_LIB / name).exists():
            pytest.skip(f"{name} is not in {REAL_CUDA_LIB} (CUDA_LIB_DIR)")
    return gpu_env()


def test_cublas_on_the_gpu_every_call_counted_and_its_kernels_nested(tmp_path):
    env = library_env("libcublas.so.13", "libcublasLt.so.13")
    command = [app("sim_cublas"), "1024", "1024", "1024", "10"]
    plain = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    proc, trace = profile(tmp_path, command, env=env, options=["-t", "cuda,cublas"], check=False, timeout=300)
    assert plain.returncode == proc.returncode == 0, proc.stderr
    assert proc.stdout == plain.stdout
    expected = app_calls(proc.stdout)
    table = api_sum(trace, report="cublas_api_sum", show_internal=False)
    recorded = {name: int(row["Num Calls"]) for name, row in table.items()}
    rows = api_rows(trace)
    gemms = [r for r in rows if r["Name"] == "cublasSgemm_v2"]
    inside = {}
    for g in gemms:
        k = rows.index(g)
        for r in rows[k + 1:]:
            if r["Depth"] <= g["Depth"]:
                break
            inside[r["Name"]] = inside.get(r["Name"], 0) + 1
    report("cublas", {"program": expected, "recorded": recorded, "inside_sgemm": inside,
                      "sgemm_ns": [g["Duration (ns)"] for g in gemms]})
    assert recorded == expected
    assert len(gemms) == 10 and all(g["args"]["m"] == "1024" for g in gemms)
    # Every GEMM reaches the GPU through a kernel launch made inside it, whichever route cuBLAS takes.
    assert sum(n for name, n in inside.items() if "Launch" in name) >= 10, inside


def test_static_runtime_on_the_gpu_is_seen_through_its_driver_calls(tmp_path):
    iterations = 10
    command = [app("sim_vector_add_static"), str(iterations)]
    plain = subprocess.run(command, env=gpu_env(), capture_output=True, text=True, timeout=300)
    proc, trace = profile(tmp_path, command, env=gpu_env(), check=False, timeout=300)
    assert plain.returncode == proc.returncode == 0, proc.stderr
    assert untimed(proc.stdout) == untimed(plain.stdout)
    assert f"verified {iterations}" in proc.stdout
    internal = {name: int(r["Num Calls"]) for name, r in api_sum(trace, show_internal=True).items()}
    public = {name: int(r["Num Calls"]) for name, r in api_sum(trace, show_internal=False).items()}
    report("static_runtime", {"with_internal": internal, "public": public, "program": app_calls(proc.stdout)})
    assert internal.get("cuGetProcAddress_v2", 0) > 100
    assert info_totals(info(trace))["dropped"] == 0
    # Each of the static runtime's launches and allocations is one driver call (measured on an H200:
    # 20 of 20 and 30 of 30).
    program = app_calls(proc.stdout)
    assert public["cuLaunchKernel"] == program["__cudaLaunchKernel"] == 2 * iterations
    assert public["cuMemAlloc_v2"] == program["cudaMalloc"]


def test_cuda12_and_cuda13_runtimes_in_one_process_on_the_gpu(tmp_path):
    from conftest import REAL_CUDA12_LIB
    if REAL_CUDA12_LIB is None or not (REAL_CUDA12_LIB / "libcudart.so.12").exists():
        pytest.skip("no real CUDA 12 runtime in this build")
    env = gpu_env()
    env["LD_LIBRARY_PATH"] = f"{REAL_CUDA_LIB}:{REAL_CUDA12_LIB}"
    command = [app("two_runtimes")]
    plain = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    proc, trace = profile(tmp_path, command, env=env, check=False, timeout=300)
    assert plain.returncode == proc.returncode == 0, proc.stderr
    assert proc.stdout == plain.stdout
    events, _ = calls(trace, tmp_path)
    report("two_runtimes", {"stdout": proc.stdout, "counts": counts(events),
                            "prefetch": [e["args"] for e in events if e["name"] == "cudaMemPrefetchAsync"]})
    assert counts(events) == {"cudaGetDevice": 2, "cudaMalloc": 2, "cudaMemPrefetchAsync": 2, "cudaRuntimeGetVersion": 2}
    # Each version's prefetch got its own prototype: the result the program printed is the one recorded.
    printed = [int(line.split()[4]) for line in proc.stdout.splitlines()]
    assert [result(e) for e in events if e["name"] == "cudaMemPrefetchAsync"] == printed


def test_slow_copies_on_the_gpu_carry_the_programs_call_chain(tmp_path):
    # A 16 MiB copy from pageable memory takes hundreds of microseconds on any PCIe or NVLink host.
    command = [app("backtrace_app"), "3", "5"]
    proc, trace = profile(tmp_path, command, env=gpu_env(), options=["--cudabacktrace", "memory:100000"], timeout=300)
    assert proc.stdout == "copies 3 queries 5 failed 0\n"
    events, _ = calls(trace, tmp_path, domains=None)
    taken = [e for e in events if "backtrace" in e["args"]]
    copies = [e for e in events if e["name"] == "cudaMemcpy"]
    report("backtrace_app", {"copy_us": [e["dur"] for e in copies], "taken": [(e["name"], e["dur"], e["args"]["backtrace"]) for e in taken]})
    # On a real device the first cudaMalloc (which creates the context) and the cudaFree calls (which
    # synchronise) are memory calls as slow as the copies: exactly the memory calls at or above the
    # threshold carry a stack, the fast query none.
    memory = [e for e in events if e["name"] in ("cudaMalloc", "cudaFree", "cudaMemcpy")]
    assert sorted(e["name"] for e in taken) == sorted(e["name"] for e in memory if e["dur"] >= 100), taken
    assert all(e["dur"] >= 100 for e in copies) and all(e in taken for e in copies)
    for e in copies:
        frames = e["args"]["backtrace"]
        assert [f.partition("+")[0] for f in frames[:3]] == ["backtrace_app"] * 3, frames
    assert not any("cutrace" in f for e in taken for f in e["args"]["backtrace"])


TRAIN_SCRIPT = r"""
import collections, json, sys
import torch
import torch.nn.functional as F
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

steps = int(sys.argv[1])
torch.manual_seed(0)
mlp = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10)).cuda()
conv = torch.nn.Conv2d(3, 16, 3).cuda()
opt = torch.optim.SGD(list(mlp.parameters()) + list(conv.parameters()), lr=0.01)
x = torch.randn(256, 512, device="cuda")
images = torch.randn(32, 3, 64, 64, device="cuda")
target = torch.randint(0, 10, (256,), device="cuda")

def step():
    with torch.cuda.nvtx.range("train_step"):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(mlp(x), target) + conv(images).square().mean()
        loss.backward()
        opt.step()
    return loss

for _ in range(3):  # warm-up: cuBLAS and cuDNN handles, plans and workspaces
    step()
torch.cuda.synchronize()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], acc_events=True) as prof:
    torch.cuda.profiler.start()
    for _ in range(steps):
        loss = step()
    value = float(loss.detach())
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
seen = collections.Counter(e.name for e in prof.events() if e.device_type == DeviceType.CPU and
                           (e.name.startswith("cu") or e.name.startswith("__cu")))
kernels = sum(1 for e in prof.events() if e.device_type == DeviceType.CUDA)
print("loss", round(value, 3))
print("kineto", json.dumps({"calls": seen, "gpu_events": kernels}, sort_keys=True))
"""


def kineto_counts(stdout):
    line = [l for l in stdout.splitlines() if l.startswith("kineto ")][-1]
    return json.loads(line[len("kineto "):])


def test_pytorch_training_steps_match_pytorchs_own_profiler(tmp_path):
    """PyTorch's profiler (Kineto, on CUPTI's callbacks) counts the CUDA calls of the same steps in the
    same process: an independent tracer running beside cutrace, which must not disturb it. CUPTI takes
    one subscriber: cutrace's GPU activity is turned off here so that Kineto gets it (with it on, Kineto
    is the one refused, which the next test checks)."""
    if not torch_with_cuda():
        pytest.skip("no PyTorch with CUDA in this Python")
    steps = 20
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.pop("CUTRACE_SESSION", None)
    command = [sys.executable, "-c", TRAIN_SCRIPT, str(steps)]
    plain = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert plain.returncode == 0, plain.stderr
    proc, trace = profile(tmp_path, command, env=env, timeout=300, check=False,
                          options=["-t", "cuda,nvtx,cublas,cudnn", "-c", "cudaProfilerApi",
                                   "--capture-range-end", "stop", "--cudabacktrace", "all:20000",
                                   "--gpu-activity", "false"])
    assert proc.returncode == 0, proc.stderr
    # The same loss with and without cutrace, and Kineto saw the same steps.
    assert proc.stdout.splitlines()[0] == plain.stdout.splitlines()[0]
    kineto = kineto_counts(proc.stdout)
    assert kineto_counts(plain.stdout)["calls"] == kineto["calls"]
    rows = api_rows(trace)
    top = collections.Counter(r["Name"] for r in rows if r["Depth"] == 0)
    every = collections.Counter(r["Name"] for r in rows)
    nvtx = rows_of(trace, "nvtx_sum", False)
    events, _ = calls(trace, tmp_path, domains=None)
    with_stack = [(e["name"], e["dur"], e["args"]["backtrace"][:6]) for e in events if "backtrace" in e["args"]]
    report("pytorch_train", {"kineto": kineto, "cutrace_top_level": top, "cutrace_every": every,
                             "nvtx_sum": nvtx, "with_stack": with_stack[:40], "stack_count": len(with_stack),
                             "text": info(trace)})
    # Every kernel launch Kineto saw, cutrace saw as a driver launch: the runtime's own launches (its
    # cudaLaunchKernel, and the cudaLaunchKernelExC of the runtime that cuBLASLt and cuDNN link
    # statically, which CUPTI sees from inside) and the driver launches made directly. Measured on an
    # H200 with PyTorch 2.11: 400 + 120 + 20 = 540 both ways.
    launches = lambda counts: sum(n for name, n in counts.items() if name.startswith(("cuLaunchKernel", "cudaLaunchKernel")))
    assert sum(n for name, n in every.items() if name.startswith("cuLaunchKernel")) == launches(kineto["calls"])
    # The shared runtime's calls are each recorded; those of the static runtimes inside cuBLASLt and
    # cuDNN only through their driver calls (docs/interception.md), so Kineto counts more of some.
    for name in ("cudaLaunchKernel", "cudaMemcpyAsync", "cudaMemsetAsync", "cudaHostAlloc", "cudaStreamSynchronize"):
        assert 0 < top[name] <= kineto["calls"][name], name
    assert top["cudaMemcpyAsync"] == kineto["calls"]["cudaMemcpyAsync"]
    (train,) = [r for r in nvtx if r["Range"].endswith("train_step")]
    assert int(train["Instances"]) == steps
    assert info_totals(info(trace))["dropped"] == 0
    assert with_stack and not any("cutrace" in f for _, _, frames in with_stack for f in frames)


JAX_SCRIPT = r"""
import jax, jax.numpy as jnp
x = jnp.arange(1024 * 1024, dtype=jnp.float32).reshape(1024, 1024) / 1e6
f = jax.jit(lambda a: jnp.tanh(a @ a.T).sum())
print("devices", [d.platform for d in jax.devices()])
print("value", round(float(f(x).block_until_ready()), 2))
"""


def jax_gpu_env():
    """The environment a JAX program runs on the GPU in (XLA allocating as it goes); skips the test where
    this Python's JAX has no CUDA."""
    probe = subprocess.run([sys.executable, "-c", "import jax; print(jax.devices()[0].platform)"],
                           capture_output=True, text=True, timeout=300)
    if probe.returncode != 0 or probe.stdout.strip() != "gpu":
        pytest.skip("no JAX with CUDA in this Python")
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    return env


def test_jax_on_the_gpu_is_traced_through_the_driver(tmp_path):
    env = jax_gpu_env()
    command = [sys.executable, "-c", JAX_SCRIPT]
    plain = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    proc, trace = profile(tmp_path, command, env=env, options=["-t", "cuda,cublas,cudnn"], timeout=300, check=False)
    assert plain.returncode == proc.returncode == 0, proc.stderr
    assert proc.stdout == plain.stdout
    rows = api_rows(trace)
    every = collections.Counter(r["Name"] for r in rows)
    failed = collections.Counter(r["Name"] for r in rows if "(" in r["Result"] and not r["Result"].endswith("(0)"))
    report("jax", {"every": every, "not_success": failed, "text": info(trace), "stderr": proc.stderr[-3000:]})
    assert sum(n for name, n in every.items() if name.startswith("cuLaunchKernel")) > 0, every
    assert info_totals(info(trace))["dropped"] == 0


# The simulated device's JAX program (tests/unit/simcuda/jax_test.py runs it there): XLA's op and module
# names on every kernel, through the NVTX projection.
JAX_OPS_SCRIPT = Path(__file__).resolve().parents[3] / "scripts/frameworks/jax_ops.py"


def test_jax_kernels_carry_xlas_op_and_module_names(tmp_path):
    """Every kernel the program's thread ran lies under an XlaModule range, and under a Thunk range
    (hlo_op=...): an op's own, or, for kernels replayed from a command buffer, the command buffer's until
    graph attribution names the op that recorded each node. The kernel names, counts and ranges go to the
    report, to be set beside the simulated device's (same script, jax_test.py's step)."""
    env = jax_gpu_env()
    command = [sys.executable, str(JAX_OPS_SCRIPT)]
    plain = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    proc, trace = profile(tmp_path, command, env=env, options=["-t", "cuda,cublas,cudnn,cufft,nvtx",
                                                              "--cuda-graph-trace", "node"], timeout=300, check=False)
    assert plain.returncode == proc.returncode == 0, proc.stderr
    assert proc.stdout == plain.stdout
    kernels = collections.Counter()
    for r in rows_of(trace, "cuda_gpu_kern_sum", False):
        kernels[r["Name"]] += int(r["Instances"])
    doc = json.loads(subprocess.run([str(CUTRACE), "stats", "-q", "-r", "nvtx_kern_sum", "-f", "json", str(trace)],
                                    capture_output=True, text=True, timeout=300).stdout or "[]")
    rows = [r for t in doc for r in t["rows"] if r["TID"] == r["PID"]]
    thunk, module = collections.Counter(), collections.Counter()
    for r in rows:
        if r["NVTX Range"].startswith("TSL:Thunk:"):
            thunk[r["Kernel Name"]] += r["Kern Inst"]
        elif r["NVTX Range"].startswith("TSL:XlaModule:"):
            module[r["Kernel Name"]] += r["Kern Inst"]
    fft = collections.Counter(r["Name"] for r in api_rows(trace) if r["Domain"] == "cufft")
    report("jax_ops", {"kernels": kernels, "under_thunk": thunk, "under_module": module, "cufft": fft,
                       "ranges": sorted({(r["NVTX Range"], r["Kernel Name"], r["Kern Inst"]) for r in rows}),
                       "text": info(trace)})
    assert module and thunk == module, (thunk, module)
    assert fft["cufftExecR2C"] == 1, fft
    assert info_totals(info(trace))["dropped"] == 0


# --- GPU activity from the real CUPTI: the invariants the simulated CUPTI's tests check, on a GPU. ---

def test_gpu_activity_on_the_gpu_is_complete_timed_and_linked_to_its_calls(tmp_path):
    iterations, elements = 20, 1 << 20
    proc, trace = run_both(tmp_path, [app("sim_vector_add"), str(iterations), str(elements)], gpu_env())
    kernels = {r["Name"]: r for r in rows_of(trace, "cuda_gpu_kern_sum", False)}
    # Every launch ran once, each kernel under its own name.
    assert int(kernels[AXPY]["Instances"]) == iterations and int(kernels[SQUARE]["Instances"]) == iterations, kernels
    ops = {r["Operation"]: r for r in rows_of(trace, "cuda_gpu_mem_time_sum", False)}
    assert int(ops["[CUDA memcpy Device-to-Host]"]["Count"]) == iterations, ops
    gpu = rows_of(trace, "cuda_gpu_trace", False)
    events, doc = calls(trace, tmp_path, domains=None)
    work = [e for e in doc["traceEvents"] if e.get("cat") == "cuda_gpu"]
    starts = {e["id"]: e for e in doc["traceEvents"] if e.get("ph") == "s"}
    ends = [e for e in doc["traceEvents"] if e.get("ph") == "f"]
    # Each kernel, copy and set has its call: the flow's start lies inside a recorded call on the thread
    # that made it, before the work began.
    launches = [e for e in events if e["name"] in ("__cudaLaunchKernel", "cudaMemcpy", "cudaMemset")]
    linked = 0
    for f in ends:
        s = starts.get(f["id"])
        if s is None:
            continue
        linked += 1
        assert s["ts"] <= f["ts"] + 1, (s, f)
        assert any(c["tid"] == s["tid"] and c["ts"] <= s["ts"] <= c["ts"] + c["dur"] for c in launches), s
    assert linked >= 2 * iterations, (linked, len(ends))
    # One stream: its operations do not overlap.
    by_stream = collections.defaultdict(list)
    for e in work:
        by_stream[e["tid"]].append((e["ts"], e["ts"] + e["dur"]))
    for spans in by_stream.values():
        spans.sort()
        assert all(a[1] <= b[0] + 0.001 for a, b in zip(spans, spans[1:])), spans[:4]
    summary = info(trace)
    assert "gpu_activity.dropped           0" in summary, summary
    # CUPTI's own driver calls (it reaches the driver through the shim's dlsym) are not the program's:
    # the API trace is the same with and without GPU activity.
    _, api_only = profile(tmp_path, [app("sim_vector_add"), str(iterations), str(elements)], env=gpu_env(),
                          options=["--gpu-activity", "false"], name="api_only", timeout=300)
    with_activity, without = api_sum(trace), api_sum(api_only)
    report("gpu_activity", {"kernels": {k: v for k, v in kernels.items()}, "memory": ops, "gpu_rows": len(gpu),
                            "linked": linked, "summary": [l for l in summary.splitlines() if "gpu_activity" in l],
                            "api_with": {k: v["Num Calls"] for k, v in with_activity.items()},
                            "api_without": {k: v["Num Calls"] for k, v in without.items()}})
    assert {k: v["Num Calls"] for k, v in with_activity.items()} == {k: v["Num Calls"] for k, v in without.items()}


def test_pytorch_profiler_after_cutrace_holds_cupti_is_refused_and_the_program_still_runs(tmp_path):
    """With GPU activity on, cutrace holds CUPTI's one subscriber slot from the first CUDA use, so a
    torch.profiler started later cannot subscribe: PyTorch warns and profiles without CUDA activity,
    the training steps run as without cutrace, and the trace has the GPU's kernels."""
    if not torch_with_cuda():
        pytest.skip("no PyTorch with CUDA in this Python")
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.pop("CUTRACE_SESSION", None)
    command = [sys.executable, "-c", TRAIN_SCRIPT, "5"]
    plain = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert plain.returncode == 0, plain.stderr
    proc, trace = profile(tmp_path, command, env=env, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == plain.stdout.splitlines()[0]
    kernels = rows_of(trace, "cuda_gpu_kern_sum", False)
    assert kernels, proc.stderr
    report("pytorch_beside_cutrace_gpu_activity", {"kernels": len(kernels), "stderr": proc.stderr[-2000:]})


def test_pytorch_profiler_started_midway_leaves_cutraces_gpu_activity_whole(tmp_path):
    """A program that runs torch.profiler for a while under cutrace: cutrace holds CUPTI's subscriber
    slot, so Kineto's CUPTI set-up fails and it profiles without CUDA activity (as it says on stderr);
    cutrace's GPU activity has every kernel, before, during and after that profile."""
    if not torch_with_cuda():
        pytest.skip("no PyTorch with CUDA in this Python")
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.pop("CUTRACE_SESSION", None)
    ops = 200
    command = [sys.executable, str(Path(__file__).resolve().parents[3] / "scripts/gpu/kineto_handover.py"), str(ops)]
    plain = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert plain.returncode == 0, plain.stderr
    proc, trace = profile(tmp_path, command, env=env, timeout=300, check=False)
    kernels = {r["Name"]: int(r["Instances"]) for r in rows_of(trace, "cuda_gpu_kern_sum", False)}
    # fill_, mul_ by a scalar and add_ of a scalar: PyTorch's functor names in the kernels' names.
    phases = {phase: sum(n for name, n in kernels.items() if functor in name)
              for phase, functor in (("fill", "FillFunctor<"), ("mul", "MulFunctor<"), ("add", "_add<"))}
    report("kineto_handover", {"phases": phases, "kernels": kernels, "plain": plain.stdout, "traced": proc.stdout,
                               "stderr": proc.stderr[-3000:],
                               "summary": [l for l in info(trace).splitlines() if "gpu_activity" in l]})
    assert proc.returncode == 0, proc.stderr
    without, under = json.loads(plain.stdout), json.loads(proc.stdout)
    assert under["value"] == without["value"]
    assert without["kineto_gpu_events"] == ops
    assert phases == {"fill": ops, "mul": ops, "add": ops}, phases
    assert sum(kernels.values()) == 3 * ops, kernels


FORK_CHILD_SCRIPT = r"""
import multiprocessing
import torch

def child(queue):
    x = torch.ones(1024, device="cuda")
    queue.put(float((x * 2).sum()))

if __name__ == "__main__":
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    worker = context.Process(target=child, args=(queue,))
    worker.start()
    value = queue.get(timeout=120)
    worker.join()
    print("child", value, "exit", worker.exitcode)
"""


def test_a_fork_child_is_the_first_to_use_cuda_as_without_cutrace(tmp_path):
    """The parent imports torch (which loads the CUDA runtime, and so starts cutrace's CUPTI) but
    never initialises CUDA; its fork child does. Whatever CUPTI does at start-up must leave CUDA usable
    in such a child."""
    if not torch_with_cuda():
        pytest.skip("no PyTorch with CUDA in this Python")
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.pop("CUTRACE_SESSION", None)
    script = tmp_path / "fork_child.py"
    script.write_text(FORK_CHILD_SCRIPT)
    command = [sys.executable, str(script)]
    plain = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    proc, trace = profile(tmp_path, command, env=env, timeout=300, check=False)
    _, doc = calls(trace, tmp_path, domains=None)
    work = collections.Counter(e["pid"] for e in doc["traceEvents"] if e.get("cat") == "cuda_gpu")
    report("fork_child_first_cuda", {"plain": plain.stdout, "traced": proc.stdout, "stderr": proc.stderr[-3000:],
                                     "gpu_work_per_pid": work})
    assert plain.stdout == "child 2048.0 exit 0\n", plain.stderr
    assert proc.stdout == plain.stdout, proc.stderr


def test_pytorchs_slow_synchronize_and_item_name_the_scripts_lines(tmp_path):
    # PyTorch releases the GIL around both waits: the Python frames are read without it.
    if not torch_with_cuda():
        pytest.skip("no PyTorch with CUDA in this Python")
    script = Path(__file__).resolve().parents[3] / "scripts" / "gpu" / "python_lines.py"
    lines = {l.split("# SLOW: ")[1].strip(): n for n, l in enumerate(script.read_text().splitlines(), 1) if "# SLOW: " in l}
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    proc, trace = profile(tmp_path, [sys.executable, str(script)], env=env, options=["--cudabacktrace", "sync:1000000"],
                          timeout=300)
    assert proc.stdout.startswith("sum "), proc.stderr
    slow = [e for e in calls(trace, tmp_path, domains=None)[0] if "python_stack" in e["args"] and e["dur"] >= 1000]
    innermost = {e["args"]["python_stack"][0] for e in slow}
    report("python_lines", {"slow": [(e["name"], e["dur"], e["args"]["python_stack"][:3]) for e in slow]})
    assert f"wait_all (python_lines.py:{lines['synchronize']})" in {s for e in slow for s in e["args"]["python_stack"]}, innermost
    assert f"read_back (python_lines.py:{lines['item']})" in {s for e in slow for s in e["args"]["python_stack"]}, innermost


def test_real_nccl_ranges_carry_their_decoded_payloads(tmp_path):
    """NCCL itself (PyPI nvidia-nccl-cu13, where installed): its ranges of domain NCCL with the payloads
    NCCL gives them, decoded; the program's output unchanged. tests/e2e/profile/test_nccl.py checks the
    same without a GPU, with a library that annotates as NCCL does."""
    import sqlite3
    pytest.importorskip("nvidia.nccl", reason="NCCL's PyPI package (nvidia-nccl-cu13) is not installed")
    script = Path(__file__).resolve().parent / "scripts" / "nccl_allreduce.py"
    command = [sys.executable, str(script)]
    env = gpu_env()
    plain = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert plain.returncode == 0, plain.stderr
    proc, trace = profile(tmp_path, command, env=env, options=["-t", "cuda,nvtx"])
    assert proc.stdout == plain.stdout
    out = tmp_path / "nccl.sqlite"
    subprocess.run([str(CUTRACE), "export", "--type", "sqlite", "-o", str(out), str(trace)], check=True, timeout=120)
    rows = sqlite3.connect(out).execute(
        """SELECT coalesce(n.text, s.value), n.jsonText FROM NVTX_EVENTS AS n
           LEFT JOIN StringIds AS s ON s.id = n.textId
           JOIN NVTX_EVENTS AS d ON d.eventType = 75 AND d.text = 'NCCL' AND d.domainId = n.domainId
           WHERE n.eventType = 59""").fetchall()
    payloads = {name: json.loads(p) for name, p in rows if p}
    assert payloads["ncclAllReduce"]["Message size [bytes]"] == 1 << 20
    assert payloads["ncclAllReduce"]["Reduction operation"] == "Sum"
    assert "NCCL communicator ID" in payloads["ncclAllReduce"]
    assert "(problem)" not in payloads["ncclAllReduce"]
    # NCCL 2.2x gives ncclCommInitRank its payload as the range closes, once the communicator exists.
    assert payloads["ncclCommInitRank"]["No. of ranks"] == 1, payloads


HANG_SCRIPT = r"""
import sys, torch
torch.cuda._sleep(int(sys.argv[1]))  # spins the GPU for that many cycles
print("launched", flush=True)
torch.cuda.synchronize()
print("synchronized", flush=True)
"""


def test_a_program_hung_on_the_gpu_shows_its_call_and_keeps_it_when_killed(tmp_path):
    """On a real driver: `cutrace status --calls` names the synchronize a program waits in while the GPU
    spins, and once the program is killed there, the trace keeps that call, marked not returned."""
    if not torch_with_cuda():
        pytest.skip("no PyTorch with CUDA in this Python")
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.pop("CUTRACE_SESSION", None)
    # About a minute at 1-2 GHz: far longer than the test waits.
    proc = subprocess.Popen([str(CUTRACE), "profile", "-o", str(tmp_path / "hang"), "--", sys.executable, "-c",
                             HANG_SCRIPT, str(100 * 10**9)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline() == "launched\n"
        deadline = time.monotonic() + 60
        while True:
            status = subprocess.run([str(CUTRACE), "status", "--session", str(proc.pid), "--calls"],
                                    capture_output=True, text=True, timeout=60).stdout
            if "in cudaDeviceSynchronize for" in status or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert "in cudaDeviceSynchronize for" in status, status
        program = int(re.search(r"^  process (\d+):", status, re.M).group(1))
        time.sleep(1)
        os.kill(program, signal.SIGKILL)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 128 + signal.SIGKILL, err
    rows = [r for r in api_rows(tmp_path / "hang.cutrace") if r["Name"] == "cudaDeviceSynchronize"]
    assert [r["Result"] for r in rows] == ["not returned"], rows
    assert rows[0]["Duration (ns)"] > 10**9, rows
    assert "1 call had not returned" in err, err
    report("hung_call", {"status": status, "synchronize": rows[0]})
