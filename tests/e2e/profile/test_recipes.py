"""`cutrace recipe`: recipes over many traces, one per rank. Eight runs of known, different work give
exact per-rank and all-rank values in every mode (none, concurrent, and dask-futures on a real
scheduler with two workers, which must be the ones that ran the map steps); a recipe over one trace
gives the numbers of `cutrace stats`; the refusals."""
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import BUILD, CUTRACE, app, profile, run_tool, sim_env

pytestmark = pytest.mark.reads_traces_in_python

pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("duckdb")

SOURCE_PYTHON = Path(__file__).resolve().parents[3] / "python"
LIBRARY = BUILD / "lib" / "libcutrace-tables.so"
RANKS = 8
ELEMENTS = 256  # per rank r: (r + 1) * ELEMENTS floats per buffer


def iterations(rank):
    return rank + 1


def kernel_ns(rank):
    return 1000 * (rank + 1)


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """Eight traces, rank0..rank7, as a job's ranks write them (RANK set per process)."""
    tmp = tmp_path_factory.mktemp("job")
    traces = tmp / "traces"
    traces.mkdir()
    for r in range(RANKS):
        proc, _ = profile(traces, [app("sim_vector_add"), str(iterations(r)), str((r + 1) * ELEMENTS)],
                          env=sim_env(RANK=r, SIMCUDA_KERNEL_NS=kernel_ns(r)), name=f"rank{r}")
        assert f"verified {iterations(r)}" in proc.stdout
    return traces


def recipe(*args, expect=0, env=None):
    proc = subprocess.run([str(CUTRACE), "recipe", *map(str, args)], capture_output=True, text=True, timeout=300,
                          env=env)
    assert proc.returncode == expect, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


def rows(path):
    return pq.read_table(path).to_pylist()


def check_job_results(out, recipe_name):
    """The exact values of the eight ranks' work, in the outputs of `recipe_name`."""
    files = rows(out / "files.parquet")
    assert [(f["Rank"], Path(f["File"]).name) for f in files] == [(r, f"rank{r}.cutrace") for r in range(RANKS)]
    if recipe_name == "cuda_gpu_kern_sum":
        per_rank = rows(out / "rank_stats.parquet")
        assert len(per_rank) == 2 * RANKS
        for row in per_rank:
            r = row["Rank"]
            assert row["Instances"] == iterations(r), row
            assert row["Min"] == row["Max"] == row["Med"] == row["Q1"] == row["Q3"] == kernel_ns(r), row
            assert row["Total Time"] == iterations(r) * kernel_ns(r) and row["StdDev"] == 0, row
            assert row["Time"] == 50.0, row
        for row in rows(out / "all_stats.parquet"):
            assert row["Instances"] == sum(iterations(r) for r in range(RANKS)), row
            assert row["Total Time"] == sum(iterations(r) * kernel_ns(r) for r in range(RANKS)), row
            assert (row["Min"], row["Min Rank"], row["Max"], row["Max Rank"]) == (1000, "0", 8000, "7"), row
            assert row["Med"] == 4500.0  # the median of the ranks' medians 1000 ... 8000
    elif recipe_name == "cuda_gpu_mem_size_sum":
        per_rank = {(row["Rank"], row["Operation"]): row for row in rows(out / "rank_stats.parquet")}
        for r in range(RANKS):
            size = 4 * (r + 1) * ELEMENTS
            h2d, d2h = per_rank[r, "[CUDA memcpy Host-to-Device]"], per_rank[r, "[CUDA memcpy Device-to-Host]"]
            assert (h2d["Count"], h2d["Total"], h2d["Min"], h2d["Max"]) == (2 * iterations(r), 2 * iterations(r) * size,
                                                                            size, size)
            assert (d2h["Count"], d2h["Total"]) == (iterations(r), iterations(r) * size)
        assert len(per_rank) == 2 * RANKS
    elif recipe_name == "cuda_api_sum":
        per_rank = {(row["Rank"], row["Name"]): row for row in rows(out / "rank_stats.parquet")}
        for r in range(RANKS):
            assert per_rank[r, "cudaMalloc"]["Num Calls"] == 3 * iterations(r)
            assert per_rank[r, "cudaLaunchKernel"]["Num Calls"] == 2 * iterations(r)
            assert per_rank[r, "cudaMemcpy"]["Num Calls"] == 3 * iterations(r)
        every = {row["Name"]: row for row in rows(out / "all_stats.parquet")}
        assert every["cudaLaunchKernel"]["Num Calls"] == 2 * sum(iterations(r) for r in range(RANKS))
        assert every["cudaMalloc"]["Total Time"] == sum(per_rank[r, "cudaMalloc"]["Total Time"] for r in range(RANKS))
        assert abs(sum(row["Time"] for row in every.values()) - 100) < 1e-9
    elif recipe_name == "stragglers":
        totals = rows(out / "rank_totals.parquet")
        assert [t["Rank"] for t in totals] == list(range(RANKS))
        for t in totals:
            r = t["Rank"]
            assert (t["Kernels"], t["Kernel Time"]) == (2 * iterations(r), 2 * iterations(r) * kernel_ns(r)), t
            assert t["Memcpy Bytes"] == 3 * iterations(r) * 4 * (r + 1) * ELEMENTS, t
            assert t["Memcpys"] == 3 * iterations(r) and t["NVTX Ranges"] == 0, t


