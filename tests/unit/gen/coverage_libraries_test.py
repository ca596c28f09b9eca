"""scripts/coverage.py --libraries: the CUDA libraries under a directory (a framework's wheels) against
what the build wraps. The CUDA 12 wheels the build was generated from are wrapped whole; a runtime of
a newer minor version has its one unknown function listed, and the exit status says so.
Usage: coverage_libraries_test.py BUILD_DIR FUTURE_DIR [CUDA12_LIB_DIR]"""
import subprocess
import sys
from pathlib import Path

COVERAGE = Path(__file__).resolve().parents[3] / "scripts" / "coverage.py"


def run(build, directory):
    return subprocess.run([sys.executable, str(COVERAGE), "--build", build, "--libraries", directory],
                          capture_output=True, text=True, timeout=300)


def main(build, future, cuda12=None):
    failures = []
    r = run(build, future)
    if r.returncode != 1 or "libcudart.so.13: 2 exported functions, 1 wrapped, NOT wrapped (1): cudaFutureFunction" \
            not in r.stdout:
        failures.append(f"a newer runtime's unknown function is not listed (exit {r.returncode}):\n{r.stdout}{r.stderr}")
    if cuda12:
        r = run(build, cuda12)
        if r.returncode != 0 or r.stdout.count(" wrapped\n") != 4 or "NOT" in r.stdout:
            failures.append(f"the CUDA 12 wheels are not wrapped whole (exit {r.returncode}):\n{r.stdout}{r.stderr}")
    for f in failures:
        print(f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
