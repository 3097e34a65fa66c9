#!/usr/bin/env bash
# Creates against /healthz as the database grows: one server (synchronous=FULL, fresh data
# directory) through ROUNDS rounds, each of CREATES closed-loop signed creates and then HEALTHZ
# unsigned GET /healthz, 64 connections. Per round: creates/s, /healthz/s, their ratio, the
# server's CPU per create (utime + stime of all its threads over the create run) and, when
# perf can count them, its pwrite64 / pread64 / fsync calls per create, and the data
# directory's size. cpu.sh measures a fresh server per run; this shows what a grown database
# (and a grown index of used nonces) costs.
#
#   benches/scripts/grow.sh [ROUNDS=6] [CREATES=40000] [HEALTHZ=300000]
#
# Needs `cargo build --release -p payments-server -p payments-benches --bins` first. Ports
# 18080-18082; data under ${PERF_DIR:-/tmp/perf}/grow.
set -euo pipefail
. "$(dirname "$0")/common.sh"
require_free_port
ROUNDS=${1:-6}
CREATES=${2:-40000}
HEALTHZ=${3:-300000}
DIR=${PERF_DIR:-/tmp/perf}/grow
trap 'kill ${SERVER:-} 2>/dev/null || true' EXIT
start_bench_server "$DIR"
TICK=$(getconf CLK_TCK)
# perf counts syscalls only where it may open their tracepoints (root or CAP_PERFMON).
COUNT=
if command -v perf >/dev/null &&
  perf stat -e syscalls:sys_enter_fsync -o /dev/null true >/dev/null 2>&1; then
  COUNT=yes
fi
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
thr() { grep -o '"throughput":[0-9.]*' "$1" | cut -d: -f2; }
for round in $(seq "$ROUNDS"); do
  PERF=
  rm -f "$DIR/stat.csv"
  if [ -n "$COUNT" ]; then
    perf stat -x, -e syscalls:sys_enter_pwrite64,syscalls:sys_enter_pread64,syscalls:sys_enter_fsync \
      -p "$SERVER" -o "$DIR/stat.csv" 2>/dev/null &
    PERF=$!
    sleep 0.3
  fi
  t0=$(cpu "$SERVER")
  "$T/loadgen" --credentials "$DIR/sandbox-credentials.json" --mode create --connections 64 \
    --requests "$CREATES" --warmup 0 --label "grow-create-$round" >"$DIR/create.out" 2>&1
  t1=$(cpu "$SERVER")
  calls=
  if [ -n "$PERF" ]; then
    kill -INT "$PERF" 2>/dev/null || true
    wait "$PERF" 2>/dev/null || true
  fi
  if [ -s "$DIR/stat.csv" ]; then
    calls=$(awk -F, -v n="$CREATES" '$3 ~ /syscalls/ { sub("syscalls:sys_enter_", "", $3);
      printf "; %s %.2f", $3, $1 / n }' "$DIR/stat.csv")
    calls="${calls} per create"
  fi
  "$T/loadgen" --credentials "$DIR/sandbox-credentials.json" --mode healthz --connections 64 \
    --requests "$HEALTHZ" --warmup 0 --label "grow-healthz-$round" >"$DIR/healthz.out" 2>&1
  c=$(thr "$DIR/create.out")
  h=$(thr "$DIR/healthz.out")
  awk -v r="$round" -v c="$c" -v h="$h" -v t0="$t0" -v t1="$t1" -v t="$TICK" -v n="$CREATES" \
    -v calls="$calls" -v mb="$(du -sm "$DIR" | cut -f1)" 'BEGIN {
      printf "round %s: %.0f creates/s, %.0f /healthz/s, ratio %.3f; %.1f us CPU per create%s; data dir %s MB\n",
        r, c, h, c / h, (t1 - t0) / t / n * 1e6, calls, mb }'
done
