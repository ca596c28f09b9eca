"""Shared helpers for end-to-end tests: run programs under `cutrace profile` on the simulated CUDA
device and read the resulting traces back through the public tools (`cutrace stats/export/info`)."""
import csv
import io
import json
import os
import struct
import subprocess
from pathlib import Path

import pytest

BUILD = Path(os.environ.get("CUTRACE_BUILD_DIR", Path(__file__).resolve().parents[3] / "build"))
# The launcher and recorder under test; a sanitizer build's, with the programs, the simulated device
# and the shim (CUTRACE_PRELOAD_LIB) of a plain build, which uninstrumented programs can load.
TOOLS = Path(os.environ.get("CUTRACE_TOOLS_DIR", BUILD / "bin"))
CUTRACE = TOOLS / "cutrace"
# The commands that read traces (stats, export, ...), where another build's are asked for: scripts/test.sh's
# TSan pass takes them from the plain build, as they run one thread, where TSan has no race to find
# (ASan's pass runs them sanitized).
READING_CUTRACE = (Path(os.environ["CUTRACE_READING_TOOLS_DIR"]) / "cutrace"
                   if os.environ.get("CUTRACE_READING_TOOLS_DIR") else CUTRACE)
APPS = BUILD / "tests" / "bin"
SIM_LIB = BUILD / "simcuda" / "lib"
REAL_CUDA_LIB = Path(os.environ.get("CUDA_LIB_DIR", "/usr/local/cuda/lib64"))
# What hands over to Python (recipes, analyze, view, the Parquet and Arrow exports) loads the tables
# library into the interpreter: the plain build's, also when the tools under test are a sanitizer's
# build (an uninstrumented Python cannot load theirs), whichever test files run.
os.environ.setdefault("CUTRACE_TABLES_LIBRARY", str(BUILD / "lib" / "libcutrace-tables.so"))


def _cmake_cache(key):
    try:
        for line in (BUILD / "CMakeCache.txt").read_text().splitlines():
            if line.startswith(key + ":"):
                return line.split("=", 1)[1]
    except OSError:
        pass
    return None


# CUDA 12 beside 13 (-DCUTRACE_CUDA12=ON): the real CUDA 12 libraries from the pinned wheels, and the
# simulated ones with CUDA 12's sonames. None when the build left CUDA 12 out.
CUDA12 = _cmake_cache("CUTRACE_CUDA12") in ("ON", "TRUE", "1")
REAL_CUDA12_LIB = Path(_cmake_cache("CUTRACE_CUDA12_ROOT") or "") / "lib" if CUDA12 else None
SIM_LIB12 = BUILD / "simcuda" / "lib12"
# The CUDA 13.2 runtime and CUPTI of PyTorch's wheels (scripts/cuda13.2-wheels.txt), newer than the
# toolkit's; None when the build did not fetch them.
_CUDA13_2_ROOT = _cmake_cache("CUTRACE_CUDA13_2_ROOT")
CUDA13_2_LIB = Path(_CUDA13_2_ROOT) / "lib" if _CUDA13_2_ROOT and (Path(_CUDA13_2_ROOT) / "lib").is_dir() else None


def app(name):
    path = APPS / name
    if not path.exists():
        pytest.fail(f"test program {path} is missing: build the project first")
    return str(path)


def sim_env(**extra):
    """The environment a program needs to run on the simulated device."""
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = str(SIM_LIB) + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    env.pop("LD_PRELOAD", None)
    env.pop("CUTRACE_SESSION", None)
    # Under scripts/test.sh --sanitizers the launcher is an ASan build; a test that preloads a tool of
    # its own would otherwise have ASan refuse to start it (the runtime must come first).
    # Uninstrumented programs ignore the variable.
    env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"
    env.update({k: str(v) for k, v in extra.items()})
    return env


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def orphaned_sessions():
    """This user's cutrace shared-memory objects whose launcher and recorder have both exited: what a
    run left behind. (Sessions of runs still going on, from tests running beside this one, are not
    counted; nor is one whose launcher was killed while its recorder still records the program.)"""
    prefix = f"cutrace-{os.getuid()}-"
    orphans = set()
    for name in os.listdir("/dev/shm"):
        if not name.startswith(prefix):
            continue
        try:
            with open(f"/dev/shm/{name}", "rb") as f:
                header = f.read(160)
        except OSError:
            continue  # removed meanwhile
        if len(header) < 160:
            continue
        # SessionHeader: launcher_pid at 128, recorder_pid at 156 (asserted in include/cutrace/abi.h).
        launcher_pid, recorder_pid = struct.unpack_from("<I", header, 128)[0], struct.unpack_from("<I", header, 156)[0]
        if not _alive(launcher_pid) and not (recorder_pid and _alive(recorder_pid)):
            orphans.add(name)
    return orphans


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "reads_traces: the file's subject is what the commands that read traces give (reports, exports); "
        "left out where those commands are another build's than the recorder's (CUTRACE_READING_TOOLS_DIR)")
    config.addinivalue_line(
        "markers", "reads_traces_in_python: the file's subject is what the cutrace package gives (recipes, analyze, "
        "tables, Parquet, Kineto); left out where the tools under test are another build's than the tables library "
        "the package loads")


