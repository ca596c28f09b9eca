"""The tables of a trace in Python (the cutrace package, through the C++ reader), Parquet and Arrow
(`cutrace export --type parquetdir|arrowdir`): the same tables, columns and rows as the SQLite export,
value for value; DuckDB and pandas over them; the refusals."""
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CUTRACE, app, on_a_terminal, profile, run_tool

pytestmark = pytest.mark.reads_traces_in_python

pa = pytest.importorskip("pyarrow")
import pyarrow.ipc  # noqa: E402
import pyarrow.parquet  # noqa: E402

SOURCE_PYTHON = Path(__file__).resolve().parents[3] / "python"
sys.path.insert(0, str(SOURCE_PYTHON))
import cutrace  # noqa: E402


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tables")
    _, trace = profile(tmp, [app("sim_vector_add"), "10"],
                       options=["-t", "cuda,nvtx,osrt", "--cudabacktrace", "memory:1000"])
    run_tool("export", "--type", "sqlite", "-o", tmp / "trace.sqlite", trace)
    return trace, sqlite3.connect(tmp / "trace.sqlite"), tmp


def sqlite_rows(db, table):
    return [tuple(row) for row in db.execute(f'SELECT * FROM "{table}" ORDER BY rowid')]


def arrow_rows(table):
    columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return list(zip(*columns)) if columns else []


def test_every_table_has_the_rows_of_the_sqlite_export_value_for_value(traced):
    trace, db, _ = traced
    t = cutrace.open(trace)
    assert t.tables() == [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY rowid")]
    tables = t.tables_of(t.tables())
    assert t.complete and t.status.startswith("complete")
    non_empty = 0
    for name, table in tables.items():
        columns = [c[1] for c in db.execute(f'PRAGMA table_info("{name}")')]
        assert table.schema.names == columns, name
        assert arrow_rows(table) == sqlite_rows(db, name), name
        non_empty += table.num_rows > 0
    assert non_empty >= 20
    assert tables["CUPTI_ACTIVITY_KIND_KERNEL"].num_rows == 20
    # Types as the schema declares them; NOT NULL columns are not nullable.
    kernel = tables["CUPTI_ACTIVITY_KIND_KERNEL"].schema
    assert kernel.field("start").type == pa.int64() and not kernel.field("start").nullable
    assert kernel.field("mangledName").nullable
    assert tables["StringIds"].schema.field("value").type == pa.string()


def test_pandas_and_duckdb_read_the_tables(traced):
    duckdb = pytest.importorskip("duckdb")
    trace, db, _ = traced
    t = cutrace.open(trace)
    calls = t.table("CUPTI_ACTIVITY_KIND_RUNTIME")
    names = t.table("StringIds")
    frame = calls.to_pandas()
    assert len(frame) == db.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
    in_duckdb = duckdb.sql("""SELECT s.value, count(*), sum(c."end" - c.start) FROM calls AS c JOIN names AS s
                              ON s.id = c.nameId GROUP BY 1 ORDER BY 1""").fetchall()
    in_sqlite = db.execute("""SELECT s.value, count(*), sum(c.end - c.start) FROM CUPTI_ACTIVITY_KIND_RUNTIME AS c
                              JOIN StringIds AS s ON s.id = c.nameId GROUP BY 1 ORDER BY 1""").fetchall()
    assert in_duckdb == in_sqlite and len(in_sqlite) == 6


@pytest.mark.parametrize("kind", ["parquetdir", "arrowdir"])
def test_a_file_per_table_with_the_rows_of_the_sqlite_export(traced, kind):
    trace, db, tmp = traced
    out = tmp / f"out_{kind}"
    proc = run_tool("export", "--type", kind, "-o", out, trace)
    assert proc.stderr.startswith(f"cutrace export: wrote {out} (") and proc.stderr.endswith(" tables).\n"), proc.stderr
    files = sorted(out.iterdir())
    # An ordinary directory, as mkdir makes it under the umask (the temporary one it was is 0700).
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o777 & ~umask
    suffix = ".parquet" if kind == "parquetdir" else ".arrow"
    assert files and all(f.suffix == suffix for f in files)
    for f in files:
        table = pyarrow.parquet.read_table(f) if kind == "parquetdir" else pyarrow.ipc.open_file(f).read_all()
        assert arrow_rows(table) == sqlite_rows(db, f.stem), f.name
    # Every table gets a file, an empty one its columns, as nsys's --lazy=false has it; with --lazy true
    # (nsys's -l) only the tables with rows, in this export and in the SQLite one.
    every = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    with_rows = {name for name in every if db.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0]}
    assert {f.stem for f in files} == every and len(with_rows) < len(every)
    run_tool("export", "--type", kind, "-l", "true", "-o", tmp / f"lazy_{kind}", trace)
    assert {f.stem for f in (tmp / f"lazy_{kind}").iterdir()} == with_rows
    run_tool("export", "--type", "sqlite", "-f", "true", "--lazy=true", "-o", tmp / "lazy.sqlite", trace)
    lazy = sqlite3.connect(tmp / "lazy.sqlite")
    assert {name for (name,) in lazy.execute("SELECT name FROM sqlite_master WHERE type = 'table'")} == with_rows
    for name in with_rows:
        assert sqlite_rows(lazy, name) == sqlite_rows(db, name), name


