"""MPI tracing (-t mpi, --mpi-impl): a two-rank program under each implementation's own mpirun, each
rank traced into a file of its own (-o rank%q{...}), its MPI calls read back through mpi_event_trace and
mpi_event_sum with their communicators, peers, tags, datatypes and bytes; the program's output and exit
code unchanged; and the option's refusals."""
import csv
import io
import os
import shutil
import sqlite3
import subprocess

import pytest

from conftest import APPS, BUILD, CUTRACE, calls, counts, run_tool, sim_env

# Per implementation: its mpirun, the variable that holds a process's rank in the job, and the options
# a two-rank job on a small machine needs (Open MPI counts cores, and refuses root without consent).
IMPLEMENTATIONS = {
    "openmpi": ("mpirun.openmpi", "OMPI_COMM_WORLD_RANK", ["--oversubscribe"]),
    "mpich": ("mpirun.mpich", "PMI_RANK", []),
}


def mpi_env():
    env = sim_env(OMPI_ALLOW_RUN_AS_ROOT=1, OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1,
                  # No network is needed between two ranks of one machine, nor a search for one.
                  OMPI_MCA_btl="self,vader", OMPI_MCA_btl_vader_single_copy_mechanism="none")
    return env


def needs(impl):
    runner = IMPLEMENTATIONS[impl][0]
    if shutil.which(runner) is None:
        pytest.skip(f"{runner} is not installed (scripts/install-deps.sh installs Open MPI and MPICH)")
    program = APPS / f"mpi_app_{impl}"
    interposer = BUILD / "lib" / f"libcutrace-mpi-{impl}.so"
    if not program.exists() or not interposer.exists():
        pytest.skip(f"this build has no {impl} support ({program.name}, {interposer.name}): its headers were "
                    f"missing when cutrace was configured")
    return runner, str(program)


def run_job(impl, tmp_path, traced=True, extra=()):
    runner, program = needs(impl)
    _, rank_variable, options = IMPLEMENTATIONS[impl]
    command = [runner, *options, "-n", "2"]
    if traced:
        command += [str(CUTRACE), "profile", "-o", str(tmp_path / f"rank%q{{{rank_variable}}}"), "-t", "mpi",
                    "--mpi-impl", impl, *extra, "--"]
    command.append(program)
    return subprocess.run(command, env=mpi_env(), capture_output=True, text=True, timeout=180)


def table(trace, report):
    proc = run_tool("stats", "--report", report, "--format", "csv", trace)
    lines = [l for l in proc.stdout.splitlines() if l and not l.startswith("#")]
    return list(csv.DictReader(io.StringIO("\n".join(lines))))


# What each rank's calls say, in the order it makes them: (Event, Comm, CommSize, Tag, PeerRank,
# RootRank, Datatype, Size, CollSendSize, CollRecvSize), "" where the call has no such slot. Communicator 1 is
# MPI_COMM_WORLD, 3 the program's reversed one, whose rank 0 is world rank 1: peers are world ranks.
def expected_calls(rank):
    other = str(1 - rank)
    point_to_point = [
        ("MPI_Send", "1", "2", "7", "1", "", "MPI_INT", "40", "", ""),
        ("MPI_Recv", "1", "2", "-1", "MPI_ANY_SOURCE", "", "MPI_DOUBLE", "24", "", ""),
    ] if rank == 0 else [
        ("MPI_Recv", "1", "2", "7", "0", "", "MPI_INT", "40", "", ""),
        ("MPI_Send", "1", "2", "8", "0", "", "MPI_DOUBLE", "24", "", ""),
    ]
    reversed_exchange = (("MPI_Recv", "3", "2", "21", "1", "", "MPI_INT", "8", "", "") if rank == 0 else
                         ("MPI_Send", "3", "2", "21", "0", "", "MPI_INT", "8", "", ""))
    return [
        ("MPI_Init", "", "", "", "", "", "", "", "", ""),
        ("MPI_Comm_rank", "1", "2", "", "", "", "", "", "", ""),
        ("MPI_Comm_size", "1", "2", "", "", "", "", "", "", ""),
        *point_to_point,
        ("MPI_Irecv", "1", "2", "9", other, "", "MPI_CHAR", "5", "", ""),
        ("MPI_Isend", "1", "2", "9", other, "", "MPI_CHAR", "5", "", ""),
        ("MPI_Waitall", "", "", "", "", "", "", "", "", ""),
        ("MPI_Sendrecv", "1", "2", "11", other, "", "MPI_INT", "", "16", "16"),
        ("MPI_Barrier", "1", "2", "", "", "", "", "", "", ""),
        ("MPI_Bcast", "1", "2", "", "", "1", "MPI_INT", "24", "", ""),
        ("MPI_Reduce", "1", "2", "", "", "0", "MPI_DOUBLE", "16", "", ""),
        ("MPI_Allreduce", "1", "2", "", "", "", "MPI_LONG_LONG", "64", "", ""),
        ("MPI_Allgather", "1", "2", "", "", "", "MPI_INT", "", "4", "4"),
        ("MPI_Comm_split", "1", "2", "", "", "", "", "", "", ""),
        ("MPI_Comm_rank", "3", "2", "", "", "", "", "", "", ""),
        reversed_exchange,
        ("MPI_Allreduce", "3", "2", "", "", "", "MPI_INT", "4", "", ""),
        ("MPI_Comm_free", "3", "", "", "", "", "", "", "", ""),
        ("MPI_Type_commit", "", "", "", "", "", "", "", "", ""),
        # A derived datatype (3 ints) has no predefined name; its size comes from MPI_Type_commit.
        ("MPI_Bcast", "1", "2", "", "", "0", "other", "24", "", ""),
        ("MPI_Type_free", "", "", "", "", "", "", "", "", ""),
        ("MPI_Finalize", "", "", "", "", "", "", "", "", ""),
    ]


