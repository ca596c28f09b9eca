#!/usr/bin/env python3
"""Runs NVIDIA's cuda-samples on the simulated CUDA device, with and without cutrace, and says which run
and whether cutrace changed any of them.

Opt-in, and it fetches nothing: give it a checkout of https://github.com/NVIDIA/cuda-samples (the
samples' sources are not in this repository). It takes every sample that builds with nvcc alone: a
directory under Samples/ whose CMakeLists.txt finds no package but the CUDA toolkit and links nothing
but the runtime and the driver. Each is built with the toolkit's nvcc (one architecture, the shared
runtime, the samples' Common/ headers), then run twice on the simulated device (LD_LIBRARY_PATH =
BUILD/simcuda/lib): as it is, and under `cutrace profile` with its defaults. A sample passes the
differential check when both runs exit alike (a death by signal N counts as exit 128 + N, which is
what cutrace exits with) and print the same, cutrace's own lines aside and with digits masked
(samples print their own timings and bandwidths); where they differ, both outputs are kept beside the
traces. Whether a sample runs at all on the
simulated device is reported, not failed: a sample that fails untraced shows a gap of the simulation
(docs/simulated-device.md), not of cutrace.

Usage: scripts/check-samples.py SAMPLES_DIR [--build BUILD] [--jobs N] [--only NAME[,NAME...]]
                                [--work DIR] [--timeout S]
Exit status: 0 when every sample that built ran alike with and without cutrace; 1 otherwise; 2 for a
bad command line or a missing build."""
from __future__ import annotations

import argparse
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
NVCC = os.environ.get("NVCC", "/usr/local/cuda/bin/nvcc")
ALLOWED_LIBRARIES = {"CUDA::cudart", "CUDA::cuda_driver"}


@dataclass
class Sample:
    name: str
    directory: Path


@dataclass
class Outcome:
    sample: Sample
    built: bool
    build_error: str = ""
    plain_exit: int | None = None
    traced_exit: int | None = None
    alike: bool = False
    difference: str = ""
    why: str = ""  # the untraced run's last line of stderr, when it failed


def nvcc_alone_samples(root: Path) -> list[Sample]:
    samples = []
    for cmake in sorted(root.glob("Samples/*/*/CMakeLists.txt")):
        text = cmake.read_text(errors="replace")
        packages = set(re.findall(r"find_package\(\s*(\w+)", text)) - {"CUDAToolkit"}
        libraries = set()
        for m in re.finditer(r"target_link_libraries\s*\(([^)]*)\)", text):
            libraries |= set(m.group(1).split()[1:]) - {"PRIVATE", "PUBLIC", "INTERFACE"}
        sources = [p for p in cmake.parent.iterdir() if p.suffix in (".cu", ".cpp", ".c")]
        if sources and not packages and libraries <= ALLOWED_LIBRARIES:
            samples.append(Sample(cmake.parent.name, cmake.parent))
    return samples


# The fatbins and PTX files a driver API sample loads at run time (nvcc -fatbin or -ptx): built beside
# its binary, where it looks first.
def modules(text: str, directory: Path) -> list[tuple[str, str, Path]]:
    built = re.findall(r'set\(CUDA_(FATBIN|PTX)_FILE\s+"\$\{CMAKE_CURRENT_BINARY_DIR\}/([^"]+)"\)', text)
    kernels = re.findall(r'set\(CUDA_KERNEL_SOURCE\s+"\$\{CMAKE_CURRENT_SOURCE_DIR\}/([^"]+)"\)', text)
    return [("-" + kind.lower(), name, directory / kernel) for (kind, name), kernel in zip(built, kernels)]


def build(sample: Sample, root: Path, out: Path) -> tuple[bool, str]:
    text = (sample.directory / "CMakeLists.txt").read_text(errors="replace")
    flags = ["-std=c++17", "-O1", "-arch=sm_90", "-Wno-deprecated-gpu-targets",
             "-I", str(root / "Common"), "-I", str(sample.directory)]
    out.parent.mkdir(parents=True, exist_ok=True)
    loaded = modules(text, sample.directory)
    for kind, name, kernel in loaded:
        r = subprocess.run([NVCC, *flags, kind, str(kernel), "-o", str(out.parent / name)],
                           capture_output=True, text=True, timeout=900)
        if r.returncode != 0:
            return False, (r.stderr.strip().splitlines() or [""])[-1]
    kernel_sources = {str(kernel) for _, _, kernel in loaded}
    sources = sorted(str(p) for p in sample.directory.iterdir()
                     if p.suffix in (".cu", ".cpp", ".c") and str(p) not in kernel_sources)
    flags += ["-cudart", "shared"]
    if "--extended-lambda" in text:
        flags.append("--extended-lambda")
    if "CUDA_SEPARABLE_COMPILATION ON" in text:
        flags.append("-rdc=true")
    r = subprocess.run([NVCC, *flags, *sources, "-lcuda", "-o", str(out)], capture_output=True, text=True,
                       timeout=900)
    last = (r.stderr.strip().splitlines() or [""])[-1]
    return r.returncode == 0, last


def masked(text: str) -> str:
    # A number in a fixed-width column is padded by as many spaces as it lacks digits: the padding
    # goes with the number, and so do its sign (a speed-up measured negative on a loaded machine),
    # fraction and exponent (a rate printed with %g is "80" one run and "71.9424" the next).
    return re.sub(r" *-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", " #", text)


