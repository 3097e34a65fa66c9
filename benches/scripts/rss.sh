#!/usr/bin/env bash
# Server memory during a sustained closed-loop create run: starts payments-server on a fresh
# data directory, drives signed creates back to back for DURATION seconds (64 connections) and
# samples VmRSS / VmHWM from /proc/<pid>/status every INTERVAL seconds. Prints one line per
# sample: elapsed_s rss_kb hwm_kb payments_created anon_kb file_kb threads.
#
#   benches/scripts/rss.sh [DURATION=300] [INTERVAL=10]
set -euo pipefail
. "$(dirname "$0")/common.sh"
require_free_port
DURATION=${1:-300}
INTERVAL=${2:-10}
DIR=${PERF_DIR:-/tmp/perf}/rss
trap 'kill ${SERVER:-} ${LOAD:-} 2>/dev/null || true' EXIT
start_bench_server "$DIR"
mem() { awk '/^VmRSS/{r=$2} /^VmHWM/{h=$2} END{print r, h}' "/proc/$SERVER/status"; }
more() { awk '/^RssAnon/{a=$2} /^RssFile/{f=$2} /^Threads/{t=$2} END{print a, f, t}' "/proc/$SERVER/status"; }
echo "# idle: $(mem)"
(
  end=$((SECONDS + DURATION))
  while [ $SECONDS -lt $end ]; do
    "$T/loadgen" --credentials "$DIR/sandbox-credentials.json" --mode create \
      --connections 64 --requests 30000 --warmup 0 | grep RESULT >>"$DIR/loadgen.log"
  done
) &
LOAD=$!
start=$SECONDS
while kill -0 $LOAD 2>/dev/null; do
  sleep "$INTERVAL"
  created=$(grep -o '"ok":[0-9]*' "$DIR/loadgen.log" 2>/dev/null | awk -F: '{s+=$2} END{print s+0}')
  echo "$((SECONDS - start)) $(mem) ${created:-0} $(more)"
done
wait $LOAD || true
echo "# after the load: $(mem)"
