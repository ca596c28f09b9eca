"""CUDA graphs: --cuda-graph-trace graph (nsys's default: a launch as one interval) and node (each node
as its own kernel, copy or set, with its graph and node ids), on sim_graphs: a captured graph (memset,
kernel, device-to-device copy, kernel) and a built one (memset; kernel and copy after it; an empty join
node), each launched N times, with an ordinary kernel between them."""
import collections
import csv
import io
import sqlite3
import subprocess

import pyarrow.parquet as pq
import pytest

from conftest import CUTRACE, api_sum, app, calls, metadata, profile, program_calls, run_tool

LAUNCHES = 3
KERNEL_NS = {"sleep_us_30_add": 30000, "sleep_us_10_touch": 10000}
SET_NS = COPY_NS = (4096 + 9) // 10  # 4096 bytes at the simulated 10 GB/s
CAPTURED_NS = SET_NS + 30000 + COPY_NS + 10000
BUILT_NS = SET_NS + 10000 + COPY_NS  # the empty node takes no time


def run(tmp_path, mode=None, name="trace"):
    options = ("--cuda-graph-trace", mode) if mode else ()
    proc, trace = profile(tmp_path, [app("sim_graphs"), str(LAUNCHES)], options=options, name=name)
    assert proc.stdout.startswith(f"launches {LAUNCHES}\ncaptured_nodes 4\nbuilt_nodes 4\nverified {LAUNCHES}\n")
    return proc, trace


def sqlite_of(trace, tmp_path):
    out = tmp_path / (trace.stem + ".sqlite")
    run_tool("export", "--type", "sqlite", "-o", out, trace)
    return sqlite3.connect(out)


def launch_calls(db):
    """correlationId -> name of every recorded graph launch and kernel launch call."""
    return dict(db.execute("SELECT r.correlationId, s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
                           "JOIN StringIds s ON s.id = r.nameId WHERE r.correlationId IS NOT NULL"))


