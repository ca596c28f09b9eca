"""NVIDIA's own SQL: the queries of the Nsight Systems Analysis Guide's "Common SQLite Examples", kept
verbatim in sql/nsys/ (each file names its section), run unchanged on `cutrace export --type sqlite` of
traces of the simulated-device programs that record their data. The rows are asserted exactly where the
simulation fixes them (names, counts, order), their shape where times vary. docs/sql.md lists the
examples that cannot run on cutrace's data, and why."""
import sqlite3
from pathlib import Path

import pytest

from conftest import app, profile, run_tool, sim_env

pytestmark = pytest.mark.reads_traces

EXAMPLES = Path(__file__).resolve().parent / "sql" / "nsys"


def record(tmp_path_factory, name, command, options=(), env=None):
    tmp = tmp_path_factory.mktemp(name)
    _, trace = profile(tmp, command, options=options, env=env)
    out = tmp / f"{name}.sqlite"
    run_tool("export", "--type", "sqlite", "-q", "-o", out, trace)
    return out


def run_example(database, example, table=None):
    """Runs sql/nsys/<example>.sql statement by statement, in order, on a copy of the export (the examples
    add columns and tables); returns the connection and (columns, rows) of each statement that returns rows."""
    db = sqlite3.connect(":memory:")
    with sqlite3.connect(database) as source:
        source.backup(db)
    text = (EXAMPLES / f"{example}.sql").read_text()
    if table is not None:
        text = text.replace("TABLE_NAME", table)
    statement, results = "", []
    for line in text.splitlines(keepends=True):
        statement += line
        if sqlite3.complete_statement(statement):
            cursor = db.execute(statement)
            rows = cursor.fetchall()
            if cursor.description is not None:
                results.append(([c[0] for c in cursor.description], rows))
            statement = ""
    assert not statement.strip(), f"{example}.sql ends in an unfinished statement"
    return db, results


@pytest.fixture(scope="module")
def vector_add(tmp_path_factory):
    # 20 kernels, 30 copies; the memory calls of at least 1 us carry their stack.
    return record(tmp_path_factory, "vector_add", [app("sim_vector_add"), "10"],
                  ["-t", "cuda,nvtx,osrt", "--cudabacktrace", "memory:1000"])


@pytest.fixture(scope="module")
def nvtx(tmp_path_factory):
    # lib_b names category 7 "steps" in its domain and pushes "b.step" in it, 3 threads 20 times each.
    return record(tmp_path_factory, "nvtx", [app("nvtx_app"), "3", "20"])


@pytest.fixture(scope="module")
def rules(tmp_path_factory):
    # One NVTX push/pop range "step" around a 50 ms kernel and twenty 5 ms kernels.
    return record(tmp_path_factory, "rules", [app("sim_rules"), "avoid"], ["-t", "cuda,nvtx"],
                  env=sim_env(SIMCUDA_COPY_GBPS=1))


@pytest.fixture(scope="module")
def osrt(tmp_path_factory):
    # main sleeps 100 ms holding a mutex a second thread waits for, then joins it: each call its stack.
    return record(tmp_path_factory, "osrt", [app("osrt_app"), "threads", "100"],
                  ["-t", "osrt", "--osrt-threshold", "1000000", "--osrt-backtrace-threshold", "20000000"])


@pytest.fixture(scope="module")
def cpu_burn(tmp_path_factory):
    # main burns 3 units of CPU (2 in burn_a, 1 in burn_b), a second thread 1 (burn_in_thread).
    return record(tmp_path_factory, "cpu_burn", [app("cpu_burn"), "60"], ["-s", "cpu", "--cpuctxsw", "process-tree"])


def test_pid_and_tid_from_global_tid(vector_add):
    with sqlite3.connect(vector_add) as db:
        tables = [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY 1")
                  if any(c[1] == "globalTid" for c in db.execute(f"PRAGMA table_info({name})"))]
        threads = set(db.execute("SELECT pid, tid FROM CUTRACE_THREADS").fetchall())
        (pid,) = db.execute("SELECT pid FROM CUTRACE_PROCESSES").fetchone()
    assert {"CUPTI_ACTIVITY_KIND_RUNTIME", "OSRT_API", "ThreadNames", "CUTRACE_API_CALLS"} <= set(tables)
    for table in tables:
        _, [(columns, rows)] = run_example(vector_add, "pid_tid", table)
        assert columns == ["PID", "TID"], table
        assert rows or table not in ("CUPTI_ACTIVITY_KIND_RUNTIME", "OSRT_API", "ThreadNames"), table
        assert set(rows) <= threads and {p for p, _ in rows} <= {pid}, table


