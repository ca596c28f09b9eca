#!/usr/bin/env bash
# The README's pip route, checked: `pip install .` of this checkout into a new virtual environment,
# then that environment's `cutrace` profiles a bundled example on the simulated device and its Python
# package reads the trace (tests/install). The environment sees the system's packages (pyarrow, pandas,
# from scripts/install-deps.sh), so only the build's own requirements are fetched. DIR is the CMake
# build directory, kept so that a second run rebuilds only what changed (the environment is DIR/venv);
# scripts/test.sh makes it a sibling of the plain build, whose objects ccache then hands it.
# Usage: scripts/check-pip-install.sh [DIR] [PLAIN_BUILD]   (defaults build-pip and build)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(realpath -m "${1:-build-pip}")
plain=$(realpath "${2:-build}")
venv="$dir/venv"
rm -rf "$venv"
python3 -m venv --system-site-packages "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check --config-settings=build-dir="$dir" .
CUTRACE_PIP_VENV="$venv" CUTRACE_BUILD_DIR="$plain" python3 -m pytest -q -p no:cacheprovider tests/install
