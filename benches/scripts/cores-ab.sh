#!/usr/bin/env bash
# Two builds A and B, alternating in one run: closed-loop GETs (unsigned, 1,000 payments read
# round robin) and signed creates, 64 connections, with the server on one core (`taskset -c 0`,
# the load generator on core 1) and on two (both unpinned, sharing the cores). A fresh data
# directory and server per block; one load generator (A's, or $LOADGEN) for every run. Prints
# one line per run: rep, build, cores, mode, 2xx/s, the 1-minute load.
#
#   T_A=/tmp/bin-glibc T_B=/tmp/bin-mimalloc benches/scripts/cores-ab.sh [REPS=3]
#
# Each T_ is a directory holding payments-server, bench_setup and loadgen (release builds).
# Ports 18080/18081/18082; data under ${PERF_DIR:-/tmp/perf}/cores-ab. Used for the allocator
# comparison in docs/performance.md ("The allocator").
set -euo pipefail
if curl -fs -o /dev/null http://127.0.0.1:18080/healthz 2>/dev/null; then
  echo "something already answers on 127.0.0.1:18080 (a server left running?)" >&2
  exit 1
fi
T_A=${T_A:?set T_A to the directory of build A}
T_B=${T_B:?set T_B to the directory of build B}
LOADGEN=${LOADGEN:-$T_A/loadgen}
REPS=${1:-3}
DIR=${PERF_DIR:-/tmp/perf}/cores-ab
SERVER=
trap '[ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null || true' EXIT

# run DIR_OF_BUILD CORES MODE: one fresh server, one loadgen run; prints the 2xx/s.
run() {
  local t=$1 cores=$2 mode=$3 pin_s=() pin_l=() n=100000
  [ "$mode" = create ] && n=30000
  if [ "$cores" = 1 ]; then pin_s=(taskset -c 0); pin_l=(taskset -c 1); fi
  rm -rf "$DIR" && mkdir -p "$DIR"
  PAYMENTS_SYNCHRONOUS=full "${pin_s[@]}" "$t/payments-server" serve --data-dir "$DIR" \
    --listen 127.0.0.1:18080 --operator-listen 127.0.0.1:18081 --cabinet-listen 127.0.0.1:18082 \
    2>"$DIR/server.log" &
  SERVER=$!
  for _ in $(seq 100); do [ -f "$DIR/sandbox-credentials.json" ] && break; sleep 0.1; done
  sleep 0.5
  "$t/bench_setup" --data-dir "$DIR" rate-limit >/dev/null
  "${pin_l[@]}" "$LOADGEN" --credentials "$DIR/sandbox-credentials.json" --mode "$mode" \
    --connections 64 --requests "$n" --warmup $((n / 10)) --label "$mode" 2>/dev/null |
    sed -n 's/^RESULT //p' | jq -r '.ok_throughput | round'
  kill -TERM "$SERVER"
  wait "$SERVER" || true
  SERVER=
}

for rep in $(seq "$REPS"); do
  for build in A B; do
    if [ "$build" = A ]; then t=$T_A; else t=$T_B; fi
    for cores in 1 2; do
      for mode in get create; do
        echo "rep=$rep build=$build cores=$cores mode=$mode $(run "$t" "$cores" "$mode")/s load=$(cut -d' ' -f1 /proc/loadavg)"
      done
    done
  done
done
