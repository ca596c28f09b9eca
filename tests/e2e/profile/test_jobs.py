"""Job metadata: the session's rank, local rank and world size from the launcher's environment (job.*
metadata, by docs/jobs.md's precedence), each traced process's own from its environment (`cutrace info`'s
Rank column, CUTRACE_PROCESSES in the SQLite export and the Python package), and the wall-clock anchors
that put traces of several hosts on one timeline."""
import sqlite3
import sys
import time
from pathlib import Path

import pytest

from conftest import app, info, metadata, profile, run_tool, sim_env

SCRIPTS = Path(__file__).resolve().parent / "scripts"
SOURCE_PYTHON = Path(__file__).resolve().parents[3] / "python"
sys.path.insert(0, str(SOURCE_PYTHON))

JOB_VARIABLES = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                 "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "MPI_LOCALRANKID", "PMI_SIZE", "SLURM_PROCID", "SLURM_LOCALID",
                 "SLURM_NTASKS"]


def job_env(**variables):
    """sim_env() with only the job variables given: the test's own environment may be a Slurm job's."""
    env = sim_env()
    for name in JOB_VARIABLES:
        env.pop(name, None)
    env.update({k: str(v) for k, v in variables.items()})
    return env


def job_keys(trace):
    return {k: v for k, v in metadata(trace).items() if k.startswith("job.")}


def run(tmp_path, env, name="trace"):
    _, trace = profile(tmp_path, [app("sim_vector_add"), "1"], env=env, name=name)
    return trace


@pytest.mark.parametrize("variables, expected", [
    ({"RANK": 3, "LOCAL_RANK": 1, "WORLD_SIZE": 8},
     {"job.rank": "3", "job.local_rank": "1", "job.world_size": "8", "job.rank_variable": "RANK"}),
    ({"OMPI_COMM_WORLD_RANK": 5, "OMPI_COMM_WORLD_LOCAL_RANK": 2, "OMPI_COMM_WORLD_SIZE": 16},
     {"job.rank": "5", "job.local_rank": "2", "job.world_size": "16", "job.rank_variable": "OMPI_COMM_WORLD_RANK"}),
    ({"PMI_RANK": 7, "PMI_SIZE": 12},
     {"job.rank": "7", "job.world_size": "12", "job.rank_variable": "PMI_RANK"}),
    ({"PMI_RANK": 7, "MPI_LOCALRANKID": 3, "PMI_SIZE": 12},
     {"job.rank": "7", "job.local_rank": "3", "job.world_size": "12", "job.rank_variable": "PMI_RANK"}),
    ({"SLURM_PROCID": 2, "SLURM_LOCALID": 0, "SLURM_NTASKS": 4},
     {"job.rank": "2", "job.local_rank": "0", "job.world_size": "4", "job.rank_variable": "SLURM_PROCID"}),
], ids=["torchrun", "openmpi", "pmi", "hydra", "slurm"])
def test_each_launcher_family_names_the_session(tmp_path, variables, expected):
    trace = run(tmp_path, job_env(**variables))
    assert job_keys(trace) == expected
    env = dict(sqlite3.connect(export_sqlite(trace, tmp_path)).execute(
        "SELECT name, value FROM TARGET_INFO_SYSTEM_ENV").fetchall())
    assert env["rank"] == expected["job.rank"]


EVERY_FAMILY = {"RANK": 1, "LOCAL_RANK": 1, "WORLD_SIZE": 10, "OMPI_COMM_WORLD_RANK": 2,
                "OMPI_COMM_WORLD_LOCAL_RANK": 2, "OMPI_COMM_WORLD_SIZE": 20, "PMI_RANK": 3, "MPI_LOCALRANKID": 3,
                "PMI_SIZE": 30, "SLURM_PROCID": 4, "SLURM_LOCALID": 4, "SLURM_NTASKS": 40}


def without(*families):
    return {k: v for k, v in EVERY_FAMILY.items() if not any(k.startswith(f) for f in families)}


@pytest.mark.parametrize("variables, rank, local_rank, world_size, variable", [
    (EVERY_FAMILY, "1", "1", "10", "RANK"),
    (without("RANK", "LOCAL_RANK", "WORLD_SIZE"), "2", "2", "20", "OMPI_COMM_WORLD_RANK"),
    (without("RANK", "LOCAL_RANK", "WORLD_SIZE", "OMPI"), "3", "3", "30", "PMI_RANK"),
    (without("RANK", "LOCAL_RANK", "WORLD_SIZE", "OMPI", "PMI", "MPI"), "4", "4", "40", "SLURM_PROCID"),
    # A rank that is no count is passed over; the next family's is taken whole.
    ({"RANK": "${RANK}", "LOCAL_RANK": 5, "WORLD_SIZE": 50, "SLURM_PROCID": 6, "SLURM_NTASKS": 60},
     "6", None, "60", "SLURM_PROCID"),
    ({"RANK": "-1", "PMI_RANK": "08", "PMI_SIZE": "0"}, "8", None, None, "PMI_RANK"),
    # Families are not mixed: RANK's family has no local rank here, and SLURM_LOCALID is not taken for one.
    ({"RANK": 0, "SLURM_PROCID": 0, "SLURM_LOCALID": 3, "SLURM_NTASKS": 4}, "0", None, None, "RANK"),
], ids=["all", "no-torchrun", "pmi-over-slurm", "slurm-last", "not-a-count", "leading-zero", "no-mixing"])
def test_the_most_specific_launcher_wins(tmp_path, variables, rank, local_rank, world_size, variable):
    expected = {"job.rank": rank, "job.rank_variable": variable}
    if local_rank is not None:
        expected["job.local_rank"] = local_rank
    if world_size is not None:
        expected["job.world_size"] = world_size
    assert job_keys(run(tmp_path, job_env(**variables))) == expected