# A program that dies of signal N: cutrace exits with 128 + N, as a shell reports it.
def run(command: list[str], env: dict[str, str], cwd: Path, timeout: int) -> tuple[int, str, str]:
    try:
        r = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, errors="replace",
                           timeout=timeout, stdin=subprocess.DEVNULL)
        return (128 - r.returncode if r.returncode < 0 else r.returncode), r.stdout, r.stderr
    except subprocess.TimeoutExpired as e:
        def text(b):
            return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")
        return 128 + 9, text(e.stdout), text(e.stderr) + "\n(timed out)"


def check(sample: Sample, root: Path, work: Path, cutrace: Path, lib_dir: Path, timeout: int,
          devices: int) -> Outcome:
    binary = work / "bin" / sample.name / sample.name
    ok, error = build(sample, root, binary)
    if not ok:
        return Outcome(sample, False, build_error=error)
    # Samples look for their fatbins and data in the directory they run in: the binary's, with the
    # sample's own files linked beside it.
    for entry in sample.directory.iterdir():
        link = binary.parent / entry.name
        if not link.exists():
            link.symlink_to(entry)
    env = dict(os.environ, LD_LIBRARY_PATH=str(lib_dir), SIMCUDA_DEVICE_COUNT=str(devices))
    env.pop("LD_PRELOAD", None)
    plain = run([str(binary)], env, binary.parent, timeout)
    trace = work / "traces" / sample.name
    traced = run([str(cutrace), "profile", "-f", "true", "-q", "-o", str(trace), "--", str(binary)], env,
                 binary.parent, timeout)
    traced_err = "".join(line for line in traced[2].splitlines(True) if not line.startswith("cutrace"))
    outcome = Outcome(sample, True, plain_exit=plain[0], traced_exit=traced[0])
    if plain[0] != 0:
        outcome.why = (plain[2].strip().splitlines() or plain[1].strip().splitlines() or [""])[-1][:160]
    if plain[0] != traced[0]:
        outcome.difference = f"exit {plain[0]} untraced, {traced[0]} traced"
    else:
        for stream, untraced, with_cutrace in (("output", plain[1], traced[1]), ("error", plain[2], traced_err)):
            a, b = masked(untraced).splitlines(), masked(with_cutrace).splitlines()
            if a != b:
                first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
                outcome.difference = f"standard {stream} differs from line {first + 1}"
                (work / "traces" / f"{sample.name}.untraced.{stream}").write_text(untraced)
                (work / "traces" / f"{sample.name}.traced.{stream}").write_text(with_cutrace)
                break
    outcome.alike = not outcome.difference
    return outcome


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("samples", type=Path, help="a checkout of NVIDIA/cuda-samples")
    ap.add_argument("--build", type=Path, default=HERE.parent / "build", help="cutrace's build directory")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--only", default="", help="comma-separated sample names")
    ap.add_argument("--work", type=Path, help="where binaries and traces go (default: a temporary directory)")
    ap.add_argument("--timeout", type=int, default=120, help="seconds for each run")
    ap.add_argument("--devices", type=int, default=2,
                    help="simulated devices (default 2: the peer-to-peer samples waive with fewer)")
    args = ap.parse_args(argv)
    cutrace = args.build / "bin" / "cutrace"
    lib_dir = args.build / "simcuda" / "lib"
    if not cutrace.exists() or not (lib_dir / "libcudart.so.13").exists():
        print(f"check-samples: {args.build} has no cutrace or simulated device; build it first "
              f"(cmake --build {args.build})", file=sys.stderr)
        return 2
    if not (args.samples / "Samples").is_dir() or not (args.samples / "Common").is_dir():
        print(f"check-samples: {args.samples} is not a cuda-samples checkout (no Samples/ and Common/)",
              file=sys.stderr)
        return 2
    samples = nvcc_alone_samples(args.samples)
    if args.only:
        wanted = set(args.only.split(","))
        samples = [s for s in samples if s.name in wanted]
    work = args.work or Path(tempfile.mkdtemp(prefix="cutrace-samples."))
    (work / "bin").mkdir(parents=True, exist_ok=True)
    (work / "traces").mkdir(parents=True, exist_ok=True)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        outcomes = list(pool.map(lambda s: check(s, args.samples, work, cutrace, lib_dir, args.timeout, args.devices),
                                 samples))
    built = [o for o in outcomes if o.built]
    running = [o for o in built if o.plain_exit == 0]
    differing = [o for o in built if not o.alike]
    for o in outcomes:
        if not o.built:
            status = f"does not build with nvcc alone: {o.build_error[:120]}"
        elif o.plain_exit == 0:
            status = "runs"
        else:
            status = f"fails on the simulated device (exit {o.plain_exit}): {o.why}"
        check_mark = "" if not o.built else ("alike" if o.alike else f"DIFFERS: {o.difference}")
        print(f"{o.sample.name:36} {check_mark:40} {status}")
    print(f"\n{len(samples)} samples take nothing but the runtime and the driver; {len(built)} built, "
          f"{len(running)} run on the simulated device, {len(built) - len(differing)} of {len(built)} "
          f"alike with and without cutrace (binaries and traces in {work})")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
