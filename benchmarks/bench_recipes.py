#!/usr/bin/env python3
"""`cutrace recipe` at scale: many small traces, and a few large ones, in each mode.

The issue's shapes are 1,000 traces of 20,000 calls and 8 traces of 20 million calls; a small machine
runs them scaled down (--many 100x20000 --few 2x2000000). Each trace is `cheap_calls N cudaGetDevice`
recorded on the simulated device, so a trace of N calls has N rows in CUPTI_ACTIVITY_KIND_RUNTIME.
For each shape and mode it runs cuda_api_sum and reports the whole run's wall time, the map and
reduce steps' wall times, and the peak resident memory of the reducing process during the reduce
(sampled from /proc; the recipe writes them when $CUTRACE_RECIPE_STATS names a file).

usage: bench_recipes.py [--build DIR] [--work DIR] [--many NxCALLS] [--few NxCALLS] [--modes none,concurrent,dask-futures]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def make_traces(build, directory, count, calls):
    """count traces of `calls` cudaGetDevice calls each, kept between runs of the benchmark."""
    directory.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, LD_LIBRARY_PATH=str(build / "simcuda" / "lib"))
    for r in range(count):
        out = directory / f"rank{r:04d}"
        if Path(str(out) + ".cutrace").exists():
            continue
        subprocess.run([str(build / "bin" / "cutrace"), "profile", "-o", str(out), "--", str(build / "tests" / "bin" / "cheap_calls"),
                        str(calls), "cudaGetDevice"], env=env, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)


def run_recipe(build, traces, mode, work):
    stats = work / "stats.json"
    out = work / "out"
    env = dict(os.environ, CUTRACE_RECIPE_STATS=str(stats), CUTRACE_TABLES_LIBRARY=str(build / "lib" / "libcutrace-tables.so"),
               PYTHONPATH=str(ROOT / "python"))
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "cutrace", "recipe", "cuda_api_sum", "--input", str(traces), "--output", str(out),
                    "-f", "-q", "--mode", mode], env=env, check=True, stdout=subprocess.DEVNULL)
    wall = time.monotonic() - started
    result = json.loads(stats.read_text())
    result["wall_s"] = wall
    result["output_bytes"] = sum(f.stat().st_size for f in out.iterdir())
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("--work", default="/tmp/cutrace-bench-recipes")
    ap.add_argument("--many", default="100x20000")
    ap.add_argument("--few", default="2x2000000")
    ap.add_argument("--modes", default="none,concurrent,dask-futures")
    args = ap.parse_args()
    build, work = Path(args.build), Path(args.work)
    print("| shape | mode | wall (s) | map (s) | reduce (s) | reduce peak RSS (MB) | input (MB) |")
    print("|---|---|---|---|---|---|---|")
    for shape in (args.many, args.few):
        count, calls = (int(x) for x in shape.split("x"))
        traces = work / f"{count}x{calls}"
        make_traces(build, traces, count, calls)
        size = sum(f.stat().st_size for f in traces.iterdir()) / 1e6
        for mode in args.modes.split(","):
            r = run_recipe(build, traces, mode, work)
            print(f"| {count:,} traces x {calls:,} calls | {mode} | {r['wall_s']:.1f} | {r['map_s']:.1f} | "
                  f"{r['reduce_s']:.2f} | {r['reduce_peak_rss'] / 1e6:.0f} | {size:.0f} |", flush=True)
    shutil.rmtree(work / "out", ignore_errors=True)


if __name__ == "__main__":
    main()
