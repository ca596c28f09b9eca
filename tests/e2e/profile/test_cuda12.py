"""CUDA 12 beside CUDA 13 (libcutrace-cuda12.so): a program built against CUDA 12 is recorded with CUDA
12's prototypes, on the simulated CUDA 12 libraries and on the real libcudart.so.12 and libcublas.so.12
of the pinned wheels (which fail without a driver, with their real error codes recorded unchanged);
loaded by link, by dlopen through a framework's DT_RPATH, and by ctypes; and beside CUDA 13 in one
process."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import APPS, CUDA12, REAL_CUDA12_LIB, SIM_LIB, SIM_LIB12, api_sum, app, calls, counts, info_totals, \
    info, profile, sim_env
from conftest import api_trace as api_trace_rows

pytestmark = pytest.mark.skipif(not CUDA12, reason="built with -DCUTRACE_CUDA12=OFF")

# Without a driver (this machine): CUDA 12's runtime answers cudaErrorInsufficientDriver, cuBLAS
# CUBLAS_STATUS_NOT_INITIALIZED.
NO_DRIVER = not Path("/dev/nvidiactl").exists()


def sim12_env():
    return sim_env(LD_LIBRARY_PATH=f"{SIM_LIB12}:{SIM_LIB}")


def real12_env():
    return sim_env(LD_LIBRARY_PATH=str(REAL_CUDA12_LIB))


def run(command, env):
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)


def test_cuda12_prototypes_reach_the_simulated_runtime_and_the_trace(tmp_path):
    # CUDA 12's cudaMemPrefetchAsync takes a device number where CUDA 13's takes a cudaMemLocation and
    # flags; the simulated runtime refuses a garbled stream, so both results say the call arrived intact.
    command = [app("cuda12_app"), "prefetch"]
    plain = run(command, sim12_env())
    proc, trace = profile(tmp_path, command, env=sim12_env())
    lines = proc.stdout.splitlines()
    assert lines[:2] == plain.stdout.splitlines()[:2] == [
        "cudaMalloc 0 cudaStreamCreate 0", "cudaMemPrefetchAsync 0 cudaMemPrefetchAsync_v2 0"]
    _, buffer, _, stream = lines[2].split()
    events, _ = calls(trace, tmp_path)
    assert counts(events) == {"cudaMalloc": 1, "cudaStreamCreate": 1, "cudaMemPrefetchAsync": 1,
                              "cudaMemPrefetchAsync_v2": 1, "cudaStreamDestroy": 1, "cudaFree": 1}
    for name in ("cudaMemPrefetchAsync", "cudaMemPrefetchAsync_v2"):
        (event,) = [e for e in events if e["name"] == name]
        # A success carries its result's name alone (the number, 0, is implied).
        assert event["args"] == {"devPtr": buffer, "count": 4096, "location": 0, "stream": stream,
                                 "result_name": "cudaSuccess", "correlation": event["args"]["correlation"]}
    assert info_totals(info(trace))["dropped"] == 0


@pytest.mark.skipif(not NO_DRIVER, reason="an NVIDIA driver is present: calls do not fail")
def test_the_real_cuda12_runtime_is_recorded_with_its_error_codes(tmp_path):
    assert (REAL_CUDA12_LIB / "libcudart.so.12").exists()
    command = [app("cuda12_app"), "calls", "1001"]
    plain = run(command, real12_env())
    proc, trace = profile(tmp_path, command, env=real12_env())
    assert proc.stdout == plain.stdout == "cudaGetDevice 35 x1001\n"
    events, _ = calls(trace, tmp_path)
    assert counts(events) == {"cudaGetDevice": 1001}
    assert {e["args"]["result_name"] for e in events} == {"cudaErrorInsufficientDriver"}

    proc, trace = profile(tmp_path, [app("cuda12_app"), "prefetch"], env=real12_env(), name="prefetch")
    assert proc.stdout.splitlines()[1] == "cudaMemPrefetchAsync 35 cudaMemPrefetchAsync_v2 35"
    (prefetch,) = [e for e in calls(trace, tmp_path)[0] if e["name"] == "cudaMemPrefetchAsync"]
    assert prefetch["args"]["result"] == 35 and prefetch["args"]["location"] == 0


def test_cuda12_cublas_and_its_cublaslt_calls_nest_on_the_simulated_libraries(tmp_path):
    command = [app("cuda12_app"), "cublas"]
    proc, trace = profile(tmp_path, command, env=sim12_env(), options=["-t", "cuda,cublas"])
    assert proc.stdout == run(command, sim12_env()).stdout == "cublasCreate 0\ncublasDestroy 0\n"
    events, _ = calls(trace, tmp_path, domains=("cublas", "cublaslt"))
    # The simulated CUDA 12 cuBLAS calls its cuBLASLt through cublasLtCreate@libcublasLt.so.12.
    assert [(e["name"], e["cat"]) for e in sorted(events, key=lambda e: e["ts"])] == [
        ("cublasCreate_v2", "cublas"), ("cublasLtCreate", "cublaslt"),
        ("cublasDestroy_v2", "cublas"), ("cublasLtDestroy", "cublaslt")]
    create, lt_create = sorted(events, key=lambda e: e["ts"])[:2]
    assert create["ts"] <= lt_create["ts"] and lt_create["ts"] + lt_create["dur"] <= create["ts"] + create["dur"]
    summary = api_sum(trace, report="cublas_api_sum")
    assert {n: int(r["Num Calls"]) for n, r in summary.items()} == {"cublasCreate_v2": 1, "cublasDestroy_v2": 1}


@pytest.mark.skipif(not NO_DRIVER, reason="an NVIDIA driver is present: calls do not fail")
def test_the_real_cuda12_cublas_is_recorded_with_its_status(tmp_path):
    command = [app("cuda12_app"), "cublas"]
    plain = run(command, real12_env())
    proc, trace = profile(tmp_path, command, env=real12_env(), options=["-t", "cuda,cublas"])
    assert proc.stdout == plain.stdout == "cublasCreate 1\n"
    events, _ = calls(trace, tmp_path, domains=("cublas",))
    assert [(e["name"], e["args"]["result"]) for e in events] == [("cublasCreate_v2", 1)]
    assert api_sum(trace, report="cublas_api_sum")["cublasCreate_v2"]["Num Calls"] == 1


def framework_events(tmp_path, framework, env, runtime_dir):
    command = [app("cuda12_framework_main"), str(APPS / framework), "3"]
    plain = run(command, env)
    proc, trace = profile(tmp_path, command, env=env, options=["-t", "cuda,cublas"])
    assert proc.stdout == plain.stdout
    events, _ = calls(trace, tmp_path, domains=("cuda_runtime", "cublas"))
    # The runtime the framework loaded after the process had started recording is named, with its version.
    text = info(trace)
    assert f"CUDA runtime library: {Path(runtime_dir) / 'libcudart.so.12'}" in text, text
    assert "  12.9  " in text, text
    return proc.stdout, events


@pytest.mark.skipif(not NO_DRIVER, reason="an NVIDIA driver is present: calls do not fail")
def test_a_framework_loading_the_real_cuda12_libraries_through_its_rpath_is_traced(tmp_path):
    # No LD_LIBRARY_PATH: libcuda12_framework.so finds the wheels' libraries through its DT_RPATH only.
    env = sim_env()
    env.pop("LD_LIBRARY_PATH")
    stdout, events = framework_events(tmp_path, "libcuda12_framework.so", env, REAL_CUDA12_LIB)
    assert stdout == "cudaGetDevice 35 x3\ncudaMemPrefetchAsync 35\ncublasCreate_v2 1\n"
    assert counts(events) == {"cudaGetDevice": 3, "cudaMemPrefetchAsync": 1, "cublasCreate_v2": 1}
    (prefetch,) = [e for e in events if e["name"] == "cudaMemPrefetchAsync"]
    # The issue's case: CUDA 13's prototype recorded it as location 0 and stream 0x0.
    assert prefetch["args"]["location"] == 1 and prefetch["args"]["stream"] == "0x5eed1234"
    assert prefetch["args"]["result"] == 35


def test_a_framework_loading_the_simulated_cuda12_libraries_is_traced(tmp_path):
    stdout, events = framework_events(tmp_path, "libcuda12_framework_sim.so", sim_env(), SIM_LIB12)
    # 0x1000 is no allocation of the simulated device: cudaErrorInvalidValue, as the real runtime says.
    assert stdout == "cudaGetDevice 0 x3\ncudaMemPrefetchAsync 1\ncublasCreate_v2 0\n"
    assert counts(events) == {"cudaGetDevice": 3, "cudaMemPrefetchAsync": 1, "cublasCreate_v2": 1}
    (prefetch,) = [e for e in events if e["name"] == "cudaMemPrefetchAsync"]
    assert prefetch["args"]["location"] == 1 and prefetch["args"]["stream"] == "0x5eed1234"


@pytest.mark.parametrize("where", ["simulated", "real"])
def test_ctypes_loading_cuda12_by_soname_is_traced(tmp_path, where):
    if where == "real" and not NO_DRIVER:
        pytest.skip("an NVIDIA driver is present: calls do not fail")
    script = (
        "import ctypes\n"
        "rt = ctypes.CDLL('libcudart.so.12')\n"
        "device = ctypes.c_int(-1)\n"
        "results = {rt.cudaGetDevice(ctypes.byref(device)) for _ in range(7)}\n"
        "prefetch = rt.cudaMemPrefetchAsync\n"
        "prefetch.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]\n"
        "print(sorted(results), prefetch(0x1000, 4096, 1, 0x5eed1234))\n")
    env = sim12_env() if where == "simulated" else real12_env()
    command = [sys.executable, "-c", script]
    plain = run(command, env)
    proc, trace = profile(tmp_path, command, env=env)
    assert proc.stdout == plain.stdout == ("[0] 1\n" if where == "simulated" else "[35] 35\n")
    events, _ = calls(trace, tmp_path)
    assert counts(events) == {"cudaGetDevice": 7, "cudaMemPrefetchAsync": 1}
    (prefetch,) = [e for e in events if e["name"] == "cudaMemPrefetchAsync"]
    assert prefetch["args"]["location"] == 1 and prefetch["args"]["stream"] == "0x5eed1234"


def test_cuda13_and_cuda12_runtimes_in_one_process_each_get_their_own_prototypes(tmp_path):
    command = [app("two_runtimes")]
    plain = run(command, sim12_env())
    proc, trace = profile(tmp_path, command, env=sim12_env())
    assert proc.stdout == plain.stdout == ("cuda13 cudaGetDevice 0 cudaMemPrefetchAsync 0 version 13000\n"
                                           "cuda12 cudaGetDevice 0 cudaMemPrefetchAsync 0 version 12090\n")
    events, _ = calls(trace, tmp_path)
    assert counts(events) == {"cudaGetDevice": 2, "cudaMalloc": 2, "cudaMemPrefetchAsync": 2,
                              "cudaRuntimeGetVersion": 2}
    first, second = [e for e in events if e["name"] == "cudaMemPrefetchAsync"]
    malloc13, malloc12 = [e for e in events if e["name"] == "cudaMalloc"]
    # CUDA 13's call recorded location.id of its cudaMemLocation, CUDA 12's its device number; each
    # with its own buffer and the legacy stream.
    assert (first["args"]["devPtr"], first["args"]["location"], first["args"]["stream"]) == \
        (malloc13["args"]["devPtr"], 0, "0x0")
    assert (second["args"]["devPtr"], second["args"]["location"], second["args"]["stream"]) == \
        (malloc12["args"]["devPtr"], 0, "0x0")


CUFFT12_SCRIPT = r"""
import ctypes
fft = ctypes.CDLL("libcufft.so.11")
version, plan, work = ctypes.c_int(), ctypes.c_int(), ctypes.c_size_t()
print(fft.cufftGetVersion(ctypes.byref(version)), version.value // 1000)
print(fft.cufftCreate(ctypes.byref(plan)), fft.cufftMakePlan1d(plan, 64, 0x2a, 8, ctypes.byref(work)), work.value)
print(fft.cufftDestroy(plan))
"""


def test_cuda12_cufft_is_recorded_under_cufft_with_its_own_prototypes(tmp_path):
    # CUDA 12's cuFFT is libcufft.so.11 (JAX's CUDA 12 plug-in loads it): its calls reach the wrappers
    # defined under its own version node, are recorded in the cufft domain with their arguments, and no
    # warning names it as a library without wrappers. Simulated work area: 8 transforms of 64 points, one
    # complex float each.
    script = [sys.executable, "-c", CUFFT12_SCRIPT]
    plain = run(script, sim12_env())
    proc, trace = profile(tmp_path, script, env=sim12_env(), options=["-t", "cufft"])
    assert proc.stdout == plain.stdout == "0 11\n0 0 4096\n0\n", plain.stderr
    assert "libcufft.so.11" not in proc.stderr, proc.stderr
    rows = [r for r in api_trace_rows(trace) if r["Domain"] == "cufft"]
    assert [(r["Name"], r["Result"]) for r in rows] == [
        ("cufftGetVersion", "CUFFT_SUCCESS (0)"), ("cufftCreate", "CUFFT_SUCCESS (0)"),
        ("cufftMakePlan1d", "CUFFT_SUCCESS (0)"), ("cufftDestroy", "CUFFT_SUCCESS (0)")]
    plan = rows[1]["args"]["plan"]
    assert rows[2]["args"] == {"plan": plan, "nx": "64", "type": "CUFFT_R2C", "batch": "8", "workSize": "4096"}
    assert rows[3]["args"] == {"plan": plan}
