#!/usr/bin/env bash
# The wheel route, checked as a PyTorch user meets it: on a machine without the CUDA toolkit (hidden
# here in a mount namespace of this script's own: an empty tmpfs over the toolkit's directory and
# nothing executable at each nvcc on PATH), scripts/build-wheel.sh builds the wheel; it is installed
# into a new virtual environment that sees none of the system's Python packages (pip brings pyarrow
# from PyPI), whose `cutrace` then profiles a bundled example and a Python program on the simulated
# device, and whose package reads the traces (tests/install). The simulated device and the example
# come from the plain build.
# Usage: scripts/check-wheel.sh [--build-only | --built] [DIR] [PLAIN_BUILD]   (defaults build-wheel
# and build); needs root. --build-only stops once the wheel is in DIR/dist; --built checks the wheel
# that an earlier --build-only left there (scripts/test.sh builds it while other tests run).
set -euo pipefail
cd "$(dirname "$0")/.."
stage=all
case "${1:-}" in
  --build-only) stage=build; shift ;;
  --built) stage=check; shift ;;
esac
dir=$(realpath -m "${1:-build-wheel}")
plain=$(realpath "${2:-build}")
stage_option=()
[[ $stage == build ]] && stage_option=(--build-only)
[[ $stage == check ]] && stage_option=(--built)

if [[ "${CUTRACE_TOOLKIT_HIDDEN:-}" != 1 ]]; then
  exec unshare --mount --propagation private env CUTRACE_TOOLKIT_HIDDEN=1 "$0" "${stage_option[@]}" "$dir" "$plain"
fi
toolkit=$(realpath -m /usr/local/cuda)
if [[ -d "$toolkit" ]]; then
  mount -t tmpfs -o size=1m,mode=0755 cutrace-no-toolkit "$toolkit"
fi
IFS=: read -r -a path_dirs <<< "$PATH"
for d in "${path_dirs[@]}"; do
  if [[ -x "$d/nvcc" ]]; then mount --bind /dev/null "$d/nvcc"; fi
done
hidden=1
for d in "${path_dirs[@]}"; do [[ -x "$d/nvcc" ]] && hidden=0; done
if (( ! hidden )) || [[ -n "$(ls -A "$toolkit" 2>/dev/null)" ]]; then
  echo "$0: the CUDA toolkit could not be hidden" >&2
  exit 1
fi

if [[ $stage != check ]]; then
  rm -rf "$dir"
  mkdir -p "$dir"
  scripts/build-wheel.sh "$dir/dist"
fi
[[ $stage == build ]] && exit 0
wheel=("$dir"/dist/cutrace-*.whl)
if [[ ! -f ${wheel[0]} ]]; then
  echo "$0: $dir/dist holds no cutrace wheel; build it first with --build-only." >&2
  exit 1
fi
rm -rf "$dir/venv"
python3 -m venv "$dir/venv"
"$dir/venv/bin/pip" install --quiet --disable-pip-version-check "${wheel[0]}"
CUTRACE_PIP_VENV="$dir/venv" CUTRACE_WHEEL="${wheel[0]}" CUTRACE_BUILD_DIR="$plain" \
  python3 -m pytest -q -p no:cacheprovider tests/install
