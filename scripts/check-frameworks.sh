#!/usr/bin/env bash
# Opt-in check of cutrace on the real frameworks (too heavy for every CI run: 7 to 8 GB installed for
# each CUDA version). For each set of scripts/frameworks/<set>.txt (cuda12: PyTorch and JAX built for
# CUDA 12; cuda13: for CUDA 13) it installs the pinned wheels into a virtual environment of its own,
# profiles a short start-up and training step with each framework, and prints what was recorded: calls
# per domain and function with their results, the processes, and cutrace's own warnings (a CUDA
# library loaded with none of its calls recorded). It also compares the exports of the CUDA libraries
# the wheels brought with what cutrace wraps (scripts/coverage.py --libraries), so that a function no
# wrapper exists for is listed rather than silently untraced. It fails when a traced run (the import
# under cutrace's defaults, the step) exits or prints other than the same run without cutrace, when a process loaded the CUDA runtime and none of
# its calls was recorded, or when PyTorch's CUDA runtime calls are missing. On a machine with a GPU
# the same steps run on the GPU.
# Usage: scripts/check-frameworks.sh [BUILD_DIR]   (environment: CUTRACE_FRAMEWORK_SETS, default
# "cuda12 cuda13"; CUTRACE_FRAMEWORKS, default "torch jax"; CUTRACE_FRAMEWORKS_DIR for the virtual
# environments, default ~/.cache/cutrace)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(realpath "${1:-$here/../build}")
cutrace="$build/bin/cutrace"
venvs=${CUTRACE_FRAMEWORKS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cutrace}
sets=${CUTRACE_FRAMEWORK_SETS:-cuda12 cuda13}
frameworks=${CUTRACE_FRAMEWORKS:-torch jax}
if [[ ! -x "$cutrace" ]]; then
  echo "$0: $cutrace does not exist; build cutrace first (cmake --build $build)" >&2
  exit 2
fi

# The virtual environment of one set, installed once per version of its requirements.
prepare() {
  local requirements="$here/frameworks/$1.txt" venv="$venvs/frameworks-$1"
  if [[ ! -f "$requirements" ]]; then
    echo "$0: no $requirements" >&2
    return 1
  fi
  if [[ ! -f "$venv/.cutrace-requirements" ]] || ! cmp -s "$requirements" "$venv/.cutrace-requirements"; then
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    if ! "$venv/bin/python" -m pip install --quiet -r "$requirements"; then
      echo "$0: could not install $requirements into $venv; check the network or the pip index" >&2
      return 1
    fi
    cp "$requirements" "$venv/.cutrace-requirements"
  fi
}

out=$(mktemp -d "${TMPDIR:-/tmp}/cutrace-frameworks.XXXXXX")

# alike NAME [OPTION...] -- COMMAND...: runs COMMAND without cutrace, then under `cutrace profile
# OPTION...` into $out/NAME.cutrace; fails unless both exit alike and print the same on both streams
# (cutrace's own lines aside). Shows the traced output and cutrace's lines.
alike() {
  local name=$1 options=() plain_status=0 traced_status=0
  shift
  while [[ $1 != -- ]]; do options+=("$1"); shift; done
  shift
  "$@" > "$out/$name.plain" 2> "$out/$name.plain-err" || plain_status=$?
  "$cutrace" profile -o "$out/$name" "${options[@]}" -- "$@" > "$out/$name.stdout" 2> "$out/$name.stderr" ||
    traced_status=$?
  local failed=0
  if [[ $traced_status != "$plain_status" ]] || ! cmp -s "$out/$name.plain" "$out/$name.stdout" ||
     ! cmp -s "$out/$name.plain-err" <(grep -v '^cutrace:' "$out/$name.stderr"); then
    echo "FAIL: traced, it exited $traced_status (without cutrace $plain_status), or its output differs:"
    diff <(cat "$out/$name.plain" "$out/$name.plain-err") \
         <(cat "$out/$name.stdout"; grep -v '^cutrace:' "$out/$name.stderr") | head -20
    failed=1
  else
    echo "  exit $plain_status and the same output, traced or not (exit codes above 128 are signals)"
  fi
  sed 's/^/  | /' "$out/$name.stdout"
  grep '^cutrace' "$out/$name.stderr" | sed 's/^/  /' || true
  return $failed
}

