"""cutrace export --type kineto: the Kineto-style JSON of each rank, checked as JSON and read by Holistic
Trace Analysis (HTA), whose per-rank numbers must be those the traces imply (the SQLite export of the
same traces, and the work the simulated device was given)."""
import json
import math
import os
import sqlite3
import sys
from pathlib import Path

import pytest

from conftest import SIM_LIB, app, profile, run_tool, sim_env

pytestmark = pytest.mark.reads_traces_in_python

# Two ranks with different, known work: sim_vector_add runs, per iteration, two kernels of
# SIMCUDA_KERNEL_NS each and three copies of ELEMENTS * 4 bytes (10 GB/s: 10 us each).
RANKS = {0: {"iterations": 2, "kernel_ns": 30000}, 1: {"iterations": 3, "kernel_ns": 50000}}
ELEMENTS = 25000
COPY_NS = ELEMENTS * 4 // 10
KERNELS = ("void ns::axpy<float>(int, float, float const*, float*)", "square_kernel(float*, float const*, int)")
SCRIPTS = Path(__file__).resolve().parent / "scripts"


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """The two ranks' traces, their Kineto export into one directory, and their SQLite exports."""
    tmp = tmp_path_factory.mktemp("kineto")
    out = tmp / "hta"
    for rank, work in RANKS.items():
        proc, trace = profile(tmp, [app("sim_vector_add"), str(work["iterations"]), str(ELEMENTS)], name=f"rank{rank}",
                              env=sim_env(RANK=rank, WORLD_SIZE=len(RANKS), SIMCUDA_KERNEL_NS=work["kernel_ns"]))
        assert f"verified {work['iterations']}" in proc.stdout
        written = run_tool("export", "--type", "kineto", "-o", out, trace)
        assert f"wrote {out / f'rank-{rank}.json'} (" in written.stderr, written.stderr
        run_tool("export", "--type", "sqlite", trace)
    return tmp, out


def load(path):
    with open(path) as f:
        return json.load(f)


