#!/usr/bin/env bash
# Closed-loop signed creates against payments-server and the verify-only reference, alternating
# in the same run, on a fresh data directory. Prints loadgen's RESULT lines.
#
#   benches/scripts/create-vs-verify.sh [SYNC=full|normal] [REPS=3] [CONNECTIONS="16 64 256"]
#
# Needs `cargo build --release -p payments-server -p payments-benches --bins` first. Ports
# 18080/18081/18090; data under ${PERF_DIR:-/tmp/perf}.
set -euo pipefail
if curl -fs -o /dev/null http://127.0.0.1:18080/healthz 2>/dev/null; then
  echo "something already answers on 127.0.0.1:18080 (a server left running?)" >&2
  exit 1
fi
SYNC=${1:-full}
REPS=${2:-3}
CONNS=${3:-"16 64 256"}
REQUESTS=${REQUESTS:-30000}
WARMUP=${WARMUP:-3000}
T=${T:-target/release}
DIR=${PERF_DIR:-/tmp/perf}/suite-$SYNC
rm -rf "$DIR" && mkdir -p "$DIR"
PAYMENTS_SYNCHRONOUS=$SYNC PAYMENTS_ALLOW_LOCAL_CALLBACKS=1 \
  "$T/payments-server" serve --data-dir "$DIR" \
  --listen 127.0.0.1:18080 --operator-listen 127.0.0.1:18081 --cabinet-listen 127.0.0.1:18082 2>"$DIR/server.log" &
SERVER=$!
trap 'kill $SERVER ${VERIFY:-} 2>/dev/null || true' EXIT
for _ in $(seq 100); do [ -f "$DIR/sandbox-credentials.json" ] && break; sleep 0.1; done
sleep 0.5
"$T/bench_setup" --data-dir "$DIR" rate-limit
# The reference on a data directory of its own (one server per data directory).
VDIR=$DIR-verify
rm -rf "$VDIR" && mkdir -p "$VDIR"
"$T/verify_server" --data-dir "$VDIR" --listen 127.0.0.1:18090 --synchronous "$SYNC" 2>"$DIR/verify.log" &
VERIFY=$!
for _ in $(seq 100); do [ -f "$VDIR/sandbox-credentials.json" ] && break; sleep 0.1; done
sleep 0.5
"$T/bench_setup" --data-dir "$VDIR" rate-limit
C=$DIR/sandbox-credentials.json
for rep in $(seq "$REPS"); do
  for conns in $CONNS; do
    echo "# rep $rep, $conns connections, load $(cut -d' ' -f1 /proc/loadavg)"
    "$T/loadgen" --credentials "$C" --mode create --connections "$conns" \
      --requests "$REQUESTS" --warmup "$WARMUP" --label "create-$SYNC-$conns-$rep" | grep RESULT
    "$T/loadgen" --credentials "$VDIR/sandbox-credentials.json" --mode verify --url http://127.0.0.1:18090 \
      --connections "$conns" --requests "$REQUESTS" --warmup "$WARMUP" \
      --label "verify-$SYNC-$conns-$rep" | grep RESULT
  done
done