def test_kernels_correlated_with_the_calls_that_launched_them(vector_add):
    db, [(columns, rows)] = run_example(vector_add, "kernel_api_correlation")
    assert columns == ["name", "kernelName", "start", "end"]
    # Every launch got its kernel's name, and the example lists the 10 shortest of them, shortest first.
    launches = db.execute("""SELECT kernelName, end - start FROM CUPTI_ACTIVITY_KIND_RUNTIME
                             WHERE kernelName IS NOT NULL""").fetchall()
    assert len(launches) == 20 and sorted(k for k, _ in launches) == ["axpy"] * 10 + ["square_kernel"] * 10
    assert len(rows) == 10 and {(name, kernel) for name, kernel, _, _ in rows} <= {
        ("cudaLaunchKernel", "axpy"), ("cudaLaunchKernel", "square_kernel")}
    durations = [end - start for _, _, start, end in rows]
    assert durations == sorted(d for _, d in launches)[:10]


def test_cuda_calls_with_backtraces(vector_add):
    db, [(columns, rows)] = run_example(vector_add, "cuda_backtraces")
    assert columns == ["TID", "start", "end", "name", "callchainId", "stackDepth", "symbolName"]
    assert len(rows) == 11
    assert [(r[4], r[5]) for r in rows] == sorted((r[4], r[5]) for r in rows)
    # The first stacks are of sim_vector_add's cudaMalloc calls on its main thread, frame 0 innermost.
    (pid,) = db.execute("SELECT pid FROM CUTRACE_PROCESSES").fetchone()
    first = [r for r in rows if r[4] == rows[0][4]]
    assert {(r[0], r[3]) for r in rows} == {(pid, "cudaMalloc")}
    assert [r[5] for r in first] == list(range(len(first))) and "main" in [r[6] for r in first]


def test_nvtx_category_names_resolved(nvtx):
    db, [(columns, rows)] = run_example(nvtx, "nvtx_category_names")
    assert columns == ["start", "end", "globalTid", "eventType", "domainId", "category", "categoryName", "text"]
    (lib_b,) = db.execute("SELECT domainId FROM NVTX_EVENTS WHERE eventType = 75 AND text = 'lib_b'").fetchone()
    assert [row[3:] for row in rows] == [(59, lib_b, 7, "steps", "b.step")] * 60
    assert [row[0] for row in rows] == sorted(row[0] for row in rows)
    workers = {gtid for (gtid,) in db.execute("SELECT globalTid FROM CUTRACE_THREADS WHERE tid != pid")}
    assert {row[2] for row in rows} == workers and len(workers) == 3


def test_kernels_renamed_by_their_nvtx_range(rules):
    db, [(columns, rows)] = run_example(rules, "nvtx_kernel_ranges")
    assert columns == ["start", "end", "globalPid", "shortName", "nvtxRange"]
    (global_pid,) = db.execute("SELECT globalPid FROM CUTRACE_PROCESSES").fetchone()
    # At SIMCUDA_COPY_GBPS=1 a sleep_us_N kernel takes exactly N us on the simulated device.
    assert [(end - start, gpid, name, nvtx) for start, end, gpid, name, nvtx in rows] == \
        [(50_000_000, global_pid, "sleep_us_50000", "step")] + [(5_000_000, global_pid, "sleep_us_5000", "step")] * 5


def test_backtrace_of_the_longest_osrt_range(osrt):
    db, [(columns, rows)] = run_example(osrt, "osrt_backtraces")
    assert columns == ["PID", "TID", "start", "end", "name", "callchainId", "stackDepth", "symbolName", "moduleName"]
    # The longest call is main's 100 ms nanosleep, or the lock the second thread waited on for as long
    # when it got there first; either way its whole stack, innermost first, from osrt_app's own code.
    (start, end, name, chain) = db.execute("""SELECT start, end, name, callchainId FROM OSRT_API
                                              ORDER BY end - start DESC LIMIT 1""").fetchone()
    assert end - start >= 95_000_000 and name in ("nanosleep", "pthread_mutex_lock")
    frames = db.execute("SELECT symbolName, moduleName FROM OSRT_CALLCHAINS WHERE id = ? ORDER BY stackDepth",
                        (chain,)).fetchall()
    assert 2 <= len(rows) == min(len(frames), 10)
    assert [r[2:7] for r in rows] == [(start, end, name, chain, depth) for depth in range(len(rows))]
    assert [r[7:] for r in rows] == frames[:10] and rows[0][8] == "osrt_app"
    (pid,) = db.execute("SELECT pid FROM CUTRACE_PROCESSES").fetchone()
    assert {r[0] for r in rows} == {pid} and (name == "nanosleep") == (rows[0][1] == pid)


