"""The Python frames of slow calls, read without the GIL (preload/python_frames.cpp): for every CPython
the machine has, the layout table against the interpreter's own headers, then slow calls from Python
code of every shape, on every route (a C extension releasing the GIL as PyTorch's bindings do,
ctypes.CDLL, ctypes.PyDLL), in threads, and while other threads churn code objects and frames, each
compared with the stack CPython itself gave just before the call. And an interpreter whose layout is
unknown: no Python frames, one warning naming it, the native stack as before."""
import glob
import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import calls, info, metadata, profile, sim_env

HERE = Path(__file__).resolve().parent / "python"
PRELOAD_SOURCES = Path(__file__).resolve().parents[3] / "preload"  # python_layouts.h
THRESHOLD = "1000000"  # 1 ms; a 1 MiB copy takes 2 ms at 0.5 GB/s
SLOW = {"SIMCUDA_COPY_GBPS": "0.5"}
DEPTH = 32  # --python-backtrace's default depth (backtrace.python_depth)


def _describe(python):
    """(version tuple, include dir, extension suffix, shared libpython or None) of an interpreter."""
    code = ("import json, platform, sys, sysconfig; print(json.dumps([list(sys.version_info[:3]), "
            "platform.python_implementation(), sysconfig.get_paths()['include'], "
            "sysconfig.get_config_var('EXT_SUFFIX'), bool(sysconfig.get_config_var('Py_GIL_DISABLED')), "
            "sysconfig.get_config_var('LIBDIR'), sysconfig.get_config_var('LDLIBRARY')]))")
    try:
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    version, implementation, include, suffix, free_threaded, libdir, ldlibrary = json.loads(out)
    if implementation != "CPython" or tuple(version) < (3, 9) or free_threaded:
        return None
    if not (Path(include) / "Python.h").exists():
        return None
    shared = Path(libdir) / ldlibrary if ldlibrary and ldlibrary.endswith(".so") else None
    return tuple(version), include, suffix, shared if shared and shared.exists() else None


def _interpreters():
    """Every CPython 3.9+ with headers: the tests' own, Debian's, pyenv's. Deduplicated by version and
    build (a pyenv interpreter and Debian's of the same minor version are both kept). The tests' own
    alone with CUTRACE_TEST_INTERPRETERS=own: scripts/test.sh's sanitized passes, whose sanitized launcher
    and recorder take the same records from every interpreter (the plain shim reads the frames)."""
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    candidates = [sys.executable, *sorted(glob.glob("/usr/bin/python3.[0-9]*")),
                  *sorted(glob.glob(str(pyenv / "versions" / "3.*" / "bin" / "python3")))]
    if os.environ.get("CUTRACE_TEST_INTERPRETERS") == "own":
        candidates = [sys.executable]
    found, seen = [], set()
    for candidate in candidates:
        if not re.search(r"python3(\.\d+)?$", candidate) or not os.access(candidate, os.X_OK):
            continue
        described = _describe(candidate)
        if not described or (described[0], described[1]) in seen:
            continue
        seen.add((described[0], described[1]))
        found.append((candidate, described))
    return found


INTERPRETERS = _interpreters()
IDS = [f"{'.'.join(map(str, d[0]))}-{'pyenv' if '.pyenv' in p else Path(p).name}" for p, d in INTERPRETERS]


def test_the_tests_own_interpreter_is_among_those_checked():
    # The suite's python3 always has headers (python3-dev, scripts/install-deps.sh): a machine
    # where nothing is checked fails here rather than passing empty.
    assert any(os.path.realpath(p) == os.path.realpath(sys.executable) for p, _ in INTERPRETERS), INTERPRETERS


@pytest.mark.parametrize("python,described", INTERPRETERS, ids=IDS)
def test_the_layout_table_is_each_interpreters_own(tmp_path, python, described):
    version, include, _, _ = described
    probe = tmp_path / "probe"
    subprocess.run(["cc", "-I", str(PRELOAD_SOURCES), "-I", include, "-I", str(Path(include) / "internal"), str(HERE / "layout_probe.c"), "-o", str(probe)],
                   check=True, capture_output=True, text=True, timeout=120)
    out = subprocess.run([str(probe)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and out.stdout == f"layout 3.{version[1]} checked\n", out.stdout


def build_extension(tmp_path, described):
    _, include, suffix, _ = described
    out = tmp_path / "ext"
    out.mkdir(exist_ok=True)
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-I", include, str(HERE / "releasing.c"), "-o",
                    str(out / ("releasing" + suffix))], check=True, capture_output=True, text=True, timeout=120)
    return out


