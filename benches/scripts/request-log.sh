#!/usr/bin/env bash
# A create's latency and throughput with the request log on against off, in one run: each
# repetition starts a fresh server (sandbox, synchronous=FULL) with the log on, then one with
# it off (`PAYMENTS_TUNING__REQUEST_LOG`), and drives each with closed-loop signed creates at
# 64 connections (throughput, latency under saturation), then an open loop at a fixed rate for 5 s
# (latency at a load the server carries). After each server with the log on it prints what
# the log dropped (`payments_request_log_dropped_total`) and how many rows it holds. Each closed
# loop's server CPU per create is also split by thread name (`THREADS {json}`: the SQLite
# writer, the tokio workers that serve the requests and run the log's writer task, ...).
#
#   benches/scripts/request-log.sh [REPS=3] [RATE=1000]
#
# Needs `cargo build --release -p payments-server -p payments-benches --bins` first. Ports
# 18080-18082; data under ${PERF_DIR:-/tmp/perf}.
set -euo pipefail
. "$(dirname "$0")/common.sh"
require_free_port
REPS=${1:-3}
RATE=${2:-1000}
REQUESTS=${REQUESTS:-20000}
WARMUP=${WARMUP:-2000}
DIR=${PERF_DIR:-/tmp/perf}/request-log
TICK=$(getconf CLK_TCK)
cpu() { awk -v t="$TICK" '{print ($14 + $15) / t}' "/proc/$1/stat"; }
# CPU seconds of process $1 by thread name, one "name seconds" line each.
threads() {
  for t in /proc/"$1"/task/*; do
    awk -v n="$(tr ' ' '_' < "$t/comm")" -v t="$TICK" '{print n, ($14 + $15) / t}' "$t/stat"
  done | awk '{s[$1] += $2} END {for (n in s) print n, s[n]}' | sort
}
trap 'kill ${SERVER:-} 2>/dev/null || true' EXIT
for rep in $(seq "$REPS"); do
  for log in true false; do
    PAYMENTS_TUNING__REQUEST_LOG=$log start_bench_server "$DIR"
    C=$DIR/sandbox-credentials.json
    echo "# rep $rep, request log $log, load $(cut -d' ' -f1 /proc/loadavg)"
    s0=$(cpu "$SERVER")
    threads "$SERVER" > "$DIR/threads0"
    "$T/loadgen" --credentials "$C" --mode create --connections 64 --requests "$REQUESTS" \
      --warmup "$WARMUP" --label "closed-log-$log-$rep" | grep RESULT
    sleep 0.5
    s1=$(cpu "$SERVER")
    threads "$SERVER" > "$DIR/threads1"
    echo "THREADS {\"label\":\"closed-log-$log-$rep\"$(join "$DIR/threads0" "$DIR/threads1" |
      awk -v n=$((REQUESTS + WARMUP)) '{printf ",\"%s\":%.1f", $1, ($3 - $2) * 1e6 / n}')}"
    echo "CPU {\"label\":\"closed-log-$log-$rep\",\"us_per_create\":$(awk -v a="$s0" -v b="$s1" -v n=$((REQUESTS + WARMUP)) 'BEGIN { printf "%.1f", (b - a) * 1e6 / n }')}"
    "$T/loadgen" --credentials "$C" --mode create --rate "$RATE" --connections 64 \
      --requests $((RATE * 5)) --warmup "$RATE" --label "open-$RATE-log-$log-$rep" | grep RESULT
    if [ "$log" = true ]; then
      echo "# dropped: $(curl -fs http://127.0.0.1:18081/metrics | grep '^payments_request_log_dropped_total' || echo '?')"
    fi
    kill -TERM "$SERVER"
    wait "$SERVER" || true
    SERVER=
    if [ "$log" = true ]; then
      echo "# rows kept: $(sqlite3 "$DIR/payments.db" 'SELECT coalesce(sum(entries), 0) FROM request_log_writes' 2>/dev/null || echo '?')"
    fi
  done
done
