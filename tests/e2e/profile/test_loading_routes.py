"""The ways real programs reach the CUDA runtime besides linking it: ctypes (and its fork()ed
multiprocessing children), dlopen + dlsym/dlvsym on a handle, a library loaded with RTLD_DEEPBIND, a
runtime found only through the RUNPATH of the library that loads it, and a second tool preloaded
beside cutrace. Each must be traced call for call, and the program must behave exactly as without
cutrace (its output, dlerror() results and exit code)."""
import os
import subprocess
import sys
from pathlib import Path

from conftest import APPS, BUILD, SIM_LIB, api_sum, app, calls, info, profile, sim_env

SCRIPTS = Path(__file__).resolve().parent / "scripts"
RUNTIME_CALLS = {"cudaGetDeviceCount", "cudaMalloc", "cudaMemcpy", "cudaFree", "cudaDeviceSynchronize"}


def program_calls(stdout, prefix=""):
    """{function: n} from a program's "calls <function> <n>" lines (with an optional prefix)."""
    result = {}
    for line in stdout.splitlines():
        if not line.startswith(prefix):
            continue
        parts = line[len(prefix):].split()
        if len(parts) == 3 and parts[0] == "calls":
            result[parts[1]] = int(parts[2])
    return result


def recorded(trace):
    """{function: calls} of the runtime functions in cuda_api_sum."""
    return {name: int(row["Num Calls"]) for name, row in api_sum(trace).items() if name in RUNTIME_CALLS}


def untraced(command, env):
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


def test_the_shim_exports_the_libc_functions_it_wraps():
    # The shim is built with hidden visibility: a wrapper of a libc function not marked for export is
    # never reached (dlclose's was not, and its unload records came only at the next look).
    shim = Path(os.environ.get("CUTRACE_PRELOAD_LIB", BUILD / "lib" / "libcutrace-preload.so"))
    out = subprocess.run(["nm", "-D", "--defined-only", str(shim)], capture_output=True, text=True, check=True).stdout
    exported = {line.split()[-1] for line in out.splitlines() if len(line.split()) == 3}
    assert {"dlsym", "dlvsym", "dlclose", "_exit", "_Exit"} <= exported


def test_ctypes_script_is_traced_call_for_call(tmp_path):
    command = [sys.executable, str(SCRIPTS / "ctypes_runtime.py"), "libcudart.so.13", "7"]
    proc, trace = profile(tmp_path, command)
    without_pid = lambda out: [l for l in out.splitlines() if not l.startswith("pid ")]  # noqa: E731
    assert without_pid(proc.stdout) == without_pid(untraced(command, sim_env()).stdout)
    expected = program_calls(proc.stdout)
    assert expected == {"cudaFree": 7, "cudaGetDeviceCount": 7, "cudaMalloc": 7, "cudaMemcpy": 7}
    assert recorded(trace) == expected
    assert "failures 0" in proc.stdout


def test_multiprocessing_fork_children_are_traced_each(tmp_path):
    children, iterations = 3, 5
    command = [sys.executable, str(SCRIPTS / "ctypes_runtime.py"), "libcudart.so.13", str(iterations),
               "--children", str(children)]
    proc, trace = profile(tmp_path, command)
    child_pids = sorted({int(line.split()[1]) for line in proc.stdout.splitlines() if line.startswith("child ")})
    assert len(child_pids) == children
    parent_pid = int(next(l.split()[1] for l in proc.stdout.splitlines() if l.startswith("pid ")))
    events, _ = calls(trace, tmp_path)
    per_process = {}
    for e in events:
        if e["name"] in RUNTIME_CALLS:
            per_process.setdefault(e["pid"], {}).setdefault(e["name"], 0)
            per_process[e["pid"]][e["name"]] += 1
    expected = {"cudaFree": iterations, "cudaGetDeviceCount": iterations, "cudaMalloc": iterations,
                "cudaMemcpy": iterations}
    assert per_process == {pid: expected for pid in [parent_pid, *child_pids]}
    for pid in child_pids:
        assert program_calls(proc.stdout, f"child {pid} ") == expected


