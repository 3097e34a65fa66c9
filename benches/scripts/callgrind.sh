#!/usr/bin/env bash
# Instructions per create: payments-server runs under valgrind's callgrind (synchronous=FULL,
# fresh data directory); after a warm-up of creates the counters are zeroed, a fixed number of
# closed-loop creates is sent by the load generator, and the counters are dumped. Prints, per
# run, the instructions (Ir) of the whole server process (every thread: tokio workers, blocking
# pool, SQLite writer) divided by the creates, and those of the SQLite writer thread alone
# (the thread every write of the node queues behind: its share is what caps creates on many
# cores). User-space instructions only: the kernel's part
# (syscalls, scheduling, fsync) is not counted, see cpu.sh for that. Valgrind runs one thread
# at a time, so group-commit batch sizes differ from a native run; the figure is for comparing
# builds with each other, not for converting into time.
#
#   benches/scripts/callgrind.sh [REPS=3] [CREATES=2000] [CONNECTIONS=16]
#
# With VERIFY=1 the verify-only reference (`verify_server`, the merchant API's admission and
# authentication with its nonce write, no payment) runs instead, driven with the same signed
# creates: what a create costs beyond being let in.
#
# Needs valgrind (apt-get install -y valgrind) and
# `cargo build --release -p payments-server -p payments-benches --bins`. Ports 18080-18082; data
# under ${PERF_DIR:-/tmp/perf}/callgrind.
set -euo pipefail
. "$(dirname "$0")/common.sh"
require_free_port
REPS=${1:-3}
CREATES=${2:-2000}
CONNS=${3:-16}
WARM=${WARM:-300}
BASE=${PERF_DIR:-/tmp/perf}/callgrind
trap 'kill ${SERVER:-} 2>/dev/null || true' EXIT
for rep in $(seq "$REPS"); do
  DIR=$BASE/run-$rep
  rm -rf "$DIR" && mkdir -p "$DIR"
  CG=(valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$DIR/callgrind.out")
  if [ -n "${VERIFY:-}" ]; then
    mkdir -p "$DIR/data"
    "${CG[@]}" "$T/verify_server" --data-dir "$DIR/data" --listen 127.0.0.1:18080 \
      --synchronous full >"$DIR/verify.out" 2>"$DIR/server.log" &
    SERVER=$!
    MODE=(--mode verify --url http://127.0.0.1:18080)
    for _ in $(seq 600); do [ -f "$DIR/data/sandbox-credentials.json" ] && break; sleep 0.2; done
    sleep 1
  else
    PAYMENTS_SYNCHRONOUS=full "${CG[@]}" "$T/payments-server" serve --data-dir "$DIR/data" \
      --listen 127.0.0.1:18080 --operator-listen 127.0.0.1:18081 \
      --cabinet-listen 127.0.0.1:18082 2>"$DIR/server.log" &
    SERVER=$!
    MODE=(--mode create)
    for _ in $(seq 600); do
      curl -fs -o /dev/null http://127.0.0.1:18080/readyz 2>/dev/null && break
      sleep 0.2
    done
  fi
  "$T/bench_setup" --data-dir "$DIR/data" rate-limit >/dev/null
  C=$DIR/data/sandbox-credentials.json
  "$T/loadgen" --credentials "$C" "${MODE[@]}" --connections "$CONNS" --requests "$WARM" \
    --warmup 0 --label warm >/dev/null 2>&1
  callgrind_control -z "$SERVER" >/dev/null
  "$T/loadgen" --credentials "$C" "${MODE[@]}" --connections "$CONNS" --requests "$CREATES" \
    --warmup 0 --label "callgrind-$rep" >"$DIR/loadgen.out" 2>&1
  callgrind_control -d "$SERVER" >/dev/null
  kill -TERM "$SERVER"
  wait "$SERVER" || true
  SERVER=
  ok=$(grep -o "\"ok\":[0-9]*" "$DIR/loadgen.out" | head -1 | cut -d: -f2 || true)
  # The dump made by `callgrind_control -d` is one file per thread with the suffix .1-NN; the
  # writer's is the one whose functions include the writer's loop.
  ir=0
  writer=0
  for dump in "$DIR"/callgrind.out.1-*; do
    n=$(awk '/^(summary|totals):/ {print $2; exit}' "$dump")
    ir=$((ir + n))
    if grep -q 'payments_store_sqlite::writer::run' "$dump"; then writer=$n; fi
  done
  awk -v r="$rep" -v ir="$ir" -v w="$writer" -v n="$CREATES" -v ok="${ok:-?}" 'BEGIN {
    printf "callgrind run %s: %d signed creates (2xx: %s), %.0f Ir in all, %.0f Ir per request, of which the SQLite writer %.0f\n",
      r, n, ok, ir, ir / n, w / n }'
done
