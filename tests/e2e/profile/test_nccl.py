"""NCCL's NVTX ranges with their extended payloads (the NVTX payload extension), from nccl_like, a
library that registers NCCL's domain, range names, payload schemas and reduction-operation enum and
annotates its calls as NCCL does, on several threads: exact counts, every decoded value in the SQLite
export's jsonText and the Perfetto export's arguments, the nccl_sum recipe's rows; payloads a tool must
survive (an unregistered schema, an oversized payload, a null one, several at once), counted and said,
the program's output unchanged. With real NCCL on a GPU: tests/e2e/profile/test_real_gpu.py."""
import json
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from conftest import CUTRACE, app, profile, run_tool, sim_env
from test_nvtx import export as perfetto_events, nvtx_sum, table

RANKS, ITERATIONS = 3, 4
COMM = 0xC0FFEE00
MIB = 1 << 20


def traced(tmp_path, *args):
    command = [app("nccl_app"), *map(str, args)]
    proc, trace = profile(tmp_path, command)
    plain = subprocess.run(command, env=sim_env(), capture_output=True, text=True, timeout=60)
    assert proc.stdout == plain.stdout and proc.returncode == plain.returncode == 0
    return trace


def nccl_rows(trace, tmp_path):
    """(name, decoded payload or None) of every range of domain NCCL, from the SQLite export."""
    out = tmp_path / "nccl.sqlite"
    run_tool("export", "--type", "sqlite", "-o", out, trace)
    db = sqlite3.connect(out)
    return [(name, json.loads(payload) if payload else None) for name, payload in db.execute(
        """SELECT coalesce(n.text, s.value), n.jsonText FROM NVTX_EVENTS AS n
           LEFT JOIN StringIds AS s ON s.id = n.textId
           JOIN NVTX_EVENTS AS d ON d.eventType = 75 AND d.text = 'NCCL' AND d.domainId = n.domainId
           WHERE n.eventType = 59 ORDER BY n.start""")]


def test_ranges_and_their_payloads_decoded_exactly(tmp_path):
    trace = traced(tmp_path, RANKS, ITERATIONS)
    n = RANKS * ITERATIONS
    assert nvtx_sum(trace) == {("PushPop", "NCCL:ncclCommInitRank"): RANKS, ("PushPop", "NCCL:ncclAllReduce"): n,
                               ("PushPop", "NCCL:ncclBroadcast"): n}

    rows = nccl_rows(trace, tmp_path)
    inits = [p for name, p in rows if name == "ncclCommInitRank"]
    assert sorted(inits, key=lambda p: p["Rank"]) == [
        {"NCCL communicator ID": COMM + r, "No. of ranks": RANKS, "Rank": r, "CUDA device": 0} for r in range(RANKS)]
    reduces = Counter(json.dumps(p, sort_keys=True) for name, p in rows if name == "ncclAllReduce")
    assert reduces == Counter({json.dumps({"NCCL communicator ID": COMM + r, "Message size [bytes]": MIB,
                                           "Reduction operation": op}, sort_keys=True): ITERATIONS // 2
                               for r in range(RANKS) for op in ("Sum", "Max")})
    broadcasts = Counter(json.dumps(p, sort_keys=True) for name, p in rows if name == "ncclBroadcast")
    assert broadcasts == Counter({json.dumps({"NCCL communicator ID": COMM + r, "Message size [bytes]": 4096,
                                              "Root": 0}, sort_keys=True): ITERATIONS for r in range(RANKS)})
    # The fields keep the schema's order.
    assert list(inits[0]) == ["NCCL communicator ID", "No. of ranks", "Rank", "CUDA device"]

    # The Perfetto export: each field an argument of its slice, numbers as numbers.
    slices = [e for e in perfetto_events(trace, tmp_path) if e.get("cat") == "nvtx" and e["ph"] == "X"]
    assert Counter(e["name"] for e in slices) == {"ncclCommInitRank": RANKS, "ncclAllReduce": n, "ncclBroadcast": n}
    for e in slices:
        assert e["args"]["domain"] == "NCCL"
        if e["name"] == "ncclAllReduce":
            assert e["args"]["Message size [bytes]"] == MIB
            assert e["args"]["Reduction operation"] in ("Sum", "Max")
            assert e["args"]["NCCL communicator ID"] - COMM in range(RANKS)
        elif e["name"] == "ncclBroadcast":
            assert (e["args"]["Message size [bytes]"], e["args"]["Root"]) == (4096, 0)

    # The reports that do not decode payloads are as they were.
    pushpop = table(trace, "nvtx_pushpop_trace")
    assert len(pushpop) == RANKS + 2 * n


