"""`cutrace export --type sqlite`: nsys's tables and columns, every recorded call once with the times
and values the reports show, sums in SQL equal to `cutrace stats`, the kernels joined to the calls that
launched them, queries in the nsys documentation's style returning the rows they must, and the usual
refusals and partial traces."""
import csv
import io
import sqlite3
import struct
from pathlib import Path

import pytest

from conftest import api_sum, app, on_a_terminal, profile, run_tool

pytestmark = pytest.mark.reads_traces

SQL = Path(__file__).resolve().parent / "sql"


def export(trace, out, *options, expect=0):
    proc = run_tool("export", "--type", "sqlite", "-o", out, *options, trace, expect=expect)
    return proc, sqlite3.connect(out)


def report_rows(trace, report, *options):
    proc = run_tool("stats", "--report", report, "--format", "csv", *options, trace)
    return list(csv.DictReader(io.StringIO(proc.stdout)))


@pytest.fixture(scope="module")
def vector_add(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("vector_add")
    _, trace = profile(tmp, [app("sim_vector_add"), "10"],
                       options=["-t", "cuda,nvtx,osrt", "--cudabacktrace", "memory:1000"])
    proc, db = export(trace, tmp / "trace.sqlite")
    return trace, db, proc


def test_the_cuda_sums_in_sql_are_cutrace_stats(vector_add):
    trace, db, _ = vector_add
    rows = db.execute("""
        SELECT s.value, count(*), sum(r.end - r.start), min(r.end - r.start), max(r.end - r.start)
        FROM CUPTI_ACTIVITY_KIND_RUNTIME AS r JOIN StringIds AS s ON s.id = r.nameId GROUP BY 1""").fetchall()
    in_sql = {name: (n, total, low, high) for name, n, total, low, high in rows}
    stats = api_sum(trace, show_internal=False)
    assert in_sql == {name: (int(r["Num Calls"]), int(r["Total Time (ns)"]), int(r["Min (ns)"]), int(r["Max (ns)"]))
                      for name, r in stats.items()}
    assert in_sql["cudaLaunchKernel"][0] == 20 and in_sql["cudaMemcpy"][0] == 30


def test_the_os_runtime_sums_in_sql_are_cutrace_stats(vector_add):
    trace, db, _ = vector_add
    rows = db.execute("""
        SELECT s.value, count(*), sum(o.end - o.start) FROM OSRT_API AS o JOIN StringIds AS s ON s.id = o.nameId
        WHERE o.eventClass = 27 GROUP BY 1""").fetchall()
    stats = api_sum(trace, report="osrt_sum", show_internal=False)
    assert stats and dict((name, (n, total)) for name, n, total in rows) == {
        name: (int(r["Num Calls"]), int(r["Total Time (ns)"])) for name, r in stats.items()}


def test_every_call_is_in_the_trace_table_once_with_the_times_cuda_api_trace_shows(vector_add):
    trace, db, _ = vector_add
    shown = report_rows(trace, "cuda_api_trace")
    rows = db.execute("""
        SELECT r.start, r.end - r.start, s.value, r.returnValue, r.correlationId,
               r.globalTid / 0x1000000 % 0x1000000, r.globalTid % 0x1000000
        FROM CUPTI_ACTIVITY_KIND_RUNTIME AS r JOIN StringIds AS s ON s.id = r.nameId ORDER BY r.start, r.rowid""").fetchall()
    assert len(shown) == len(rows) > 100
    assert [tuple(map(str, row)) for row in rows] == [
        (r["Start (ns)"], r["Duration (ns)"], r["Name"], r["Result"], r["CorrID"], r["Pid"], r["Tid"]) for r in shown]
    # Every call of every domain, nested ones too, is in cutrace's own table: as many as api_trace shows.
    assert db.execute("SELECT count(*) FROM CUTRACE_API_CALLS").fetchone()[0] == len(report_rows(trace, "api_trace"))
    # A copy's arguments, decoded, beside it.
    args = db.execute("""
        SELECT a.name, a.value, a.number FROM CUTRACE_API_ARGUMENTS AS a JOIN CUTRACE_API_CALLS AS c ON c.callId = a.callId
        JOIN StringIds AS s ON s.id = c.nameId WHERE s.value = 'cudaMemcpy' ORDER BY c.start, a.position LIMIT 3""").fetchall()
    assert args[0] == ("count", "4194304", 4194304) and args[1] == ("kind", "cudaMemcpyHostToDevice", 1), args


def test_every_kernel_joins_the_call_that_launched_it(vector_add):
    trace, db, _ = vector_add
    gpu = report_rows(trace, "cuda_gpu_trace")
    kernels = db.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    copies = db.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY").fetchone()[0]
    assert kernels == 20 and copies == 30 and kernels + copies == len(gpu)
    unjoined = db.execute("""
        SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL AS k WHERE (SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME AS r
        WHERE r.correlationId = k.correlationId AND k.globalPid = (r.globalTid & 0xFFFFFFFFFF000000)) != 1""").fetchone()[0]
    assert unjoined == 0
    # The kernel's names: demangled, short and mangled, all through StringIds.
    names = db.execute("""
        SELECT DISTINCT d.value, s.value, m.value FROM CUPTI_ACTIVITY_KIND_KERNEL AS k JOIN StringIds AS d ON d.id = k.demangledName
        JOIN StringIds AS s ON s.id = k.shortName JOIN StringIds AS m ON m.id = k.mangledName ORDER BY 2""").fetchall()
    assert [short for _, short, _ in names] == ["axpy", "square_kernel"]
    assert all(mangled.startswith("_Z") for _, _, mangled in names)


def test_slow_calls_carry_their_stack(vector_add):
    _, db, _ = vector_add
    copies = db.execute("""
        SELECT r.callchainId FROM CUPTI_ACTIVITY_KIND_RUNTIME AS r JOIN StringIds AS s ON s.id = r.nameId
        WHERE s.value = 'cudaMemcpy'""").fetchall()
    assert len(copies) == 30 and all(chain is not None for (chain,) in copies)
    depths = db.execute("""
        SELECT c.id, count(*), min(c.stackDepth), max(c.stackDepth) FROM CUDA_CALLCHAINS AS c GROUP BY c.id""").fetchall()
    assert {chain for chain, _, _, _ in depths} >= {chain for (chain,) in copies}
    assert all(n == top + 1 and low == 0 for _, n, low, top in depths)
    # The program's own frame is named from its binary, in every copy's stack.
    mains = {chain for (chain,) in db.execute("""
        SELECT DISTINCT c.id FROM CUDA_CALLCHAINS AS c JOIN StringIds AS s ON s.id = c.symbol WHERE s.value = 'main'""")}
    assert mains >= {chain for (chain,) in copies}


@pytest.mark.parametrize("query", sorted(SQL.glob("*.sql")), ids=lambda p: p.stem)
def test_documented_style_queries_return_their_rows(vector_add, query):
    _, db, _ = vector_add
    text = query.read_text()
    expected = [line[len("-- row: "):].split("|") for line in text.splitlines() if line.startswith("-- row: ")]
    assert expected
    assert [[str(v) for v in row] for row in db.execute(text).fetchall()] == expected


def test_session_metadata_and_schema_version(vector_add):
    trace, db, proc = vector_add
    meta = dict(db.execute("SELECT name, value FROM META_DATA_EXPORT").fetchall())
    assert meta["EXPORT_SCHEMA_VERSION"] and meta["EXPORT_PRODUCT"] == "cutrace"
    capture = dict(db.execute("SELECT name, value FROM META_DATA_CAPTURE").fetchall())
    assert capture["gpu_activity"] == "cupti" and capture["command"].endswith("sim_vector_add 10")
    env = dict(db.execute("SELECT name, value FROM TARGET_INFO_SYSTEM_ENV").fetchall())
    assert env["host"] == capture["host"]
    # The wall-clock time of the export's time 0, the session's start (a few ms before the recorder's own).
    (epoch,) = db.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()
    assert 0 <= int(capture["start.realtime_ns"]) - epoch < 10**9
    (n,) = db.execute("SELECT count(*) FROM CUTRACE_API_CALLS").fetchone()
    assert proc.stderr.endswith(f"trace.sqlite ({n:,} calls, 50 GPU operations, 0 NVTX events).\n"), proc.stderr


def test_nvtx_ranges_and_marks_are_counted_as_nvtx_sum(tmp_path):
    _, trace = profile(tmp_path, [app("nvtx_app"), "3", "20"])
    _, db = export(trace, tmp_path / "nvtx.sqlite")
    rows = db.execute("""
        SELECT CASE e.eventType WHEN 59 THEN 'PushPop' ELSE 'StartEnd' END,
               coalesce(d.text, '') || ':' || e.text, count(*)
        FROM NVTX_EVENTS AS e
        LEFT JOIN NVTX_EVENTS AS d ON d.eventType = 75 AND d.domainId = e.domainId
          AND d.globalTid = (e.globalTid & 0xFFFFFFFFFF000000)
        WHERE e.eventType IN (59, 60) GROUP BY 1, 2""").fetchall()
    shown = report_rows(trace, "nvtx_sum")
    assert {(style, name): n for style, name, n in rows} == {(r["Style"], r["Range"]): int(r["Instances"]) for r in shown}
    assert len(rows) >= 5
    # lib_b's "b.step" is pushed with category 7, an ARGB colour and its iteration as an int64 payload,
    # by 3 threads 20 times each; the other ranges have none of them.
    given = db.execute("""SELECT text, category, color, int64Value, count(*) FROM NVTX_EVENTS
                          WHERE eventType IN (59, 60) AND (category IS NOT NULL OR color IS NOT NULL
                                                           OR int64Value IS NOT NULL) GROUP BY 1, 2, 3, 4""").fetchall()
    assert sorted(given) == [("b.step", 7, 0xff00ff00, i, 3) for i in range(20)], given


def test_cpu_samples_and_context_switches_are_in_nsys_sampling_tables(tmp_path):
    # 2 units of CPU in burn_a, 1 in burn_b and 1 in burn_in_thread, and a join that takes the main
    # thread off its CPU: COMPOSITE_EVENTS and SAMPLING_CALLCHAINS hold the samples cpu_sample_sum
    # counts, SCHED_EVENTS the switches cpu_ctxsw_sum counts.
    _, trace = profile(tmp_path, [app("cpu_burn"), "60"], options=["-s", "cpu", "--cpuctxsw", "process-tree"])
    proc, db = export(trace, tmp_path / "samples.sqlite")
    by_function = {}
    for r in report_rows(trace, "cpu_sample_sum"):
        by_function[r["Function"]] = by_function.get(r["Function"], 0) + int(r["Samples"])
    total = db.execute("SELECT count(*) FROM COMPOSITE_EVENTS").fetchone()[0]
    assert total == sum(by_function.values()) and proc.stderr.endswith(f", {total:,} samples).\n"), proc.stderr
    innermost = dict(db.execute("""
        SELECT s.value, count(*) FROM COMPOSITE_EVENTS AS c
        JOIN SAMPLING_CALLCHAINS AS k ON k.id = c.id AND k.stackDepth = 0 JOIN StringIds AS s ON s.id = k.symbol
        GROUP BY 1""").fetchall())
    for function in ("burn_a", "burn_b", "burn_in_thread"):
        assert innermost[function] == by_function[function] > 0, (function, innermost, by_function)
    # Each sample's stack reaches main on the main thread, as the report's frames do.
    assert db.execute("""SELECT count(DISTINCT c.id) FROM COMPOSITE_EVENTS AS c JOIN SAMPLING_CALLCHAINS AS k
                         ON k.id = c.id JOIN StringIds AS s ON s.id = k.symbol WHERE s.value = 'main'""").fetchone()[0] \
        >= innermost["burn_a"] + innermost["burn_b"]
    switches = {(int(r["Tid"])): r for r in report_rows(trace, "cpu_ctxsw_sum")}
    rows = db.execute("""SELECT globalTid % 16777216, sum(isSchedIn = 0 AND preempted = 0), sum(preempted = 1),
                                sum(isSchedIn) FROM SCHED_EVENTS GROUP BY 1""").fetchall()
    assert {tid for tid, *_ in rows} >= set(switches) and switches
    for tid, blocked, preempted, back_in in rows:
        if tid in switches:
            assert (blocked, preempted) == (int(switches[tid]["Blocked"]), int(switches[tid]["Preempted"])), tid
        assert back_in >= blocked + preempted - 1


def test_refusals_and_an_existing_output(vector_add, tmp_path):
    trace, _, _ = vector_add
    out = tmp_path / "again.sqlite"
    run_tool("export", "--type", "sqlite", "-o", out, trace)
    before = out.read_bytes()
    proc = run_tool("export", "--type", "sqlite", "-o", out, trace, expect=1)
    assert proc.stderr == f"cutrace export: {out} already exists; pass -f true to overwrite it or choose another name with -o.\n"
    assert out.read_bytes() == before
    proc = run_tool("export", "--type", "sqlite", "--gzip", "true", "-o", tmp_path / "x.sqlite", trace, expect=2)
    assert proc.stderr == ("cutrace export: --gzip is for the exports written as one stream (perfetto and "
                           "perfetto-json); a sqlite export is not compressed.\n")
    proc = run_tool("export", "--type", "sqlite", "-o", "-", trace, expect=2)
    assert proc.stderr == "cutrace export: a sqlite export is a file and cannot go to stdout; give it a name with -o.\n"
    assert not (tmp_path / "x.sqlite").exists()


def chunk_spans(data):
    """(type, start, end) of each chunk of a trace file (docs/trace-format.md)."""
    (header_bytes,) = struct.unpack_from("<I", data, 12)
    at, spans = header_bytes, []
    while at + 32 <= len(data):
        _, ctype, _, stored = struct.unpack_from("<IHHI", data, at)
        spans.append((ctype, at, at + 32 + stored))
        at += 32 + stored
    return spans


def test_a_cut_off_trace_exports_its_intact_part(tmp_path):
    # Three runs a second and more apart: the recorder writes their calls in separate chunks.
    run = app("sim_vector_add")
    _, trace = profile(tmp_path, ["sh", "-c", f"{run} 10; sleep 1.2; {run} 10; sleep 1.2; {run} 10"])
    _, db = export(trace, tmp_path / "whole.sqlite")
    data = trace.read_bytes()
    events = [span for span in chunk_spans(data) if span[0] == 3]
    assert len(events) >= 3, chunk_spans(data)
    # Cut inside the last events chunk: the chunks before it are intact.
    cut = tmp_path / "cut.cutrace"
    cut.write_bytes(data[: (events[-1][1] + events[-1][2]) // 2])
    proc, part = export(cut, tmp_path / "cut.sqlite", expect=3)
    assert f"cutrace export: warning: {cut}: truncated at byte" in proc.stderr, proc.stderr
    whole = db.execute("SELECT count(*) FROM CUTRACE_API_CALLS").fetchone()[0]
    kept = part.execute("SELECT count(*) FROM CUTRACE_API_CALLS").fetchone()[0]
    assert 0 < kept < whole
    # What it kept is what the whole trace has, call for call (callId numbers calls in the trace's order;
    # a call waiting for its CorrID may come later in the table).
    def calls(conn):
        names = dict(conn.execute("SELECT id, value FROM StringIds").fetchall())
        return [(s, e, names[n]) for s, e, n in conn.execute("SELECT start, end, nameId FROM CUTRACE_API_CALLS ORDER BY callId")]
    assert calls(part) == calls(db)[:kept]


def test_tables_chosen_by_a_regular_expression(vector_add, tmp_path):
    trace, _, _ = vector_add
    _, db = export(trace, tmp_path / "some.sqlite", "--tables", "CUPTI_ACTIVITY_KIND_(RUNTIME|KERNEL)|StringIds")
    assert sorted(n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")) == [
        "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "StringIds"]
    assert db.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0] == 20
    proc = run_tool("export", "--type", "perfetto", "--tables", "StringIds", trace, expect=2)
    assert proc.stderr == ("cutrace export: --tables is for the exports made of tables (sqlite, parquetdir, arrowdir "
                           "and arrow), not perfetto.\n")


def test_a_progress_bar_on_a_terminal_only_and_not_with_quiet(vector_add, tmp_path):
    trace, _, _ = vector_add
    code, shown = on_a_terminal(["export", "--type", "sqlite", "-o", tmp_path / "bar.sqlite", trace])
    assert code == 0
    # Drawn, then erased before the command's own last line.
    assert "\rcutrace export: [" in shown and "%" in shown and "/s" in shown, repr(shown)
    assert "\r\x1b[K" + "cutrace export: wrote " in shown, repr(shown)
    code, shown = on_a_terminal(["export", "--type", "sqlite", "-q", "-o", tmp_path / "quiet.sqlite", trace])
    assert code == 0 and "[" not in shown and shown.startswith("cutrace export: wrote "), repr(shown)
    code, shown = on_a_terminal(["stats", trace])
    assert code == 0 and "\rcutrace stats: [" in shown, repr(shown)