@pytest.mark.parametrize("name,mode", [("cuda_gpu_kern_sum", "none"), ("cuda_gpu_kern_sum", "concurrent"),
                                       ("cuda_gpu_mem_size_sum", "none"), ("cuda_api_sum", "concurrent"),
                                       ("stragglers", "none"), ("stragglers", "concurrent")])
def test_eight_ranks_give_exact_per_rank_results(job, tmp_path, name, mode):
    out = tmp_path / "out"
    proc = recipe(name, "--input", job, "--output", out, "--mode", mode)
    check_job_results(out, name)
    # The summary on stdout: its title and the columns of the file it shows.
    assert proc.stdout.startswith(f"{name} over {RANKS} traces: ")
    assert f"cutrace recipe: wrote {out} (" in proc.stderr


def test_ranks_come_from_the_name_order_of_the_files_given(job, tmp_path):
    # Files given out of order, and two of them: sorted by name, rank 0 is rank3.cutrace.
    out = tmp_path / "out"
    proc = recipe("cuda_gpu_kern_sum", "--input", job / "rank5.cutrace", job / "rank3.cutrace", "--output", out,
                  "--mode", "none")
    files = rows(out / "files.parquet")
    if "ranks are the traces' positions in name order" not in proc.stderr:
        pytest.skip("these traces carry job.rank; the ranks are the job's")
    assert [(f["Rank"], Path(f["File"]).name) for f in files] == [(0, "rank3.cutrace"), (1, "rank5.cutrace")]
    assert proc.stderr.count("ranks are the traces' positions in name order") == 1
    instances = {row["Rank"]: row["Instances"] for row in rows(out / "rank_stats.parquet")}
    assert instances == {0: iterations(3), 1: iterations(5)}