def test_nccl_sum_recipe_summarises_the_nccl_ranges(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    pytest.importorskip("duckdb")
    trace = traced(tmp_path, RANKS, ITERATIONS)
    out = tmp_path / "out"
    proc = subprocess.run([str(CUTRACE), "recipe", "nccl_sum", "--input", str(trace), "--output", str(out),
                           "--mode", "none"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = pq.read_table(out / "rank_stats.parquet").to_pylist()
    n = RANKS * ITERATIONS
    assert {r["Name"]: r["Instances"] for r in rows} == {"ncclCommInitRank": RANKS, "ncclAllReduce": n,
                                                          "ncclBroadcast": n}
    # The same times as nvtx_sum's rows of domain NCCL.
    nvtx = {r["Range"]: r for r in table(trace, "nvtx_sum")}
    for r in rows:
        theirs = nvtx["NCCL:" + r["Name"]]
        assert r["Total Time"] == int(theirs["Total Time (ns)"])
        assert (r["Min"], r["Max"]) == (int(theirs["Min (ns)"]), int(theirs["Max (ns)"]))
    assert [r["Name"] for r in pq.read_table(out / "all_stats.parquet").to_pylist()] == [r["Name"] for r in rows]


def test_bad_payloads_are_kept_as_far_as_they_can_be_and_said(tmp_path):
    trace = traced(tmp_path, 1, 1, "bad")
    rows = [p for name, p in nccl_rows(trace, tmp_path) if name == "ncclAllReduce"]
    assert len(rows) == 5  # the one good, then the four bad ones in the order made
    good, unregistered, oversized, null, two = rows
    assert good["Reduction operation"] == "Sum"
    assert unregistered == {"payload": "8877665544332211" + "2a00000000000000",
                            "(problem)": "schema 16777315 is not registered in the trace"}
    assert oversized == {"NCCL communicator ID": 7, "Message size [bytes]": 64, "Reduction operation": "Min",
                         "(problem)": "the program gave more bytes than the 1024 recorded"}
    assert null == {"(problem)": "field NCCL communicator ID lies beyond the 0 bytes recorded; field Message size "
                                 "[bytes] lies beyond the 0 bytes recorded; field Reduction operation lies beyond "
                                 "the 0 bytes recorded; the program gave more bytes than the 0 recorded"}
    assert two == {"NCCL communicator ID": 8, "Message size [bytes]": 128, "Reduction operation": "Avg",
                   "(problem)": "the program gave more payloads; the first was recorded"}


# Real NCCL where the toolkit carries it (CUDA 13's /usr/local/cuda/lib64/libnccl.so.2): without a GPU
# ncclCommInitRank fails, but it opens and closes its range first, through NCCL's own copy of NVTX
# reaching the shim as injection library; as it failed before its communicator existed, the range closes
# without a payload (on a GPU it closes with one: test_real_gpu.py).
REAL_NCCL = """
import ctypes, sys
nccl = ctypes.CDLL("libnccl.so.2")
version, uid, comm = ctypes.c_int(), (ctypes.c_char * 128)(), ctypes.c_void_p()
print("version", nccl.ncclGetVersion(ctypes.byref(version)), version.value)
print("unique id", nccl.ncclGetUniqueId(uid))
print("init", nccl.ncclCommInitRank(ctypes.byref(comm), 1, uid, 0))
"""


def test_real_nccls_ranges_reach_the_trace_without_a_gpu(tmp_path):
    lib = Path("/usr/local/cuda/lib64")
    if not (lib / "libnccl.so.2").exists():
        pytest.skip("no libnccl.so.2 in /usr/local/cuda/lib64")
    env = sim_env()
    env["LD_LIBRARY_PATH"] = f"{lib}:{env['LD_LIBRARY_PATH']}"
    command = [sys.executable, "-c", REAL_NCCL]
    plain = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    proc, trace = profile(tmp_path, command, env=env, options=["-t", "cuda,nvtx"])
    assert proc.stdout == plain.stdout and proc.returncode == plain.returncode == 0
    assert plain.stdout.startswith("version 0 2") and plain.stdout.endswith("unique id 0\ninit 1\n")
    assert nvtx_sum(trace) == {("PushPop", "NCCL:ncclCommInitRank"): 1}
    assert nccl_rows(trace, tmp_path) == [("ncclCommInitRank", None)]
