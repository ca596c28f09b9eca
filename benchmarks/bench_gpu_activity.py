#!/usr/bin/env python3
"""What GPU activity adds to calls that give the GPU no work, whole-process: tests/apps/cheap_calls
times cudaGetDevice, cudaGetLastError, cudaStreamQuery and cudaEventQuery in a loop, untraced, under
`cutrace profile --gpu-activity false`, and under cutrace's defaults (GPU activity on), the
configurations interleaved round by round; medians of --rounds runs, ns per call. "gpu activity adds"
is defaults - (--gpu-activity false): the goal is at most 5 ns.

On the simulated device by default; --lib-dir DIR runs against another CUDA runtime (a real GPU's).

usage: bench_gpu_activity.py [--build DIR] [--lib-dir DIR] [--calls 2000000] [--rounds 5]"""
import argparse
import os
import statistics
import subprocess
import tempfile
from pathlib import Path

APIS = ("cudaGetDevice", "cudaGetLastError", "cudaStreamQuery", "cudaEventQuery")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    root = Path(__file__).resolve().parents[1]
    parser.add_argument("--build", type=Path, default=root / "build")
    parser.add_argument("--lib-dir", type=Path)
    parser.add_argument("--calls", type=int, default=2000000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    env = dict(os.environ, LD_LIBRARY_PATH=str(args.lib_dir or args.build / "simcuda" / "lib"))
    app = str(args.build / "tests" / "bin" / "cheap_calls")
    cutrace = str(args.build / "bin" / "cutrace")
    configurations = {"untraced": None, "gpu activity off": ["--gpu-activity", "false"], "defaults": []}
    results = {(api, name): [] for api in APIS for name in configurations}
    with tempfile.TemporaryDirectory() as scratch:
        for _ in range(args.rounds):
            for api in APIS:
                for name, options in configurations.items():
                    command = [app, str(args.calls), api]
                    if options is not None:
                        command = [cutrace, "profile", "-q", "-f", "-o", f"{scratch}/trace", *options, "--", *command]
                    out = subprocess.run(command, env=env, capture_output=True, text=True, check=True, timeout=600)
                    per_call = [l.split()[1] for l in out.stdout.splitlines() if l.startswith("ns_per_call ")]
                    results[(api, name)].append(float(per_call[0]))
    print(f"{args.calls} calls each, medians of {args.rounds} runs, ns per call (range):")
    print(f"  {'':18} " + " ".join(f"{name:>22}" for name in configurations) + f" {'gpu activity adds':>18}")
    for api in APIS:
        median = {name: statistics.median(results[(api, name)]) for name in configurations}
        cells = " ".join(f"{median[name]:8.1f} ({min(results[(api, name)]):5.1f}-{max(results[(api, name)]):5.1f})"
                         for name in configurations)
        print(f"  {api:18} {cells} {median['defaults'] - median['gpu activity off']:+18.1f}")


if __name__ == "__main__":
    main()