COLUMNS = ("Event", "Comm", "CommSize", "Tag", "PeerRank", "RootRank", "Datatype", "Size (B)", "CollSendSize (B)",
           "CollRecvSize (B)")
# nsys's kinds of MPI calls (its mpi_event_trace's Kind, its MPI_*_EVENTS tables).
KINDS = {"MPI_Send": "p2p", "MPI_Recv": "p2p", "MPI_Isend": "p2p", "MPI_Irecv": "p2p", "MPI_Sendrecv": "p2p",
         "MPI_Waitall": "startwait", "MPI_Barrier": "coll", "MPI_Bcast": "coll", "MPI_Reduce": "coll",
         "MPI_Allreduce": "coll", "MPI_Allgather": "coll"}


@pytest.mark.parametrize("impl", ["openmpi", "mpich"])
def test_each_rank_records_its_calls_with_communicators_peers_tags_and_bytes(impl, tmp_path):
    plain = run_job(impl, tmp_path, traced=False)
    traced = run_job(impl, tmp_path)
    assert traced.returncode == plain.returncode == 0, traced.stderr
    # The ranks' lines interleave as they please; each rank's own line is unchanged.
    program_lines = sorted(l for l in traced.stdout.splitlines() if l.startswith("rank "))
    assert program_lines == sorted(plain.stdout.splitlines()) == [
        "rank 0 reversed_rank 1 check 8445", "rank 1 reversed_rank 0 check 376"]
    for rank in (0, 1):
        trace = tmp_path / f"rank{rank}.cutrace"
        rows = table(trace, "mpi_event_trace")
        assert [tuple(r[c] for c in COLUMNS) for r in rows] == expected_calls(rank)
        assert {r["Rank"] for r in rows} == {str(rank)}
        assert all(r["Kind"] == KINDS.get(r["Event"], "other") for r in rows), [(r["Event"], r["Kind"]) for r in rows]
        assert {r["Result"] for r in rows} == {"0"}
        assert all(int(r["End (ns)"]) - int(r["Start (ns)"]) == int(r["Duration (ns)"]) for r in rows)
        summary = {r["Name"]: int(r["Num Calls"]) for r in table(trace, "mpi_event_sum")}
        expected = {}
        for call in expected_calls(rank):
            expected[call[0]] = expected.get(call[0], 0) + 1
        assert summary == expected
        # The SQLite export sorts them into nsys's MPI tables, with the same values.
        check_sqlite_tables(trace, tmp_path, rank)
        # The timeline export shows the calls too, in the mpi category, with their arguments decoded.
        events, _ = calls(trace, tmp_path, domains=("mpi",))
        assert counts(events) == expected
        send = next(e for e in events if e["name"] == "MPI_Isend")
        assert send["args"]["datatype"] == "MPI_CHAR" and send["args"]["peer"] == 1 - rank


