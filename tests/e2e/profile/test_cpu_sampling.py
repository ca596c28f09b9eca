"""CPU sampling (-s cpu, --sampling-frequency): perf events on the program and every thread and process it
starts, read by the recorder into the sampled threads' records. A program with known CPU work (2 units
in burn_a, 1 in burn_b on the main thread, 1 in burn_in_thread on a second thread) must be sampled in
those proportions, at about the frequency asked, with frame-pointer stacks named from the binary; a
machine that forbids perf events says so in one line; samples of processes the trace has no thread of
are counted, never silently lost."""
import collections
import csv
import io
import subprocess
from pathlib import Path

from conftest import APPS, CUTRACE, app, calls, info, metadata, profile, sim_env

SOURCE = Path(__file__).resolve().parents[2] / "apps" / "cpu_burn.cpp"


def samples_by_function(trace):
    proc = subprocess.run([str(CUTRACE), "stats", "--report", "cpu_sample_sum", "--format", "csv", str(trace)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    # A row is a function in a module: one name may head rows of several modules ([unknown] often does).
    by_function = collections.Counter()
    for r in csv.DictReader(io.StringIO(proc.stdout)):
        by_function[r["Function"]] += int(r["Samples"])
    return by_function


def test_samples_land_in_the_functions_that_used_the_cpu_in_proportion(tmp_path):
    unit_ms = 150
    proc, trace = profile(tmp_path, [app("cpu_burn"), str(unit_ms)], options=["-s", "cpu"])
    assert proc.stdout == f"burned {4 * unit_ms} ms\n"
    rows = samples_by_function(trace)
    a, b, worker = rows["burn_a"], rows["burn_b"], rows["burn_in_thread"]
    # 1000 per second of each thread's CPU time: about 600 in all (the loops read the clock rarely).
    total = sum(rows.values())
    assert 0.7 * 600 <= total <= 1.15 * 600, rows
    assert a + b + worker >= 0.95 * total, rows
    assert 1.5 <= a / b <= 2.6 and 0.6 <= worker / b <= 1.6, rows
    assert metadata(trace)["sampling.frequency"] == "1000"
    # The summary counts every sample written; the report, those with an instruction to name (perf
    # can deliver one without a user-space frame on a loaded machine, seen once under ctest -j2).
    written = int(metadata(trace, "End summary:")["cpu_samples"])
    assert total <= written <= total + max(2, written // 100), (total, written)

    events, doc = calls(trace, tmp_path, domains=None)
    samples = [e for e in doc["traceEvents"] if e.get("cat") == "cpu_sample"]
    assert len(samples) == total
    by_thread = collections.Counter((e["tid"], e["name"]) for e in samples)
    main_tid = [e["tid"] for e in events if e["name"] == "cudaGetDevice"][0]
    assert by_thread[(main_tid, "burn_a")] == a and by_thread[(main_tid, "burn_b")] == b
    (worker_tid,) = {e["tid"] for e in samples if e["name"] == "burn_in_thread"}
    assert worker_tid != main_tid
    # The worker made no CUDA call and claimed no ring: it has a track of its own, named.
    assert any(e.get("ph") == "M" and e["name"] == "thread_name" and e["tid"] == worker_tid for e in doc["traceEvents"])
    # Built with frame pointers: the kernel's call chain names main at the line that called burn_a.
    lines = SOURCE.read_text().splitlines()
    call_line = next(n for n, line in enumerate(lines, 1) if "burn_a(2 * unit);" in line)
    stacks = [e["args"]["stack"] for e in samples if e["name"] == "burn_a"]
    assert sum(s[1] == f"main (cpu_burn.cpp:{call_line})" for s in stacks) >= 0.9 * len(stacks), stacks[:3]


def test_the_frequency_asked_for_is_the_one_taken(tmp_path):
    proc, trace = profile(tmp_path, [app("cpu_burn"), "100"], options=["-s", "process-tree", "--sampling-frequency",
                                                                      "4000"])
    total = sum(samples_by_function(trace).values())
    assert 0.6 * 1600 <= total <= 1.15 * 1600, total
    assert metadata(trace)["sampling.frequency"] == "4000"


def test_without_perf_events_threads_sample_themselves_with_a_timer(tmp_path):
    # perf_event_open fails in the launcher (as under kernel.perf_event_paranoid 3 or a container that
    # forbids it): the run goes on, says so in one line, and each thread that makes a traced call samples
    # itself with a timer on its CPU clock. The worker thread makes none: it has no samples.
    env = sim_env()
    env["LD_PRELOAD"] = str(APPS / "libno_perf_events.so")
    out = tmp_path / "trace"
    proc = subprocess.run([str(CUTRACE), "profile", "-o", str(out), "-s", "cpu", "--", app("cpu_burn"), "150"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "burned 600 ms\n"
    paranoid = Path("/proc/sys/kernel/perf_event_paranoid").read_text().strip()
    lines = [l for l in proc.stderr.splitlines() if "perf events" in l]
    assert lines == [f"cutrace: warning: perf events are not available here (perf_event_open: Permission denied; "
                     f"kernel.perf_event_paranoid is {paranoid}, or a container forbids perf events (it needs "
                     "perf_event_open allowed and paranoid 2 or lower)), so CPU samples come from a timer signal in "
                     "each thread that makes a traced call, not from other threads, and at most at the kernel's tick rate."], proc.stderr
    trace = Path(str(out) + ".cutrace")
    rows = samples_by_function(trace)
    a, b = rows["burn_a"], rows["burn_b"]
    # 450 ms of the main thread's CPU time. A timer on a thread's CPU clock is checked on the kernel's
    # tick (CONFIG_HZ: 250 per second here, 100 to 1000 elsewhere) while the thread is the one running:
    # at most 450 samples, and on a busy machine (a thread preempted between ticks) fewer and uneven:
    # under two competing busy loops the 2:1 split once came out 31:36. So only that both functions
    # are found, with about the samples the ticks allow, is asserted.
    assert 20 <= a + b <= 1.15 * 450 and a > 0 and b > 0, rows
    assert "burn_in_thread" not in rows
    meta = metadata(trace)
    assert (meta["sampling.method"], meta["sampling.frequency"]) == ("timer", "1000")
    _, doc = calls(trace, tmp_path, domains=None)
    stacks = [e["args"]["stack"] for e in doc["traceEvents"] if e.get("cat") == "cpu_sample" and e["name"] == "burn_a"]
    lines_of = SOURCE.read_text().splitlines()
    call_line = next(n for n, line in enumerate(lines_of, 1) if "burn_a(2 * unit);" in line)
    # The shim's stacks, through the signal frame: burn_a, then main at the calling line.
    assert sum(len(s) > 1 and s[1] == f"main (cpu_burn.cpp:{call_line})" for s in stacks) >= 0.9 * len(stacks), stacks[:3]


def test_samples_of_a_process_the_trace_has_no_thread_of_are_counted(tmp_path):
    # A shell loop makes no CUDA call: the trace has no thread of it to hold its samples.
    script = "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; echo done"
    proc, trace = profile(tmp_path, ["/bin/sh", "-c", script], options=["-s", "cpu"])
    assert proc.stdout == "done\n"
    text = info(trace)
    line = next(l for l in text.splitlines() if l.strip().startswith("cpu_samples.untraced"))
    untraced = int(line.split()[-1].replace(",", ""))
    assert untraced > 50, text
    assert (f"cutrace: warning: {untraced} CPU samples of processes that recorded nothing (no CUDA call, no traced "
            "library) were left out: the trace has no thread of theirs to put them on.") in proc.stderr, proc.stderr


def test_context_switches_show_each_sleep_off_cpu(tmp_path):
    # Eight sleeps of 30 ms (four usleep, four nanosleep) on the main thread.
    proc, trace = profile(tmp_path, [app("osrt_app"), "sleeps", "4", "0", "30", "0"],
                          options=["--cpuctxsw", "process-tree", "-s", "cpu"])
    assert proc.stdout == "nanosleep 4\nusleep 4\n"
    table = subprocess.run([str(CUTRACE), "stats", "--report", "cpu_ctxsw_sum", "--format", "csv", str(trace)],
                           capture_output=True, text=True, timeout=60)
    assert table.returncode == 0, table.stderr
    # The main thread's; cutrace's own threads of the process (its GPU activity flusher) are there too.
    (row,) = [r for r in csv.DictReader(io.StringIO(table.stdout)) if r["Tid"] == r["Pid"]]
    assert int(row["Blocked"]) >= 8 and int(row["Max Off (ns)"]) >= 30_000_000, row
    assert 240_000_000 <= int(row["Off-CPU Time (ns)"]) <= 400_000_000, row
    assert metadata(trace)["cpuctxsw"] == "process-tree"
    _, doc = calls(trace, tmp_path, domains=None)
    begins = {}
    long_ones = 0
    for e in doc["traceEvents"]:
        if e.get("cat") != "off_cpu" or e["tid"] != int(row["Tid"]):
            continue
        if e["ph"] == "b":
            begins[e["id"]] = e["ts"]
        else:
            long_ones += e["ts"] - begins.pop(e["id"]) >= 29_000  # microseconds
    assert long_ones == 8 and not begins
