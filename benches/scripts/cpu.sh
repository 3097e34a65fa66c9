#!/usr/bin/env bash
# Server and load-generator CPU per request: closed-loop creates against payments-server, then
# the verify-only reference, 64 connections, 3 runs each, on a fresh data directory
# (synchronous=FULL). utime + stime of each process from /proc/<pid>/stat over 5 s of each run.
# Prints one line per run.
#
#   benches/scripts/cpu.sh [REPS=3]
#
# Needs `cargo build --release -p payments-http -p payments-benches --bins` first. Ports
# 18080/18081/18090; data under ${PERF_DIR:-/tmp/perf}.
set -euo pipefail
. "$(dirname "$0")/common.sh"
require_free_port
REPS=${1:-3}
DIR=${PERF_DIR:-/tmp/perf}/cpu
trap 'kill ${SERVER:-} ${VERIFY:-} 2>/dev/null || true' EXIT
start_bench_server "$DIR"
"$T/verify_server" --data-dir "$DIR" --listen 127.0.0.1:18090 --synchronous full 2>"$DIR/verify.log" &
VERIFY=$!
sleep 1
TICK=$(getconf CLK_TCK)
cpu() { awk -v t="$TICK" '{print ($14 + $15) / t}' "/proc/$1/stat"; }
for mode in create verify; do
  for rep in $(seq "$REPS"); do
    if [ "$mode" = create ]; then P=$SERVER; URL=http://127.0.0.1:18080; else P=$VERIFY; URL=http://127.0.0.1:18090; fi
    "$T/loadgen" --credentials "$DIR/sandbox-credentials.json" --mode "$mode" --url "$URL" \
      --connections 64 --requests 60000 --warmup 0 --label "cpu-$mode-$rep" >"$DIR/loadgen.out" &
    LG=$!
    sleep 1.2 # pre-signing 60,000 requests
    s0=$(cpu $P); l0=$(cpu $LG); t0=$(date +%s.%N)
    sleep 5
    s1=$(cpu $P); l1=$(cpu $LG); t1=$(date +%s.%N)
    wait $LG
    thr=$(grep -o '"throughput":[0-9.]*' "$DIR/loadgen.out" | cut -d: -f2)
    awk -v m="$mode" -v r="$rep" -v s0="$s0" -v s1="$s1" -v l0="$l0" -v l1="$l1" -v t0="$t0" \
      -v t1="$t1" -v thr="$thr" 'BEGIN {
        w = t1 - t0; s = (s1 - s0) / w; l = (l1 - l0) / w
        printf "%s run %s: %.0f/s; server %.2f cores, loadgen %.2f cores; server %.0f us CPU per request, loadgen %.0f us\n",
          m, r, thr, s, l, s / thr * 1e6, l / thr * 1e6 }'
  done
done