@pytest.mark.parametrize("impl", ["openmpi", "mpich"])
def test_a_job_traced_without_mpi_runs_and_records_no_mpi_call(impl, tmp_path):
    runner, program = needs(impl)
    _, rank_variable, options = IMPLEMENTATIONS[impl]
    proc = subprocess.run([runner, *options, "-n", "2", str(CUTRACE), "profile", "-o",
                           str(tmp_path / f"rank%q{{{rank_variable}}}"), "-t", "osrt", "--", program],
                          env=mpi_env(), capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    for rank in (0, 1):
        events, _ = calls(tmp_path / f"rank{rank}.cutrace", tmp_path, domains=("mpi",))
        assert events == []


@pytest.mark.parametrize("value", ["bogus", "OpenMPI", ""])
def test_mpi_impl_takes_openmpi_or_mpich(value, tmp_path):
    proc = subprocess.run([str(CUTRACE), "profile", "-o", str(tmp_path / "t"), "-t", "mpi", "--mpi-impl", value,
                           "--", "true"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    expected = "cutrace profile: option '--mpi-impl' takes openmpi or mpich"
    assert proc.stderr.strip() == expected + (f", not '{value}'." if value else ".")
    assert not (tmp_path / "t.cutrace").exists()


def test_a_missing_interposer_is_named(tmp_path):
    # A copy of the tools beside a lib/ without the MPI interposers: what a build without MPI has.
    bin_dir, lib_dir = tmp_path / "bin", tmp_path / "lib"
    bin_dir.mkdir()
    shutil.copytree(BUILD / "lib", lib_dir, ignore=shutil.ignore_patterns("libcutrace-mpi-*", "static", "python*"))
    for tool in ("cutrace", "cutrace-recorder"):
        if (BUILD / "bin" / tool).exists():
            shutil.copy2(BUILD / "bin" / tool, bin_dir / tool)
    if (BUILD / "libexec").exists():
        shutil.copytree(BUILD / "libexec", tmp_path / "libexec")
    # The copy must look for its libraries beside itself: the sanitizer stages point CUTRACE_PRELOAD_LIB
    # at the plain build, whose lib/ has the interposers.
    env = {k: v for k, v in os.environ.items() if k != "CUTRACE_PRELOAD_LIB"}
    proc = subprocess.run([str(bin_dir / "cutrace"), "profile", "-o", str(tmp_path / "t"), "-t", "mpi",
                           "--mpi-impl", "mpich", "--", "true"], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 1
    assert proc.stderr.strip() == (f"cutrace profile: -t mpi --mpi-impl mpich needs {lib_dir}/libcutrace-mpi-mpich.so, "
                                   "which is missing: this cutrace was built without MPICH (libmpich-dev); install it "
                                   "and rebuild cutrace, or leave mpi out of -t.")


def check_sqlite_tables(trace, tmp_path, rank):
    out = tmp_path / f"rank{rank}.sqlite"
    run_tool("export", "--type", "sqlite", "-o", out, trace)
    db = sqlite3.connect(out)
    names = dict(db.execute("SELECT id, value FROM StringIds"))
    number = lambda v: "" if v == "" else int(v)
    special = {"MPI_ANY_SOURCE": -1, "MPI_PROC_NULL": -2, "MPI_ROOT": -3}
    peer = lambda v: special[v] if v in special else number(v)
    calls = expected_calls(rank)
    p2p = [(c[0], number(c[1]), number(c[3]), peer(c[4]), number(c[7] or c[8])) for c in calls if KINDS.get(c[0]) == "p2p"]
    assert [(names[t], *(("" if x is None else x) for x in rest)) for t, *rest in db.execute(
        "SELECT textId, commHandle, tag, remoteRank, size FROM MPI_P2P_EVENTS ORDER BY start")] == p2p
    coll = [(c[0], number(c[1]), peer(c[5]), number(c[7]), number(c[8]), number(c[9])) for c in calls
            if KINDS.get(c[0]) == "coll"]
    assert [(names[t], *(("" if x is None else x) for x in rest)) for t, *rest in db.execute(
        "SELECT textId, commHandle, rootRank, size, collSendSize, collRecvSize FROM MPI_COLLECTIVES_EVENTS "
        "ORDER BY start")] == coll
    waits = [names[t] for t, in db.execute("SELECT textId FROM MPI_START_WAIT_EVENTS ORDER BY start")]
    assert waits == [c[0] for c in calls if KINDS.get(c[0]) == "startwait"]
    others = [names[t] for t, in db.execute("SELECT textId FROM MPI_OTHER_EVENTS ORDER BY start")]
    assert others == [c[0] for c in calls if c[0] not in KINDS]
    assert [r for r, in db.execute("SELECT rank FROM MPI_RANKS")] == [rank]