def run_scenario(tmp_path, python, described, scenario, *args, env_extra=None, name="trace"):
    """Profiles frames.py SCENARIO; returns (the stacks it expected, per call in order, with the trace's
    python_stack of that call; the trace; the finished `cutrace profile`)."""
    env = sim_env(**SLOW, PYTHONPATH=str(build_extension(tmp_path, described)), **(env_extra or {}))
    proc, trace = profile(tmp_path, [python, str(HERE / "frames.py"), scenario, *map(str, args)], env=env, name=name,
                          options=["--cudabacktrace", "memory:" + THRESHOLD], timeout=300)
    expected = [json.loads(line) for line in proc.stdout.splitlines()]
    by_thread = {}
    for e in calls(trace, tmp_path, domains=None)[0]:
        if e["name"] == "cudaMemcpy":
            by_thread.setdefault(e["tid"], []).append(e)
    pairs, taken = [], {}
    for x in expected:
        i = taken.get(x["tid"], 0)
        taken[x["tid"]] = i + 1
        call = by_thread[x["tid"]][i]
        assert "backtrace" in call["args"], call  # slow: it has its native stack
        pairs.append((x, call["args"].get("python_stack")))
        check_mixed_stack(call["args"])
    # Every slow copy was one the script announced: none unaccounted for.
    assert sum(len(v) for v in by_thread.values()) == len(expected)
    return pairs, trace, proc


def check_mixed_stack(args):
    """A call's mixed_stack is its native stack with each eval-loop frame replaced by the Python frames
    it ran, in order; absent where no eval-loop frame is named (a stripped interpreter)."""
    native, python, mixed = args.get("stack", []), args.get("python_stack", []), args.get("mixed_stack")
    evals = [i for i, f in enumerate(native) if re.match(r"_PyEval_EvalFrameDefault(\.\w+)?( \(|$)", f)]
    if not python or not evals:
        assert mixed is None, args
        return
    assert mixed is not None, args
    assert [f for f in mixed if f in python] == python  # every Python frame, in order
    assert mixed[:evals[0]] == native[:evals[0]]  # the innermost run of the eval loop takes its place
    assert mixed[evals[0]] == python[0]
    # The native frames stay, less the eval-loop frames, innermost first, that Python frames replaced.
    rest = [f for f in mixed if f not in python]
    replaced = len(native) - len(rest)
    assert 1 <= replaced <= len(evals)
    assert rest == [f for i, f in enumerate(native) if i not in evals[:replaced]]


def version_text(described):
    return "CPython " + ".".join(map(str, described[0]))


@pytest.mark.parametrize("python,described", INTERPRETERS, ids=IDS)
def test_every_route_names_the_lines_with_or_without_the_gil(tmp_path, python, described):
    pairs, trace, _ = run_scenario(tmp_path, python, described, "routes")
    assert [x["route"] for x, _ in pairs] == ["extension", "cdll", "pydll"]
    for x, stack in pairs:
        assert stack == x["expected"][:DEPTH], x["route"]
    assert [s[0].split(" ")[0] for _, s in pairs] == ["copy_releasing", "copy_cdll", "copy_pydll"]
    assert metadata(trace, "End summary:")["python_frames.interpreter"] == version_text(described)


@pytest.mark.parametrize("python,described", INTERPRETERS, ids=IDS)
def test_generators_async_classes_exec_unicode_and_deep_recursion(tmp_path, python, described):
    pairs, _, _ = run_scenario(tmp_path, python, described, "shapes", 900)
    assert len(pairs) == 9
    for x, stack in pairs:
        assert stack == x["expected"][:DEPTH]
    innermost_callers = [x["expected"][1].split(" (")[0] for x, _ in pairs]
    assert innermost_callers[:3] == ["generator", "generator", "leaf"]
    assert innermost_callers[-3:][0].endswith("from_exec") and "données_имя_𠀀" in innermost_callers[-2]
    # 900 deep: the innermost 32 frames, the recursion's call line 30 times under the innermost's.
    recursion = pairs[-1][1]
    assert recursion[0].startswith("copy_releasing ") and recursion[1].startswith("recurse ")
    assert len(recursion) == DEPTH and len(set(recursion[2:])) == 1 and recursion[2].startswith("recurse ")
    assert any("ünï_𠀀.py" in frame for x, _ in pairs for frame in x["expected"])