def test_no_launcher_no_job_keys(tmp_path):
    trace = run(tmp_path, job_env(WORLD_SIZE=8, LOCAL_RANK=1, SLURM_NTASKS=4, RANK=""))
    assert job_keys(trace) == {}
    # And no Rank column: no process has a rank.
    assert processes_of_info(trace)[0] == ["PID", "PPID", "Threads", "CUDA", "Command"]
    import cutrace
    t = cutrace.open(trace)
    assert t.rank is None and t.local_rank is None and t.world_size is None
    assert t.metadata["host"] == metadata(trace)["host"]


def export_sqlite(trace, tmp_path):
    out = tmp_path / (Path(trace).stem + ".sqlite")
    run_tool("export", "--type", "sqlite", "-o", out, "--force-overwrite", "true", trace)
    return out


def processes_of_info(trace):
    """`cutrace info`'s Processes table: (header, rows), each row split into the header's columns."""
    lines = info(trace).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Processes ("))
    header = lines[start + 1].split()
    rows = []
    for line in lines[start + 2:]:
        if not line.strip() or line.startswith("  CUDA runtime library:"):
            break
        rows.append(line.split(None, len(header) - 1))
    return header, rows


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    """`cutrace profile -- job_launcher.py`: one trace, a rank per child process."""
    tmp = tmp_path_factory.mktemp("jobs")
    command = [sys.executable, str(SCRIPTS / "job_launcher.py"), "libcudart.so.13", app("sim_vector_add"), "1"]
    proc, trace = profile(tmp, command, env=job_env())
    pids = {}
    for line in proc.stdout.splitlines():
        role, _, pid = line.split()
        pids[role] = int(pid)
    assert sorted(pids) == ["exec0", "exec1", "exec2", "exec3", "fork4", "fork5"], proc.stdout
    return trace, pids, tmp


# role -> (rank, local rank, world size), None where unknown.
EXPECTED = {"exec0": (0, 0, 6), "exec1": (1, 1, 6), "exec2": (2, None, 6), "exec3": (None, None, None),
            "fork4": (4, 0, 6), "fork5": (5, 1, 6)}


def test_each_process_has_its_own_rank_in_info(launched):
    trace, pids, _ = launched
    header, rows = processes_of_info(trace)
    assert header == ["PID", "PPID", "Rank", "Threads", "CUDA", "Command"]
    ranks = {int(row[0]): row[2] for row in rows}
    assert ranks == {pids[role]: "-" if rank is None else str(rank) for role, (rank, _, _) in EXPECTED.items()}
    # The session itself was started with no job variable.
    assert job_keys(trace) == {}


def test_each_process_has_its_own_rank_in_the_sqlite_export(launched):
    trace, pids, tmp = launched
    db = sqlite3.connect(export_sqlite(trace, tmp))
    rows = {pid: (rank, local_rank, world_size)
            for pid, rank, local_rank, world_size in db.execute(
                "SELECT pid, rank, localRank, worldSize FROM CUTRACE_PROCESSES")}
    assert rows == {pids[role]: expected for role, expected in EXPECTED.items()}
    columns = {c[1]: c[2] for c in db.execute('PRAGMA table_info("CUTRACE_PROCESSES")')}
    assert columns["rank"] == columns["localRank"] == columns["worldSize"] == "INTEGER"


def test_each_process_has_its_own_rank_in_python(launched):
    import cutrace
    trace, pids, _ = launched
    table = cutrace.open(trace).table("CUTRACE_PROCESSES").to_pydict()
    rows = {pid: (rank, local_rank, world_size) for pid, rank, local_rank, world_size in
            zip(table["pid"], table["rank"], table["localRank"], table["worldSize"])}
    assert rows == {pids[role]: expected for role, expected in EXPECTED.items()}


def test_python_gives_the_session_job_and_metadata(tmp_path):
    import cutrace
    trace = run(tmp_path, job_env(OMPI_COMM_WORLD_RANK=6, OMPI_COMM_WORLD_LOCAL_RANK=2, OMPI_COMM_WORLD_SIZE=8))
    t = cutrace.open(trace)
    assert (t.rank, t.local_rank, t.world_size) == (6, 2, 8)
    assert t.metadata["job.rank_variable"] == "OMPI_COMM_WORLD_RANK"
    # As META_DATA_CAPTURE has it, pair for pair.
    capture = t.table("META_DATA_CAPTURE").to_pydict()
    assert t.metadata == dict(zip(capture["name"], capture["value"]))
    assert t.metadata["start.realtime_ns"] == metadata(trace)["start.realtime_ns"]


def test_wall_clock_anchors(tmp_path):
    before = time.time_ns()
    trace = run(tmp_path, job_env())
    after = time.time_ns()
    start, end = metadata(trace), metadata(trace, "End summary:")
    start_real, start_mono = int(start["start.realtime_ns"]), int(start["start.monotonic_ns"])
    end_real, end_mono = int(end["end.realtime_ns"]), int(end["end.monotonic_ns"])
    assert before <= start_real < end_real <= after
    assert start_mono < end_mono
    # The two anchors give the same offset: the wall clock was not stepped during the run, and both
    # are paired to well under a microsecond (a bad pairing, or realtime read apart from monotonic,
    # shows here).
    assert abs((start_real - start_mono) - (end_real - end_mono)) < 100_000
    for error in (int(start["start.anchor_error_ns"]), int(end["end.anchor_error_ns"])):
        assert 0 < error < 1_000_000
