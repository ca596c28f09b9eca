"""Capture ranges: -c cudaProfilerApi (runtime and driver calls), -c nvtx with -p in the default
domain, a named domain and any domain, --capture-range-end stop, stop-shutdown, repeat[:N] and none
(and the older --stop-on-range-end), -y and -d with --kill, several processes each gating
themselves (a forked child starting in its parent's state), and one clear warning for a process that
never opened a range."""
import csv
import io
import re
import signal
import sys
from pathlib import Path

from conftest import api_sum, app, info, profile, run_tool


def counted(trace):
    return {name: int(row["Num Calls"]) for name, row in api_sum(trace, show_internal=False).items()}


def capture_line(trace):
    return [l.strip() for l in info(trace).splitlines() if l.strip().startswith("capture ")]


def test_profiler_api_ranges_gate_exactly_the_calls_between_start_and_stop(tmp_path):
    for route, stop in (("profiler", "cudaProfilerStop"), ("driver", "cuProfilerStop")):
        proc, trace = profile(tmp_path, [app("capture_app"), route, "4", "25"], name=route,
                              options=["-c", "cudaProfilerApi", "--capture-range-end", "repeat"])
        assert proc.stdout == "inside 100 outside 125\n" and proc.returncode == 0
        # Every call of the four ranges, nothing from outside them; the stop call closes its range.
        assert counted(trace) == {"cudaGetDeviceCount": 100, stop: 4}
        assert re.search(r"capture +process \d+: 4 ranges", capture_line(trace)[0])


def test_range_end_modes(tmp_path):
    command = [app("capture_app"), "profiler", "4", "10"]
    cases = [(["--capture-range-end", "stop"], 10), (["--capture-range-end=repeat:3"], 30),
             (["--capture-range-end", "none"], 40 + 10 * 4), (["--stop-on-range-end", "true"], 10),
             (["--stop-on-range-end=false"], 40 + 10 * 4)]
    for i, (options, inside) in enumerate(cases):
        _, trace = profile(tmp_path, command, name=f"end{i}", options=["-c", "cudaProfilerApi", *options])
        calls = counted(trace)
        # `none`: once the first range opens, capture goes on: the 3 later outside phases and the last count too.
        assert calls.get("cudaGetDeviceCount", 0) + calls.get("cudaGetDevice", 0) == inside, (options, calls)


def test_stop_shutdown_ends_the_program_after_its_first_range(tmp_path):
    # nsys's default end: record the first range, then end the program with --kill's signal.
    proc, trace = profile(tmp_path, [app("capture_app"), "profiler", "200000", "10"], options=["-c", "cudaProfilerApi"],
                          check=False)
    assert proc.returncode == 128 + signal.SIGTERM, proc.stderr
    assert counted(trace)["cudaGetDeviceCount"] == 10
    # --kill none: the program runs to its end, recorded only in its first range.
    proc, trace = profile(tmp_path, [app("capture_app"), "profiler", "50", "10"], name="nokill",
                          options=["-c", "cudaProfilerApi", "--kill", "none"])
    assert proc.returncode == 0 and proc.stdout == "inside 500 outside 510\n"
    assert counted(trace) == {"cudaGetDeviceCount": 10, "cudaProfilerStop": 1}


def test_nvtx_ranges_by_name_and_domain(tmp_path):
    command = [app("capture_app"), "nvtx", "4", "10"]
    # Ranges 0 and 2 push "capture" in the default domain; 1 and 3 push the registered "capture" in
    # domain "dom"; "other" never opens a range.
    for i, (spec, ranges) in enumerate([("capture", 2), ("capture@dom", 2), ("capture@*", 4), ("other@dom", 0)]):
        proc, trace = profile(tmp_path, command, name=f"nvtx{i}",
                              options=["-c", "nvtx", "-p", spec, "--capture-range-end", "repeat"])
        assert proc.stdout == "inside 40 outside 54\n"
        assert counted(trace).get("cudaGetDeviceCount", 0) == 10 * ranges, spec
        if ranges:
            # The capturing range itself is in the trace.
            proc = run_tool("stats", "-r", "nvtx_sum", "-f", "csv", trace)
            rows = list(csv.DictReader(io.StringIO(proc.stdout)))
            assert sum(int(r["Instances"]) for r in rows) == ranges
        else:
            assert any("never opened a capture range (-c nvtx: the NVTX range other@dom)" in l
                       for l in proc.stderr.splitlines()), proc.stderr


