#!/usr/bin/env bash
# Builds cutrace and runs the whole test suite; with --sanitizers also the ASan/UBSan and TSan builds
# of the tests, a bounded fuzzing run of the trace reader and the recorder (scripts/fuzz.sh), the pip
# route (scripts/check-pip-install.sh) and the wheel route (scripts/check-wheel.sh, as root). Each
# sanitized build and the wheel's build run in the background while the tests before them run, in
# the CPU time those tests leave idle; with ccache installed, the pip route's build reuses the plain
# build's objects. 25 minutes in all on 2 cores (each part's time is said at the end).
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
on_exit() {
  stop_background
  say_timings
}
trap on_exit EXIT

# The next build runs in the background while tests run. Tests leave about a third of the two CPUs
# idle (they wait on the programs they trace and on the recorder); the build takes that, and only that:
# it is in the idle scheduling class, so any test that wants a CPU gets it first. It is paused while
# the tests run that compare sample counts with CPU time (the ctest label `alone`, the serial files
# below). Its own session, so that it can be paused, resumed and stopped whole; its output in a log,
# said where it fails. A session is also an autogroup where the kernel has them (Debian's does): the
# scheduler shares the CPUs between autogroups first, which gave the build half of them whatever its
# class (the tests took 40% longer), so its autogroup gets the lowest weight too.
background_pid="" background_what="" background_log=""
background() {  # LOG WHAT COMMAND...
  background_log=$1 background_what=$2
  shift 2
  setsid sh -c 'echo 19 2> /dev/null > /proc/self/autogroup; exec chrt --idle 0 ionice -c 3 "$@"' background "$@" \
    < /dev/null > "$background_log" 2>&1 &
  background_pid=$!
}
# By session, not process group: ninja starts each compile in a process group of its own, and a
# compile that went on through a pause took the CPUs from the sampling tests it was meant to leave
# alone (one of them counted 102 samples to 10 where 2.5 to 1 was due). Twice, for a process forked
# while the first pass ran.
pause_background() {
  if [[ -n $background_pid ]]; then
    pkill -STOP -s "$background_pid" 2> /dev/null || true
    pkill -STOP -s "$background_pid" 2> /dev/null || true
  fi
}
resume_background() { if [[ -n $background_pid ]]; then pkill -CONT -s "$background_pid" 2> /dev/null || true; fi; }
stop_background() {
  if [[ -n $background_pid ]]; then
    pkill -TERM -s "$background_pid" 2> /dev/null || true
    resume_background
    wait "$background_pid" 2> /dev/null || true
    background_pid=""
  fi
}
finish_background() {
  local status=0
  resume_background
  wait "$background_pid" || status=$?
  background_pid=""
  if (( status != 0 )); then
    tail -n 60 "$background_log" >&2
    echo "test.sh: $background_what failed (exit $status); its whole output is in $background_log." >&2
    exit 1
  fi
}

# Ninja where it is installed (scripts/install-deps.sh installs it): it schedules the whole build as
# one graph, where make's recursion leaves cores idle. A build directory keeps its first generator.
configure() {
  local dir=$1
  shift
  local generator=()
  if [[ ! -f $dir/CMakeCache.txt ]] && command -v ninja > /dev/null; then generator=(-G Ninja); fi
  "${configure_env[@]}" cmake -S . -B "$dir" "${generator[@]}" "$@"
}
configure_env=(env)

# The pip route (scripts/check-pip-install.sh) builds the product again with the plain build's flags:
# through ccache, where it is installed, it takes the plain build's objects instead of compiling them
# (136 s of the suite on 2 cores). A cache of the suite's own, beside the build; the paths under the
# checkout are made relative, so that two build directories at the same depth share it. One compiler
# name for both (scikit-build-core asks for g++), as ccache tells compilers apart by name. The other
# builds share nothing with these, so they do without it.
shared_objects=(env CC="${CC:-gcc}" CXX="${CXX:-g++}")
# The wrapper generator's outputs likewise (14 s of one CPU in each build that would run it again).
export CUTRACE_GENERATOR_CACHE="$(realpath -m "$build-generator-cache")"
if command -v ccache > /dev/null; then
  shared_objects+=(CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
                   CCACHE_DIR="$(realpath -m "$build-ccache")" CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1)
