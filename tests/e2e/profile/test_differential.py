"""Never change the program: every test program, run under `cutrace profile` with its defaults and
without it, exits with the same code and prints the same stdout and stderr (cutrace's own `cutrace:`
lines aside). On the simulated device; on the toolkit's real runtime, which without a driver fails
every call; and on the CUDA 13.2 runtime and CUPTI that PyTorch's wheels bring (scripts/cuda13.2-wheels.txt),
whose CUPTI crashes when started without a driver."""
import re
import subprocess

import pytest

from conftest import CUDA13_2_LIB, REAL_CUDA_LIB, app, info, profile, sim_env

# Programs whose output is a function of their arguments alone, but for the times they measured and
# the process ids they print (compared as placeholders).
SIMULATED = [
    ("sim_vector_add", "3", "4096"),
    ("sim_vector_add_static", "1"),
    ("sim_streams", "262144", "2"),
    ("sim_threads", "4", "20", "concurrent"),
    ("sim_errors",),
    ("sim_output", "5"),
    ("sim_fork", "4"),
    ("sim_cublas", "64", "32", "16", "3"),
    ("sim_cudnn",),
    ("sim_driver_launch", "3"),
    ("capture_app", "nvtx", "4", "10"),
    ("two_runtimes",),
    # Calls a function no runtime has (built against a newer one): the loader's message and exit status 127.
    ("newer_runtime_call",),
]
# On a real runtime without a driver: the programs linked with the shared runtime, and the static one.
REAL = [
    ("sim_vector_add", "2", "1024"),
    ("sim_vector_add_static", "1"),
    ("sim_errors",),
    ("sim_output", "3"),
    ("sim_threads", "2", "5", "concurrent"),
]


MEASURED = re.compile(r"^elapsed_ms .*$", re.M)


def measurements_masked(text):
    text = MEASURED.sub(lambda m: re.sub(r"\d+\.\d+", "<ms>", m.group(0)), text)
    return re.sub(r"\bpid \d+", "pid <pid>", text)


def own_lines_removed(text):
    return "".join(l for l in text.splitlines(keepends=True) if not l.startswith("cutrace:"))


def compare(tmp_path, command, env, name):
    plain = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    traced, trace = profile(tmp_path, command, env=env, check=False, name=name)
    assert traced.returncode == plain.returncode, (traced.returncode, plain.returncode, traced.stderr)
    assert measurements_masked(traced.stdout) == measurements_masked(plain.stdout)
    assert own_lines_removed(traced.stderr) == plain.stderr
    return plain, traced, trace


@pytest.mark.parametrize("command", SIMULATED, ids=lambda c: "_".join(c))
def test_on_the_simulated_device(tmp_path, command):
    plain, _, _ = compare(tmp_path, [app(command[0]), *command[1:]], sim_env(), "traced")
    if command[0] == "newer_runtime_call":
        assert plain.returncode == 127 and "undefined symbol: cudaSimNewerFunction, version libcudart.so.13" in plain.stderr


def real_env(lib_dir):
    env = sim_env()
    env["LD_LIBRARY_PATH"] = str(lib_dir)
    return env


@pytest.mark.parametrize("command", REAL, ids=lambda c: "_".join(c))
def test_on_the_toolkits_runtime_without_a_driver(tmp_path, command):
    plain, _, trace = compare(tmp_path, [app(command[0]), *command[1:]], real_env(REAL_CUDA_LIB), "traced")
    assert plain.returncode != 0  # every CUDA call fails here: the programs say so and exit 1


@pytest.mark.parametrize("command", REAL, ids=lambda c: "_".join(c))
def test_on_the_cuda_13_2_runtime_and_cupti_without_a_driver(tmp_path, command):
    if CUDA13_2_LIB is None:
        pytest.skip("the build has no CUDA 13.2 wheels (configure with -DCUTRACE_BUILD_TESTS=ON)")
    env = real_env(CUDA13_2_LIB)
    plain, traced, trace = compare(tmp_path, [app(command[0]), *command[1:]], env, "traced")
    if command[0] == "sim_vector_add_static":
        return  # its runtime is inside the program, and without a driver none of its calls is recorded
    # The runtime the program used is the wheel's, and CUPTI was never started: there is no driver.
    text = info(trace)
    assert str(CUDA13_2_LIB / "libcudart.so.13") in text, text
    reason = ("has no GPU activity in the trace, only its API calls: its CUDA calls found no usable driver (")
    assert reason in text and "returned 35, cudaErrorInsufficientDriver" in text, text
    assert reason in traced.stderr
