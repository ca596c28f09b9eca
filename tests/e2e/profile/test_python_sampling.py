"""Python sampling (--python-sampling, --python-sampling-frequency): a thread of each CPython process
takes the GIL at the frequency asked and records the Python stack of every other thread that runs
Python code, filed under that thread. A script with known work on two threads in turn (2.5 units of
CPU in spin_main on the main thread, 1 in spin_worker on a worker, each waiting in time.sleep while the
other spins), and a forked child, must be sampled in those functions, at those lines, on those
threads, in about those proportions; a run without the option has no Python samples."""
import os
import collections
import csv
import io
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CUTRACE, calls, info, metadata, profile, sim_env

SCRIPT = Path(__file__).resolve().parent / "scripts" / "python_sampling.py"


def line(marker):
    lines = SCRIPT.read_text().splitlines()
    (number,) = [n for n, text in enumerate(lines, 1) if text.rstrip().endswith("# LINE: " + marker)]
    return number


def frame(function, marker=None):
    return f"{function} (python_sampling.py:{line(marker or function)})"


def run(tmp_path, options, library=True, name="trace"):
    command = [sys.executable, str(SCRIPT), "0.5", "0.2"] + (["libcudart.so.13"] if library else [])
    # The work starts once the sampler runs: the proportions compare whole spins, not what is left of
    # the first one after a late start on a busy machine.
    sampling = any(o in ("--python-sampling=true", "true") for o in options)
    proc, trace = profile(tmp_path, command, options=options, name=name,
                          env=sim_env(WAIT_FOR_SAMPLER="1" if sampling else "0"))
    ids = {}
    for text in proc.stdout.splitlines():
        parts = text.split()
        if parts[0] in ("main", "worker"):
            ids[parts[0]] = int(parts[1])
        elif parts[0] == "child":
            ids["child"] = int(parts[2])
    assert proc.stdout.splitlines()[-1] == "done", proc.stdout
    _, doc = calls(trace, tmp_path, domains=None)
    samples = [e for e in doc["traceEvents"] if e.get("cat") == "python_sample"]
    return proc, trace, ids, samples