def test_one_arrow_file_holds_the_tables_of_the_arrowdir_export_as_streams(traced):
    trace, db, tmp = traced
    out, directory = tmp / "all.arrows", tmp / "all_arwdir"
    proc = run_tool("export", "--type", "arrow", "-o", out, trace)
    assert proc.stderr.startswith(f"cutrace export: wrote {out} (") and proc.stderr.endswith(" tables).\n"), proc.stderr
    run_tool("export", "--type", "arrowdir", "-o", directory, trace)
    tables = cutrace.read_arrow_export(out)
    # The tables with rows, in the tables' export order, each as the arrowdir export has it.
    with_rows = [f.stem for f in directory.iterdir()]
    assert list(tables) == [name for name in cutrace.table_names() if name in with_rows]
    assert "TARGET_INFO_GPU" in tables and "CUPTI_ACTIVITY_KIND_KERNEL" in tables
    for name, table in tables.items():
        alone = pyarrow.ipc.open_file(directory / f"{name}.arrow").read_all()
        assert table.schema == alone.schema, name
        assert arrow_rows(table) == arrow_rows(alone) == sqlite_rows(db, name), name
    # As a reader without the package reads it: one stream after another on one file, each naming its table.
    names = []
    with open(out, "rb") as f:
        while f.peek(1):
            reader = pyarrow.ipc.open_stream(f)
            reader.read_all()
            names.append(reader.schema.metadata[b"table"].decode())
    assert names == list(tables)


def test_the_arrow_file_takes_tables_and_keeps_an_existing_file(traced, tmp_path):
    trace, _, tmp = traced
    copy = tmp / "streams.cutrace"
    copy.write_bytes(trace.read_bytes())
    run_tool("export", "--type", "arrow", "--tables", "CUPTI_ACTIVITY_KIND_.*|StringIds", copy)
    out = tmp / "streams.arrows"
    chosen = ["StringIds"] + [n for n in cutrace.table_names() if n.startswith("CUPTI_ACTIVITY_KIND_")]
    assert list(cutrace.read_arrow_export(out)) == chosen and len(chosen) == 7
    run_tool("export", "--type", "arrow", "-f", "true", "-l", "--tables", "CUPTI_ACTIVITY_KIND_.*|StringIds", copy)
    assert list(cutrace.read_arrow_export(out)) == ["StringIds", "CUPTI_ACTIVITY_KIND_RUNTIME",
                                                    "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY"]
    before = out.read_bytes()
    proc = run_tool("export", "--type", "arrow", "-o", out, trace, expect=2)
    assert proc.stderr == (f"cutrace export: {out} already exists; pass -f true to overwrite it or choose another name "
                           "with -o.\n")
    assert out.read_bytes() == before
    run_tool("export", "--type", "arrow", "-f", "true", "--tables", "StringIds", "-o", out, trace)
    assert list(cutrace.read_arrow_export(out)) == ["StringIds"]
    proc = run_tool("export", "--type", "arrow", "-f", "true", "-o", tmp_path, trace, expect=2)
    assert proc.stderr == f"cutrace export: {tmp_path} is a directory; choose another name with -o.\n"
    # Nothing is left beside the output.
    assert sorted(f.name for f in tmp.iterdir() if ".tmp-" in f.name) == []


