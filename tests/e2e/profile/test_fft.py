"""cuFFT (-t cufft) on the simulated stack: every call the program made counted exactly, plans with
their sizes, types and batches, work areas with their byte counts, transforms with their plan and
direction, results named by cufftResult, the kernels each transform launched in the GPU activity, and
nothing of cuFFT recorded unless -t asks for it. The real library, with no driver, is recorded with the
status it answers."""
import json
import os
import subprocess
import sys

from conftest import api_sum, api_trace, app, profile, program_calls, run_tool, sim_env

N = 16


def warnings(stderr):
    return [l for l in stderr.splitlines() if l.startswith("cutrace: warning:")]


def count_by_name(rows):
    out = {}
    for r in rows:
        out[r["Name"]] = out.get(r["Name"], 0) + 1
    return out


def test_plans_transforms_and_their_kernels(tmp_path):
    command = [app("sim_fft"), str(N)]
    plain = subprocess.run(command, env=sim_env(), capture_output=True, text=True, timeout=60)
    proc, trace = profile(tmp_path, command, options=["-t", "cufft"])
    assert proc.stdout == plain.stdout and proc.returncode == plain.returncode == 0
    assert warnings(proc.stderr) == []
    # The simulated library's work area: one double-complex element per point of the 3-D plan.
    work = N * N * N * 16
    assert f"workspace {work}\n" in proc.stdout
    expected = program_calls(proc.stdout)
    assert expected["cufftExecC2C"] == 2 and expected["cufftDestroy"] == 3

    rows = api_trace(trace)
    fft = [r for r in rows if r["Domain"] == "cufft"]
    assert all(r["Depth"] == 0 for r in fft)
    assert count_by_name(fft) == expected
    assert {r["Result"] for r in fft} == {"CUFFT_SUCCESS (0)"}
    # In the program's order, with each plan named by the handle its creation answered.
    assert [r["Name"] for r in fft] == [
        "cufftGetVersion", "cufftPlan1d", "cufftSetStream", "cufftExecC2C", "cufftExecC2C", "cufftPlan2d",
        "cufftSetStream", "cufftExecR2C", "cufftCreate", "cufftSetAutoAllocation", "cufftMakePlanMany64",
        "cufftSetWorkArea", "cufftSetStream", "cufftExecZ2Z", "cufftDestroy", "cufftDestroy", "cufftDestroy"]
    version = int(proc.stdout.split("version ")[1].split()[0])
    assert fft[0]["args"] == {"version": str(version)}
    line, plane, cube = fft[1]["args"], fft[5]["args"], fft[8]["args"]
    assert line == {"plan": line["plan"], "nx": str(N), "type": "CUFFT_C2C", "batch": "4"}
    assert plane == {"plan": plane["plan"], "nx": str(N), "ny": str(N), "type": "CUFFT_R2C"}
    handles = [line["plan"], plane["plan"], cube["plan"]]
    assert len(set(handles)) == 3 and all(int(h) > 0 for h in handles), handles
    assert [fft[k]["args"]["direction"] for k in (3, 4)] == ["-1", "1"]
    assert [fft[k]["args"]["plan"] for k in (2, 3, 4, 6, 7, 13)] == [handles[0]] * 3 + [handles[1]] * 2 + [handles[2]]
    many = fft[10]["args"]
    assert (many["plan"], many["rank"], many["type"], many["batch"], many["workSize"]) == (
        handles[2], "3", "CUFFT_Z2Z", "1", str(work))
    assert fft[9]["args"] == {"plan": handles[2], "autoAllocate": "0"}
    assert [r["args"]["plan"] for r in fft[-3:]] == handles
    # Each transform is one kernel per dimension, launched through the driver inside the cuFFT call.
    kernels = json.loads(run_tool("stats", "--report", "cuda_gpu_kern_sum", "--format", "json", trace).stdout)
    assert [(r["Name"], r["Instances"]) for r in kernels[0]["rows"]] == [("cufft_regular_fft_sim", 1 + 1 + 2 + 3)]
    launches = [r for r in api_trace(trace, show_internal=True) if r["Name"] == "cuLaunchKernel"]
    assert len(launches) == 7 and all(r["Depth"] == 1 for r in launches)


def test_cufft_only_with_its_trace_value(tmp_path):
    command = [app("sim_fft"), str(N)]
    for name, options, recorded in (("default", [], False), ("fft", ["-t", "cufft"], True),
                                    ("case", ["-t", "cuFFT,nvtx"], True)):
        proc, trace = profile(tmp_path, command, options=options, name=name)
        assert warnings(proc.stderr) == [], name
        assert any(r["Domain"] == "cufft" for r in api_trace(trace)) == recorded, name
        # CUDA is recorded with it: the kernels cuFFT launched are the program's driver calls.
        assert api_sum(trace, show_internal=False)["cuLaunchKernel"]["Num Calls"] == 7, name


def test_the_real_library_is_recorded_with_its_status(tmp_path):
    # The toolkit's libcufft.so.12 with no driver: its plan fails, and the status the program sees is
    # the one recorded; its version needs no device and is answered.
    lib_dir = os.environ.get("CUDA_LIB_DIR", "/usr/local/cuda/lib64")
    script = [sys.executable, "-c",
              "import ctypes\n"
              "fft = ctypes.CDLL('libcufft.so.12')\n"
              "v, plan = ctypes.c_int(), ctypes.c_int()\n"
              "print(fft.cufftGetVersion(ctypes.byref(v)), v.value, fft.cufftPlan1d(ctypes.byref(plan), 64, 0x29, 1))\n"]
    env = dict(os.environ, LD_LIBRARY_PATH=lib_dir)
    plain = subprocess.run(script, env=env, capture_output=True, text=True, timeout=120)
    proc, trace = profile(tmp_path, script, env=env, options=["-t", "cufft"], check=False)
    assert proc.stdout == plain.stdout and proc.returncode == plain.returncode == 0, proc.stderr
    version_status, version, plan_status = map(int, proc.stdout.split())
    assert version_status == 0 and version >= 12000 and plan_status != 0
    rows = [r for r in api_trace(trace) if r["Depth"] == 0 and r["Domain"] == "cufft"]
    assert [(r["Name"], r["Result"].split(" ")[-1]) for r in rows] == [
        ("cufftGetVersion", "(0)"), ("cufftPlan1d", f"({plan_status})")]
    assert rows[0]["args"] == {"version": str(version)}
    assert rows[1]["Result"].startswith("CUFFT_") and rows[1]["args"]["type"] == "CUFFT_C2C"