def _build_of_tools(tools):
    return tools.resolve().parent


def pytest_collection_modifyitems(config, items):
    # A sanitized pass records with its launcher and recorder but reads with a plain build's code: the
    # package's tables library always (an uninstrumented Python cannot load a sanitized one), and under
    # TSan the reading commands too. Files whose subject is that reading would repeat the plain pass,
    # their recordings being what every other file records; they are left out there.
    plain_python = Path(os.environ["CUTRACE_TABLES_LIBRARY"]).resolve().parent.parent != _build_of_tools(TOOLS)
    plain_reading = _build_of_tools(READING_CUTRACE.parent) != _build_of_tools(TOOLS)
    left_out = [item for item in items
                if (plain_reading and item.get_closest_marker("reads_traces"))
                or (plain_python and item.get_closest_marker("reads_traces_in_python"))]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if item not in left_out]


@pytest.fixture(autouse=True)
def no_session_outlives_its_run():
    before = orphaned_sessions()
    yield
    assert orphaned_sessions() - before == set(), "a session's shared memory was left behind"


def profile(tmp_path, command, env=None, options=(), name="trace", timeout=120, check=True, **popen):
    """Runs `cutrace profile -o <tmp>/<name> <options> -- <command>`; returns (CompletedProcess, trace path)."""
    out = tmp_path / name
    args = [str(CUTRACE), "profile", "-o", str(out), *options, "--", *command]
    proc = subprocess.run(args, env=env or sim_env(), capture_output=True, text=True, timeout=timeout, **popen)
    trace = Path(str(out) + ".cutrace")
    if check and proc.returncode != 0:
        raise AssertionError(f"cutrace profile exited {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc, trace


def run_tool(*args, check=True, expect=0):
    """Runs a cutrace tool; with check, its exit code must be `expect` (3: a cut-off or damaged trace)."""
    proc = subprocess.run([str(READING_CUTRACE), *map(str, args)], capture_output=True, text=True, timeout=120)
    if check and proc.returncode != expect:
        raise AssertionError(f"cutrace {' '.join(map(str, args))} exited {proc.returncode}:\n{proc.stderr}")
    return proc


def api_sum(trace, report="cuda_api_sum", show_internal=True, expect=0):
    """A summary report as {name: row} with numeric columns converted. Internal calls (kernel
    registration) are included unless asked: the tests count them against what nvcc's generated code
    must have made. `expect`: the exit code of stats (3: a cut-off or damaged trace)."""
    proc = run_tool("stats", "--report", report, "--format", "csv", "--show-internal",
                    "true" if show_internal else "false", trace, check=False)
    if proc.returncode == 4:  # nothing to show: SKIPPED, as nsys says it
        assert "SKIPPED: " in proc.stderr, proc.stderr
        return {}
    if proc.returncode != expect:
        raise AssertionError(f"cutrace stats of {trace} exited {proc.returncode}:\n{proc.stderr}")
    lines = [l for l in proc.stdout.splitlines() if l and not l.startswith("#")]
    rows = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines))):
        rows[row["Name"]] = {k: (float(v) if k != "Name" else v) for k, v in row.items()}
    return rows