fi

part "plain build"
configure_env=("${shared_objects[@]}")
configure "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo
configure_env=(env)
"${shared_objects[@]}" cmake --build "$build" -j"$jobs"
if (( sanitizers )); then
  export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 TSAN_OPTIONS=halt_on_error=1
  plain=$(realpath "$build")
  logs=$plain/background-logs
  mkdir -p "$logs"
  kinds=(address,undefined thread)
  # Each sanitized build is configured here and built while the tests before it run.
  start_sanitized_build() {
    local kind=$1 dir="$build-${1%%,*}"
    # Line tables only (-g1): all that a sanitizer's report names (file:line), at 8% less compile time.
    configure "$dir" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG=-g1 -DCMAKE_CXX_FLAGS_DEBUG=-g1 \
      -DCUTRACE_SANITIZE="$kind" -DCUTRACE_BUILD_BENCHMARKS=OFF > /dev/null
    background "$logs/${kind%%,*}-build.log" "the ${kind%%,*} build" cmake --build "$dir" -j"$jobs"
  }
  start_sanitized_build "${kinds[0]}"
fi

part "plain tests"
ctest --test-dir "$build" --output-on-failure -j"$jobs" --timeout 600 -LE alone
pause_background
ctest --test-dir "$build" --output-on-failure -j"$jobs" --timeout 600 -L alone
resume_background

if (( sanitizers )); then
  for i in "${!kinds[@]}"; do
    kind=${kinds[$i]}
    dir="$build-${kind%%,*}"
    part "${kind%%,*} build (its rest)"
    finish_background
    # The next build, beside this one's tests: the other sanitizer's, then the wheel, whose build is
    # the longest of the two pip routes' (the other takes the plain build's objects from ccache).
    if (( i + 1 < ${#kinds[@]} )); then
      start_sanitized_build "${kinds[$((i + 1))]}"
    else
      background "$logs/wheel-build.log" "the wheel's build" scripts/check-wheel.sh --build-only "$build-wheel" "$build"
    fi
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
    # The interpreter-by-interpreter tests of Python frames with the tests' own interpreter only: the
    # plain shim reads the frames, and the sanitized recorder takes the same records from each. Under
    # TSan, the commands that read traces come from the plain build: they run one thread, where TSan
    # has no race to find (ASan's pass runs them sanitized). The files whose subject is reading
    # traces with what comes from the plain build (the Python package always, the commands under TSan)
    # are left out of the pass (markers in tests/e2e/profile/conftest.py): they would repeat the plain pass.
    reading_tools=""
    [[ $kind == thread ]] && reading_tools="$plain/bin"
    e2e=(env CUTRACE_BUILD_DIR="$plain" CUTRACE_TOOLS_DIR="$(realpath "$dir")/bin"
         CUTRACE_SANITIZED_PRELOAD_LIB="$sanitized_shim" CUTRACE_PRELOAD_LIB="$plain/lib/libcutrace-preload.so"
         CUTRACE_TEST_INTERPRETERS=own CUTRACE_READING_TOOLS_DIR="$reading_tools"
         python3 -m pytest -q -p no:cacheprovider)
    part "${kind%%,*} end-to-end tests"
    "${e2e[@]}" -n "$jobs" --dist loadfile "${serial[@]/#/--ignore=}" tests/e2e/profile
    pause_background
    "${e2e[@]}" "${serial[@]}"
    resume_background
  done
  # libFuzzer under ASan/UBSan: 60 s for each target, the two side by side.
  part "fuzz (build and 60 s)"
  scripts/fuzz.sh 60 "$build-fuzz"
  # The README's pip route: pip install . into a new environment, which then profiles and reads a trace.
  part "pip route (build and tests)"
  "${shared_objects[@]}" scripts/check-pip-install.sh "$build-pip" "$build"
  # The wheel route: built with the CUDA toolkit hidden, installed into an environment that sees no
  # system package, which then profiles and reads traces; auditwheel shows its platform.
  part "wheel route (its build's rest)"
  finish_background
  part "wheel route (tests)"
  scripts/check-wheel.sh --built "$build-wheel" "$build"
fi