def test_duckdb_over_a_parquet_directory_sums_as_cutrace_stats(traced):
    duckdb = pytest.importorskip("duckdb")
    trace, db, tmp = traced
    out = tmp / "for_duckdb"
    run_tool("export", "--type", "parquetdir", "-o", out, trace)
    rows = duckdb.sql(f"""
        SELECT s.value, count(*) FROM '{out}/CUPTI_ACTIVITY_KIND_KERNEL.parquet' AS k
        JOIN '{out}/CUPTI_ACTIVITY_KIND_RUNTIME.parquet' AS r
          ON k.correlationId = r.correlationId AND k.globalPid = r.globalTid - r.globalTid % 16777216
        JOIN '{out}/StringIds.parquet' AS s ON s.id = k.shortName GROUP BY 1 ORDER BY 1""").fetchall()
    assert rows == [("axpy", 10), ("square_kernel", 10)]


def test_the_parquet_export_takes_the_sqlite_exports_time_and_nvtx_filters(tmp_path):
    # cutrace export checks the command line once and hands Python the NVTX range as a time window:
    # a Parquet export filtered by --filter-nvtx or --from/--to holds the SQLite export's rows.
    _, trace = profile(tmp_path, [app("nvtx_app"), "2", "5"], options=["-t", "cuda,nvtx"])
    for k, options in enumerate((["--filter-nvtx", "outer/2"], ["--from", "1ms", "--to", "0.5"])):
        run_tool("export", "--type", "sqlite", "-o", tmp_path / f"f{k}.sqlite", *options, trace)
        db = sqlite3.connect(tmp_path / f"f{k}.sqlite")
        run_tool("export", "--type", "parquetdir", "-o", tmp_path / f"f{k}", *options, trace)
        files = sorted((tmp_path / f"f{k}").iterdir())
        assert "CUPTI_ACTIVITY_KIND_RUNTIME" in [f.stem for f in files]
        for f in files:
            assert arrow_rows(pyarrow.parquet.read_table(f)) == sqlite_rows(db, f.stem), (options, f.name)
        # The one-file Arrow export takes the same window.
        run_tool("export", "--type", "arrow", "-o", tmp_path / f"f{k}.arrows", *options, trace)
        streams = cutrace.read_arrow_export(tmp_path / f"f{k}.arrows")
        assert sorted(streams) == [f.stem for f in files]
        for name, table in streams.items():
            assert arrow_rows(table) == sqlite_rows(db, name), (options, name)
    # The window holds fewer calls than the whole trace: the filter reached the export.
    run_tool("export", "--type", "sqlite", "-o", tmp_path / "all.sqlite", trace)
    whole = sqlite3.connect(tmp_path / "all.sqlite")
    count = 'SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME'
    filtered = sqlite3.connect(tmp_path / "f0.sqlite").execute(count).fetchone()[0]
    assert 0 < filtered < whole.execute(count).fetchone()[0]


def test_tables_chosen_by_a_regular_expression_and_the_default_name(traced):
    trace, _, tmp = traced
    copy = tmp / "named.cutrace"
    copy.write_bytes(trace.read_bytes())
    run_tool("export", "--type", "parquetdir", "--tables", "CUPTI_ACTIVITY_KIND_.*|StringIds", copy)
    out = tmp / "named_pqtdir"
    assert sorted(f.stem for f in out.iterdir()) == sorted(
        ["StringIds"] + [n for n in cutrace.table_names() if n.startswith("CUPTI_ACTIVITY_KIND_")])