@pytest.mark.parametrize("python,described", INTERPRETERS, ids=IDS)
def test_lines_stay_right_under_settrace_and_sys_monitoring(tmp_path, python, described):
    pairs, _, _ = run_scenario(tmp_path, python, described, "traced")
    assert len(pairs) == (6 if described[0] >= (3, 12) else 3)
    for x, stack in pairs:
        assert stack == x["expected"][:DEPTH], x["route"]


@pytest.mark.parametrize("python,described", INTERPRETERS, ids=IDS)
def test_threads_in_slow_calls_beside_threads_running_python(tmp_path, python, described):
    pairs, _, _ = run_scenario(tmp_path, python, described, "threads", 4)
    assert len(pairs) == 12 and len({x["tid"] for x, _ in pairs}) == 4
    for x, stack in pairs:
        assert stack == x["expected"][:DEPTH]


@pytest.mark.parametrize("python,described", INTERPRETERS, ids=IDS)
def test_frames_stay_right_while_other_threads_churn_code_and_frames(tmp_path, python, described):
    pairs, _, _ = run_scenario(tmp_path, python, described, "churn", 25)
    assert len(pairs) == 100
    wrong = [(x["expected"][:DEPTH], stack) for x, stack in pairs if stack != x["expected"][:DEPTH]]
    assert not wrong, wrong[:3]


@pytest.mark.parametrize("python,described", INTERPRETERS, ids=IDS)
def test_daemon_threads_in_slow_calls_while_the_interpreter_exits(tmp_path, python, described):
    # Finalisation with threads inside the call: they come back to a dying interpreter, whose frames
    # are left alone. The program ends as it would without cutrace, whenever the exit falls.
    env = sim_env(**SLOW, PYTHONPATH=str(build_extension(tmp_path, described)))
    named = 0
    for run, delay in enumerate((5, 23, 50, 77)):
        proc, trace = profile(tmp_path, [python, str(HERE / "frames.py"), "daemon", str(delay)], env=env,
                              name=f"daemon{run}", options=["--cudabacktrace", "memory:" + THRESHOLD])
        lines = [json.loads(line) for line in proc.stdout.splitlines()]
        assert {"exit": True} in lines and proc.returncode == 0
        lines.remove({"exit": True})
        by_thread = {}
        for e in calls(trace, tmp_path, domains=None)[0]:
            if e["name"] == "cudaMemcpy":
                by_thread.setdefault(e["tid"], []).append(e)
        announced = {}
        for x in lines:
            announced.setdefault(x["tid"], []).append(x["expected"][:DEPTH])
        # Every copy that returned before the end and has Python frames has the right ones.
        for tid, copies in by_thread.items():
            for copy, expected in zip(copies, announced[tid]):
                assert copy["args"].get("python_stack") in (None, expected)
        named += sum("python_stack" in c["args"] for copies in by_thread.values() for c in copies)
    assert named > 0


SANITIZED_SHIM = os.environ.get("CUTRACE_SANITIZED_PRELOAD_LIB")