def test_by_default_a_graph_launch_is_one_interval_and_its_nodes_have_no_records(tmp_path):
    proc, trace = run(tmp_path)
    # The program's calls, graph API included, are recorded one for one.
    recorded = counts_of(calls(trace, tmp_path)[0])
    for name, n in program_calls(proc.stdout).items():
        assert recorded[name] == n, (name, recorded[name], n)
    assert metadata(trace)["cuda_graph_trace"] == "graph"
    db = sqlite_of(trace, tmp_path)
    graphs = db.execute("SELECT start, end, graphId, correlationId, streamId FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE "
                        "ORDER BY start").fetchall()
    assert len(graphs) == 2 * LAUNCHES
    launched = launch_calls(db)
    assert all(launched[g[3]].startswith("cudaGraphLaunch") for g in graphs)
    # Captured and built alternate; each lasts exactly the sum of its nodes' times (they run back to
    # back on the stream, and the stream was never idle inside a launch).
    ids = [g[2] for g in graphs]
    assert len(set(ids)) == 2 and ids == [ids[0], ids[1]] * LAUNCHES
    assert [g[1] - g[0] for g in graphs] == [CAPTURED_NS, BUILT_NS] * LAUNCHES
    assert len({g[4] for g in graphs}) == 1
    # Only the ordinary launches have kernel records; no copy or set of a graph has one either.
    kernels = db.execute("SELECT graphId, graphNodeId, end - start FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchall()
    assert kernels == [(None, None, 10000)] * LAUNCHES
    copies = db.execute("SELECT copyKind FROM CUPTI_ACTIVITY_KIND_MEMCPY").fetchall()
    assert sorted(copies) == [(2,)] * (2 * LAUNCHES)  # the program's device-to-host checks
    assert db.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_MEMSET").fetchone() == (0,)
    # The timeline draws each launch on the stream's track, with a flow from cudaGraphLaunch.
    _, doc = calls(trace, tmp_path, domains=None)
    drawn = [e for e in doc["traceEvents"] if e.get("cat") == "cuda_gpu" and e["name"].startswith("[CUDA graph ")]
    assert sorted(e["dur"] * 1000 for e in drawn) == sorted([CAPTURED_NS, BUILT_NS] * LAUNCHES)
    assert all(e["args"]["graph_id"] in ids for e in drawn)


def test_node_mode_records_every_node_with_its_graph_and_node_ids(tmp_path):
    proc, trace = run(tmp_path, "node")
    assert metadata(trace)["cuda_graph_trace"] == "node"
    db = sqlite_of(trace, tmp_path)
    assert db.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE").fetchone() == (0,)
    names = dict(db.execute("SELECT id, value FROM StringIds"))
    kernels = db.execute("SELECT shortName, graphId, graphNodeId, end - start, correlationId "
                         "FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start").fetchall()
    launched = launch_calls(db)
    in_graphs = [k for k in kernels if k[1] is not None]
    plain = [k for k in kernels if k[1] is None]
    # Per round: the captured graph's two kernels, the ordinary one, the built graph's one.
    assert len(plain) == LAUNCHES and all(launched[k[4]].startswith("cudaLaunchKernel") for k in plain)
    assert len(in_graphs) == 3 * LAUNCHES
    assert all(launched[k[4]].startswith("cudaGraphLaunch") for k in in_graphs)
    assert all(k[3] == KERNEL_NS[names[k[0]]] for k in kernels)
    # A node keeps its id in every launch; the captured graph's nodes are its own, the built one's too.
    per_node = collections.Counter((k[1], k[2]) for k in in_graphs)
    assert set(per_node.values()) == {LAUNCHES} and len(per_node) == 3
    assert len({k[1] for k in in_graphs}) == 2
    sets = db.execute("SELECT graphNodeId, bytes, value FROM CUPTI_ACTIVITY_KIND_MEMSET").fetchall()
    assert len(sets) == 2 * LAUNCHES and {s[1:] for s in sets} == {(4096, 7), (4096, 3)}
    assert len({s[0] for s in sets}) == 2
    device_copies = db.execute("SELECT graphNodeId FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 8").fetchall()
    assert len(device_copies) == 2 * LAUNCHES and len(set(device_copies)) == 2 and (None,) not in device_copies
    # The kernel summary counts the graphs' kernels as nsys's node mode does.
    summary = subprocess.run([str(CUTRACE), "stats", "--report", "cuda_gpu_kern_sum", "--format", "csv", str(trace)],
                             capture_output=True, text=True, check=True).stdout
    instances = {row["Name"].split("(")[0]: int(row["Instances"]) for row in csv.DictReader(io.StringIO(summary))}
    assert instances == {"graphs::sleep_us_30_add": LAUNCHES, "graphs::sleep_us_10_touch": 3 * LAUNCHES}


def test_nsys_jax_profile_line_runs_unchanged(tmp_path):
    # nsys-jax profiles every run with this line; only the output name and the program are ours.
    line = ["--cuda-graph-trace=node", "--cpuctxsw=none", "--python-sampling=true",
            "--trace=cublas,cuda,cudnn,cusolver,nvtx,osrt"]
    proc, trace = profile(tmp_path, [app("sim_graphs"), "1"], options=line)
    assert "verified 1" in proc.stdout
    assert metadata(trace)["cuda_graph_trace"] == "node"


@pytest.mark.parametrize("value", ["nodes", "", "graph:host-only"])
def test_a_bad_graph_trace_value_is_one_sentence(tmp_path, value):
    proc = subprocess.run([str(CUTRACE), "profile", "-o", str(tmp_path / "t"), f"--cuda-graph-trace={value}", "true"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and not (tmp_path / "t.cutrace").exists()
    assert proc.stderr.startswith("cutrace profile: option '--cuda-graph-trace' takes graph or node"), proc.stderr
    assert proc.stderr.count("\n") == 1


def test_gpu_time_counts_a_whole_graph_launch_as_its_nodes_time(tmp_path):
    # The nodes of a launch run back to back, so the busy time of the launch traced whole equals
    # the sum of its nodes traced one by one: the utilization recipe gives the same busy time.
    busy = {}
    for mode in ("graph", "node"):
        _, trace = run(tmp_path, mode, name=mode)
        out = tmp_path / f"util-{mode}"
        subprocess.run([str(CUTRACE), "recipe", "gpu_time_util", "--input", str(trace), "--output", str(out),
                        "--mode", "none"], check=True, capture_output=True, text=True, timeout=300)
        (row,) = pq.read_table(out / "utilization.parquet").to_pylist()
        busy[mode] = row["Busy Time"]
    graph_work = LAUNCHES * (CAPTURED_NS + BUILT_NS + 10000)
    assert busy["graph"] == busy["node"] >= graph_work


def counts_of(events):
    return collections.Counter(e["name"] for e in events)
