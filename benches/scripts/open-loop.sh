#!/usr/bin/env bash
# Open-loop signed creates at a fixed rate, each run on a fresh server and data directory
# (synchronous=FULL), 128 connections, 10 s measured after 1 s of warm-up. Prints loadgen's
# summary per run (latency from each request's scheduled send time, and the load generator's
# own lag behind schedule).
#
#   benches/scripts/open-loop.sh [REPS=3] [RATE=5000]
#
# Needs `cargo build --release -p payments-server -p payments-benches --bins` first. Ports
# 18080-18082; data under ${PERF_DIR:-/tmp/perf}.
set -euo pipefail
. "$(dirname "$0")/common.sh"
require_free_port
REPS=${1:-3}
RATE=${2:-5000}
DIR=${PERF_DIR:-/tmp/perf}/open
trap 'kill ${SERVER:-} 2>/dev/null || true' EXIT
for rep in $(seq "$REPS"); do
  start_bench_server "$DIR"
  echo "# run $rep, open loop $RATE/s, load $(cut -d' ' -f1 /proc/loadavg)"
  "$T/loadgen" --credentials "$DIR/sandbox-credentials.json" --mode create --rate "$RATE" \
    --connections 128 --requests $((RATE * 10)) --warmup "$RATE" --label "open-$RATE-$rep" |
    grep -E "^create|latency|lag|statuses"
  kill -TERM "$SERVER"
  wait "$SERVER" || true
  SERVER=
done
