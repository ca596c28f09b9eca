"""The recipes of the device's timeline and the diff, on simulated-device runs whose GPU work has known
durations (scripts/gpu_work.py): NVTX ranges projected onto the GPU, time utilization per chunk and
per bin, and two runs compared rank by rank; the same results from a Dask cluster's workers."""
import csv
import io
import sys
from pathlib import Path

import pytest

from conftest import profile, run_tool, sim_env

pytestmark = pytest.mark.reads_traces_in_python
from test_recipes import dask_cluster, recipe, rows

pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("duckdb")
pytest.importorskip("nvtx")

GPU_WORK = Path(__file__).resolve().parent / "scripts" / "gpu_work.py"
LONG, SHORT, MEMSET = 20_000_000, 3_000_000, 500  # ns: long_sleep_us_20000, short_sleep_us_3000, 5000 bytes
STEP = LONG + SHORT + MEMSET  # queued behind the long kernel, the three run back to back
PROJ_ITERATIONS = {0: 2, 1: 3}
UTIL_BUSY_NS = 100_000_000


def work(directory, name, *args, rank=None):
    env = sim_env(**({"RANK": rank} if rank is not None else {}))
    proc, trace = profile(directory, [sys.executable, str(GPU_WORK), *map(str, args)], env=env,
                          options=["-t", "cuda,nvtx"], name=name)
    assert proc.stdout == "done\n", proc.stderr
    return trace


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gpu")
    proj = tmp / "proj"
    proj.mkdir()
    for rank, iterations in PROJ_ITERATIONS.items():
        work(proj, f"rank{rank}", "proj", iterations, rank=rank)
    # Two runs of two ranks: rank 0 launches 3 kernels of 1 ms, then 5; rank 1 two both times.
    a, b = tmp / "a", tmp / "b"
    for side, launches in ((a, (3, 2)), (b, (5, 2))):
        side.mkdir()
        for rank, count in enumerate(launches):
            work(side, f"rank{rank}", "launches", count, 1000, rank=rank)
    return {"proj": proj, "util": work(tmp, "util", "util", UTIL_BUSY_NS // 1000, 300), "a": a, "b": b}


def stats_csv(trace, report):
    proc = run_tool("stats", "--report", report, "--format", "csv", trace)
    return list(csv.DictReader(io.StringIO("\n".join(l for l in proc.stdout.splitlines() if l and l[0] != "#"))))


def kernels(trace):
    """(start, end) of each kernel of the trace, as cuda_gpu_trace gives them."""
    return sorted((int(r["Start (ns)"]), int(r["Start (ns)"]) + int(r["Duration (ns)"]))
                  for r in stats_csv(trace, "cuda_gpu_trace") if not r["Name"].startswith("["))


def check_projection(out):
    trace = rows(out / "trace.parquet")
    assert {r["Name"] for r in trace} == {":step", ":inner"}  # neither "host only" nor "other thread"
    for rank, iterations in PROJ_ITERATIONS.items():
        mine = [r for r in trace if r["Rank"] == rank]
        steps = [r for r in mine if r["Name"] == ":step"]
        inners = [r for r in mine if r["Name"] == ":inner"]
        assert len(steps) == len(inners) == iterations
        for step, inner in zip(steps, inners):
            # The outer range holds its two kernels and the inner range's memset.
            assert (step["Projected Duration"], step["NumGPUOps"], step["Lvl"], step["NumChild"]) == (STEP, 3, 0, 1)
            assert (inner["Projected Duration"], inner["NumGPUOps"], inner["Lvl"], inner["NumChild"]) == (MEMSET, 1, 1, 0)
            assert step["Projected End"] == inner["Projected End"] == step["Projected Start"] + STEP
            assert inner["ParentId"] == step["RangeId"] and step["ParentId"] is None
            assert (step["RangeStack"], inner["RangeStack"]) == (f"{step['RangeId']}", f"{step['RangeId']}:{inner['RangeId']}")
            assert step["Style"] == "PushPop" and step["TID"] == inner["TID"] and step["PID"] == inner["PID"]
            assert step["Orig Start"] < step["Projected Start"] and step["Orig Duration"] < STEP
    return trace


def test_nvtx_gpu_proj_trace_projects_each_range_onto_the_work_launched_inside_it(runs, tmp_path):
    out = tmp_path / "out"
    proc = recipe("nvtx_gpu_proj_trace", "--input", runs["proj"], "--output", out, "--mode", "concurrent")
    trace = check_projection(out)
    assert proc.stdout.startswith("nvtx_gpu_proj_trace over 2 traces: trace.parquet")
    # The projected start is the long kernel's own start, read from the trace.
    starts = [s for s, e in kernels(runs["proj"] / "rank1.cutrace") if e - s == LONG]
    assert [r["Projected Start"] for r in trace if r["Rank"] == 1 and r["Name"] == ":step"] == starts


def test_nvtx_gpu_proj_sum_summarises_the_projections_per_range_and_rank(runs, tmp_path):
    out = tmp_path / "out"
    recipe("nvtx_gpu_proj_sum", "--input", runs["proj"], "--output", out, "--mode", "none")
    nvtx = tmp_path / "nvtx"
    recipe("nvtx_sum", "--input", runs["proj"], "--output", nvtx, "--mode", "none")
    range_time = {(r["Rank"], r["Range"]): r["Total Time"] for r in rows(nvtx / "rank_stats.parquet")}
    per_rank = {(r["Rank"], r["Range"]): r for r in rows(out / "rank_stats.parquet")}
    assert set(per_rank) == {(rank, name) for rank in PROJ_ITERATIONS for name in (":step", ":inner")}
    for rank, n in PROJ_ITERATIONS.items():
        for name, projected, ops, level, children in ((":step", STEP, 3, 0, 1), (":inner", MEMSET, 1, 1, 0)):
            row = per_rank[rank, name]
            assert (row["Range Instances"], row["Total Proj Time"], row["Total GPU Ops"]) == (n, n * projected, n * ops)
            assert row["Proj Min"] == row["Proj Max"] == row["Proj Med"] == row["Proj Q1"] == projected
            assert (row["Proj StdDev"], row["Avg GPU Ops"], row["Avg Range Lvl"], row["Avg Num Child"]) == (0, ops, level, children)
            assert row["Total Range Time"] == range_time[rank, name] and row["Style"] == "PushPop"
    every = {r["Range"]: r for r in rows(out / "all_stats.parquet")}
    total = sum(PROJ_ITERATIONS.values())
    assert (every[":step"]["Range Instances"], every[":step"]["Total Proj Time"]) == (total, total * STEP)
    assert (every[":step"]["Min Rank"], every[":step"]["Max Rank"]) == ("0, 1", "0, 1")
    assert every[":inner"]["Total GPU Ops"] == total and every[":inner"]["Proj Avg"] == MEMSET


def expected_chunks(spans, begin, end, count):
    """Per chunk of [begin, end): (start, length, ns of the spans in it), computed here independently."""
    result = []
    for i in range(count):
        s, e = begin + (end - begin) * i // count, begin + (end - begin) * (i + 1) // count
        result.append((s, e - s, sum(max(0, min(e, ke) - max(s, ks)) for ks, ke in spans)))
    return result


def test_gpu_time_util_finds_the_idle_stretch_between_two_kernels(runs, tmp_path):
    (k1, k2) = kernels(runs["util"])
    assert k1[1] - k1[0] == k2[1] - k2[0] == UTIL_BUSY_NS and k2[0] - k1[1] >= 300_000_000
    out = tmp_path / "out"
    recipe("gpu_time_util", "--input", runs["util"], "--output", out, "--mode", "none", "--chunks", 10)
    chunks = expected_chunks([k1, k2], k1[0], k2[1], 10)
    low = [(s, n, busy) for s, n, busy in chunks if 100 * busy / n < 50]
    # The idle 300 ms of about 500 are one stretch of consecutive low chunks.
    assert 6 <= len(low) <= 7 and [c for c in chunks if c in low] == chunks[chunks.index(low[0]):][:len(low)]
    (window,) = rows(out / "analysis.parquet")
    assert (window["Start"], window["Duration"], window["Chunks"]) == (low[0][0], sum(n for _, n, _ in low), len(low))
    assert window["In-Use"] == pytest.approx(100 * sum(b for _, _, b in low) / window["Duration"], abs=1e-9)
    (whole,) = rows(out / "utilization.parquet")
    assert (whole["Start"], whole["Duration"], whole["Busy Time"]) == (k1[0], k2[1] - k1[0], 2 * UTIL_BUSY_NS)
    assert (whole["Chunks"], whole["Low Chunks"], whole["Rank"]) == (10, len(low), 0)
    # At a threshold of 0 nothing is low; a chunk count of 0 is refused.
    recipe("gpu_time_util", "--input", runs["util"], "--output", out, "-f", "--mode", "none", "--threshold", 0)
    assert rows(out / "analysis.parquet") == []
    proc = recipe("gpu_time_util", "--input", runs["util"], "--chunks", 0, expect=2)
    assert "argument --chunks: 0 is not between 1 and 10000" in proc.stderr


def test_cuda_gpu_time_util_map_gives_each_bin_its_kernel_time(runs, tmp_path):
    out = tmp_path / "out"
    proc = recipe("cuda_gpu_time_util_map", "--input", runs["util"], "--output", out, "--mode", "none", "--bins", 5)
    bins = rows(out / "analysis.parquet")
    assert [b["Bin"] for b in bins] == list(range(5)) and bins[0]["Start"] == 0
    end = sum(b["Duration"] for b in bins)
    calls = stats_csv(runs["util"], "cuda_api_trace")
    assert end == max(int(c["Start (ns)"]) + int(c["Duration (ns)"]) for c in calls)  # the session's last event
    for b, (start, length, busy) in zip(bins, expected_chunks(kernels(runs["util"]), 0, end, 5)):
        assert (b["Start"], b["Duration"]) == (start, length)
        assert b["Kernel"] == pytest.approx(100 * busy / length, abs=1e-9) and b["Memory"] == 0
    (heat,) = rows(out / "heatmap.parquet")
    assert [heat[str(i)] for i in range(5)] == [b["Kernel"] for b in bins] and heat["Rank"] == 0
    assert sum(b["Kernel"] * b["Duration"] for b in bins) / 100 == pytest.approx(2 * UTIL_BUSY_NS, rel=1e-12)
    assert proc.stdout.startswith("cuda_gpu_time_util_map over 1 trace: heatmap.parquet")


def diff_rows(path, *keys):
    return {tuple(r[k] for k in keys): r for r in rows(path)}


def test_diff_pairs_the_ranks_of_two_runs_and_gives_the_difference(runs, tmp_path):
    out = tmp_path / "out"
    proc = recipe("diff", "--input", runs["a"], runs["b"], "--output", out, "--mode", "concurrent")
    per_rank = diff_rows(out / "rank_stats.parquet", "Rank", "Type", "Name")
    k0, k1 = per_rank[0, "Kernel", "work_sleep_us_1000"], per_rank[1, "Kernel", "work_sleep_us_1000"]
    assert (k0["Count A"], k0["Count B"], k0["Count Diff"], k0["Count Ratio"]) == (3, 5, 2, 5 / 3)
    assert (k0["Total Time A"], k0["Total Time B"], k0["Total Time Diff"]) == (3_000_000, 5_000_000, 2_000_000)
    assert (k0["Avg A"], k0["Avg B"], k0["Avg Diff"], k0["Avg Ratio"]) == (1_000_000, 1_000_000, 0, 1)
    assert (k1["Count Diff"], k1["Total Time Diff"], k1["Total Time Ratio"]) == (0, 0, 1)
    assert per_rank[0, "CUDA API", "cuLaunchKernel"]["Count Diff"] == 2
    assert per_rank[1, "CUDA API", "cuLaunchKernel"]["Count Diff"] == 0
    every = diff_rows(out / "all_stats.parquet", "Type", "Name")
    k = every["Kernel", "work_sleep_us_1000"]
    assert (k["Count A"], k["Count B"], k["Total Time A"], k["Total Time B"]) == (5, 7, 5_000_000, 7_000_000)
    assert (k["Count Diff"], k["Total Time Diff"]) == (2, 2_000_000)
    assert every["CUDA API", "cuLaunchKernel"]["Count Diff"] == 2
    files = rows(out / "files.parquet")
    assert [(f["Side"], f["Rank"], Path(f["File"]).parent.name) for f in files] == [
        ("A", 0, "a"), ("A", 1, "a"), ("B", 0, "b"), ("B", 1, "b")]
    assert proc.stdout.startswith("diff over 4 traces: all_stats.parquet")


def test_diff_of_a_run_with_itself_is_zero_and_a_missing_rank_has_no_calls(runs, tmp_path):
    out = tmp_path / "same"
    recipe("diff", "--input", runs["a"], runs["a"], "--output", out, "--mode", "none")
    for row in rows(out / "rank_stats.parquet") + rows(out / "all_stats.parquet"):
        assert row["Count A"] == row["Count B"] > 0 and row["Total Time A"] == row["Total Time B"], row
        assert (row["Count Diff"], row["Total Time Diff"], row["Avg Diff"], row["Total Time Ratio"]) == (0, 0, 0, 1), row
    # B is one trace: its rank 0 pairs with A's rank 0; A's rank 1 has nothing to pair with.
    out = tmp_path / "one"
    recipe("diff", "--input", runs["a"], runs["b"] / "rank0.cutrace", "--output", out, "--mode", "none")
    per_rank = diff_rows(out / "rank_stats.parquet", "Rank", "Type", "Name")
    lone = per_rank[1, "Kernel", "work_sleep_us_1000"]
    assert (lone["Count A"], lone["Count B"], lone["Count Diff"], lone["Count Ratio"], lone["Avg B"]) == (2, 0, -2, 0, None)
    assert per_rank[0, "Kernel", "work_sleep_us_1000"]["Count Diff"] == 2
    proc = recipe("diff", "--input", runs["a"], expect=2)
    assert proc.stderr == ("cutrace recipe: diff compares 2 sides: give --input A B, each a trace or a directory of "
                           "traces (got 1).\n")


def test_the_gpu_recipes_give_the_same_results_on_a_dask_cluster(runs, tmp_path):
    with dask_cluster(tmp_path, 1) as scheduler_file:
        dask = ["--mode", "dask-futures", "--scheduler-file", scheduler_file]
        out = tmp_path / "proj"
        recipe("nvtx_gpu_proj_trace", "--input", runs["proj"], "--output", out, *dask)
        check_projection(out)
        assert {f["Worker"].split("@")[0] for f in rows(out / "files.parquet")} == {"dask:w1"}
        for name, inputs, options, files in (
                ("nvtx_gpu_proj_sum", [runs["proj"]], [], ["rank_stats.parquet", "all_stats.parquet"]),
                ("gpu_time_util", [runs["util"]], ["--chunks", 10], ["analysis.parquet", "utilization.parquet"]),
                ("cuda_gpu_time_util_map", [runs["util"]], ["--bins", 5], ["analysis.parquet", "heatmap.parquet"]),
                ("diff", [runs["a"], runs["b"]], [], ["rank_stats.parquet", "all_stats.parquet"])):
            here, there = tmp_path / f"{name}-none", tmp_path / f"{name}-dask"
            recipe(name, "--input", *inputs, "--output", here, "--mode", "none", *options)
            recipe(name, "--input", *inputs, "--output", there, *dask, *options)
            for file in files:
                assert rows(there / file) == rows(here / file) != [], (name, file)
