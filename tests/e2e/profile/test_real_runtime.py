"""Interposition on the real CUDA 13 runtime in the toolkit: with no driver every call fails with
error 35, and every call must be recorded with that code, the program's output unchanged."""
import os
import subprocess
from pathlib import Path

import pytest

from conftest import REAL_CUDA_LIB, api_sum, app, calls, info, profile


def real_env():
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = str(REAL_CUDA_LIB)
    env.pop("LD_PRELOAD", None)
    return env


# With a driver the calls succeed; test_real_gpu.py covers that case.
@pytest.mark.skipif(Path("/dev/nvidiactl").exists(), reason="an NVIDIA driver is present: calls do not fail")
def test_calls_into_the_real_runtime_are_recorded_with_its_error_code(tmp_path):
    assert (REAL_CUDA_LIB / "libcudart.so.13").exists()
    command = [app("sim_vector_add"), "1", "1024"]
    plain = subprocess.run(command, env=real_env(), capture_output=True, text=True, timeout=60)
    traced, trace = profile(tmp_path, command, env=real_env(), check=False)
    assert traced.returncode == plain.returncode == 1  # the program's own "a CUDA call failed"
    assert traced.stdout == plain.stdout
    events, _ = calls(trace, tmp_path)
    malloc = [e for e in events if e["name"] == "cudaMalloc"]
    assert len(malloc) == 1
    assert malloc[0]["args"]["result"] == 35
    assert malloc[0]["args"]["result_name"] == "cudaErrorInsufficientDriver"
    # The program's own error reporting went through the wrappers too.
    assert api_sum(trace)["cudaGetErrorString"]["Num Calls"] == 1
    # The runtime the process used is named, asked of the library itself (it answers without a driver);
    # the shim's own question is not among the program's calls.
    text = info(trace)
    assert f"CUDA runtime library: {os.path.realpath(REAL_CUDA_LIB / 'libcudart.so.13')}" in text or \
        f"CUDA runtime library: {REAL_CUDA_LIB / 'libcudart.so.13'}" in text, text
    assert "  13.0  " in text, text
    assert "cudaRuntimeGetVersion" not in api_sum(trace)
