#!/usr/bin/env bash
# Opt-in check of cutrace on the real frameworks (too heavy for every CI run: about 4 GB of wheels).
# Installs the pinned PyTorch and JAX CUDA 12 builds of scripts/frameworks/requirements.txt into a
# virtual environment, profiles a short start-up and training step with each, and prints what was
# recorded: calls per domain and function with their results, the processes, and cutrace's own
# warnings (a CUDA library loaded with none of its calls recorded). It fails when a run fails, when a
# process loaded the CUDA runtime and none of its calls was recorded, or when PyTorch's CUDA runtime
# calls are missing. On a machine with a GPU the same step runs on the GPU.
# Usage: scripts/check-frameworks.sh [BUILD_DIR]   (environment: CUTRACE_FRAMEWORKS_VENV, default
# ~/.cache/cutrace/frameworks-venv; CUTRACE_FRAMEWORKS="torch jax" to choose)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(realpath "${1:-$here/../build}")
cutrace="$build/bin/cutrace"
venv=${CUTRACE_FRAMEWORKS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/cutrace/frameworks-venv}
frameworks=${CUTRACE_FRAMEWORKS:-torch jax}
if [[ ! -x "$cutrace" ]]; then
  echo "$0: $cutrace does not exist; build cutrace first (cmake --build $build)" >&2
  exit 2
fi

requirements="$here/frameworks/requirements.txt"
stamp="$venv/.cutrace-requirements"
if [[ ! -f "$stamp" ]] || ! cmp -s "$requirements" "$stamp"; then
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  if ! "$venv/bin/python" -m pip install --quiet -r "$requirements"; then
    echo "$0: could not install $requirements into $venv; check the network or the pip index" >&2
    exit 1
  fi
  cp "$requirements" "$stamp"
fi

out=$(mktemp -d "${TMPDIR:-/tmp}/cutrace-frameworks.XXXXXX")
status=0
for fw in $frameworks; do
  echo "=== $fw: cutrace profile -t cuda,nvtx,cublas,cudnn python scripts/frameworks/${fw}_step.py"
  if ! "$cutrace" profile -o "$out/$fw" -t cuda,nvtx,cublas,cudnn --show-output true \
       "$venv/bin/python" "$here/frameworks/${fw}_step.py" > "$out/$fw.stdout" 2> "$out/$fw.stderr"; then
    echo "FAIL: the profiled run exited non-zero" && status=1
  fi
  sed 's/^/  | /' "$out/$fw.stdout"
  grep '^cutrace' "$out/$fw.stderr" | sed 's/^/  /' || true
  # A library loaded and never called is no fault (without a GPU, PyTorch loads cuBLAS and cuDNN and
  # never calls them); a runtime loaded with none of its calls recorded is.
  if grep -q 'libcudart[^ ]* was loaded but none of its calls\|no CUDA call was recorded' "$out/$fw.stderr"; then
    echo "FAIL: a process loaded the CUDA runtime and cutrace recorded none of its calls" && status=1
  fi
  trace="$out/$fw.cutrace"
  [[ -f "$trace" ]] || { echo "FAIL: no trace"; status=1; continue; }
  "$cutrace" stats -r api_trace --show-internal true --format csv "$trace" > "$out/$fw.csv" 2>/dev/null || true
  python3 - "$out/$fw.csv" "$fw" <<'PY' || status=1
import collections, csv, sys
path, fw = sys.argv[1], sys.argv[2]
rows = [r for r in csv.DictReader(l for l in open(path) if l.strip() and not l.startswith("#"))]
by_domain = collections.Counter(r["Domain"] for r in rows)
print(f"  calls recorded: {len(rows)}; by domain: {dict(by_domain)}")
by_call = collections.Counter((r["Domain"], r["Name"], r["Result"]) for r in rows)
for (domain, name, result), n in sorted(by_call.items(), key=lambda kv: -kv[1])[:25]:
    print(f"    {n:7d}  {domain:13s} {name:40s} {result}")
if fw == "torch" and by_domain.get("cuda_runtime", 0) == 0:
    print("FAIL: PyTorch's CUDA runtime calls are missing")
    sys.exit(1)
PY
  "$cutrace" info "$trace" | sed -n '/^Processes/,/^Threads/p' | head -8 | sed 's/^/  /'
done
echo "traces and outputs: $out"
exit $status