def test_nvtx_capture_needs_a_range_name(tmp_path):
    proc = run_tool("profile", "-c", "nvtx", "--", app("capture_app"), "nvtx", "1", "1", check=False)
    assert proc.returncode == 2
    assert proc.stderr == ("cutrace profile: -c nvtx needs the range to follow: add -p RANGE, -p RANGE@DOMAIN or "
                           "-p RANGE@*.\n")


def test_delay_and_duration_bound_the_recording_and_end_the_program(tmp_path):
    proc, trace = profile(tmp_path, [app("capture_app"), "paced", "3000"], options=["-y", "0.5", "-d", "0.5"],
                          check=False)
    assert proc.returncode == 128 + signal.SIGTERM, proc.stderr
    made = int(proc.stdout.split()[-1])
    assert 500 <= made < 2900  # killed at about one second of its three (at most one call a millisecond)
    out = run_tool("stats", "-r", "cuda_api_trace", "-f", "csv", trace).stdout
    starts = [int(r["Start (ns)"]) for r in csv.DictReader(io.StringIO(out))]
    # One call a millisecond (or a little less often), between 0.5 s and 1 s of the session.
    assert 200 <= len(starts) <= 520, len(starts)
    # The delay runs from the program's release, a little after the session started (the trace's time 0).
    assert min(starts) >= 0.5e9 and max(starts) <= 1.3e9, (min(starts), max(starts))


def test_each_process_gates_itself(tmp_path):
    # Two processes: one opens ranges, the other never does.
    script = f"{app('capture_app')} profiler 2 10 && {app('capture_app')} driver 0 10"
    proc, trace = profile(tmp_path, ["sh", "-c", script], options=["-c", "cudaProfilerApi", "--capture-range-end",
                                                                    "repeat"])
    assert proc.stdout == "inside 20 outside 30\ninside 0 outside 10\n"
    assert counted(trace) == {"cudaGetDeviceCount": 20, "cudaProfilerStop": 2}
    warnings = [l for l in proc.stderr.splitlines() if "never opened a capture range" in l]
    assert len(warnings) == 1 and "driver 0 10" in warnings[0], proc.stderr


def test_a_published_nsys_command_line_runs_unchanged(tmp_path):
    # nsys profile -t cuda,nvtx,cudnn,cublas -s none -x true --capture-range=cudaProfilerApi
    #   --capture-range-end=stop -f true -o NAME --stats=false APP, with nsys replaced by cutrace.
    proc, trace = profile(tmp_path, [app("capture_app"), "profiler", "3", "5"],
                          options=["-t", "cuda,nvtx,cudnn,cublas", "-s", "none", "-x", "true",
                                   "--capture-range=cudaProfilerApi", "--capture-range-end=stop", "-f", "true",
                                   "--stats=false"])
    assert proc.returncode == 0 and proc.stdout == "inside 15 outside 20\n"
    assert counted(trace) == {"cudaGetDeviceCount": 5, "cudaProfilerStop": 1}


def test_nvtx_capture_without_tracing_nvtx(tmp_path):
    # -c nvtx needs the NVTX tool even when -t leaves nvtx out: ranges open capture, none is recorded.
    proc, trace = profile(tmp_path, [app("capture_app"), "nvtx", "4", "10"],
                          options=["-t", "cuda", "-c", "nvtx", "-p", "capture@*", "--capture-range-end", "repeat"])
    assert proc.stdout == "inside 40 outside 54\n"
    assert counted(trace) == {"cudaGetDeviceCount": 40}
    assert run_tool("stats", "-r", "nvtx_sum", trace, check=False).returncode == 4


def test_a_forked_child_starts_in_its_parents_capture_state(tmp_path):
    script = Path(__file__).resolve().parent / "scripts" / "capture_fork.py"
    proc, trace = profile(tmp_path, [sys.executable, str(script), "libcudart.so.13", "7"],
                          options=["-c", "cudaProfilerApi", "--capture-range-end", "repeat"])
    assert proc.stdout == "done\n"
    # Child A, forked inside the range, is recorded (its 7 calls); child B, forked after the stop, is not.
    out = run_tool("stats", "-r", "cuda_api_trace", "-f", "csv", trace).stdout
    rows = [r for r in csv.DictReader(io.StringIO(out)) if r["Name"] == "cudaGetDeviceCount"]
    assert len(rows) == 7 and len({r["Pid"] for r in rows}) == 1