status=0
for set in $sets; do
  prepare "$set" || { status=1; continue; }
  venv="$venvs/frameworks-$set"
  echo "=== $set: the CUDA libraries the wheels brought, against what cutrace wraps"
  python3 "$here/coverage.py" --build "$build" --libraries "$venv" | sed 's/^/  /' || true
  for fw in $frameworks; do
    # The first thing a user runs, under cutrace's defaults, then a training step.
    case $fw in
      torch) first="import torch; print(torch.__version__, torch.cuda.is_available())" ;;
      *) first="import $fw; print($fw.__version__)" ;;
    esac
    echo "=== $set $fw: cutrace profile python -c '$first', against the same without cutrace"
    alike "$set-$fw-import" -- "$venv/bin/python" -c "$first" || status=1
    echo "=== $set $fw: cutrace profile -t cuda,nvtx,cublas,cudnn python scripts/frameworks/${fw}_step.py"
    alike "$set-$fw" -t cuda,nvtx,cublas,cudnn -- "$venv/bin/python" "$here/frameworks/${fw}_step.py" || status=1
    # A library loaded and never called is no fault (without a GPU, PyTorch loads cuBLAS and cuDNN and
    # never calls them); kernels no recorded call launched, or no CUDA call at all, are (the runtime's
    # calls are counted below).
    if grep -q 'no call that launches kernels was recorded\|no CUDA call was recorded' "$out/$set-$fw.stderr"; then
      echo "FAIL: cutrace recorded none of the calls that gave the GPU its work" && status=1
    fi
    trace="$out/$set-$fw.cutrace"
    [[ -f "$trace" ]] || { echo "FAIL: no trace"; status=1; continue; }
    "$cutrace" stats -r api_trace --show-internal true --format csv "$trace" > "$out/$set-$fw.csv" 2>/dev/null || true
    python3 - "$out/$set-$fw.csv" "$fw" <<'PY' || status=1
import collections, csv, sys
path, fw = sys.argv[1], sys.argv[2]
rows = [r for r in csv.DictReader(l for l in open(path) if l.strip() and not l.startswith("#"))]
by_domain = collections.Counter(r["Domain"] for r in rows)
print(f"  calls recorded: {len(rows)}; by domain: {dict(by_domain)}")
results = collections.defaultdict(collections.Counter)
for r in rows:
    results[(r["Domain"], r["Name"])][r["Result"]] += 1
for (domain, name), seen in sorted(results.items(), key=lambda kv: -sum(kv[1].values()))[:25]:
    shown = ", ".join(f"{k or '-'} x{n}" for k, n in seen.most_common(2)) if len(seen) <= 2 else f"{len(seen)} distinct results"
    print(f"    {sum(seen.values()):7d}  {domain:13s} {name:40s} {shown}")
if fw == "torch" and by_domain.get("cuda_runtime", 0) == 0:
    print("FAIL: PyTorch's CUDA runtime calls are missing")
    sys.exit(1)
PY
    "$cutrace" info "$trace" | sed -n '/^Processes/,/^Threads/p' | head -8 | sed 's/^/  /'
    if [[ $fw == torch ]]; then
      # Every call's stack (--cudabacktrace all:0): PyTorch's runtime calls must name the script's
      # line, read without the GIL where PyTorch released it.
      echo "=== $set torch: the Python lines of PyTorch's runtime calls"
      "$cutrace" profile -q -f true --cudabacktrace all:0 -o "$out/$set-torch-lines" -- "$venv/bin/python" \
        "$here/frameworks/torch_lines.py" > "$out/$set-torch-lines.stdout" 2>&1 || true
      "$cutrace" export --type perfetto-json -f -o "$out/$set-torch-lines.json" "$out/$set-torch-lines.cutrace" 2>/dev/null
      python3 - "$out/$set-torch-lines.json" "$here/frameworks/torch_lines.py" <<'PY' || status=1
import json, os, sys
events = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("cat") == "cuda_runtime"]
line = [n for n, l in enumerate(open(sys.argv[2]), 1) if "# LINE: probe" in l][0]
site = f"probe ({os.path.basename(sys.argv[2])}:{line})"
named = [e["name"] for e in events if site in e["args"].get("python_stack", [])]
print(f"  {len(events)} runtime calls, {len(named)} of them from {site}: {sorted(set(named))}")
if not named:
    print("FAIL: no runtime call of torch.cuda.is_available() names the script's line")
    sys.exit(1)
PY
    fi
  done
done
echo "traces and outputs: $out"
exit $status