def calls(trace, tmp_path, domains=("cuda_runtime",)):
    """Every recorded call of `domains` (None: all) as the Perfetto export shows it: list of dicts with
    name, cat (the domain), pid, tid, ts, dur, args. Internal calls are included, and a call is named by
    its entry point (the export shows __cudaLaunchKernel as cudaLaunchKernel and keeps the entry point
    in args), which is what the programs count themselves. The simulated runtime makes driver calls
    inside its own, as the real one does: runtime-only by default, so that programs' counts compare."""
    out = tmp_path / (Path(trace).stem + ".json")
    run_tool("export", "--type", "perfetto-json", "-o", out, "--force-overwrite", "true", "--show-internal", "true", trace)
    with open(out) as f:
        doc = json.load(f)
    # GPU work from CUPTI ("cuda_gpu") is on tracks of its own, and no call.
    check_results(e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") not in ("cuda_gpu", "nvtx"))
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") != "cuda_gpu" and
              (domains is None or e.get("cat") in domains)]
    for e in events:
        e["name"] = e["args"].get("entry_point", e["name"])
    return events, doc


# The name of each named domain's success code (0).
SUCCESS_NAMES = {"cudaSuccess", "CUDA_SUCCESS", "CUBLAS_STATUS_SUCCESS", "CUDNN_STATUS_SUCCESS", "CUSOLVER_STATUS_SUCCESS",
                 "CUSPARSE_STATUS_SUCCESS", "CUFFT_SUCCESS"}


def check_results(calls):
    """A call's result as the Perfetto exports give it: a success only by its name (`result_name`, e.g.
    cudaSuccess, which implies 0), a failure by its number and its name, a result that has no name (OS
    runtime, MPI, pointers) by its number alone."""
    for e in calls:
        a = e["args"]
        if "result_name" in a:
            succeeded = a["result_name"] in SUCCESS_NAMES
            assert ("result" in a) != succeeded, e
            assert succeeded or a["result"] != 0, e


def result(call):
    """The numeric result of a call as check_results finds it: 0 for a success, which shows only its name."""
    return call["args"]["result"] if "result" in call["args"] or "result_name" not in call["args"] else 0


def counts(events):
    result = {}
    for e in events:
        result[e["name"]] = result.get(e["name"], 0) + 1
    return result


def info(trace, expect=0):
    return run_tool("info", trace, expect=expect).stdout


def metadata(trace, section="Metadata:"):
    """The "Metadata:" section of `cutrace info` (or another of its key-value sections, such as "End
    summary:"): {key: value}."""
    result, inside = {}, False
    for line in info(trace).splitlines():
        if line == section:
            inside = True
        elif inside and not line.strip():
            break
        elif inside:
            key, _, value = line.strip().partition(" ")
            result[key] = value.strip()
    return result


def info_totals(text):
    """The numeric "name value" lines of `cutrace info` (totals), e.g. {"dropped": 0, "lost_no_slot": 0}."""
    totals = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].replace(",", "").isdigit():
            totals.setdefault(parts[0], int(parts[1].replace(",", "")))
    return totals


def on_a_terminal(args):
    """Runs a cutrace command with its stderr on a pseudo-terminal; returns (exit code, what it wrote there)."""
    import pty
    main, terminal = pty.openpty()
    proc = subprocess.Popen([str(CUTRACE), *map(str, args)], stdout=subprocess.DEVNULL, stderr=terminal)
    os.close(terminal)
    out = b""
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:  # EIO once the command closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(main)
    return proc.wait(timeout=120), out.decode(errors="replace")


def program_calls(stdout):
    """The counts a test program prints itself, one "calls NAME N" line per function it called."""
    return {p[1]: int(p[2]) for p in (l.split() for l in stdout.splitlines()) if len(p) == 3 and p[0] == "calls"}


def api_trace(trace, show_internal=False):
    """`cutrace stats --report api_trace` as rows: times and depth as numbers, the arguments as {name: text}."""
    proc = run_tool("stats", "--report", "api_trace", "--format", "csv", "--show-internal",
                    "true" if show_internal else "false", trace)
    lines = [l for l in proc.stdout.splitlines() if l and not l.startswith("#")]
    rows = list(csv.DictReader(io.StringIO("\n".join(lines))))
    for r in rows:
        for k in ("Start (ns)", "Duration (ns)", "Self (ns)", "Depth"):
            r[k] = int(r[k])
        r["args"] = dict(a.split("=", 1) for a in r["Args"].split(", ") if "=" in a) if r["Args"] else {}
    return rows