@pytest.fixture(scope="module")
def one_trace(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("one")
    _, vector = profile(tmp, [app("sim_vector_add"), "5", "4096"], options=["-t", "cuda,nvtx,osrt"], name="vector")
    # Threshold 0: at the default 1 us, a fast machine's pthread_join calls may all fall below it and
    # leave osrt_sum with nothing to compare.
    _, nvtx = profile(tmp, [app("nvtx_app"), "2", "3"], options=["-t", "cuda,nvtx,osrt", "--osrt-threshold", "0"],
                      name="nvtx")
    return {"vector": vector, "nvtx": nvtx}


def stats_rows(trace, report):
    import csv
    import io
    proc = run_tool("stats", "--report", report, "--format", "csv", trace)
    return list(csv.DictReader(io.StringIO("\n".join(l for l in proc.stdout.splitlines() if l and l[0] != "#"))))


@pytest.mark.parametrize("name,trace,labels,count", [
    ("cuda_api_sum", "vector", ["Name"], "Num Calls"),
    ("cuda_gpu_kern_sum", "vector", ["Name"], "Instances"),
    ("cuda_gpu_mem_time_sum", "vector", ["Operation"], "Count"),
    ("cuda_gpu_mem_size_sum", "vector", ["Operation"], "Count"),
    ("nvtx_sum", "nvtx", ["Style", "Range"], "Instances"),
    ("osrt_sum", "nvtx", ["Name"], "Num Calls"),
])
def test_one_trace_gives_the_numbers_of_cutrace_stats(one_trace, tmp_path, name, trace, labels, count):
    out = tmp_path / "out"
    recipe(name, "--input", one_trace[trace], "--output", out, "--mode", "none")
    ours = rows(out / "rank_stats.parquet")
    theirs = stats_rows(one_trace[trace], name)
    assert theirs and len(ours) == len(theirs)
    mb = name == "cuda_gpu_mem_size_sum"
    for mine, row in zip(ours, theirs):  # in the same order: most total first
        assert [mine[l] for l in labels] == [row[l] for l in labels]
        assert mine["Rank"] == 0 and mine[count] == int(row[count])
        if mb:
            for ours_col, stats_col in [("Total", "Total (MB)"), ("Avg", "Avg (MB)"), ("Med", "Med (MB)"),
                                        ("Min", "Min (MB)"), ("Max", "Max (MB)"), ("StdDev", "StdDev (MB)")]:
                assert f"{mine[ours_col] / 1e6:.3f}" == row[stats_col], (ours_col, mine, row)
            continue
        assert mine["Total Time"] == int(row["Total Time (ns)"])
        assert (mine["Min"], mine["Max"]) == (int(row["Min (ns)"]), int(row["Max (ns)"]))
        for ours_col, stats_col in [("Time", "Time (%)"), ("Avg", "Avg (ns)"), ("Med", "Med (ns)"),
                                    ("StdDev", "StdDev (ns)")]:
            assert f"{mine[ours_col]:.1f}" == row[stats_col], (ours_col, mine, row)


def test_stragglers_name_the_slowest_and_fastest_rank_of_each_range(tmp_path):
    traces = tmp_path / "traces"
    traces.mkdir()
    for r, loops in enumerate([2, 6, 1]):
        profile(traces, [app("nvtx_app"), "1", str(loops)], options=["-t", "cuda,nvtx"], name=f"rank{r}")
    out = tmp_path / "out"
    recipe("stragglers", "--input", traces, "--output", out, "--mode", "none")
    ranges = {(row["Style"], row["Range"]): row for row in rows(out / "nvtx_ranges.parquet")}
    nvtx = tmp_path / "nvtx"
    recipe("nvtx_sum", "--input", traces, "--output", nvtx, "--mode", "none")
    per_rank = {}
    for row in rows(nvtx / "rank_stats.parquet"):
        per_rank.setdefault((row["Style"], row["Range"]), {})[row["Rank"]] = row["Total Time"]
    assert set(ranges) == set(per_rank) and (("PushPop", ":outer")) in ranges
    for key, times in per_rank.items():
        row = ranges[key]
        slowest = max(times, key=lambda r: (times[r], -r))
        fastest = min(times, key=lambda r: (times[r], r))
        assert (row["Slowest Rank"], row["Slowest Time"]) == (slowest, times[slowest]), row
        assert (row["Fastest Rank"], row["Fastest Time"]) == (fastest, times[fastest]), row
        assert row["Ranks"] == len(times) == 3
    assert ranges["PushPop", ":outer"]["Instances"] == 2 + 6 + 1
    totals = rows(out / "rank_totals.parquet")
    # Per loop: outer, a.work, b.step; plus "wide" and "whole run" once per process.
    assert [t["NVTX Ranges"] for t in totals] == [3 * loops + 2 for loops in (2, 6, 1)]


def wait_for(predicate, what, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@contextlib.contextmanager
def dask_cluster(directory, workers):
    """A Dask scheduler and `workers` named workers (w1, w2, ...) on 127.0.0.1, as processes of their own,
    that find the package and its library; yields the scheduler file once every worker has joined."""
    distributed = pytest.importorskip("distributed")
    scheduler_file = directory / "scheduler.json"
    env = dict(os.environ, CUTRACE_TABLES_LIBRARY=str(LIBRARY),
               PYTHONPATH=str(SOURCE_PYTHON) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    common = ["--scheduler-file", str(scheduler_file), "--no-dashboard"]
    started = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                 "--port", "0", *common], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        wait_for(scheduler_file.exists, "the scheduler file")
        for n in range(1, workers + 1):
            started.append(subprocess.Popen(
                [sys.executable, "-m", "distributed.cli.dask_worker", "--host", "127.0.0.1", "--name", f"w{n}",
                 "--nworkers", "1", "--nthreads", "1", *common], env=env,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        with distributed.Client(scheduler_file=str(scheduler_file), timeout="30s") as client:
            client.wait_for_workers(workers, timeout=60)
        yield scheduler_file
    finally:
        for p in reversed(started):
            p.terminate()
        for p in reversed(started):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def test_dask_futures_runs_the_maps_on_the_clusters_workers(job, tmp_path):
    distributed = pytest.importorskip("distributed")
    with dask_cluster(tmp_path, 2) as scheduler_file:
        with distributed.Client(scheduler_file=str(scheduler_file), timeout="30s") as client:
            names = {address: info["name"] for address, info in client.scheduler_info()["workers"].items()}
            pids = {names[address]: pid for address, pid in client.run(os.getpid).items()}
        address = json.loads(scheduler_file.read_text())["address"]
        out = tmp_path / "out"
        recipe("cuda_gpu_kern_sum", "--input", job, "--output", out, "--mode", "dask-futures",
               env=dict(os.environ, DASK_SCHEDULER_ADDRESS=address))
        check_job_results(out, "cuda_gpu_kern_sum")
        workers = [f["Worker"] for f in rows(out / "files.parquet")]
        ran_on = {w.split("@")[0] for w in workers}
        assert ran_on == {"dask:w1", "dask:w2"}, workers
        assert {(w.split("@")[0][len("dask:"):], int(w.rsplit(" ", 1)[1])) for w in workers} == set(pids.items())
        # The scheduler file instead of the variable, and the stragglers' totals from the same workers.
        out = tmp_path / "out2"
        recipe("stragglers", "--input", job, "--output", out, "--mode", "dask-futures", "--scheduler-file",
               scheduler_file)
        check_job_results(out, "stragglers")
        assert {f["Worker"].split("@")[0] for f in rows(out / "files.parquet")} <= {"dask:w1", "dask:w2"}


def test_refusals(job, tmp_path):
    proc = recipe("cuda_api_summ", "--input", job, expect=2)
    assert proc.stderr.startswith("cutrace recipe: unknown recipe 'cuda_api_summ'; the recipes are cuda_api_sum, ")
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = recipe("cuda_api_sum", "--input", empty, expect=2)
    assert proc.stderr == f"cutrace recipe: no .cutrace traces in {empty}; give trace files or a directory holding them.\n"
    proc = recipe("cuda_api_sum", "--input", tmp_path / "nowhere", expect=2)
    assert "no trace or directory" in proc.stderr
    out = tmp_path / "out"
    out.mkdir()
    proc = recipe("cuda_api_sum", "--input", job, "--output", out, expect=2)
    assert proc.stderr == (f"cutrace recipe: {out} already exists; pass --force-overwrite to replace it or choose "
                           "another --output.\n")
    proc = recipe("cuda_api_sum", "--input", job, "--output", out, "-f", expect=2)
    assert "is not the output of a recipe" in proc.stderr and out.exists()
    # -f replaces an earlier output, never a directory that also holds the user's own files.
    (out / "files.parquet").write_bytes(b"")
    (out / "notes.txt").write_text("mine")
    proc = recipe("cuda_api_sum", "--input", job, "--output", out, "-f", expect=2)
    assert proc.stderr == (f"cutrace recipe: {out} holds files that are not a recipe's (notes.txt); choose another "
                           "--output.\n")
    assert (out / "notes.txt").read_text() == "mine"
    proc = recipe("cuda_api_sum", "--input", job, "--scheduler-file", tmp_path / "s.json", expect=2)
    assert proc.stderr == "cutrace recipe: --scheduler-file is for --mode dask-futures.\n"
    help_text = recipe("--help").stdout
    for name in ("cuda_api_sum", "cuda_gpu_kern_sum", "nvtx_sum", "osrt_sum", "stragglers"):
        assert f"\n  {name} " in help_text
    assert "\n  recipe    " in run_tool("--help").stdout


def test_a_damaged_trace_is_named_and_left_out_and_the_rest_used(job, tmp_path):
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    for r in (0, 1, 2):
        shutil.copy(job / f"rank{r}.cutrace", inputs)
    (inputs / "rank1.cutrace").write_bytes(b"not a trace at all" * 10)
    out = tmp_path / "out"
    proc = recipe("cuda_gpu_kern_sum", "--input", inputs, "--output", out, "--mode", "none", expect=3)
    warnings = [l for l in proc.stderr.splitlines() if "warning" in l]
    assert len(warnings) == 1 and warnings[0].startswith(f"cutrace recipe: warning: {inputs / 'rank1.cutrace'} is left out: ")
    files = rows(out / "files.parquet")
    # The others keep their positions: rank 1 is missing, not renumbered.
    assert [(f["Rank"], Path(f["File"]).name) for f in files] == [(0, "rank0.cutrace"), (2, "rank2.cutrace")]
    (inputs / "rank0.cutrace").write_bytes(b"")
    (inputs / "rank2.cutrace").write_bytes(b"\0" * 64)
    proc = recipe("cuda_gpu_kern_sum", "--input", inputs, "--output", tmp_path / "none", "--mode", "none", expect=1)
    assert proc.stderr.splitlines()[-1] == "cutrace recipe: none of the 3 traces could be read; see the warnings above."
    assert not (tmp_path / "none").exists()