def gpu_rows(sqlite_path):
    """Every GPU operation of the SQLite export: (kind, name, start, end) in ns."""
    db = sqlite3.connect(sqlite_path)
    rows = [("kernel", name, s, e) for name, s, e in db.execute(
        "SELECT n.value, k.start, k.end FROM CUPTI_ACTIVITY_KIND_KERNEL AS k JOIN StringIds AS n ON n.id = k.demangledName")]
    rows += [("copy", None, s, e) for s, e in db.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY")]
    db.close()
    return rows


def union(intervals):
    total, last_end = 0, None
    for start, end in sorted(intervals):
        if last_end is None or start > last_end:
            total += end - start
            last_end = end
        elif end > last_end:
            total += end - last_end
            last_end = end
    return total


def test_each_rank_file_has_the_kineto_layout(job):
    tmp, out = job
    assert sorted(p.name for p in out.iterdir()) == ["rank-0.json", "rank-1.json"]
    for rank, work in RANKS.items():
        path = out / f"rank-{rank}.json"
        doc = load(path)
        assert doc["distributedInfo"] == {"rank": rank, "world_size": 2}
        # HTA finds a file's rank with this expression over its first lines that have one.
        first = next(line for line in path.read_text().splitlines() if '"rank"' in line)
        assert '"distributedInfo": {"rank": ' + str(rank) + "," in first
        db = sqlite3.connect(tmp / f"rank{rank}.sqlite")
        assert doc["baseTimeNanoseconds"] == db.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()[0]
        pid = db.execute("SELECT pid FROM CUTRACE_PROCESSES").fetchone()[0]
        calls = {c: (s, e) for c, s, e in db.execute("SELECT correlationId, start, end FROM CUPTI_ACTIVITY_KIND_RUNTIME")
                 if c}
        events = doc["traceEvents"]
        kernels = [e for e in events if e.get("cat") == "kernel"]
        copies = [e for e in events if e.get("cat") == "gpu_memcpy"]
        runtime = {e["args"]["correlation"]: e for e in events if e.get("cat") == "cuda_runtime" and
                   "correlation" in e["args"]}
        assert len(kernels) == 2 * work["iterations"] and len(copies) == 3 * work["iterations"]
        assert sorted({k["name"] for k in kernels}) == sorted(KERNELS)
        assert sorted({c["name"] for c in copies}) == ["Memcpy DtoH (Device -> Pageable)",
                                                      "Memcpy HtoD (Pageable -> Device)"]
        starts = {"s": {}, "f": {}}
        for e in events:
            if e.get("cat") == "ac2g":
                assert e["id"] not in starts[e["ph"]], e
                starts[e["ph"]][e["id"]] = e
        for op in kernels + copies:
            correlation = op["args"]["correlation"]
            # Kernels on their device's track, a track per stream, as Kineto lays them out.
            assert (op["pid"], op["tid"]) == (op["args"]["device"], op["args"]["stream"]) == (0, op["tid"])
            assert op["dur"] == pytest.approx((work["kernel_ns"] if op["cat"] == "kernel" else COPY_NS) / 1000, abs=1e-9)
            launch = runtime[correlation]
            assert launch["name"] == ("cudaLaunchKernel" if op["cat"] == "kernel" else "cudaMemcpy")
            assert (launch["pid"], launch["tid"]) == (pid, pid) and "stream" not in launch["args"]
            assert launch["ts"] == pytest.approx(calls[correlation][0] / 1000, abs=1e-9)
            # The flow runs from the call to the operation, each end at its slice's start.
            assert (starts["s"][correlation]["ts"], starts["s"][correlation]["tid"]) == (launch["ts"], launch["tid"])
            assert starts["f"][correlation] == {"ph": "f", "id": correlation, "pid": 0, "tid": op["tid"], "ts": op["ts"],
                                                "cat": "ac2g", "name": "ac2g", "bp": "e"}
        assert len(starts["s"]) == len(starts["f"]) == len(kernels) + len(copies)
        names = {(e["pid"], e["tid"], e["name"]): e["args"] for e in events if e.get("ph") == "M"}
        assert names[(0, 0, "process_name")] == {"name": "GPU 0"}
        assert names[(pid, 0, "process_name")] == {"name": "sim_vector_add"}


def test_hta_reads_each_rank_with_the_numbers_the_traces_imply(job, monkeypatch):
    pytest.importorskip("hta")
    from hta.trace_analysis import TraceAnalysis
    tmp, out = job
    for rounding in (False, True):
        # HTA rounds an ns-resolution trace to whole us by default (each operation shrinks to the
        # whole us inside it); HTA_DISABLE_NS_ROUNDING=1 keeps the exact times.
        monkeypatch.setenv("HTA_DISABLE_NS_ROUNDING", "0" if rounding else "1")
        analysis = TraceAnalysis(trace_dir=str(out))
        temporal = analysis.get_temporal_breakdown(visualize=False).set_index("rank")
        _, per_kernel = analysis.get_gpu_kernel_breakdown(visualize=False, include_memory_kernels=True)
        assert sorted(temporal.index) == [0, 1]
        for rank, work in RANKS.items():
            rows = gpu_rows(tmp / f"rank{rank}.sqlite")

            def hta_us(start, end):
                """An operation's [start, end) in us as HTA reads the export's ts and dur."""
                ts, dur = float(f"{start // 1000}.{start % 1000:03d}"), float(f"{(end - start) // 1000}.{(end - start) % 1000:03d}")
                return (math.ceil(ts), math.floor(ts + dur)) if rounding else (ts, ts + dur)

            spans = [hta_us(s, e) for _, _, s, e in rows]
            kernel_spans = [hta_us(s, e) for kind, _, s, e in rows if kind == "kernel"]
            span = max(e for _, e in spans) - min(s for s, _ in spans)
            got = temporal.loc[rank]
            assert got["kernel_time(us)"] == pytest.approx(span, abs=1e-6)
            assert got["idle_time(us)"] == pytest.approx(span - union(spans), abs=1e-6)
            assert got["compute_time(us)"] == pytest.approx(union(kernel_spans), abs=1e-6)
            assert got["non_compute_time(us)"] == pytest.approx(union(spans) - union(kernel_spans), abs=1e-6)
            mine = per_kernel[per_kernel["rank"] == rank].set_index("name")
            for kernel in KERNELS:
                durations = [e - s for kind, name, s, e in ((k, n, *hta_us(s, e)) for k, n, s, e in rows)
                             if kind == "kernel" and name == kernel]
                assert mine.loc[kernel, "sum (us)"] == pytest.approx(sum(durations), abs=1e-6)
            if not rounding:
                # And the work the device was given: the kernels back to back on one stream, and
                # the copies on it between them.
                assert got["compute_time(us)"] == pytest.approx(2 * work["iterations"] * work["kernel_ns"] / 1000)
                assert got["non_compute_time(us)"] == pytest.approx(3 * work["iterations"] * COPY_NS / 1000)
                for kernel in KERNELS:
                    assert mine.loc[kernel, "sum (us)"] == pytest.approx(work["iterations"] * work["kernel_ns"] / 1000)
                    assert mine.loc[kernel, "max (us)"] == mine.loc[kernel, "min (us)"] == work["kernel_ns"] / 1000


ANNOTATED = """
import ctypes, sys
import nvtx
lib = ctypes.CDLL(sys.argv[1])
device, host = ctypes.c_void_p(), (ctypes.c_char * 4096)()
lib.cudaMalloc(ctypes.byref(device), ctypes.c_size_t(4096))
for step in range(2):
    nvtx.push_range("step")
    lib.cudaMemcpy(device, host, ctypes.c_size_t(4096), 1)
    nvtx.push_range("inner")
    lib.cudaMemcpy(device, host, ctypes.c_size_t(4096), 1)
    lib.cudaMemcpy(device, host, ctypes.c_size_t(4096), 1)
    nvtx.pop_range()
    nvtx.pop_range()
lib.cudaMemcpy(device, host, ctypes.c_size_t(4096), 1)
print("done")
"""


def test_nvtx_ranges_become_annotations_and_their_gpu_spans(tmp_path):
    pytest.importorskip("nvtx")
    script = tmp_path / "annotated.py"
    script.write_text(ANNOTATED)
    proc, trace = profile(tmp_path, [sys.executable, str(script), str(SIM_LIB / "libcudart.so.13")],
                          options=["-t", "cuda,nvtx"])
    assert "done" in proc.stdout
    out = tmp_path / "one.json"
    written = run_tool("export", "--type", "kineto", "-o", out, trace)
    assert "has no job rank" in written.stderr and "rank 0 of a world of 1" in written.stderr
    doc = load(out)
    assert doc["distributedInfo"] == {"rank": 0, "world_size": 1}
    events = doc["traceEvents"]
    ranges = [e for e in events if e.get("cat") == "user_annotation"]
    assert [r["name"] for r in sorted(ranges, key=lambda r: r["ts"])] == ["step", "inner", "step", "inner"]
    by_id = {r["args"]["External id"]: r for r in ranges}
    assert len(by_id) == 4
    copies = sorted((e for e in events if e.get("cat") == "gpu_memcpy"), key=lambda e: e["ts"])
    calls = {e["args"]["correlation"]: e for e in events if e.get("name") == "cudaMemcpy"}
    assert len(copies) == len(calls) == 7
    # Each call names the innermost range it was made in; the last one none.
    enclosing = [by_id[calls[c["args"]["correlation"]]["args"]["External id"]]["name"]
                 if "External id" in calls[c["args"]["correlation"]]["args"] else None for c in copies]
    assert enclosing == ["step", "inner", "inner", "step", "inner", "inner", None]
    spans = sorted((e for e in events if e.get("cat") == "gpu_user_annotation"), key=lambda e: e["ts"])
    assert [s["name"] for s in spans] == ["step", "inner", "step", "inner"]
    for span, first, last in zip(spans, (copies[0], copies[1], copies[3], copies[4]),
                                 (copies[0], copies[2], copies[3], copies[5])):
        assert (span["pid"], span["tid"]) == (first["pid"], first["tid"]) and "stream" not in span["args"]
        assert span["ts"] == first["ts"] and span["ts"] + span["dur"] == pytest.approx(last["ts"] + last["dur"], abs=1e-6)
        assert by_id[span["args"]["External id"]]["name"] == span["name"]


def test_one_trace_of_many_ranks_gives_a_file_per_rank(tmp_path):
    launcher = SCRIPTS / "job_launcher.py"
    env = sim_env()
    for variable in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"):
        env.pop(variable, None)
    proc, trace = profile(tmp_path, [sys.executable, str(launcher), str(SIM_LIB / "libcudart.so.13"), sys.executable,
                                     str(SCRIPTS / "ctypes_runtime.py"), str(SIM_LIB / "libcudart.so.13"), "1"], env=env)
    pids = dict(line.split(" pid ") for line in proc.stdout.splitlines() if " pid " in line and line[0] in "ef")
    out = tmp_path / "job"
    refused = run_tool("export", "--type", "kineto", "-o", tmp_path / "job.json", trace, expect=2)
    assert "holds ranks 0, 1, 2, 4, 5, one file each; give -o a directory" in refused.stderr
    written = run_tool("export", "--type", "kineto", "-o", out, trace)
    # exec3 was started with no job variables, beside ranked processes: named, not written.
    assert f"left out process {pids['exec3']} (" in written.stderr
    assert sorted(p.name for p in out.iterdir()) == [f"rank-{r}.json" for r in (0, 1, 2, 4, 5)]
    for rank, role in ((0, "exec0"), (1, "exec1"), (2, "exec2"), (4, "fork4"), (5, "fork5")):
        doc = load(out / f"rank-{rank}.json")
        assert doc["distributedInfo"] == {"rank": rank, "world_size": 6}
        assert {e["pid"] for e in doc["traceEvents"] if e.get("cat") == "cuda_runtime"} == {int(pids[role])}


def test_refusals(job, tmp_path):
    tmp, out = job
    trace = tmp / "rank0.cutrace"
    before = (out / "rank-0.json").read_bytes()
    again = run_tool("export", "--type", "kineto", "-o", out, trace, expect=2)
    assert again.stderr == (f"cutrace export: {out / 'rank-0.json'} already exists; pass -f true to overwrite it or "
                            f"choose another name with -o.\n")
    assert (out / "rank-0.json").read_bytes() == before
    run_tool("export", "--type", "kineto", "-f", "true", "-o", out, trace)
    assert load(out / "rank-0.json")["distributedInfo"]["rank"] == 0
    umask = os.umask(0)
    os.umask(umask)
    assert (out / "rank-0.json").stat().st_mode & 0o777 == 0o666 & ~umask
    a_file = tmp_path / "plain"
    a_file.write_text("x")
    assert "is not a directory" in run_tool("export", "--type", "kineto", "-o", a_file, trace, expect=2).stderr
    tables = run_tool("export", "--type", "kineto", "--tables", "StringIds", "-o", tmp_path / "t", trace, expect=2)
    assert "--tables is for the exports made of tables" in tables.stderr
    assert not (tmp_path / "t").exists()
    # The default name: beside the trace, as the other exports'.
    run_tool("export", "--type", "kineto", trace)
    assert [p.name for p in (tmp / "rank0_kineto").iterdir()] == ["rank-0.json"]
    assert not any(p.name.startswith("rank-0.json.tmp") for p in out.iterdir())


# Ops as `cutrace profile --pytorch autograd-shapes-nvtx` records them (emit_nvtx's names), around
# kernels launched through the driver (scripts/gpu_work.py), one op nested in another as aten::linear
# holds aten::addmm; then a plain range.
EMIT_NVTX_OPS = r"""
import sys
import nvtx
sys.path.insert(0, sys.argv[1])
import gpu_work
context, module = gpu_work.setup(work_us=50)
kernel = gpu_work.function(module, "work_sleep_us_50")
for step in range(2):
    nvtx.push_range(f"aten::linear, seq = {3 * step}, op_id = {10 * step + 1}, sizes = [[32, 8], [16, 8], [16]], "
                    f"input_op_ids = [(0,-1), (0,-1), (0,-1)]")
    nvtx.push_range(f"aten::addmm, seq = {3 * step + 1}, op_id = {10 * step + 2}, sizes = [[16], [32, 8], [8, 16], "
                    f"[], []], input_op_ids = [(0,-1), (0,-1), (3,0), (0,-1), (0,-1)]")
    gpu_work.launch(kernel)
    nvtx.pop_range()
    nvtx.pop_range()
    nvtx.push_range(f"aten::relu, op_id = {10 * step + 3}")
    gpu_work.launch(kernel)
    nvtx.pop_range()
nvtx.push_range("not an op")
gpu_work.launch(kernel)
nvtx.pop_range()
gpu_work.synchronize()
print("done")
"""


def test_pytorch_ops_become_cpu_ops_whose_kernels_carry_their_external_id(tmp_path):
    pytest.importorskip("nvtx")
    script = tmp_path / "ops.py"
    script.write_text(EMIT_NVTX_OPS)
    proc, trace = profile(tmp_path, [sys.executable, str(script), str(Path(__file__).resolve().parent / "scripts")],
                          options=["-t", "cuda,nvtx"])
    assert proc.stdout == "done\n", proc.stderr
    out = tmp_path / "hta"
    run_tool("export", "--type", "kineto", "-o", out, trace)
    events = load(out / "rank-0.json")["traceEvents"]
    ops = sorted((e for e in events if e.get("cat") == "cpu_op"), key=lambda e: (e["ts"], -e["dur"]))
    assert [o["name"] for o in ops] == ["aten::linear", "aten::addmm", "aten::relu"] * 2
    assert ops[1]["args"]["Input Dims"] == [[16], [32, 8], [8, 16], [], []]
    assert (ops[1]["args"]["Sequence number"], ops[1]["args"]["Record function id"]) == (1, 2)
    assert "Sequence number" not in ops[2]["args"] and "Input Dims" not in ops[2]["args"]
    assert [e["name"] for e in events if e.get("cat") == "user_annotation"] == ["not an op"]
    # Each kernel carries the External id of the innermost op its launch was made in, as its call does.
    kernels = sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    by_id = {e["args"]["External id"]: e["name"] for e in events if e.get("cat") in ("cpu_op", "user_annotation")}
    assert [by_id[k["args"]["External id"]] for k in kernels] == ["aten::addmm", "aten::relu"] * 2 + ["not an op"]
    calls = {e["args"]["correlation"]: e for e in events if e.get("cat") == "cuda_driver" and "correlation" in e["args"]}
    assert all(calls[k["args"]["correlation"]]["args"]["External id"] == k["args"]["External id"] for k in kernels)
    # HTA's op-to-kernel analysis finds each aten op's kernels.
    hta = pytest.importorskip("hta.trace_analysis")
    analysis = hta.TraceAnalysis(trace_dir=str(out))
    found = analysis.get_aten_op_kernels_and_delay(ranks=[0])[0]
    assert sorted(found["aten_op_name"]) == ["aten::addmm", "aten::relu"], found
    assert set(found["occurrence_count"]) == {2}, found
    # Only annotations are drawn on the GPU, as Kineto draws them; ops are not.
    assert [e["name"] for e in events if e.get("cat") == "gpu_user_annotation"] == ["not an op"]
