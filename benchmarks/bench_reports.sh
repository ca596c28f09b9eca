#!/usr/bin/env bash
# Time and peak memory of cutrace's reports on one large trace, recorded here from the simulated device:
#   benchmarks/bench_reports.sh [calls] [build-dir]      (default 20000000 calls, build)
# Prints one line per report or export: seconds, peak resident memory, and rows (or records) per
# second. The trace and the outputs go to a temporary directory that is removed at the end.
set -euo pipefail
calls=${1:-20000000}
build=$(realpath "${2:-build}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A ring large enough that a 2-core machine drops nothing while the recorder competes for the CPU.
LD_LIBRARY_PATH="$build/simcuda/lib" "$build/bin/cutrace" profile --ring-size 128M -o "$work/big" -- \
  "$build/tests/bin/cheap_calls" "$calls" > /dev/null
trace="$work/big.cutrace"
events=$("$build/bin/cutrace" info "$trace" | awk '$1 == "events" {gsub(",", "", $2); print $2; exit}')
echo "trace: $events events, $(du -h "$trace" | cut -f1) on disk"

measure() {  # label, rows, command...
  local label=$1 rows=$2
  shift 2
  /usr/bin/time -o "$work/time" -f "%e %M" "$@" > /dev/null 2> /dev/null || true
  local stats
  stats=$(tail -1 "$work/time")
  local seconds=${stats% *} kb=${stats#* }
  awk -v l="$label" -v s="$seconds" -v kb="$kb" -v n="$rows" \
    'BEGIN { printf "%-28s %7.2f s  %6.0f MB  %6.2f M rows/s\n", l, s, kb / 1024, n / s / 1e6 }'
}
measure "cuda_api_sum (column)" "$events" "$build/bin/cutrace" stats -q -r cuda_api_sum "$trace"
measure "cuda_api_trace (csv)" "$events" "$build/bin/cutrace" stats -r cuda_api_trace -f csv "$trace"
measure "cuda_api_trace (column)" "$events" "$build/bin/cutrace" stats -r cuda_api_trace "$trace"
measure "info" "$events" "$build/bin/cutrace" info "$trace"
measure "export perfetto" "$events" "$build/bin/cutrace" export --type perfetto -o "$work/big.pftrace" "$trace"
echo "  $(stat -c %s "$work/big.pftrace") bytes, $(awk -v b="$(stat -c %s "$work/big.pftrace")" -v n="$events" 'BEGIN { printf "%.1f", b / n }') per event"
rm -f "$work/big.pftrace"
measure "export perfetto-json" "$events" "$build/bin/cutrace" export --type perfetto-json -o "$work/big.json" "$trace"
echo "  $(stat -c %s "$work/big.json") bytes, $(awk -v b="$(stat -c %s "$work/big.json")" -v n="$events" 'BEGIN { printf "%.1f", b / n }') per event"
rm -f "$work/big.json"

# The table exports (docs/sql.md), counted in rows of all tables; the Parquet and Arrow ones and the
# Python batches need pyarrow.
source_dir=$(cd "$(dirname "$0")/.." && pwd)
export CUTRACE_TABLES_LIBRARY="$build/lib/libcutrace-tables.so" PYTHONPATH="$source_dir/python${PYTHONPATH:+:$PYTHONPATH}"
if python3 -c "import pyarrow" 2> /dev/null; then
  rows=$(python3 -c "import cutrace, sys; print(sum(b.num_rows for _, b in cutrace.open(sys.argv[1]).batches()))" "$trace")
  echo "tables: $rows rows"
  measure "export sqlite" "$rows" "$build/bin/cutrace" export --type sqlite -o "$work/big.sqlite" "$trace"
  rm -f "$work/big.sqlite"
  measure "export parquetdir" "$rows" "$build/bin/cutrace" export --type parquetdir -o "$work/big_pqtdir" "$trace"
  measure "export arrowdir" "$rows" "$build/bin/cutrace" export --type arrowdir -o "$work/big_arwdir" "$trace"
  measure "python: every batch" "$rows" python3 -c \
    "import cutrace, sys; sum(b.num_rows for _, b in cutrace.open(sys.argv[1]).batches())" "$trace"
else
  measure "export sqlite" "$events" "$build/bin/cutrace" export --type sqlite -o "$work/big.sqlite" "$trace"
fi
