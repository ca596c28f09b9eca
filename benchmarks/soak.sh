#!/usr/bin/env bash
# Soak test: a long recording at a steady rate, to show that the recorder keeps up without growing.
#   benchmarks/soak.sh [seconds] [calls-per-second] [build-dir]    (default 3600 s, 1000000/s, build)
# Records paced_calls (4 processes of 2 threads, forked without exec) on the simulated device and
# samples the recorder's private memory (RssAnon: the rings it reads are shared memory, counted
# against the session, not the recorder) every 10 s. Passes when: no record was dropped or lost, the
# trace holds exactly the calls the program made, the trace reads whole, and the recorder's memory in
# the second half of the run stays within 10% (plus 8 MB) of its peak in the first half.
# Not part of CI: it is meant to run for an hour; results go into docs/benchmarks.md.
set -euo pipefail
seconds=${1:-3600}
rate=${2:-1000000}
build=$(realpath "${3:-build}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

LD_LIBRARY_PATH="$build/simcuda/lib" "$build/bin/cutrace" profile -o "$work/soak" -- \
  "$build/tests/bin/paced_calls" 4 2 "$rate" "$seconds" > "$work/program.out" 2> "$work/cutrace.err" &
launcher=$!
recorder=""
for _ in $(seq 100); do
  recorder=$(pgrep -P "$launcher" -x cutrace-recorde || true)
  [[ -n "$recorder" ]] && break
  sleep 0.1
done
[[ -n "$recorder" ]] || { echo "soak.sh: the recorder did not start" >&2; exit 1; }

echo "elapsed_s,recorder_private_kb" > "$work/rss.csv"
start=$(date +%s)
while kill -0 "$recorder" 2> /dev/null; do
  rss=$(awk '/^RssAnon:/ {print $2}' "/proc/$recorder/status" 2> /dev/null || true)
  [[ -n "$rss" ]] && echo "$(( $(date +%s) - start )),$rss" >> "$work/rss.csv"
  sleep 10
done
wait "$launcher"

made=$(awk '$1 == "calls" {print $2}' "$work/program.out")
trace="$work/soak.cutrace"
info=$("$build/bin/cutrace" info "$trace")
dropped=$(awk '$1 == "dropped" {gsub(",", "", $2); print $2; exit}' <<< "$info")
lost=$(awk '$1 == "lost_no_slot" {gsub(",", "", $2); print $2; exit}' <<< "$info")
recorded=$("$build/bin/cutrace" stats -r cuda_api_sum -f csv "$trace" | awk -F, '$9 == "cudaGetDevice" {print $3}')
read -r first_peak second_peak < <(awk -F, -v half=$((seconds / 2)) 'NR > 1 {
    if ($1 <= half) { if ($2 > a) a = $2 } else { if ($2 > b) b = $2 } } END { print a + 0, b + 0 }' "$work/rss.csv")

echo "calls made $made, recorded $recorded, dropped $dropped, lost $lost"
echo "recorder private memory peak: first half ${first_peak} kB, second half ${second_peak} kB ($(($(wc -l < "$work/rss.csv") - 1)) samples)"
tail -1 "$work/cutrace.err"
status=0
[[ "$made" == "$recorded" ]] || { echo "soak.sh: FAIL: the trace holds $recorded calls of $made" >&2; status=1; }
[[ "$dropped" == 0 && "$lost" == 0 ]] || { echo "soak.sh: FAIL: records dropped or lost" >&2; status=1; }
grep -q "^Status: *complete" <<< "$info" || { echo "soak.sh: FAIL: the trace is not whole" >&2; status=1; }
if (( second_peak > first_peak + first_peak / 10 + 8192 )); then
  echo "soak.sh: FAIL: the recorder grew from ${first_peak} kB to ${second_peak} kB" >&2
  status=1
fi
(( status == 0 )) && echo "soak.sh: pass"
exit $status