def test_dlopen_and_dlsym_on_a_local_handle(tmp_path):
    command = [app("dl_runtime"), "libcudart.so.13", "6"]
    proc, trace = profile(tmp_path, command)
    plain = untraced(command, sim_env())
    # The same output, "dlerror clean" included: looking up through the shim leaves dlerror() as
    # glibc's own lookup left it, for a found name and for a missing one.
    assert proc.stdout == plain.stdout
    assert "dlerror clean" in proc.stdout and "failures 0" in proc.stdout
    assert recorded(trace) == program_calls(proc.stdout)


def test_library_loaded_with_deepbind_is_traced(tmp_path):
    command = [app("deepbind_main"), str(APPS / "libdeep_user.so"), "9"]
    proc, trace = profile(tmp_path, command)
    assert proc.stdout == untraced(command, sim_env()).stdout
    assert "failures 0" in proc.stdout
    assert recorded(trace) == program_calls(proc.stdout) == {"cudaFree": 9, "cudaGetDeviceCount": 9, "cudaMalloc": 9}


def test_runtime_found_through_the_loading_librarys_runpath(tmp_path):
    # No LD_LIBRARY_PATH: the runtime is only on libruntime_user.so's RUNPATH, which dlopen searches
    # only when it is called from that library.
    env = dict(os.environ)
    env.pop("LD_LIBRARY_PATH", None)
    env.pop("LD_PRELOAD", None)
    command = [app("runpath_main"), str(APPS / "runpath" / "libruntime_user.so"), "8"]
    plain = untraced(command, env)
    assert plain.returncode == 0, plain.stderr
    proc, trace = profile(tmp_path, command, env=env)
    assert proc.stdout == plain.stdout
    assert recorded(trace) == program_calls(proc.stdout) == {"cudaDeviceSynchronize": 1, "cudaGetDeviceCount": 8}


def stacked_line(stderr):
    """What the other tool reported at exit ("stacked: cudaMalloc N cudaFree N"), or None."""
    return next((l for l in stderr.splitlines() if l.startswith("stacked: ")), None)


def test_a_second_preloaded_tool_keeps_working(tmp_path):
    # The other tool finds the next cudaMalloc with dlsym(RTLD_NEXT): through cutrace's dlsym it must
    # get the next definition after itself. It must see exactly the calls it sees without cutrace
    # (all of a linked program's; none of those made through a local handle or by a DEEPBIND
    # library, which bypass it), while cutrace records every call.
    env = sim_env(LD_PRELOAD=APPS / "libstacked_preload.so")
    cases = (([app("sim_vector_add"), "3", "4096"], "stacked: cudaMalloc 9 cudaFree 9"),
             ([app("deepbind_main"), str(APPS / "libdeep_user.so"), "4"], None),
             ([app("dl_runtime"), "libcudart.so.13", "5"], None))
    for command, other_sees in cases:
        plain = untraced(command, env)
        assert stacked_line(plain.stderr) == other_sees
        proc, trace = profile(tmp_path, command, env=env, name=Path(command[0]).name)
        assert proc.stdout == plain.stdout
        assert stacked_line(proc.stderr) == other_sees
        table = recorded(trace)
        made = program_calls(proc.stdout)
        for name in ("cudaMalloc", "cudaFree"):
            assert table[name] == made[name], (command, name)


def test_a_runtime_newer_than_the_build_has_its_unwrapped_functions_named(tmp_path):
    # libcudart.so.13 exporting a function the toolkit cutrace was built from lacks: no wrapper can
    # exist for it, so its calls go straight to the library. The run says so, naming the function,
    # while the function both versions have is recorded as always.
    future = APPS / "future" / "libcudart.so.13"
    script = (f"import ctypes\nrt = ctypes.CDLL({str(future)!r})\ndevice = ctypes.c_int(-1)\n"
              "print(rt.cudaGetDevice(ctypes.byref(device)), rt.cudaFutureFunction(), device.value)\n")
    command = [sys.executable, "-c", script]
    proc, trace = profile(tmp_path, command)
    assert proc.stdout == subprocess.run(command, env=sim_env(), capture_output=True, text=True).stdout == "0 0 0\n"
    events, _ = calls(trace, tmp_path)
    assert [e["name"] for e in events] == ["cudaGetDevice"]
    warning = (f"cutrace: warning: {future} (libcudart.so.13, loaded by process ")
    lines = [l for l in proc.stderr.splitlines() if l.startswith(warning)]
    assert len(lines) == 1, proc.stderr
    assert lines[0].endswith("exports 1 function this cutrace has no wrapper for (the library is newer than the one "
                             "cutrace was built from), so calls to it are not recorded: cudaFutureFunction."), lines[0]
    # The trace keeps the warning.
    assert "cudaFutureFunction" in info(trace)