def by_function(trace):
    proc = subprocess.run([str(CUTRACE), "stats", "--report", "python_sample_sum", "--format", "csv", str(trace)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return {(r["Function"], Path(r["File"]).name): r for r in csv.DictReader(io.StringIO(proc.stdout))}


def test_samples_name_each_threads_python_stack_at_its_lines(tmp_path):
    proc, trace, ids, samples = run(tmp_path, ["--python-sampling=true"])
    assert set(ids) == {"main", "worker", "child"}
    spinning = {"main": [], "worker": [], "child": []}
    for s in samples:
        stack = s["args"]["python_stack"]
        assert s["name"] == stack[0].rsplit(" (", 1)[0]
        if stack[0] == frame("spin"):
            who = {"spin_main": "main", "spin_worker": "worker", "spin_child": "child"}[stack[1].split(" ")[0]]
            spinning[who].append(s)
            # Each thread's spin is on that thread's own track.
            assert s["tid"] == ids[who], (s, ids)
    main_stack = [frame("spin"), frame("spin_main"), frame("busy_main"), frame("main"),
                  frame("<module>")]
    assert spinning["main"] and all(s["args"]["python_stack"] == main_stack for s in spinning["main"])
    assert all(s["args"]["python_stack"][:2] == [frame("spin"), frame("spin_worker")] for s in spinning["worker"])
    # The worker's thread shows the functions it was waiting in, at the line that sleeps.
    waiting = [s["args"]["python_stack"][:2] for s in samples if s["tid"] == ids["worker"] and
               s["args"]["python_stack"][1:2] == [frame("wait_worker")]]
    assert waiting and all(w == [frame("wait_for"), frame("wait_worker")] for w in waiting)
    # A forked child that records gets a sampler of its own, and its functions are named in its process.
    assert spinning["child"] and all(s["pid"] == ids["child"] for s in spinning["child"])
    # Time spent spinning, 2.5 : 1 (the GIL's switch interval bounds the rate, not the frequency asked).
    main, worker = len(spinning["main"]), len(spinning["worker"])
    assert main >= 20 and 1.2 <= main / worker <= 5.0, (main, worker)

    rows = by_function(trace)
    for function in ("spin_main", "spin_worker", "spin_child"):
        assert int(rows[(function, "python_sampling.py")]["Self Samples"]) == 0
    assert int(rows[("spin_main", "python_sampling.py")]["Total Samples"]) == main
    assert int(rows[("spin", "python_sampling.py")]["Self Samples"]) == sum(map(len, spinning.values()))
    assert metadata(trace)["python_sampling.frequency"] == "1000"
    summary = info(trace)
    assert f"python_samples                 {len(samples)}" in summary, summary
    assert "python_samples.unplaced        0" in summary, summary

    # In the SQLite export: a row of CUTRACE_PYTHON_SAMPLES per sample, its stack in
    # CUTRACE_PYTHON_CALLCHAINS, each thread's stacks as the timeline shows them.
    subprocess.run([str(CUTRACE), "export", "--type", "sqlite", "-o", str(tmp_path / "py.sqlite"), str(trace)],
                   check=True, capture_output=True, timeout=120)
    db = sqlite3.connect(tmp_path / "py.sqlite")
    stacks = collections.defaultdict(list)
    tids = {}
    for sample, tid, function, file, line_number in db.execute("""
            SELECT s.id, s.globalTid % 16777216, c.function, c.file, c.line
            FROM CUTRACE_PYTHON_SAMPLES AS s JOIN CUTRACE_PYTHON_CALLCHAINS AS c ON c.id = s.id
            ORDER BY s.id, c.stackDepth"""):
        stacks[sample].append(f"{function} ({Path(file).name}:{line_number})")
        tids[sample] = tid
    exported = collections.Counter((tids[k], "|".join(v)) for k, v in stacks.items())
    shown = collections.Counter((s["tid"], "|".join(s["args"]["python_stack"])) for s in samples)
    assert exported == shown


def test_the_frequency_bounds_the_rate_and_no_option_means_no_samples(tmp_path):
    proc, trace, ids, samples = run(tmp_path, ["--python-sampling", "true", "--python-sampling-frequency", "20"],
                                    library=False)
    spin = [s for s in samples if s["args"]["python_stack"][1:2] == [frame("spin_main")]]
    # 0.5 s of the main thread's CPU at 20 per second of wall time (longer than the CPU time on a busy
    # machine), one more for the tick that may fall on either edge.
    busy = float(next(l.split()[1] for l in proc.stdout.splitlines() if l.startswith("busy ")))
    assert 3 <= len(spin) <= 20 * busy + 1, (len(spin), busy)
    assert metadata(trace)["python_sampling.frequency"] == "20"

    _, trace, _, samples = run(tmp_path, [], library=False, name="without")
    assert samples == []
    assert "python_samples" not in info(trace)


def test_a_program_that_is_not_python_runs_as_without_the_option(tmp_path):
    from conftest import app
    proc, trace = profile(tmp_path, [app("backtrace_app"), "1", "1"], options=["--python-sampling=true"])
    assert proc.stdout == "copies 1 queries 1 failed 0\n"
    events, doc = calls(trace, tmp_path, domains=None)
    assert not [e for e in doc["traceEvents"] if e.get("cat") == "python_sample"]
    assert "cutrace-pysample" not in info(trace)


def other_pythons():
    """Other CPython interpreters on this machine, 3.9 or newer (pyenv's), each tested where present;
    none with CUTRACE_TEST_INTERPRETERS=own (test_python_frames.py says why)."""
    found = []
    if os.environ.get("CUTRACE_TEST_INTERPRETERS") == "own":
        return [None]
    for candidate in sorted(Path("/root/.pyenv/versions").glob("3.*/bin/python3")):
        version = tuple(int(p) for p in candidate.parts[-3].split(".")[:2])
        if version >= (3, 9) and candidate.resolve() != Path(sys.executable).resolve():
            found.append(str(candidate))
    return found or [None]


@pytest.mark.parametrize("python", other_pythons())
def test_every_cpython_version_from_3_9_is_sampled_alike(tmp_path, python):
    if python is None:
        pytest.skip("no other CPython 3.9+ to test: none on this machine, or CUTRACE_TEST_INTERPRETERS=own")
    # A second of the main thread's CPU: about 150 samples here (0.3 s gave 45, and once, with both CPUs
    # busy with other tests, 8), so that ten stay where the sampling thread seldom gets a CPU.
    proc, trace = profile(tmp_path, [python, str(SCRIPT), "1.0", "0.1"], options=["--python-sampling=true"],
                          env=sim_env(WAIT_FOR_SAMPLER="1"))
    main_tid = int(proc.stdout.split()[1])
    _, doc = calls(trace, tmp_path, domains=None)
    spin = [e for e in doc["traceEvents"] if e.get("cat") == "python_sample" and
            e["args"]["python_stack"][:2] == [frame("spin"), frame("spin_main")]]
    assert len(spin) >= 10 and all(e["tid"] == main_tid for e in spin), (python, len(spin))
    assert spin[0]["args"]["python_stack"][2:] == [frame("busy_main"), frame("main"), frame("<module>")]
