#!/usr/bin/env python3
"""What a slow call's Python stack costs, whole-process: a script calls the simulated cudaGetDevice
through ctypes.CDLL (which releases the GIL, as PyTorch's bindings do) from a stack of exactly
--frames Python frames, under `cutrace profile`, in one run of this script:

  untraced                     python alone, on the simulated device
  capture                      cutrace's defaults: every call under its backtrace threshold
  capture, no python frames    the same with --python-backtrace none
  every stack, native only     --cudabacktrace all:0 --python-backtrace none: every call takes its stack
  every stack, with python     --cudabacktrace all:0: and its Python frames

"python stack" = (every stack, with python) - (every stack, native only): the cost of reading the
Python frames of one call, per call. "under threshold" = capture - (capture, no python frames): what
Python frames add to calls that take no stack (nothing, by design). Medians of --rounds runs, the
configurations interleaved so that a machine's drift falls on all of them alike.

usage: bench_python_frames.py [--build DIR] [--python PYTHON] [--frames 20] [--calls 200000] [--rounds 5]"""
import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def child(frames, calls):
    lib = ctypes.CDLL("libcudart.so.13")
    device = ctypes.c_int()
    get_device = lib.cudaGetDevice
    pointer = ctypes.byref(device)

    def loop():
        start = time.perf_counter_ns()
        for _ in range(calls):
            get_device(pointer)
        print((time.perf_counter_ns() - start) / calls)

    def nest(n):  # n Python frames above loop(), <module> included
        if n == 2:
            return loop()
        return nest(n - 1)

    nest(frames)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(int(sys.argv[2]), int(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    root = Path(__file__).resolve().parents[1]
    parser.add_argument("--build", type=Path, default=root / "build")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--frames", type=int, default=20)
    parser.add_argument("--calls", type=int, default=200000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if args.frames < 3:
        parser.error("--frames must be at least 3 (<module>, the nesting, the loop)")
    env = dict(os.environ, LD_LIBRARY_PATH=str(args.build / "simcuda" / "lib"))
    cutrace = str(args.build / "bin" / "cutrace")
    command = [args.python, str(Path(__file__).resolve()), "--child", str(args.frames - 1), str(args.calls)]
    configurations = {
        "untraced": None,
        "capture": [],
        "capture, no python frames": ["--python-backtrace", "none"],
        "every stack, native only": ["--cudabacktrace", "all:0", "--python-backtrace", "none"],
        "every stack, with python": ["--cudabacktrace", "all:0"],
    }
    results = {name: [] for name in configurations}
    with tempfile.TemporaryDirectory() as scratch:
        for _ in range(args.rounds):
            for name, options in configurations.items():
                run = command if options is None else [cutrace, "profile", "-q", "-f", "--gpu-activity", "false",
                                                       "-o", f"{scratch}/trace", *options, "--", *command]
                out = subprocess.run(run, env=env, capture_output=True, text=True, check=True, timeout=600)
                results[name].append(float(out.stdout.split()[-1]))
    median = {name: statistics.median(values) for name, values in results.items()}
    python = subprocess.run([args.python, "-c", "import platform; print(platform.python_version())"],
                            capture_output=True, text=True).stdout.strip()
    print(f"Python {python}, {args.frames} Python frames, {args.calls} calls of cudaGetDevice through ctypes.CDLL "
          f"(GIL released), medians of {args.rounds} runs:")
    for name, value in median.items():
        spread = f"{min(results[name]):.1f}-{max(results[name]):.1f}"
        print(f"  {name:28} {value:8.1f} ns per call   ({spread})")
    print(f"  {'python stack':28} {median['every stack, with python'] - median['every stack, native only']:+8.1f} ns "
          f"per call ({args.frames} frames)")
    print(f"  {'under threshold':28} {median['capture'] - median['capture, no python frames']:+8.1f} ns per call")


if __name__ == "__main__":
    main()