def test_a_driver_entry_point_newer_than_the_build_is_named(tmp_path):
    # cuGetProcAddress hands out an entry point the build has no wrapper for (a newer runtime asking a
    # newer driver): its calls cannot be recorded, and the run says so, once for three lookups. The
    # graphics interop entry points are forwarded untimed by design (annotations.md), and the driver
    # hands them out to every runtime: their lookup is no news and no warning.
    command = [app("future_entry_point")]
    proc, trace = profile(tmp_path, command)
    assert proc.stdout == subprocess.run(command, env=sim_env(), capture_output=True, text=True).stdout == \
        "lookup 0 call 0\n" * 3 + "interop lookup 0 call 0\n"
    warnings = [l for l in proc.stderr.splitlines() if "entry point" in l]
    assert len(warnings) == 1, proc.stderr
    assert warnings[0].endswith(": the driver handed out 1 entry point this cutrace has no wrapper for (asked for by a "
                                "CUDA runtime or library newer than the one cutrace was built from), so calls through "
                                "it are not recorded: cuSimFutureFunction."), warnings[0]
    events, _ = calls(trace, tmp_path, domains=("cuda_driver",))
    assert [e["name"] for e in events if not e["name"].startswith("cuGetProcAddress")] == ["cuInit"]


def test_a_runtime_preloaded_ahead_of_cutrace_is_traced_from_the_first_call(tmp_path):
    # The simulated device's runtime preloaded by hand, as one runs a framework on it: it comes ahead
    # of the shim, so a lazily bound slot would bind to it on its first call. A library loaded later
    # (a framework's extension, dlopen()ed) imports more wrapped functions than the shim looks up at a
    # time, the ones it calls last; every call it makes is recorded all the same, the first included.
    exports = subprocess.run(["nm", "-D", "--defined-only", str(SIM_LIB / "libcudart.so.13")], capture_output=True,
                             text=True, check=True).stdout
    names = sorted({line.split()[-1].split("@")[0] for line in exports.splitlines()
                    if line.split()[-1].startswith("cuda")})
    assert len(names) > 300
    unused = [n for n in names if n not in RUNTIME_CALLS][:300]
    source = tmp_path / "many_imports.c"
    source.write_text(
        "".join(f"extern int {n}();\n" for n in unused + sorted(RUNTIME_CALLS)) +
        # Never taken: these calls only make the imports, ahead of the four the library makes.
        "int many_imports(int never) {\n  if (never == 12345) {\n" +
        "".join(f"    {n}();\n" for n in unused) +
        "  }\n  int count = 0; void* p = 0;\n  cudaGetDeviceCount(&count);\n  cudaMalloc(&p, 64);\n"
        "  cudaFree(p);\n  cudaDeviceSynchronize();\n  return count;\n}\n")
    library = tmp_path / "libmany_imports.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-w", "-Wl,-z,lazy", "-o", str(library), str(source),
                    f"-L{SIM_LIB}", "-l:libcudart.so.13"], check=True)
    script = (f"import ctypes\nlib = ctypes.CDLL({str(library)!r})\n"
              "print(lib.many_imports(0), lib.many_imports(0))\n")
    env = sim_env(LD_PRELOAD=SIM_LIB / "libcudart.so.13")
    command = [sys.executable, "-c", script]
    plain = untraced(command, env)
    assert plain.returncode == 0 and plain.stdout == "1 1\n", plain.stderr
    proc, trace = profile(tmp_path, command, env=env)
    assert proc.stdout == plain.stdout
    assert recorded(trace) == {"cudaGetDeviceCount": 2, "cudaMalloc": 2, "cudaFree": 2, "cudaDeviceSynchronize": 2}
