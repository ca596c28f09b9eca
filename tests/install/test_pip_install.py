"""What a pip install put into a virtual environment: `pip install .` of the checkout
(scripts/check-pip-install.sh), or the wheel of scripts/build-wheel.sh, built without the CUDA toolkit
and installed into an environment that sees no system package (scripts/check-wheel.sh, which sets
CUTRACE_WHEEL). Its `cutrace` profiles a bundled example and a Python program with the shim and
recorder installed in its package, not the build tree's, and prints their stats; its Python package
reads the traces, and `cutrace export` runs the package's Parquet writer. The shim needs nothing but
the C library, and a wheel's programs nothing outside it but what the manylinux policy allows."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

VENV = os.environ.get("CUTRACE_PIP_VENV")
WHEEL = os.environ.get("CUTRACE_WHEEL")
BUILD = Path(os.environ.get("CUTRACE_BUILD_DIR", Path(__file__).resolve().parents[2] / "build"))
SCRIPTS = Path(__file__).resolve().parents[1] / "e2e" / "profile" / "scripts"
pytestmark = pytest.mark.skipif(not VENV, reason="run by scripts/check-pip-install.sh or scripts/check-wheel.sh, "
                                                 "which make the environment")

# Libraries a manylinux wheel may take from the system (auditwheel's policy for glibc 2.17 and later),
# and the loader.
MANYLINUX_SYSTEM_LIBRARIES = {
    "libgcc_s.so.1", "libstdc++.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libc.so.6", "libnsl.so.1",
    "libutil.so.1", "libpthread.so.0", "libresolv.so.2", "libX11.so.6", "libXext.so.6", "libXrender.so.1",
    "libICE.so.6", "libSM.so.6", "libGL.so.1", "libgobject-2.0.so.0", "libgthread-2.0.so.0",
    "libglib-2.0.so.0", "libz.so.1", "libexpat.so.1", "ld-linux-x86-64.so.2"}
# The shim is loaded into other people's programs: the C library and the loader, nothing else.
SHIM_SYSTEM_LIBRARIES = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1",
                         "ld-linux-x86-64.so.2"}


def run(*args, env=None, **kwargs):
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})}, **kwargs)
    assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
    return proc


def venv_env(**extra):
    """The environment's own programs only: nothing of the build tree but the examples and the device."""
    return {"LD_LIBRARY_PATH": str(BUILD / "simcuda" / "lib"), "PATH": f"{VENV}/bin:/usr/bin:/bin", "PYTHONPATH": "",
            "CUTRACE_PRELOAD_LIB": "", "CUTRACE_RECORDER": "", "CUTRACE_TABLES_LIBRARY": "", **extra}


@pytest.fixture(scope="module")
def package():
    """The installed package's directory."""
    out = run(Path(VENV) / "bin" / "python", "-c", "import cutrace, os; print(os.path.dirname(cutrace.__file__))",
              cwd="/", env={"PYTHONPATH": ""}).stdout.strip()
    assert out.startswith(str(Path(VENV))), out
    return Path(out)


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    out = tmp_path_factory.mktemp("pip") / "example"
    proc = run(Path(VENV) / "bin" / "cutrace", "profile", "--stats", "true", "-o", out, "--",
               BUILD / "tests" / "bin" / "sim_vector_add", "4", env=venv_env())
    assert "calls cudaMemcpy 12" in proc.stdout, proc.stdout
    assert "cudaMemcpy" in proc.stdout and "cuda_api_sum" in proc.stdout + proc.stderr, proc.stdout
    return Path(str(out) + ".cutrace"), proc


def test_the_environments_cutrace_profiles_with_its_own_shim_and_recorder(trace, package):
    path, _ = trace
    native = package / "_native"
    libraries = {p.name for p in (native / "lib").glob("libcutrace-*.so")}
    assert {"libcutrace-preload.so", "libcutrace-osrt.so", "libcutrace-cuda12.so"} <= libraries
    assert (native / "libexec" / "cutrace" / "cutrace-recorder").is_file()
    info = run(Path(VENV) / "bin" / "cutrace", "info", path, env=venv_env()).stdout
    assert "complete" in info and "gpu_activity                   cupti" in info, info
    assert run(Path(VENV) / "bin" / "cutrace", "--version", env=venv_env()).stdout.startswith("cutrace ")


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
    run(Path(VENV) / "bin" / "cutrace", "export", "--type", "parquetdir", "-o", tmp_path / "p", path, env=venv_env())
    assert (tmp_path / "p" / "CUPTI_ACTIVITY_KIND_KERNEL.parquet").is_file()


