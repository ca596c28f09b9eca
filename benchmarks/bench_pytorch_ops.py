#!/usr/bin/env python3
"""What `cutrace profile --pytorch` costs per PyTorch op: a loop of small in-place tensor operations (one
op and one kernel launch each), timed inside the script, round by round in five ways: without cutrace;
without cutrace but with torch.autograd.profiler.emit_nvtx() in the script (what a user who annotates
by hand pays, NVTX calls going nowhere); under `cutrace profile` without --pytorch; with --pytorch
autograd-nvtx; with --pytorch autograd-shapes-nvtx,functions-trace. Prints the median time per op of
each and what each adds to the first.

On the simulated device (--simulated DIR: its libraries, build/simcuda/lib, preloaded as
tests/unit/simcuda/torch_test.py does, with kernels of SIMCUDA_KERNEL_NS, 1 us here) or, without it, on
the machine's GPU.

usage: bench_pytorch_ops.py [--cutrace build/bin/cutrace] [--python PYTHON] [--ops 5000] [--rounds 5]
                            [--simulated build/simcuda/lib]"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import contextlib, sys, time, torch
ops, annotate = int(sys.argv[1]), sys.argv[2] == "emit_nvtx"
x = torch.zeros(256, device="cuda")
with torch.autograd.profiler.emit_nvtx() if annotate else contextlib.nullcontext():
    for _ in range(1000):  # warm-up: kernels loaded, caching allocator primed
        x.add_(1.0)
    torch.cuda.synchronize()
    start = time.perf_counter_ns()
    for _ in range(ops):
        x.add_(1.0)
    torch.cuda.synchronize()
    print((time.perf_counter_ns() - start) / ops)
"""
SIMULATED = ("libcudart.so.13", "libcuda.so.1", "libcublasLt.so.13", "libcublas.so.13", "libcudnn.so.9",
             "libcupti.so.13")


def run(command, env):
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        sys.exit(f"bench_pytorch_ops: {' '.join(map(str, command[:4]))}... exited {proc.returncode}:\n{proc.stderr}")
    return float(proc.stdout.strip().splitlines()[-1])


def main():
    here = Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cutrace", default=str(here.parent / "build" / "bin" / "cutrace"))
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--ops", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--simulated", help="the simulated device's library directory (build/simcuda/lib)")
    args = parser.parse_args()

    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "CUTRACE_SESSION")}
    if args.simulated:
        lib = Path(args.simulated).resolve()
        env.update(LD_LIBRARY_PATH=str(lib), LD_PRELOAD=" ".join(str(lib / n) for n in SIMULATED),
                   SIMCUDA_KERNEL_NS="1000", PYTHONWARNINGS="ignore")
    ways = {
        "without cutrace": (None, "plain"),
        "emit_nvtx in the script, no tracer": (None, "emit_nvtx"),
        "cutrace, no --pytorch": ([], "plain"),
        "cutrace --pytorch autograd-nvtx": (["--pytorch", "autograd-nvtx"], "plain"),
        "cutrace --pytorch autograd-shapes-nvtx,functions-trace":
            (["--pytorch", "autograd-shapes-nvtx,functions-trace"], "plain"),
    }
    times = {name: [] for name in ways}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.rounds):
            for name, (options, annotate) in ways.items():
                child = [args.python, "-c", CHILD, str(args.ops), annotate]
                command = child if options is None else \
                    [args.cutrace, "profile", "-q", "-f", "true", "-o", str(Path(tmp) / "ops"), *options, "--", *child]
                times[name].append(run(command, env))
    base = statistics.median(times["without cutrace"])
    print(f"ops per round: {args.ops} (after 1000 to warm up), {args.rounds} rounds, "
          f"{'the simulated device' if args.simulated else 'the GPU'}")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:56} {median / 1000:8.2f} us per op  {(median - base) / 1000:+7.2f} us  "
              f"(rounds: {', '.join(f'{v / 1000:.2f}' for v in values)})")


if __name__ == "__main__":
    main()
