#!/usr/bin/env bash
# Installs the Debian 12 packages needed to build and test cutrace. The CUDA toolkit is not a Debian
# package: it is expected at /usr/local/cuda already. Safe to run again; run as root (or with sudo
# available). Usage: scripts/install-deps.sh [--list]
set -euo pipefail

# The one list of build and test dependencies. Add a package here, with the reason, when the build
# or the tests start to need it.
packages=(
  cmake               # the build (3.25 on Debian 12; the project needs 3.25)
  ninja-build         # a faster generator than make; optional for the build, used when present
  g++                 # C++20 compiler
  clang               # libFuzzer targets of the reader and the recorder (scripts/fuzz.sh, run by CI)
  make                # CMake's default generator when ninja is not used
  ccache              # scripts/test.sh: the pip route's build takes the plain build's objects (optional)
  pkg-config          # finds libzstd
  binutils            # nm and addr2line: tests
  python3-clang-14    # libclang's Python bindings (and libclang-14): the wrapper generator parses the CUDA headers
  python3-pyelftools  # the wrapper generator and scripts/coverage.py read the libraries' exports and sonames
  libunwind8          # tests: a program that brings its own libunwind beside the shim's unwinder; bench_backtrace compares the two
  libdw-dev           # elfutils' libdw/libdwfl: the tools name backtrace frames (function, file:line, inlining)
  libzstd-dev         # trace file compression
  libsqlite3-dev      # cutrace export --type sqlite: the database nsys users query with SQL
  nlohmann-json3-dev  # --python-functions-trace: its JSON file is checked before the program starts (header-only)
  zlib1g-dev          # gzip-compressed Perfetto exports (cutrace export --gzip), which the Perfetto UI opens
  libprotobuf-dev     # cutrace export --type perfetto: Perfetto's protobuf format, written with libprotobuf-lite
  protobuf-compiler   # protoc compiles the part of Perfetto's schema the writer uses, at build time
  libgtest-dev        # unit tests (GoogleTest)
  libbenchmark-dev    # benchmarks (Google Benchmark)
  python3             # the wrapper generator and build-time code generators (3.11: tomllib)
  python3-pip         # installs the pinned Python test packages below
  python3-venv        # scripts/check-pip-install.sh checks the README's pip route in a new virtual environment
  libopenmpi-dev      # -t mpi --mpi-impl openmpi: Open MPI's mpi.h and libmpi, the interposer is built against them
  openmpi-bin         # mpirun.openmpi: tests/e2e/profile/test_mpi.py runs a two-rank job under it
  libmpich-dev        # -t mpi --mpi-impl mpich: MPICH's mpi.h and libmpich (another ABI, another interposer)
  mpich               # mpirun.mpich: the same test under MPICH
  python3-dev         # Python.h and CPython's internal headers: tests build a C extension that releases the GIL, and check the shim's frame layouts against them
)

# Python packages for the tests, pinned. Installed for the `python3` first on PATH, which is the one
# CMake finds and the tests run.
python_packages=(
  pytest==8.3.5       # end-to-end tests of `cutrace profile` on the simulated device
  pytest-xdist==3.8.0 # scripts/test.sh runs the sanitized end-to-end tests a file per CPU at once
  zstandard==0.25.0   # runs the Python reader of docs/trace-format.md against real traces
  nvtx==0.2.17        # NVTX annotations from Python, captured with no change to the script
  pyarrow==26.0.1     # the cutrace Python package (python/cutrace): tables as Arrow, Parquet and Arrow exports
  pandas==2.3.3       # tests and docs/sql.md: the tables as DataFrames
  duckdb==1.4.2       # tests and docs/sql.md: SQL over the tables and over a Parquet export; cutrace recipe
  dask==2026.8.0      # cutrace recipe --mode dask-futures (its test starts a scheduler and two workers)
  distributed==2026.8.0  # the Dask scheduler, workers and client of that mode
  perfetto==0.59.1    # tests: Perfetto's own proto definitions (perfetto_trace_pb2) parse `cutrace export --type perfetto`
  protobuf==6.33.6    # the runtime those generated definitions need (6.31 or newer of major version 6)
)

# Holistic Trace Analysis reads `cutrace export --type kineto` in its tests. Its wheel declares
# jupyterlab (for its notebooks) and pytest (for its own tests), which its analyses never import and
# which would bring some 80 packages into this Python; it is installed without them, beside the
# modules it does import (pandas, numpy, PyYAML and psutil come with the packages above).
# `pip install 'cutrace[hta]'` installs it with everything it declares.
hta_packages=(
  holistictraceanalysis==0.5.0  # tests/e2e/profile/test_kineto.py: HTA's TraceAnalysis over a Kineto export
  plotly==7.1.0                 # imported by HTA's analyzers
  narwhals==2.29.0              # plotly's one dependency
  networkx==3.6.1               # imported by HTA's trace parser (its call graph)
)

if [[ "${1:-}" == "--list" ]]; then
  printf '%s\n' "${packages[@]}" "${python_packages[@]}" "${hta_packages[@]}"
  exit 0
fi
if [[ $# -gt 0 ]]; then
  echo "usage: $0 [--list]" >&2
  exit 2
fi

run_as_root=()
if [[ $(id -u) -ne 0 ]]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "install-deps.sh: installing packages needs root; run it as root or install sudo." >&2
    exit 1
  fi
  run_as_root=(sudo)
fi

export DEBIAN_FRONTEND=noninteractive
"${run_as_root[@]}" apt-get update
"${run_as_root[@]}" apt-get install -y --no-install-recommends "${packages[@]}"

# Debian's own python3 refuses pip installs into the system (PEP 668) unless told otherwise; a python3
# from pyenv or a virtual environment takes them as usual.
pip_flags=(--quiet --disable-pip-version-check)
if python3 -m pip install --help 2>/dev/null | grep -q -- --break-system-packages; then
  pip_flags+=(--break-system-packages)
fi
python3 -m pip install "${pip_flags[@]}" "${python_packages[@]}"

python3 -m pip install "${pip_flags[@]}" --no-deps "${hta_packages[@]}"

# A python3 that is not Debian's (pyenv, a virtual environment) does not see Debian's python3-clang-14
# and python3-pyelftools: the same versions from PyPI, the libclang wheel with a libclang of its own.
if ! python3 -c "import clang.cindex, elftools" 2>/dev/null; then
  python3 -m pip install "${pip_flags[@]}" libclang==14.0.6 pyelftools==0.29
fi

if [[ ! -x /usr/local/cuda/bin/nvcc ]]; then
  echo "install-deps.sh: warning: no CUDA toolkit at /usr/local/cuda; install CUDA 13 there before building." >&2
fi