def test_tables_as_nsys_export_takes_them_comma_separated_repeated_and_in_any_case(traced, tmp_path):
    trace, _, _ = traced
    options = ["--tables", "cupti_activity_kind_kernel,StringIds", "--tables=osrt_.*"]
    run_tool("export", "--type", "sqlite", "-o", tmp_path / "some.sqlite", *options, trace)
    names = [r[0] for r in sqlite3.connect(tmp_path / "some.sqlite").execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    assert names == ["CUPTI_ACTIVITY_KIND_KERNEL", "OSRT_API", "OSRT_CALLCHAINS", "StringIds"]
    run_tool("export", "--type", "parquetdir", "-o", tmp_path / "some_pqtdir", *options, trace)
    assert sorted(f.stem for f in (tmp_path / "some_pqtdir").iterdir()) == names


def test_refusals(traced, tmp_path):
    trace, _, _ = traced
    out = tmp_path / "exists_pqtdir"
    out.mkdir()
    (out / "keep").write_text("mine")
    proc = run_tool("export", "--type", "parquetdir", "-o", out, trace, expect=2)
    assert proc.stderr == (f"cutrace export: {out} already exists; pass -f true to overwrite it or choose another name "
                           "with -o.\n")
    assert (out / "keep").read_text() == "mine"
    # -f replaces an earlier export, but not a directory that holds anything else.
    proc = run_tool("export", "--type", "parquetdir", "-f", "true", "-o", out, trace, expect=2)
    assert proc.stderr == (f"cutrace export: {out} is a directory with files other than an export's; choose another "
                           "name with -o.\n")
    assert (out / "keep").read_text() == "mine"
    again = tmp_path / "again_pqtdir"
    run_tool("export", "--type", "parquetdir", "-o", again, trace)
    run_tool("export", "--type", "parquetdir", "-f", "true", "--tables", "StringIds", "-o", again, trace)
    assert [f.name for f in again.iterdir()] == ["StringIds.parquet"]
    proc = run_tool("export", "--type", "parquetdir", "--tables", "(", trace, expect=2)
    assert proc.stderr.startswith("cutrace export: --tables takes regular expressions; '(' is not one ("), proc.stderr
    proc = run_tool("export", "--type", "sqlite", "--tables", "StringIds,(", trace, expect=2)
    assert proc.stderr.startswith("cutrace export: --tables takes regular expressions; '(' is not one ("), proc.stderr
    missing = tmp_path / "missing.cutrace"
    proc = run_tool("export", "--type", "arrowdir", "-o", tmp_path / "x", missing, expect=1)
    assert proc.stderr.startswith(f"cutrace export: {missing}"), proc.stderr
    assert not (tmp_path / "x").exists()
    with pytest.raises(cutrace.TraceError):
        cutrace.open(missing)
    with pytest.raises(cutrace.TraceError, match="no table NOPE"):
        cutrace.open(trace).table("NOPE")


TIME_COLUMNS = ("start", "end", "startTime", "stopTime")


def time_columns(db, table):
    return [i for i, c in enumerate(db.execute(f'PRAGMA table_info("{table}")')) if c[1] in TIME_COLUMNS]


def shifted(rows, columns, by):
    return [tuple(v + by if i in columns else v for i, v in enumerate(row)) for row in rows]


def tables_of(db):
    return [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY rowid")]


def test_ts_shift_and_ts_normalize_move_every_time_as_nsys_export_does(traced, tmp_path):
    # nsys's --ts-normalize true: times in ns since the Unix epoch, from the session's wall-clock start;
    # --ts-shift N: N ns more. Every time column moves, nothing else changes.
    trace, db, _ = traced
    (epoch,) = db.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()
    assert epoch > 1_700_000_000 * 10**9
    for options, by in ((["--ts-shift", "-1500"], -1500), (["--ts-normalize=true"], epoch),
                        (["--ts-normalize", "true", "--ts-shift=1000000000"], epoch + 10**9),
                        (["--ts-normalize", "false"], 0)):
        out = tmp_path / "moved.sqlite"
        run_tool("export", "--type=sqlite", "--force-overwrite=true", f"--output={out}", *options, trace)
        moved = sqlite3.connect(out)
        assert tables_of(moved) == tables_of(db)
        timed = 0
        for table in tables_of(db):
            columns = time_columns(db, table)
            timed += bool(columns) and db.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0] > 0
            assert sqlite_rows(moved, table) == shifted(sqlite_rows(db, table), columns, by), (options, table)
        assert timed == 6  # calls, kernels, copies, OS calls, cutrace's calls, the session
        moved.close()
    # The package and the Parquet export move them alike.
    t = cutrace.open(trace, ts_normalize=True, ts_shift_ns=7)
    columns = time_columns(db, "CUPTI_ACTIVITY_KIND_KERNEL")
    assert arrow_rows(t.table("CUPTI_ACTIVITY_KIND_KERNEL")) == \
        shifted(sqlite_rows(db, "CUPTI_ACTIVITY_KIND_KERNEL"), columns, epoch + 7)
    run_tool("export", "--type=parquetdir", "--ts-normalize=true", "-o", tmp_path / "p_pqtdir", trace)
    parquet = pyarrow.parquet.read_table(tmp_path / "p_pqtdir" / "CUPTI_ACTIVITY_KIND_RUNTIME.parquet")
    assert arrow_rows(parquet) == shifted(sqlite_rows(db, "CUPTI_ACTIVITY_KIND_RUNTIME"),
                                          time_columns(db, "CUPTI_ACTIVITY_KIND_RUNTIME"), epoch)


def event_times(db, table):
    """(start, end) of each row of an event table; ids of strings differ between exports, times not."""
    start_at, end_at = time_columns(db, table)[:2]
    return [(row[start_at], row[end_at]) for row in sqlite_rows(db, table)]


def expected_by_times(db, table, ranges):
    """The (start, end) of the rows of `table` nsys's --times rule keeps: (start, end, loose start, loose
    end) each."""
    return [(begin, end) for begin, end in event_times(db, table)
            if any((max(end, begin) >= s if loose_s else begin >= s) and (begin <= e if loose_e else max(end, begin) <= e)
                   for s, e, loose_s, loose_e in ranges)]


def test_times_keeps_the_events_within_a_range_as_nsys_export_does(traced, tmp_path):
    trace, db, _ = traced
    # Ranges that cut through the kernels: the 3rd to 7th kernel's starts, and the 15th's middle.
    kernels = db.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start").fetchall()
    a, b = kernels[2][0] + 1, kernels[6][0] + 1
    c = (kernels[14][0] + kernels[14][1]) // 2
    events = ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "OSRT_API",
              "CUTRACE_API_CALLS")
    for times, ranges in ((f"{a}/{b}", [(a, b, False, False)]),
                          (f":{a}/{b}", [(a, b, True, False)]),
                          (f"{a}/{b}:", [(a, b, False, True)]),
                          (f":{a}/{b}:,{c}ns/", [(a, b, True, True), (c, 2**63 - 1, False, False)]),
                          (f"/{a / 1e3}us", [(-2**63, round(a / 1e3 * 1e3), False, False)])):
        out = tmp_path / "times.sqlite"
        run_tool("export", "--type", "sqlite", "-f", "true", "-o", out, "--times", times, trace)
        kept = sqlite3.connect(out)
        for table in events:
            assert event_times(kept, table) == expected_by_times(db, table, ranges), (times, table)
        assert 0 < len(event_times(kept, "CUPTI_ACTIVITY_KIND_KERNEL")) < len(kernels), times
        # The tables of things rather than events are whole.
        for table in ("TARGET_INFO_GPU", "CUTRACE_PROCESSES", "CUTRACE_THREADS"):
            assert sqlite_rows(kept, table) == sqlite_rows(db, table), (times, table)
        kept.close()
    # The filter sees the times as shifted; a repeated --times adds ranges; Parquet keeps the same rows.
    (epoch,) = db.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()
    options = ["--ts-normalize=true", f"--times={epoch + a}/{epoch + b}", "--times", f"{epoch + c}/"]
    run_tool("export", "--type", "sqlite", "-o", tmp_path / "both.sqlite", *options, trace)
    both = sqlite3.connect(tmp_path / "both.sqlite")
    expected = [(start + epoch, end + epoch) for start, end in
                expected_by_times(db, "CUPTI_ACTIVITY_KIND_KERNEL", [(a, b, False, False), (c, 2**63 - 1, False, False)])]
    assert event_times(both, "CUPTI_ACTIVITY_KIND_KERNEL") == expected and expected
    run_tool("export", "--type", "parquetdir", "-o", tmp_path / "both_pqtdir", *options, trace)
    for f in (tmp_path / "both_pqtdir").iterdir():
        assert arrow_rows(pyarrow.parquet.read_table(f)) == sqlite_rows(both, f.stem), f.name


