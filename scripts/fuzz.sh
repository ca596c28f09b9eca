#!/usr/bin/env bash
# Fuzzes the trace reader and the recorder's validation of ring contents with libFuzzer, under ASan
# and UBSan, for a bounded time each, side by side:
#   scripts/fuzz.sh [seconds-per-target] [build-dir]     (default 60 s, build-fuzz)
# Builds the two targets with clang (Debian's clang package), seeds them from the test suite's own
# builders (fuzz_seeds), and fails on the first crash, leak or hang, leaving the input that caused it
# in BUILD/fuzz-artifacts/. Such an input becomes a regression test: add it to the unit tests of the
# reader (reader_test) or the recorder (recorder_fuzz_test) as a fixed case.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
build=${2:-build-fuzz}

if ! command -v clang++ > /dev/null; then
  echo "fuzz.sh: clang++ is not installed; run scripts/install-deps.sh (it installs clang)." >&2
  exit 1
fi
generator=()  # ninja where installed, as scripts/test.sh; a build directory keeps its first generator
if [[ ! -f $build/CMakeCache.txt ]] && command -v ninja > /dev/null; then generator=(-G Ninja); fi
CC=clang CXX=clang++ cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCUTRACE_FUZZ=ON \
  -DCUTRACE_BUILD_BENCHMARKS=OFF > /dev/null
cmake --build "$build" -j"$(nproc)" --target reader_fuzz recorder_fuzz fuzz_seeds

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$build/bin/fuzz_seeds" "$work/seeds"
artifacts=$(realpath "$build")/fuzz-artifacts
mkdir -p "$artifacts"
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# libFuzzer runs one process on one CPU: the two targets run side by side, each with its output in a
# log of its own, said when it ends.
targets=(reader recorder)
pids=()
for target in "${targets[@]}"; do
  mkdir -p "$work/corpus-$target"
  echo "fuzz.sh: ${target}_fuzz for ${seconds} s"
  # New inputs go to the first corpus directory (temporary); the seeds are only read.
  "$build/bin/${target}_fuzz" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$artifacts/${target}-" "$work/corpus-$target" "$work/seeds/$target" > "$work/$target.log" 2>&1 &
  pids+=($!)
done
failed=0
for i in "${!targets[@]}"; do
  target=${targets[$i]}
  status=0
  wait "${pids[$i]}" || status=$?
  echo "fuzz.sh: ${target}_fuzz:"
  if (( status == 0 )); then tail -12 "$work/$target.log"; else tail -80 "$work/$target.log"; fi
  if (( status != 0 )); then
    echo "fuzz.sh: ${target}_fuzz failed (exit $status); the input is in $artifacts." >&2
    failed=1
  fi
done
(( failed == 0 )) || exit 1
echo "fuzz.sh: no crash in ${seconds} s per target"
