#!/usr/bin/env bash
# CPU profile of the create path: perf samples the server (999 Hz, call graphs) for 8 s in the
# middle of a closed-loop create run (64 connections, synchronous=FULL, fresh data directory),
# then prints the report by symbol (children included) and the machine's idle + iowait share.
#
#   benches/scripts/profile.sh [report lines=60]
#
# Needs `perf` and `cargo build --release -p payments-server -p payments-benches --bins`. Ports
# 18080/18081; data and perf.data under ${PERF_DIR:-/tmp/perf}/prof.
set -euo pipefail
. "$(dirname "$0")/common.sh"
require_free_port
LINES=${1:-60}
DIR=${PERF_DIR:-/tmp/perf}/prof
trap 'kill ${SERVER:-} 2>/dev/null || true' EXIT
start_bench_server "$DIR"
"$T/loadgen" --credentials "$DIR/sandbox-credentials.json" --mode create --connections 64 \
  --requests 80000 --warmup 2000 --label profile >"$DIR/loadgen.out" &
LG=$!
sleep 1.5
read -r _ u0 n0 s0 i0 w0 q0 sq0 _ </proc/stat
perf record -F 999 -g -p "$SERVER" -o "$DIR/perf.data" -- sleep 8 2>"$DIR/perf.err"
read -r _ u1 n1 s1 i1 w1 q1 sq1 _ </proc/stat
wait $LG
grep RESULT "$DIR/loadgen.out"
busy=$(((u1 - u0) + (n1 - n0) + (s1 - s0) + (q1 - q0) + (sq1 - sq0)))
idle=$(((i1 - i0) + (w1 - w0)))
echo "# machine idle + iowait during the profile: $((100 * idle / (busy + idle))) %"
echo "# by thread"
perf report -i "$DIR/perf.data" --sort comm --stdio -g none 2>/dev/null | grep -v '^#' | grep -v '^$' | head -10
echo "# by shared object"
perf report -i "$DIR/perf.data" --sort dso --stdio -g none 2>/dev/null | grep -v '^#' | grep -v '^$' | head -10
echo "# by symbol, children included"
perf report -i "$DIR/perf.data" --children --sort sym --stdio -g none 2>/dev/null |
  grep -v '^#' | grep -v '^$' | head -"$LINES"