@pytest.mark.skipif(not SANITIZED_SHIM, reason="an ASan build of the shim comes with scripts/test.sh --sanitizers")
def test_the_churn_under_an_asan_build_of_the_shim(tmp_path):
    python, described = INTERPRETERS[0]
    libasan = subprocess.run(["cc", "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    # CPython frees nothing at exit by design: leaks are not what this looks for.
    env = {"CUTRACE_PRELOAD_LIB": SANITIZED_SHIM, "LD_PRELOAD": libasan,
           "ASAN_OPTIONS": "detect_leaks=0:verify_asan_link_order=0:halt_on_error=1"}
    # The sanitized shim is the one the program runs with, beside the sanitizer's runtime.
    proc, _ = profile(tmp_path, [python, "-c", "print(open('/proc/self/maps').read())"], env=sim_env(**env), name="maps")
    assert SANITIZED_SHIM in proc.stdout and "libasan" in proc.stdout
    pairs, _, _ = run_scenario(tmp_path, python, described, "churn", 25, env_extra=env)
    assert len(pairs) == 100 and all(stack == x["expected"][:DEPTH] for x, stack in pairs)


SHARED = [(p, d) for p, d in INTERPRETERS if d[3]]


def run_in_host(tmp_path, source, python, described, scenario):
    """frames.py SCENARIO run by an executable that runs Python as python3 does, built from `source`
    against the shared libpython of `python`; what run_scenario returns."""
    _, include, _, shared = described
    host = tmp_path / "python3"
    subprocess.run(["cc", "-rdynamic", "-I", include, "-I", str(Path(include) / "internal"), str(HERE / source), "-o", str(host), str(shared),
                    "-Wl,-rpath," + str(shared.parent), "-ldl"], check=True, capture_output=True, text=True, timeout=120)
    prefix = subprocess.run([python, "-c", "import sys; print(sys.base_prefix)"], capture_output=True, text=True,
                            check=True).stdout.strip()
    return run_scenario(tmp_path, str(host), described, scenario, env_extra={"PYTHONHOME": prefix})


@pytest.mark.skipif(not SHARED, reason="needs a CPython with a shared libpython to embed")
def test_frames_that_cpythons_own_api_contradicts_are_refused_from_then_on(tmp_path):
    python, described = SHARED[0]
    pairs, trace, proc = run_in_host(tmp_path, "lying_host.c", python, described, "routes")
    # The first slow call made with the GIL held (the script's cudaMalloc through ctypes.PyDLL at
    # import, or at the latest the PyDLL copy) compares the frames read without it with the C API's,
    # which disagree: from then on no call has Python frames, none has wrong ones, and it is said once.
    assert [x["route"] for x, _ in pairs] == ["extension", "cdll", "pydll"]
    assert pairs[2][1] is None
    assert all(stack is None or [f.split(" (")[0] for f in stack] == [f.split(" (")[0] for f in x["expected"][:DEPTH]]
               for x, stack in pairs)
    version = version_text(described)
    said = [line for line in proc.stderr.splitlines() if "Python frames" in line]
    assert len(said) == 1 and said[0].endswith(
        f"{version} gave other frames through its C API than those read without the GIL, so the stacks of its slow "
        "calls have no Python frames."), said


# A newer interpreter is read through what it states of itself (_Py_DebugOffsets); one that states
# nothing, or another version than it reports, is refused.
UNSTATED = [(p, d) for p, d in SHARED if d[0][:2] < (3, 13)][:1]
STATING = [(p, d) for p, d in SHARED if d[0][:2] >= (3, 13)][:1]
NEWER = ([(*UNSTATED[0], "does not state its layout at the start of its _PyRuntime (_Py_DebugOffsets)")] if UNSTATED else []) + \
        ([(*STATING[0], "states another version in its _PyRuntime than it reports")] if STATING else [])


@pytest.mark.skipif(not NEWER, reason="needs a CPython with a shared libpython to embed")
@pytest.mark.parametrize("python,described,why", NEWER, ids=[f"{'.'.join(map(str, d[0][:2]))}" for _, d, _ in NEWER])
def test_an_unknown_interpreter_gets_native_stacks_and_one_warning_naming_it(tmp_path, python, described, why):
    pairs, trace, proc = run_in_host(tmp_path, "newer_host.c", python, described, "routes")
    # The program ran as it would have, its slow calls kept their native stacks, and none has Python
    # frames read by a guessed layout.
    assert len(pairs) == 3 and all(stack is None for _, stack in pairs)
    reason = f"CPython 3.14.0 {why}, so the stacks of its slow calls have no Python frames"
    said = [line for line in proc.stderr.splitlines() if "Python frames" in line]
    assert len(said) == 1 and said[0].startswith("cutrace: warning: process ") and said[0].endswith(reason + "."), said
    summary = metadata(trace, "End summary:")
    assert info(trace).count(said[0]) == 1  # the trace keeps the warning
    assert "python_frames.interpreter" not in summary


@pytest.mark.skipif(not STATING, reason="needs a CPython 3.13 or newer with a shared libpython to embed")
def test_a_layout_stated_in_a_form_no_cpython_has_is_refused(tmp_path):
    python, described = STATING[0]
    pairs, trace, proc = run_in_host(tmp_path, "forged_host.c", python, described, "routes")
    assert len(pairs) == 3 and all(stack is None for _, stack in pairs)
    said = [line for line in proc.stderr.splitlines() if "Python frames" in line]
    assert len(said) == 1 and said[0].endswith(
        f"{version_text(described)} states its layout in a form this build of cutrace does not know, so the stacks "
        "of its slow calls have no Python frames."), said
    assert "python_frames.interpreter" not in metadata(trace, "End summary:")
