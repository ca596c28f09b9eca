#!/usr/bin/env bash
# Fetches the CUDA 12 runtime and cuBLAS that the CUDA 12 wrappers are generated from (headers and
# exports) and that the tests run against: the pinned, hash-checked wheels of scripts/cuda12-wheels.txt
# from PyPI, unpacked into DEST/include and DEST/lib. The build runs it when DEST is not complete yet.
# Usage: scripts/fetch-cuda12.sh DEST
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
requirements="$here/cuda12-wheels.txt"
if [[ $# -ne 1 ]]; then
  echo "usage: $0 DEST" >&2
  exit 2
fi
dest=$1
stamp="$dest/.complete"
want=$(sha256sum "$requirements" | cut -d' ' -f1)
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  exit 0
fi

python=${PYTHON:-python3}
mkdir -p "$dest"
wheels=$(mktemp -d "$dest/.wheels.XXXXXX")
trap 'rm -rf "$wheels"' EXIT
if ! "$python" -m pip download --quiet --no-deps --only-binary=:all: --require-hashes -r "$requirements" \
     -d "$wheels" >&2; then
  echo "$0: could not download the CUDA 12 wheels listed in $requirements from PyPI; check the network" \
       "(or a pip index set in pip.conf), or build without CUDA 12 support with -DCUTRACE_CUDA12=OFF" >&2
  exit 1
fi
rm -rf "$dest/include" "$dest/lib" "$stamp"
# Only the headers and the shared libraries: the wheels also carry static archives and libnvblas.
"$python" - "$wheels" "$dest" <<'PY'
import pathlib, shutil, sys, zipfile
wheels, dest = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
for wheel in sorted(wheels.glob("*.whl")):
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            parts = pathlib.PurePosixPath(info.filename).parts
            if len(parts) < 4 or parts[0] != "nvidia" or info.is_dir():
                continue
            kind, rest = parts[2], pathlib.PurePosixPath(*parts[3:])
            if kind == "include":
                target = dest / "include" / rest
            elif kind == "lib" and ".so." in rest.name and rest.name != "libnvblas.so.12":
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
for lib in "$dest"/lib/*.so.12; do
  ln -sf "$(basename "$lib")" "${lib%.12}"
done
echo "$want" > "$stamp"