def test_thread_summary_by_cpu_cycles(cpu_burn):
    # cutrace's samples are CPU-clock samples and carry no cycle count (cpuCycles 0): the query runs,
    # one row per sampled thread with its name, and the utilization it divides by cycles is NULL.
    db, [(columns, rows)] = run_example(cpu_burn, "thread_summary_cycles")
    assert columns == ["PID", "TID", "CPU_utilization", "thread_name"]
    (pid,) = db.execute("SELECT pid FROM CUTRACE_PROCESSES").fetchone()
    assert len(rows) == 2 and {(p, share, name) for p, _, share, name in rows} == {(pid, None, "cpu_burn")}
    assert {tid for _, tid, _, _ in rows} == {tid for (tid,) in db.execute(
        "SELECT DISTINCT globalTid % 16777216 FROM COMPOSITE_EVENTS")}


def test_thread_summary_by_scheduling_events(cpu_burn):
    db, [(columns, rows)] = run_example(cpu_burn, "thread_summary_sched")
    assert columns == ["PID", "TID", "thread_name", "CPU_utilization"]
    (pid,) = db.execute("SELECT pid FROM CUTRACE_PROCESSES").fetchone()
    # main's 3 units of CPU against the other thread's 1: main first, the shares adding up to 100 %.
    assert len(rows) == 2 and [(p, tid == pid, name) for p, tid, name, _ in rows] == [
        (pid, True, "cpu_burn"), (pid, False, "cpu_burn")]
    assert rows[0][3] > 50 > rows[1][3] and abs(rows[0][3] + rows[1][3] - 100) <= 0.02


def test_scheduling_events_cover_each_threads_cpu_time(cpu_burn):
    # The query above counts a thread's time from each switch in to its next switch; that holds only if
    # a thread's events open with a switch in (the command's exec, where the events start, and a new
    # thread's first run) and close with a switch out (its exit), however seldom it was preempted.
    with sqlite3.connect(cpu_burn) as db:
        (pid,) = db.execute("SELECT pid FROM CUTRACE_PROCESSES").fetchone()
        events = db.execute("""SELECT globalTid % 16777216, start, isSchedIn FROM SCHED_EVENTS
                               ORDER BY globalTid, start, isSchedIn DESC""").fetchall()
        (first_call,) = db.execute("SELECT min(start) FROM CUTRACE_API_CALLS").fetchone()
    by_thread = {}
    for tid, start, into in events:
        by_thread.setdefault(tid, []).append((start, into))
    assert len(by_thread) == 2 and pid in by_thread
    on_cpu = {}
    for tid, switches in by_thread.items():
        assert switches[0][1] == 1 and switches[-1][1] == 0, (tid, switches[:2], switches[-2:])
        # Switches in and out alternate, once put in time order.
        assert all(a[1] != b[1] for a, b in zip(switches, switches[1:])), tid
        on_cpu[tid] = sum(b[0] - a[0] for a, b in zip(switches[::2], switches[1::2]))
    assert by_thread[pid][0][0] < first_call
    # A thread uses CPU time only while on a CPU: main burned 180 ms of it, the other thread 60. The
    # switches' clock (CLOCK_MONOTONIC, slewed) and the CPU-time clock may part by a few hundred ppm.
    (worker,) = set(by_thread) - {pid}
    assert on_cpu[pid] >= 0.99 * 180_000_000 and on_cpu[worker] >= 0.99 * 60_000_000, on_cpu


def test_function_table_flat_and_bottom_up(cpu_burn):
    # As for the thread summary by cycles: the views are listed, their percentages of cycles NULL.
    db, [(flat_columns, flat), (self_columns, bottom_up)] = run_example(cpu_burn, "function_table")
    assert flat_columns == ["symbolName", "moduleName", "flatTimePercentage"]
    assert self_columns == ["symbolName", "moduleName", "selfTimePercentage"]
    assert len(flat) == 5 and len(bottom_up) >= 3
    assert {share for _, _, share in flat + bottom_up} == {None}
    frames = set(db.execute("SELECT symbolName, moduleName FROM SAMPLING_CALLCHAINS").fetchall())
    leaves = set(db.execute("SELECT symbolName, moduleName FROM SAMPLING_CALLCHAINS WHERE stackDepth = 0").fetchall())
    assert {r[:2] for r in flat} <= frames and {r[:2] for r in bottom_up} <= leaves
    assert {("burn_a", "cpu_burn"), ("burn_b", "cpu_burn"), ("burn_in_thread", "cpu_burn")} <= leaves
