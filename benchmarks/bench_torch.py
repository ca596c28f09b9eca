#!/usr/bin/env python3
"""Whole-process overhead on a real GPU through PyTorch: a loop of small in-place tensor operations
(one kernel launch each), timed inside the script, alternately without cutrace and under
`cutrace profile` with GPU activity (its default) and with `--gpu-activity false`, round by round.
Prints the median time per operation of each, the time each adds per operation, and how many runtime
calls cutrace recorded per operation (PyTorch makes several per kernel launch: device queries, call
configuration, error checks). The difference between the two traced runs is what CUPTI's activity
collection costs.

usage: bench_torch.py [--cutrace build/bin/cutrace] [--ops 20000] [--rounds 5] [--python python3]
Needs PyTorch with CUDA and a GPU."""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import sys, time, torch
ops = int(sys.argv[1])
x = torch.zeros(256, device="cuda")
for _ in range(2000):  # warm-up: kernels loaded, caching allocator primed
    x.add_(1.0)
torch.cuda.synchronize()
start = time.perf_counter_ns()
for _ in range(ops):
    x.add_(1.0)
torch.cuda.synchronize()
print((time.perf_counter_ns() - start) / ops)
"""


def run(command, env):
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        sys.exit(f"bench_torch: {' '.join(command[:3])}... failed with exit code {proc.returncode}:\n{proc.stderr}")
    return float(proc.stdout.strip().splitlines()[-1])


def main():
    here = Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cutrace", default=str(here.parent / "build" / "bin" / "cutrace"))
    parser.add_argument("--ops", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()

    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "CUTRACE_SESSION")}
    child = [args.python, "-c", CHILD, str(args.ops)]
    plain, traced, api_only = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "torch"
        profile = [args.cutrace, "profile", "-f", "true", "-o"]
        for _ in range(args.rounds):
            plain.append(run(child, env))
            api_only.append(run([*profile, str(trace) + "-api", "--gpu-activity", "false", "--", *child], env))
            traced.append(run([*profile, str(trace), "--", *child], env))
        info = subprocess.run([args.cutrace, "info", str(trace) + ".cutrace"], capture_output=True, text=True).stdout
        stats = subprocess.run([args.cutrace, "stats", "-r", "cuda_api_sum", "--format", "csv", str(trace) + ".cutrace"],
                               capture_output=True, text=True).stdout
    launches = calls = 0
    for line in stats.splitlines():
        fields = line.split(",")
        # Kernel registration happens once, at import (tens of thousands of calls for PyTorch).
        if len(fields) >= 9 and fields[2].isdigit() and "Register" not in fields[-1]:
            calls += int(fields[2])
            if "LaunchKernel" in fields[-1]:
                launches += int(fields[2])
    dropped = re.search(r"^\s*dropped\s+([\d,]+)", info, re.M)
    gpu = re.search(r"^\s*gpu_activity\.kernels\s+([\d,]+)", info, re.M)
    base, with_cutrace, without_gpu = statistics.median(plain), statistics.median(traced), statistics.median(api_only)
    rounds = lambda values: ", ".join(f"{v:.0f}" for v in values)
    print(f"ops per round             {args.ops} (plus 2000 warm-up), {args.rounds} rounds")
    print(f"without cutrace           {base:9.1f} ns per op  (rounds: {rounds(plain)})")
    print(f"cutrace, API calls only   {without_gpu:9.1f} ns per op  (rounds: {rounds(api_only)})")
    print(f"cutrace with GPU activity {with_cutrace:9.1f} ns per op  (rounds: {rounds(traced)})")
    # The remaining start-up calls are a few thousand against the loop's tens of thousands.
    per_op = calls / (args.ops + 2000)
    print(f"added, API calls only     {without_gpu - base:+9.1f} ns per op")
    print(f"added with GPU activity   {with_cutrace - base:+9.1f} ns per op")
    print(f"GPU kernels recorded      {gpu.group(1) if gpu else 'none'} in the last round")
    print(f"kernel launches recorded  {launches} in the last round ({launches / (args.ops + 2000):.2f} per op)")
    print(f"runtime calls recorded    {calls} in the last round (about {per_op:.1f} per op, "
          f"so about {(with_cutrace - base) / per_op:.0f} ns added per call)")
    print(f"records dropped           {dropped.group(1) if dropped else 'unknown'} in the last round")


if __name__ == "__main__":
    main()
