#!/usr/bin/env bash
# Records the traces of tests/data/traces with the build BUILD (its cutrace, its recorder and shim, its
# simulated device and test programs), and what that build's own `cutrace stats` and `cutrace export
# --type sqlite` give for each: the outputs every later cutrace must give for them too
# (tests/e2e/profile/test_old_traces.py). Run it with the build of the commit whose traces are kept,
# once per trace format version:
#
#   tests/data/traces/record.sh BUILD [OUT]     (OUT: default tests/data/traces)
#
# Each trace lands in OUT/v<format version>/ as NAME.cutrace, NAME.stats.csv (every report of
# reports.txt, CSV) and NAME.sqlite.sql.gz (the SQLite export as SQL text, gzip without a time stamp).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(realpath "${1:?usage: record.sh BUILD [OUT]}")
out=$(realpath -m "${2:-$here}")
cutrace="$build/bin/cutrace"
export LD_LIBRARY_PATH="$build/simcuda/lib"
unset LD_PRELOAD CUTRACE_SESSION CUTRACE_SESSION_FD
reports=$(paste -sd, "$here/reports.txt")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"  # the traces record the working directory; one that says nothing of the machine
# The programs run from a copy that is gone before the outputs are taken: the frames of a stack (the
# OS runtime's slow calls carry one) then read as module+offset here and on every later machine, rather
# than as names only this one's files could give.
apps="$work/programs"
cp -r "$build/tests/bin" "$apps"

# NAME, then the options of cutrace profile, --, and the program with its arguments.
names=()
record() {
  local name=$1
  shift
  "$cutrace" profile -q -f true -o "$work/$name" "$@" > /dev/null
  names+=("$name")
}

record vector_add -- "$apps/sim_vector_add" 3 65536
record graphs_node --cuda-graph-trace node -- "$apps/sim_graphs" 2
record nvtx -t cuda,nvtx -- "$apps/nvtx_app" 2 5
record osrt -t cuda,osrt --osrt-threshold 0 -- "$apps/osrt_app" sleeps 2 3 5 100
record streams -- "$apps/sim_streams" 65536 2
record threads -- "$apps/sim_threads" 3 4 concurrent

rm -rf "$apps"
for name in "${names[@]}"; do
  version=$(python3 -c 'import struct, sys; print(struct.unpack_from("<I", open(sys.argv[1], "rb").read(12), 8)[0])' \
            "$work/$name.cutrace")
  mkdir -p "$out/v$version"
  cp "$work/$name.cutrace" "$out/v$version/$name.cutrace"
  # Exit 4: every report SKIPPED is a result too (the CSV is then empty).
  "$cutrace" stats -q --format csv --report "$reports" "$out/v$version/$name.cutrace" \
    > "$out/v$version/$name.stats.csv" 2> /dev/null || [[ $? == 4 ]]
  "$cutrace" export -q --type sqlite -f true -o "$work/$name.sqlite" "$out/v$version/$name.cutrace" 2> /dev/null
  python3 -c 'import sqlite3, sys; sys.stdout.write("\n".join(sqlite3.connect(sys.argv[1]).iterdump()) + "\n")' \
    "$work/$name.sqlite" | gzip -n -9 > "$out/v$version/$name.sqlite.sql.gz"
  echo "record.sh: $out/v$version/$name.cutrace"
done
