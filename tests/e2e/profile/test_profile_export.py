"""`cutrace profile --export TYPE` (nsys's option): the trace's exports written beside it once the run
ends, the same files `cutrace export` writes; an export that would be refused is refused before the
program runs; the program's output and exit status are its own."""
import sqlite3

import pyarrow.parquet
import pytest

from conftest import app, profile, run_tool



def table_rows(db, table):
    return db.execute(f'SELECT * FROM "{table}" ORDER BY rowid').fetchall()


def test_the_exports_asked_for_are_written_beside_the_trace(tmp_path):
    proc, trace = profile(tmp_path, [app("sim_vector_add"), "3"], options=["--export", "sqlite,parquetdir",
                                                                            "--export=arrow", "--stats", "true"])
    # The program's output, then the statistics.
    assert proc.stdout.startswith("iterations 3\n") and "verified 3\n" in proc.stdout
    assert proc.stdout.index("verified 3\n") < proc.stdout.index("cudaMemcpy")
    for written in (tmp_path / "trace.sqlite", tmp_path / "trace_pqtdir", tmp_path / "trace.arrows"):
        assert f"cutrace export: wrote {written} (" in proc.stderr, proc.stderr
    # The same rows as `cutrace export` of the trace gives.
    run_tool("export", "--type", "sqlite", "-o", tmp_path / "again.sqlite", trace)
    ours, again = sqlite3.connect(tmp_path / "trace.sqlite"), sqlite3.connect(tmp_path / "again.sqlite")
    for table in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL", "StringIds", "TARGET_INFO_GPU"):
        assert table_rows(ours, table) == table_rows(again, table), table
    kernels = pyarrow.parquet.read_table(tmp_path / "trace_pqtdir" / "CUPTI_ACTIVITY_KIND_KERNEL.parquet")
    assert kernels.num_rows == len(table_rows(ours, "CUPTI_ACTIVITY_KIND_KERNEL")) == 6


def test_an_existing_export_is_refused_before_the_program_runs(tmp_path):
    existing = tmp_path / "trace.sqlite"
    existing.write_text("mine")
    marker = tmp_path / "ran"
    proc, trace = profile(tmp_path, ["sh", "-c", f"touch {marker}"], options=["--export", "sqlite"], check=False)
    assert proc.returncode == 1
    assert proc.stderr == (f"cutrace profile: {existing} (--export sqlite) already exists; pass -f true to overwrite it or "
                           "choose another name with -o.\n"), proc.stderr
    assert existing.read_text() == "mine" and not marker.exists() and not trace.exists()
    # With -f true both are replaced, and the exit status is the program's.
    proc, trace = profile(tmp_path, ["sh", "-c", f"touch {marker}; exit 3"],
                          options=["--export", "sqlite", "-f", "true"], check=False)
    assert proc.returncode == 3 and marker.exists() and trace.exists()
    assert sqlite3.connect(existing).execute("SELECT count(*) FROM StringIds").fetchone()[0] >= 0


@pytest.mark.parametrize("value, message", [
    ("hdf", "option '--export': nsys's hdf export is not one cutrace writes; it writes "),
    ("sqlite,nope", "option '--export' takes "),
])
def test_export_types_it_does_not_write_are_refused(tmp_path, value, message):
    proc, trace = profile(tmp_path, ["true"], options=["--export", value], check=False)
    assert proc.returncode == 2 and proc.stderr.startswith("cutrace profile: " + message), proc.stderr
    assert not trace.exists()


def test_export_none_writes_none(tmp_path):
    proc, trace = profile(tmp_path, [app("sim_vector_add"), "1"], options=["--export", "sqlite", "--export", "none"])
    assert trace.exists() and not (tmp_path / "trace.sqlite").exists() and "cutrace export" not in proc.stderr