def test_the_time_options_refuse_what_they_cannot_take(traced, tmp_path):
    trace, _, _ = traced
    out = tmp_path / "never.sqlite"
    for options, message in (
            (["--times", "2s/1s"], "--times: '2s/1s' ends before it starts; a range is START/END"),
            (["--times", "1s/2s,5"], "--times: '5' (in '1s/2s,5') needs one '/' between its start and its end"),
            (["--times", "1x/"], "--times: '1x/' has a start that is not a time ('x' is not a unit: ns, us, ms, s, m "
                                 "or h (or nsec, usec, msec, sec, min or hour))"),
            (["--times", "/"], "--times: '/' gives neither a start nor an end"),
            (["--ts-shift", "1.5"], "--ts-shift takes a whole number of nanoseconds, such as 1000000 or -250, not "
                                    "'1.5'.\n"),
            (["--ts-normalize=maybe"], "--ts-normalize takes true or false.\n")):
        proc = run_tool("export", "--type", "sqlite", "-o", out, *options, trace, expect=2)
        assert proc.stderr.startswith("cutrace export: " + message), proc.stderr
        assert not out.exists()
    for option in (["--times", "1s/"], ["--ts-normalize", "true"], ["--ts-shift", "5"]):
        proc = run_tool("export", "--type", "perfetto", *option, trace, expect=2)
        assert proc.stderr == (f"cutrace export: {option[0]} is for the exports made of tables (sqlite, parquetdir, "
                               "arrowdir and arrow), not perfetto; --from and --to choose the time of a timeline.\n")
    proc = run_tool("export", "--type", "perfetto", "--lazy=true", trace, expect=2)
    assert proc.stderr == ("cutrace export: --lazy is for the exports made of tables (sqlite, parquetdir, arrowdir and "
                           "arrow), not perfetto.\n")
    with pytest.raises(cutrace.TraceError, match="--times: '1s' needs one '/'"):
        cutrace.open(trace, times="1s")


