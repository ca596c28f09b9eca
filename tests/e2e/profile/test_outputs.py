"""Outputs that can be trusted: a trace name is claimed by one run at a time, parallel runs in one
directory each get their own default name, and a trace still being written is reported as such."""
import os
import re
import subprocess
import time
from pathlib import Path

from conftest import CUTRACE, api_sum, app, info, profile, run_tool, sim_env


def start(args, cwd, env=None):
    return subprocess.Popen([str(CUTRACE), "profile", *args], cwd=cwd, env=env or sim_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def leftovers(directory):
    return sorted(p.name for p in Path(directory).iterdir() if p.name.endswith((".part", ".lock")))


def test_runs_started_together_for_one_name_one_writes_it_whole_the_others_start_nothing(tmp_path):
    # The winner's program waits until the other runs have been refused, so every one of them asks
    # while it holds the name.
    command = ["sh", "-c", f'touch "ran.$$"; while [ ! -e go ]; do sleep 0.01; done; exec {app("sim_threads")} 2 1000 '
               "concurrent"]
    runs = [start(["-f", "true", "-o", "same", "--", *command], tmp_path) for _ in range(4)]
    deadline = time.monotonic() + 120
    while sum(p.poll() is not None for p in runs) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    (tmp_path / "go").touch()
    results = [(p.wait(timeout=120), *p.communicate()) for p in runs]
    winners = [r for r in results if r[0] == 0]
    refused = [r for r in results if r[0] != 0]
    assert len(winners) == 1, results
    for code, _, err in refused:
        assert code == 1
        assert re.fullmatch(
            rf"cutrace profile: {tmp_path}/same\.cutrace is being written by cutrace run \d+ on host \S+; wait for "
            r"that run to end, or give each run its own name with -o \(for example -o run%p, or -o "
            r"rank%q\{SLURM_PROCID\}\)\.\n", err), err
    assert len(list(tmp_path.glob("ran.*"))) == 1, "a refused run started its program"
    trace = tmp_path / "same.cutrace"
    assert f"-> {trace} (" in winners[0][2]
    assert "complete:" in info(trace)
    assert api_sum(trace)["cudaGetDevice"]["Num Calls"] == 2 * 1000
    assert leftovers(tmp_path) == []


def test_parallel_runs_without_a_name_each_get_their_own_report(tmp_path):
    runs = [start(["--", app("sim_threads"), "1", str(100 * (i + 1)), "concurrent"], tmp_path) for i in range(4)]
    results = [(p.wait(timeout=120), *p.communicate()) for p in runs]
    assert [r[0] for r in results] == [0] * 4, results
    named = [re.search(r"-> (\S+) \(", err).group(1) for _, _, err in results]
    assert sorted(named) == [str(tmp_path / f"report{n}.cutrace") for n in range(1, 5)], named
    # Each summary names the file with that run's own calls.
    for i, trace in enumerate(named):
        assert api_sum(trace)["cudaGetDevice"]["Num Calls"] == 100 * (i + 1)
    assert leftovers(tmp_path) == []


def test_a_trace_being_written_is_reported_in_progress(tmp_path):
    command = ["sh", "-c", f'{app("sim_threads")} 1 100 concurrent && touch called && sleep 3']
    run = start(["-o", "live", "--", *command], tmp_path)
    trace = tmp_path / "live.cutrace"
    deadline = time.monotonic() + 60
    while not (tmp_path / "called").exists():
        assert time.monotonic() < deadline and run.poll() is None
        time.sleep(0.02)
    proc = run_tool("info", trace, expect=1)
    assert re.fullmatch(
        rf"cutrace info: {trace}: not there yet: cutrace run {run.pid} on host \S+ is still writing it \(its data "
        rf"so far is in {trace}\.\*\.part\); read it when that run has ended\.\n", proc.stderr), proc.stderr
    parts = list(tmp_path.glob("live.cutrace.*.part"))
    assert len(parts) == 1
    proc = run_tool("stats", parts[0], check=False)
    assert f"in progress: cutrace run {run.pid} on host " in proc.stderr, proc.stderr
    assert "recorder did not finish" not in proc.stderr
    assert proc.returncode in (1, 3), proc.stderr
    assert run.wait(timeout=120) == 0
    assert "complete:" in info(trace)
    assert leftovers(tmp_path) == []


def test_calls_of_a_child_that_outlives_the_command_are_kept_by_default(tmp_path):
    # The command exits at once; its background child makes every call afterwards.
    command = ["sh", "-c", f'({app("sim_threads")} 2 3000 concurrent > /dev/null; touch {tmp_path}/done) & exit 0']
    proc, trace = profile(tmp_path, command)
    assert (tmp_path / "done").exists()
    assert "warning" not in proc.stderr, proc.stderr
    assert api_sum(trace)["cudaGetDevice"]["Num Calls"] == 2 * 3000


def test_wait_primary_stops_with_the_command_and_says_what_was_cut_off(tmp_path):
    command = ["sh", "-c", f'(sleep 0.3; exec {app("sim_threads")} 1 100 concurrent > /dev/null) & exit 0']
    proc, trace = profile(tmp_path, command, options=["--wait", "primary"])
    assert re.search(r"cutrace: warning: \d+ process(es)? the command started (was|were) still running when it "
                     r"exited and recording stopped \(--wait primary\): calls made after that are not in the trace; "
                     r"--wait all waits for them\.\n", proc.stderr), proc.stderr
    assert "cudaGetDevice" not in api_sum(trace)
    # The trace keeps the warning: the tools repeat it.
    shown = run_tool("info", trace)
    assert "still running when it exited and recording stopped (--wait primary)" in shown.stdout + shown.stderr
