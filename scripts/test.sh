#!/usr/bin/env bash
# Builds cutrace and runs the whole test suite; with --sanitizers also the ASan/UBSan and TSan builds
# of the tests, a bounded fuzzing run of the trace reader and the recorder (scripts/fuzz.sh), the pip
# route (scripts/check-pip-install.sh) and the wheel route (scripts/check-wheel.sh, as root).
# Usage: scripts/test.sh [--sanitizers] [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."

sanitizers=0
if [[ "${1:-}" == "--sanitizers" ]]; then sanitizers=1; shift; fi
build=${1:-build}
jobs=$(nproc)

# Each part's wall time, said at the end (also when a part fails), so that a slow suite shows where.
timings=()
part_name="" part_start=$SECONDS
part() {
  [[ -n $part_name ]] && timings+=("$(printf '%-34s %5d s' "$part_name" $((SECONDS - part_start)))")
  part_name=$1 part_start=$SECONDS
}
say_timings() {
  part ""
  printf 'test.sh: %s\n' "${timings[@]}" "$(printf '%-34s %5d s' total "$SECONDS")" >&2
}
trap say_timings EXIT

# Ninja where it is installed (scripts/install-deps.sh installs it): it schedules the whole build as
# one graph, where make's recursion leaves cores idle. A build directory keeps its first generator.
configure() {
  local dir=$1
  shift
  local generator=()
  if [[ ! -f $dir/CMakeCache.txt ]] && command -v ninja > /dev/null; then generator=(-G Ninja); fi
  cmake -S . -B "$dir" "${generator[@]}" "$@"
}

part "plain build"
configure "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$build" -j"$jobs"
part "plain tests"
ctest --test-dir "$build" --output-on-failure -j"$jobs" --timeout 600

if (( sanitizers )); then
  export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 TSAN_OPTIONS=halt_on_error=1
  plain=$(realpath "$build")
  for kind in address,undefined thread; do
    dir="$build-${kind%%,*}"
    part "${kind%%,*} build"
    configure "$dir" -DCMAKE_BUILD_TYPE=Debug -DCUTRACE_SANITIZE="$kind" -DCUTRACE_BUILD_BENCHMARKS=OFF
    cmake --build "$dir" -j"$jobs"
    # Every in-process test in the sanitized build.
    part "${kind%%,*} in-process tests"
    ctest --test-dir "$dir" --output-on-failure -j"$jobs" --timeout 900 -LE e2e
    # The end-to-end tests with the sanitized launcher and recorder. Programs not built with a
    # sanitizer runtime cannot load a sanitized shim, so the programs, the simulated device and the
    # shim come from the plain build.
    # The sanitized shim itself runs where a test preloads the sanitizer runtime before it
    # (CUTRACE_SANITIZED_PRELOAD_LIB: test_python_frames.py's churn under ASan).
    sanitized_shim=""
    [[ $kind == address,undefined ]] && sanitized_shim="$(realpath "$dir")/lib/libcutrace-preload.so"
    # A file per CPU at once (pytest-xdist), as ctest runs the plain build's; then, alone, the files
    # whose tests compare sample counts with CPU time (RUN_SERIAL in tests/e2e/profile/CMakeLists.txt).
    serial=(tests/e2e/profile/test_python_frames.py tests/e2e/profile/test_python_sampling.py
            tests/e2e/profile/test_cpu_sampling.py)
    e2e=(env CUTRACE_BUILD_DIR="$plain" CUTRACE_TOOLS_DIR="$(realpath "$dir")/bin"
         CUTRACE_SANITIZED_PRELOAD_LIB="$sanitized_shim" CUTRACE_PRELOAD_LIB="$plain/lib/libcutrace-preload.so"
         python3 -m pytest -q -p no:cacheprovider)
    part "${kind%%,*} end-to-end tests"
    "${e2e[@]}" -n "$jobs" --dist loadfile "${serial[@]/#/--ignore=}" tests/e2e/profile
    "${e2e[@]}" "${serial[@]}"
  done
  # libFuzzer under ASan/UBSan: 60 s for each target.
  part "fuzz (build and 2 x 60 s)"
  scripts/fuzz.sh 60 "$build-fuzz"
  # The README's pip route: pip install . into a new environment, which then profiles and reads a trace.
  part "pip route (build and tests)"
  scripts/check-pip-install.sh "$build-pip" "$build"
  # The wheel route: built with the CUDA toolkit hidden, installed into an environment that sees no
  # system package, which then profiles and reads traces; auditwheel shows its platform.
  part "wheel route (build and tests)"
  scripts/check-wheel.sh "$build-wheel" "$build"
fi
