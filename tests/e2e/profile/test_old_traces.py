"""Traces stay readable: tests/data/traces/v<N>/ keeps traces recorded by an earlier cutrace (each
version's record.sh run says which), with what that cutrace's own `cutrace stats` and `cutrace export
--type sqlite` gave for them. This cutrace must give the same, byte for byte: every format version from
7 on is read (docs/trace-format.md, "Versions"), and a change to reports or exports that alters what an
old trace gives is one this test makes visible."""
import gzip
import sqlite3
import subprocess
from pathlib import Path

import pytest

from conftest import CUTRACE

pytestmark = pytest.mark.reads_traces

DATA = Path(__file__).resolve().parents[2] / "data" / "traces"
REPORTS = ",".join(line.strip() for line in (DATA / "reports.txt").read_text().splitlines() if line.strip())
TRACES = sorted(DATA.glob("v*/*.cutrace"))


def test_each_version_from_7_has_its_traces():
    versions = {int(p.parent.name[1:]) for p in TRACES}
    assert 7 in versions and len(TRACES) >= 6, TRACES


@pytest.mark.parametrize("trace", TRACES, ids=[f"{p.parent.name}/{p.stem}" for p in TRACES])
def test_an_old_trace_gives_the_reports_and_export_it_gave(tmp_path, trace):
    stats = subprocess.run([str(CUTRACE), "stats", "-q", "--format", "csv", "--report", REPORTS, str(trace)],
                           capture_output=True, text=True, timeout=120)
    assert stats.returncode in (0, 4), stats.stderr
    expected = trace.with_suffix(".stats.csv").read_text()
    assert stats.stdout == expected, f"cutrace stats of {trace.name} differs from what it gave when recorded"

    database = tmp_path / "export.sqlite"
    export = subprocess.run([str(CUTRACE), "export", "-q", "--type", "sqlite", "-o", str(database), str(trace)],
                            capture_output=True, text=True, timeout=120)
    assert export.returncode == 0, export.stderr
    dump = "\n".join(sqlite3.connect(database).iterdump()) + "\n"
    with gzip.open(trace.with_suffix(".sqlite.sql.gz"), "rt") as f:
        expected_dump = f.read()
    if dump != expected_dump:
        differing = [(a, b) for a, b in zip(dump.splitlines(), expected_dump.splitlines()) if a != b][:3]
        pytest.fail(f"the SQLite export of {trace.name} differs from what it gave when recorded: {differing}")