def test_without_pyarrow_the_export_says_what_it_needs(traced, tmp_path):
    trace, _, _ = traced
    bare = "/usr/bin/python3"
    if not Path(bare).exists() or subprocess.run([bare, "-c", "import pyarrow"], capture_output=True).returncode == 0:
        pytest.skip("no Python without pyarrow on this machine")
    env = dict(os.environ, CUTRACE_PYTHON=bare)
    proc = subprocess.run([str(CUTRACE), "export", "--type", "parquetdir", "-o", str(tmp_path / "p"), str(trace)],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"cutrace export: this export needs the Python package pyarrow, which {bare} cannot "
                                  "import ("), proc.stderr


def test_a_cut_off_trace_gives_its_intact_part_and_says_so(tmp_path):
    run = app("sim_vector_add")
    _, trace = profile(tmp_path, ["sh", "-c", f"{run} 10; sleep 1.2; {run} 10; sleep 1.2; {run} 10"])
    data = trace.read_bytes()
    cut = tmp_path / "cut.cutrace"
    cut.write_bytes(data[: len(data) - 200])
    t = cutrace.open(cut)
    calls = t.table("CUTRACE_API_CALLS")
    assert not t.complete and "truncated" in t.status
    whole = cutrace.open(trace).table("CUTRACE_API_CALLS")
    assert 0 < calls.num_rows <= whole.num_rows
    proc = run_tool("export", "--type", "parquetdir", "-o", tmp_path / "cut_pqtdir", cut, expect=3)
    assert f"cutrace export: warning: {cut}: truncated" in proc.stderr, proc.stderr


@pytest.mark.parametrize("kind", ["parquetdir", "arrow"])
def test_a_progress_bar_on_a_terminal(traced, tmp_path, kind):
    trace, _, _ = traced
    code, shown = on_a_terminal(["export", "--type", kind, "-o", tmp_path / "bar", trace])
    assert code == 0 and "\rcutrace export: [" in shown and "\r\x1b[Kcutrace export: wrote " in shown, repr(shown)
    code, shown = on_a_terminal(["export", "--type", kind, "-q", "-o", tmp_path / "quiet", trace])
    assert code == 0 and shown.startswith("cutrace export: wrote "), repr(shown)