def test_the_environments_cutrace_profiles_a_python_program(tmp_path):
    # `cutrace profile -- python train.py` as a PyTorch user runs it: the environment's interpreter,
    # which loads the CUDA runtime through ctypes; the traced program's environment is its own.
    python = Path(VENV) / "bin" / "python"
    out = tmp_path / "py"
    script = "import os, sys; print('package python' if 'CUTRACE_PACKAGE_PYTHON' in os.environ else 'clean')"
    proc = run(Path(VENV) / "bin" / "cutrace", "profile", "-o", out, "--", python, "-c", script, env=venv_env())
    assert proc.stdout == "clean\n", proc.stdout
    proc = run(Path(VENV) / "bin" / "cutrace", "profile", "-f", "true", "-o", out, "--", python,
               SCRIPTS / "ctypes_runtime.py", "libcudart.so.13", "3", env=venv_env())
    assert "failures 0" in proc.stdout, proc.stdout
    counts = ("import sys, collections, cutrace\n"
              "calls = cutrace.open(sys.argv[1]).table('CUPTI_ACTIVITY_KIND_RUNTIME').to_pydict()\n"
              "names = cutrace.open(sys.argv[1]).table('StringIds').to_pydict()\n"
              "value = dict(zip(names['id'], names['value']))\n"
              "c = collections.Counter(value[i] for i in calls['nameId'])\n"
              "print(*(f'{n} {c[n]}' for n in ('cudaMalloc', 'cudaMemcpy', 'cudaFree', 'cudaGetDeviceCount')))\n")
    line = run(python, "-c", counts, str(out) + ".cutrace", cwd=tmp_path, env={"PYTHONPATH": ""}).stdout.strip()
    assert line.startswith("cudaMalloc") and line.split()[1::2] == ["3", "3", "3", "3"], line


def test_the_environments_cutrace_has_the_pytorch_hook(tmp_path):
    # --pytorch's start-up hook is installed beside the shim: a program that imports a torch runs it
    # (this one, a stand-in, lacks what the annotations need, which the trace and the run then say).
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("__version__ = '0.0-stand-in'\n")
    proc = run(Path(VENV) / "bin" / "cutrace", "profile", "-o", tmp_path / "pt", "--pytorch", "functions-trace", "--",
               Path(VENV) / "bin" / "python", "-c", "import torch; print(torch.__version__)",
               env=venv_env(PYTHONPATH=str(tmp_path)))
    assert proc.stdout == "0.0-stand-in\n", proc.stdout
    assert "--pytorch's annotations did not start" in proc.stderr, proc.stderr


def needed(path):
    """DT_NEEDED of an ELF file, by readelf."""
    out = run("readelf", "-d", path).stdout
    return [line.split("[", 1)[1].split("]", 1)[0] for line in out.splitlines() if "(NEEDED)" in line]


def glibc_versions(path):
    """The GLIBC_2.N symbol versions an ELF file imports, as (2, N)."""
    out = run("objdump", "-T", path).stdout
    return {tuple(int(x) for x in v.split(".")[:2]) for v in re.findall(r"\(GLIBC_([0-9.]+)\)", out)}


def test_the_shim_links_nothing_but_the_c_library_and_exports_none_of_its_dependencies(package):
    shim = package / "_native" / "lib" / "libcutrace-preload.so"
    assert set(needed(shim)) <= SHIM_SYSTEM_LIBRARIES, needed(shim)
    # It loads on glibc 2.34 (RHEL 9): its unwinder's _dl_find_object (2.35) and libstdc++'s arc4random
    # (2.36) are its own.
    assert max(glibc_versions(shim)) <= (2, 34), glibc_versions(shim)
    symbols = run("nm", "-D", "--defined-only", shim).stdout.split()
    leaked = [s for s in symbols if s.startswith(("unw_", "_U", "_Unwind", "ZSTD_", "_ZN6google", "_ZNSt", "__cxa",
                                                  "__gxx"))]
    assert not leaked, leaked


@pytest.mark.skipif(not WHEEL, reason="a wheel's check (scripts/check-wheel.sh)")
def test_the_wheel_is_for_every_python_3_on_glibc_2_34(package):
    # Built on Debian 12 (glibc 2.36, GCC 12), it still installs where RHEL 9's glibc 2.34 is.
    tags = Path(WHEEL).name[:-len(".whl")].split("-")[2:]
    assert tags[:2] == ["py3", "none"], tags
    assert re.fullmatch(r"manylinux_2_(\d+)_x86_64", tags[2]) and int(tags[2].split("_")[2]) <= 34, tags


@pytest.mark.skipif(not WHEEL, reason="a wheel's check (scripts/check-wheel.sh)")
def test_the_wheels_programs_need_only_what_manylinux_allows(package):
    elf = [p for p in package.rglob("*") if p.is_file() and p.read_bytes()[:4] == b"\x7fELF"]
    elf += [p for p in (package.parent / "cutrace.libs").glob("*")]
    assert len(elf) >= 8, elf
    for path in elf:
        out = run("ldd", path, env={"LD_LIBRARY_PATH": ""}).stdout
        for line in out.splitlines():
            name, _, where = line.strip().partition(" => ")
            assert "not found" not in where, (path, line)
            resolved = where.split(" (")[0]
            if resolved.startswith("/") and not resolved.startswith(str(Path(VENV))):
                assert Path(resolved).name in MANYLINUX_SYSTEM_LIBRARIES, (path, line)
