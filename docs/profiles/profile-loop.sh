#!/bin/bash
# Runs one `tabwarden-bench loop-*` and profiles it while it runs.
#
#   docs/profiles/profile-loop.sh NAME SECS MODE -- loop-eval --what engine
#
# MODE: `perf` (perf record: our process with DWARF call graphs, Chromium's
# browser and renderer processes with frame pointers), `stat` (perf stat on
# our process), `none` (just the loop's own CPU accounting, printed last).
# Output: NAME.out (pids, then the loop's summary), NAME.bench.data,
# NAME.chrome.data or NAME.stat, in the current directory.
# TW_BENCH_CHROME_ARGS=--js-flags=--perf-basic-prof names V8's JIT frames.
set -eu
name=$1; secs=$2; mode=$3; shift 4
bench=${BENCH_BIN:-$(dirname "$0")/../../target/release/tabwarden-bench}
"$bench" "$@" --secs "$secs" > "$name.out" 2>&1 &
for _ in $(seq 1 100); do sleep 0.2; grep -q renderers "$name.out" && break; done
pids=$(head -1 "$name.out")
me=$(echo "$pids" | python3 -c 'import json,sys; print(json.load(sys.stdin)["bench"])')
browser=$(echo "$pids" | python3 -c 'import json,sys; print(json.load(sys.stdin)["browser"])')
renderers=$(echo "$pids" | python3 -c 'import json,sys; print(",".join(map(str, json.load(sys.stdin)["renderers"])))')
# The loop starts 2 s after printing the pids.
sleep 2.5
case "$mode" in
  perf)
    perf record -F 2000 --call-graph dwarf,16384 -o "$name.bench.data" -p "$me" -- sleep $((secs - 2)) > /dev/null 2>&1 &
    perf record -F 2000 -g -o "$name.chrome.data" -p "$browser,$renderers" -- sleep $((secs - 2)) > /dev/null 2>&1 &
    ;;
  stat)
    perf stat -e task-clock,context-switches,cpu-migrations -p "$me" -- sleep $((secs - 2)) 2> "$name.stat" &
    ;;
esac
wait
tail -1 "$name.out"
