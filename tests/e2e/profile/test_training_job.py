"""A training job in miniature under each MPI implementation's mpirun, every rank traced into a file of
its own: mpi_train broadcasts a communicator id over MPI, replays a captured step graph (a memset, a
forward and a backward kernel) every step, all-reduces gradients through nccl_like (NCCL's ranges and
payloads) and the loss over MPI. Each rank's trace shows its MPI calls, its collectives with their
decoded payloads, and its graph's nodes linked to the launch that ran them; the job's output is what
it is untraced."""
import csv
import io
import json
import sqlite3
import subprocess

import pytest

from conftest import APPS, BUILD, CUTRACE, run_tool
from test_mpi import IMPLEMENTATIONS, mpi_env

STEPS = 4
COMM = 0x7A11 << 32


def job(impl, tmp_path, traced):
    runner, rank_variable, options = IMPLEMENTATIONS[impl]
    program = APPS / f"mpi_train_{impl}"
    if not program.exists() or not (BUILD / "lib" / f"libcutrace-mpi-{impl}.so").exists():
        pytest.skip(f"this build has no {impl} support: its headers were missing when cutrace was configured")
    command = [runner, *options, "-n", "2"]
    if traced:
        command += [str(CUTRACE), "profile", "-o", str(tmp_path / f"rank%q{{{rank_variable}}}"), "-t",
                    "cuda,nvtx,mpi", "--mpi-impl", impl, "--cuda-graph-trace", "node", "--"]
    proc = subprocess.run([*command, str(program), str(STEPS)], env=mpi_env(), capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr
    return proc


@pytest.mark.parametrize("impl", sorted(IMPLEMENTATIONS))
def test_each_rank_shows_its_mpi_calls_collectives_and_graph_nodes(impl, tmp_path):
    plain = job(impl, tmp_path, traced=False)
    traced = job(impl, tmp_path, traced=True)
    assert [l for l in traced.stdout.splitlines() if not l.startswith("cutrace:")] == plain.stdout.splitlines()
    assert plain.stdout.endswith(f"ranks 2 steps {STEPS}\n")
    for rank in (0, 1):
        trace = tmp_path / f"rank{rank}.cutrace"
        out = tmp_path / f"rank{rank}.sqlite"
        run_tool("export", "--type", "sqlite", "-o", out, trace)
        db = sqlite3.connect(out)
        names = dict(db.execute("SELECT id, value FROM StringIds"))

        # MPI: the id's broadcast from rank 0, the loss all-reduced every step, one barrier.
        mpi = [r["Event"] for r in csv_rows(trace, "mpi_event_trace")]
        assert [e for e in mpi if e in ("MPI_Bcast", "MPI_Allreduce", "MPI_Barrier")] == \
            ["MPI_Bcast"] + ["MPI_Allreduce"] * STEPS + ["MPI_Barrier"]

        # NCCL: the communicator's creation and one all-reduce per step, their payloads decoded.
        ranges = [(name, json.loads(payload)) for name, payload in db.execute(
            """SELECT coalesce(n.text, s.value), n.jsonText FROM NVTX_EVENTS AS n
               LEFT JOIN StringIds AS s ON s.id = n.textId
               JOIN NVTX_EVENTS AS d ON d.eventType = 75 AND d.text = 'NCCL' AND d.domainId = n.domainId
               WHERE n.eventType = 59 ORDER BY n.start""")]
        assert ranges == [("ncclCommInitRank", {"NCCL communicator ID": COMM, "No. of ranks": 2, "Rank": rank,
                                                "CUDA device": 0})] + \
            [("ncclAllReduce", {"NCCL communicator ID": COMM, "Message size [bytes]": 4096,
                                "Reduction operation": "Sum"})] * STEPS

        # The graph: each step replays its two kernels and its memset, one node id each, every one
        # linked to the cudaGraphLaunch that ran it.
        launches = dict(db.execute("SELECT r.correlationId, s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
                                   "JOIN StringIds s ON s.id = r.nameId WHERE r.correlationId IS NOT NULL"))
        kernels = db.execute("SELECT shortName, graphNodeId, correlationId, end - start FROM CUPTI_ACTIVITY_KIND_KERNEL "
                             "ORDER BY start").fetchall()
        assert [names[k[0]] for k in kernels] == ["sleep_us_20_forward", "sleep_us_40_backward"] * STEPS
        assert [k[3] for k in kernels] == [20000, 40000] * STEPS
        assert len({k[1] for k in kernels}) == 2 and None not in {k[1] for k in kernels}
        assert all(launches[k[2]].startswith("cudaGraphLaunch") for k in kernels)
        sets = db.execute("SELECT graphNodeId, correlationId FROM CUPTI_ACTIVITY_KIND_MEMSET").fetchall()
        assert len(sets) == STEPS and len({s[0] for s in sets}) == 1
        assert all(launches[s[1]].startswith("cudaGraphLaunch") for s in sets)


def csv_rows(trace, report):
    proc = run_tool("stats", "--report", report, "--format", "csv", trace)
    return list(csv.DictReader(io.StringIO("\n".join(l for l in proc.stdout.splitlines() if l))))
