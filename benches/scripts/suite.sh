#!/usr/bin/env bash
# Open loop at several rates, GET, and callback delivery alone, each on a fresh server and data
# directory (synchronous=FULL). Prints loadgen's RESULT lines.
#
#   benches/scripts/suite.sh [REPS=3] [RATES="2000 3000 4000 5000"]
#
# Needs `cargo build --release -p payments-server -p payments-benches --bins` first. Ports
# 18080/18081 (server) and 18099 (callback receiver); data under ${PERF_DIR:-/tmp/perf}.
set -euo pipefail
if curl -fs -o /dev/null http://127.0.0.1:18080/healthz 2>/dev/null; then
  echo "something already answers on 127.0.0.1:18080 (a server left running?)" >&2
  exit 1
fi
REPS=${1:-3}
RATES=${2:-"2000 3000 4000 5000"}
T=${T:-target/release}
BASE=${PERF_DIR:-/tmp/perf}
SERVER=

start_server() { # data dir, extra flags...
  local dir=$1; shift
  PAYMENTS_SYNCHRONOUS=full PAYMENTS_ALLOW_LOCAL_CALLBACKS=1 \
    "$T/payments-server" serve --data-dir "$dir" \
    --listen 127.0.0.1:18080 --operator-listen 127.0.0.1:18081 --cabinet-listen 127.0.0.1:18082 "$@" 2>>"$dir/server.log" &
  SERVER=$!
  for _ in $(seq 100); do
    curl -fs http://127.0.0.1:18080/readyz >/dev/null 2>&1 && break
    sleep 0.1
  done
}
stop_server() { kill -TERM "$SERVER"; wait "$SERVER" || true; SERVER=; }
trap '[ -n "$SERVER" ] && kill $SERVER 2>/dev/null || true' EXIT
fresh() { rm -rf "$1" && mkdir -p "$1"; }

for rep in $(seq "$REPS"); do
  # Open loop: 10 s at each rate, 1 s of warm-up.
  D=$BASE/open; fresh "$D"; start_server "$D"
  "$T/bench_setup" --data-dir "$D" rate-limit >/dev/null
  for rate in $RATES; do
    echo "# rep $rep open loop $rate/s, load $(cut -d' ' -f1 /proc/loadavg)"
    "$T/loadgen" --credentials "$D/sandbox-credentials.json" --mode create --rate "$rate" \
      --connections 128 --requests $((rate * 10)) --warmup "$rate" --label "open-$rate-$rep" | grep RESULT
  done
  # GET, unsigned, 64 connections, 1,000 ids round robin.
  echo "# rep $rep get, load $(cut -d' ' -f1 /proc/loadavg)"
  "$T/loadgen" --credentials "$D/sandbox-credentials.json" --mode get --connections 64 \
    --requests 100000 --warmup 10000 --label "get-$rep" | grep RESULT
  stop_server

  # Callback delivery alone: queue 10,000 events with dispatch off, then deliver.
  D=$BASE/callbacks; fresh "$D"; start_server "$D" --callback-dispatch off
  "$T/bench_setup" --data-dir "$D" rate-limit >/dev/null
  echo "# rep $rep callbacks queue, load $(cut -d' ' -f1 /proc/loadavg)"
  "$T/loadgen" --credentials "$D/sandbox-credentials.json" --mode callbacks --phase queue \
    --receiver 127.0.0.1:18099 --connections 64 --requests 10000 --label "queue-$rep" | grep RESULT
  stop_server
  "$T/loadgen" --credentials "$D/sandbox-credentials.json" --mode callbacks --phase deliver \
    --receiver 127.0.0.1:18099 --requests 10000 --label "deliver-$rep" >"$D/deliver.out" &
  RECEIVER=$!
  sleep 0.5
  start_server "$D"
  wait "$RECEIVER" || true
  grep RESULT "$D/deliver.out"
  stop_server
done
