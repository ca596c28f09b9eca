"""What `pip install .` put into a virtual environment (scripts/check-pip-install.sh): its `cutrace`
profiles a bundled example with the shim and recorder installed beside it, not the build tree's, and
prints its stats; its Python package reads the trace, and `cutrace export` runs the package's Parquet
writer."""
import os
import subprocess
from pathlib import Path

import pytest

VENV = os.environ.get("CUTRACE_PIP_VENV")
BUILD = Path(os.environ.get("CUTRACE_BUILD_DIR", Path(__file__).resolve().parents[2] / "build"))
pytestmark = pytest.mark.skipif(not VENV, reason="run by scripts/check-pip-install.sh, which makes the environment")


def run(*args, env=None, **kwargs):
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})}, **kwargs)
    assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
    return proc


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    out = tmp_path_factory.mktemp("pip") / "example"
    # The environment's own programs only: nothing of the build tree but the example and the device.
    proc = run(Path(VENV) / "bin" / "cutrace", "profile", "--stats", "true", "-o", out, "--",
               BUILD / "tests" / "bin" / "sim_vector_add", "4",
               env={"LD_LIBRARY_PATH": str(BUILD / "simcuda" / "lib"), "PATH": f"{VENV}/bin:/usr/bin:/bin"})
    assert "calls cudaMemcpy 12" in proc.stdout, proc.stdout
    assert "cudaMemcpy" in proc.stdout and "cuda_api_sum" in proc.stdout + proc.stderr, proc.stdout
    return Path(str(out) + ".cutrace"), proc


def test_the_environments_cutrace_profiles_with_its_own_shim_and_recorder(trace):
    path, _ = trace
    libraries = {p.name for p in (Path(VENV) / "lib").glob("libcutrace-*.so")}
    assert {"libcutrace-preload.so", "libcutrace-osrt.so", "libcutrace-cuda12.so"} <= libraries
    assert (Path(VENV) / "libexec" / "cutrace" / "cutrace-recorder").is_file()
    info = run(Path(VENV) / "bin" / "cutrace", "info", path).stdout
    assert "complete" in info and "gpu_activity                   cupti" in info, info


def test_the_environments_package_reads_the_trace_and_writes_parquet(trace, tmp_path):
    path, _ = trace
    python = Path(VENV) / "bin" / "python"
    script = ("import sys, cutrace\n"
              "t = cutrace.open(sys.argv[1])\n"
              "print(cutrace.__file__)\n"
              "print(t.table('CUPTI_ACTIVITY_KIND_KERNEL').num_rows, t.table('CUPTI_ACTIVITY_KIND_MEMCPY').num_rows)\n")
    # Run from elsewhere than the checkout, so that only the installed package can be imported.
    lines = run(python, "-c", script, path, cwd=tmp_path, env={"PYTHONPATH": ""}).stdout.splitlines()
    assert lines[0].startswith(str(Path(VENV))), lines
    assert lines[1] == "8 12"
    run(Path(VENV) / "bin" / "cutrace", "export", "--type", "parquetdir", "-o", tmp_path / "p", path,
        env={"PATH": f"{VENV}/bin:/usr/bin:/bin"})
    assert (tmp_path / "p" / "CUPTI_ACTIVITY_KIND_KERNEL.parquet").is_file()
