#!/usr/bin/env bash
# Fetches pinned, hash-checked CUDA wheels from PyPI (a requirements file: scripts/cuda12-wheels.txt,
# the CUDA 12 runtime and cuBLAS that the CUDA 12 wrappers are generated from and tested against;
# scripts/cuda13.2-wheels.txt, the runtime and CUPTI that PyTorch's wheels bring, for the tests) and
# unpacks their headers and shared libraries into DEST/include and DEST/lib: every library, or only
# the LIBRARY files named (cuDNN's wheel carries a gigabyte of engines no build step reads). The
# build runs it when DEST is not complete yet.
# Usage: scripts/fetch-cuda-wheels.sh REQUIREMENTS DEST [LIBRARY...]
set -euo pipefail
if [[ $# -lt 2 ]]; then
  echo "usage: $0 REQUIREMENTS DEST [LIBRARY...]" >&2
  exit 2
fi
requirements=$1
dest=$2
shift 2
libraries="$*"
stamp="$dest/.complete"
if [[ -z "$libraries" ]]; then
  want=$(sha256sum "$requirements" | cut -d' ' -f1)
else
  want=$( (cat "$requirements"; echo "$libraries") | sha256sum | cut -d' ' -f1)
fi
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  exit 0
fi

python=${PYTHON:-python3}
mkdir -p "$dest"
wheels=$(mktemp -d "$dest/.wheels.XXXXXX")
trap 'rm -rf "$wheels"' EXIT
if ! "$python" -m pip download --quiet --no-deps --only-binary=:all: --require-hashes -r "$requirements" \
     -d "$wheels" >&2; then
  echo "$0: could not download the wheels listed in $requirements from PyPI; check the network" \
       "(or a pip index set in pip.conf)" >&2
  exit 1
fi
rm -rf "$dest/include" "$dest/lib" "$stamp"
# Only the headers and the shared libraries: the wheels also carry static archives and libnvblas.
"$python" - "$wheels" "$dest" $libraries <<'PY'
import pathlib, shutil, sys, zipfile
wheels, dest = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
wanted = set(sys.argv[3:])
for wheel in sorted(wheels.glob("*.whl")):
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            parts = pathlib.PurePosixPath(info.filename).parts
            if len(parts) < 4 or parts[0] != "nvidia" or info.is_dir():
                continue
            kind, rest = parts[2], pathlib.PurePosixPath(*parts[3:])
            if kind == "include":
                target = dest / "include" / rest
            elif kind == "lib" and (".so." in rest.name or rest.name.endswith(".so")) \
                    and not rest.name.startswith("libnvblas.") and (not wanted or rest.name in wanted):
                target = dest / "lib" / rest
            else:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with z.open(info) as src, open(target, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
            if kind == "lib":
                target.chmod(0o755)
PY
# The link-time names (libcudart.so), as the toolkit has them, for test programs linked with -lcudart.
for lib in "$dest"/lib/*.so.[0-9]*; do
  [[ -e "${lib%.so.*}.so" ]] || ln -s "$(basename "$lib")" "${lib%.so.*}.so"
done
echo "$want" > "$stamp"
