#!/usr/bin/env bash
# Create throughput and the sweep query's cost with 10,000 vs 5,010,000 payments stored.
#
#   benches/scripts/stored.sh [COUNT=5000000] [REPS=3]
#
# Each data directory gets 9,000 payments through the API (the seed's row template), then
# `bench_setup seed` copies rows in SQL (1,000 due for the sweeper + COUNT closed ones in the
# big one). The create runs alternate between the two directories. Ports 18080/18081.
set -euo pipefail
if curl -fs -o /dev/null http://127.0.0.1:18080/healthz 2>/dev/null; then
  echo "something already answers on 127.0.0.1:18080 (a server left running?)" >&2
  exit 1
fi
COUNT=${1:-5000000}
REPS=${2:-3}
T=${T:-target/release}
BASE=${PERF_DIR:-/tmp/perf}
SERVER=
start_server() {
  PAYMENTS_SYNCHRONOUS=full "$T/payments-server" serve --data-dir "$1" \
    --listen 127.0.0.1:18080 --operator-listen 127.0.0.1:18081 --cabinet-listen 127.0.0.1:18082 2>>"$1/server.log" &
  SERVER=$!
  for _ in $(seq 300); do curl -fs http://127.0.0.1:18080/readyz >/dev/null 2>&1 && break; sleep 0.1; done
}
stop_server() { kill -TERM "$SERVER"; wait "$SERVER" || true; SERVER=; }
trap '[ -n "$SERVER" ] && kill $SERVER 2>/dev/null || true' EXIT
for d in small big; do
  D=$BASE/$d; rm -rf "$D"; mkdir -p "$D"; start_server "$D"
  "$T/bench_setup" --data-dir "$D" rate-limit >/dev/null
  "$T/loadgen" --credentials "$D/sandbox-credentials.json" --mode create --connections 64 \
    --requests 9000 --warmup 0 >/dev/null
  stop_server
done
"$T/bench_setup" --data-dir "$BASE/small" seed --count 0 --due 1000
"$T/bench_setup" --data-dir "$BASE/big" seed --count "$COUNT" --due 1000
for d in small big; do
  echo "# sweep cost, $d"
  "$T/bench_setup" --data-dir "$BASE/$d" sweep-cost
done
for rep in $(seq "$REPS"); do
  for d in small big; do
    D=$BASE/$d; start_server "$D"
    echo "# rep $rep $d, load $(cut -d' ' -f1 /proc/loadavg)"
    "$T/loadgen" --credentials "$D/sandbox-credentials.json" --mode create --connections 64 \
      --requests 20000 --warmup 2000 --label "stored-$d-$rep" | grep RESULT
    stop_server
  done
done
