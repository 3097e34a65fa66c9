#!/usr/bin/env bash
# How one node scales with its cores: for each server core count N the server runs on cores
# 0..N-1 (`taskset`), the load generator on cores of its own ($LOADGEN_CORES), and a fresh
# server (sandbox, synchronous=FULL) is driven closed-loop with unsigned `GET /healthz` (the
# HTTP floor), unsigned `GET /api/v1/payments/{id}`, signed GET and signed creates; then the
# verify-only reference on the same N cores with the same signed creates. Each create run also
# prints the server's CPU per create by thread name (`THREADS {json}`, microseconds): a thread
# whose microseconds times the creates per second come near 1,000,000 is one core's worth, the
# ceiling of a single thread such as the SQLite writer.
#
#   benches/scripts/scaling.sh [CORES="1 2 4 8"] [REPS=1]
#
# Each extra environment setting in $VARIANTS ("NAME=VALUE ..." separated by ";") adds a run
# of every server mode with those variables, at every core count, labelled with them (for
# example VARIANTS="PAYMENTS_STORE__SHORT_READERS=8"). Requests per run scale with N
# ($PER_CORE, default 20,000 GETs per core and a fifth of that for creates). Needs a machine
# with at least max(CORES) + 2 cores; build first with
# `cargo build --release -p payments-server -p payments-benches --bins` ($T, default
# target/release). Ports 18080-18082 and 18090; data under ${PERF_DIR:-/tmp/perf}/scaling.
# Prints loadgen's RESULT lines, THREADS lines and `#` comments; nothing else is on stdout.
set -euo pipefail
. "$(dirname "$0")/common.sh"
require_free_port
CORES=${1:-"1 2 4 8"}
REPS=${2:-1}
PER_CORE=${PER_CORE:-20000}
CPUS=$(nproc)
LOADGEN_CORES=${LOADGEN_CORES:-$((CPUS / 2))-$((CPUS - 1))}
SIGN_THREADS=${SIGN_THREADS:-$((CPUS / 2))}
DIR=${PERF_DIR:-/tmp/perf}/scaling
TICK=$(getconf CLK_TCK)
VERIFY=
trap 'kill ${SERVER:-} ${VERIFY:-} 2>/dev/null || true' EXIT

# CPU seconds of process $1 by thread name (digits dropped: tokio-runtime-worker threads are
# one name), one "name seconds" line each.
threads() {
  for t in /proc/"$1"/task/*; do
    awk -v n="$(tr ' ' '_' < "$t/comm" | tr -d '0-9')" -v t="$TICK" '{print n, ($14 + $15) / t}' "$t/stat"
  done | awk '{s[$1] += $2} END {for (n in s) print n, s[n]}' | sort
}

# load LABEL MODE N ARGS...: one closed-loop loadgen run on the load generator's cores.
load() {
  local label=$1 mode=$2 n=$3
  shift 3
  taskset -c "$LOADGEN_CORES" "$T/loadgen" --credentials "$C" --mode "$mode" \
    --connections 128 --requests "$n" --warmup $((n / 10)) --sign-threads "$SIGN_THREADS" \
    --label "$label" "$@" 2>/dev/null | grep '^RESULT'
}

# creates LABEL PID MODE N ARGS...: a create (or verify) run with its CPU per request by thread.
creates() {
  local label=$1 pid=$2 mode=$3 n=$4
  shift 4
  threads "$pid" > "$DIR.t0"
  load "$label" "$mode" "$n" "$@"
  threads "$pid" > "$DIR.t1"
  echo "THREADS {\"label\":\"$label\"$(join "$DIR.t0" "$DIR.t1" |
    awk -v n=$((n + n / 10)) '{printf ",\"%s\":%.1f", $1, ($3 - $2) * 1e6 / n}')}"
}

# server CORES VARIANT: every server mode on a fresh server pinned to cores 0..CORES-1.
server() {
  local cores=$1 variant=$2 gets=$(($1 * PER_CORE)) makes=$(($1 * PER_CORE / 5))
  local tag="n$1${2:+-$(echo "$2" | tr ' =' '+:')}"
  rm -rf "$DIR" && mkdir -p "$DIR"
  # `env` and `taskset` exec what they run: $! is the server's pid.
  # shellcheck disable=SC2086 # the variant is a list of NAME=VALUE words
  env $variant PAYMENTS_SYNCHRONOUS=full taskset -c "0-$((cores - 1))" "$T/payments-server" serve \
    --data-dir "$DIR" --listen 127.0.0.1:18080 --operator-listen 127.0.0.1:18081 \
    --cabinet-listen 127.0.0.1:18082 2>"$DIR/server.log" &
  SERVER=$!
  for _ in $(seq 100); do [ -f "$DIR/sandbox-credentials.json" ] && break; sleep 0.1; done
  sleep 0.5
  "$T/bench_setup" --data-dir "$DIR" rate-limit >/dev/null
  C=$DIR/sandbox-credentials.json
  echo "# $tag: server on cores 0-$((cores - 1)), load $(cut -d' ' -f1 /proc/loadavg)"
  load "healthz-$tag" healthz "$gets"
  load "get-$tag" get "$gets"
  load "get-signed-$tag" get "$gets" --sign-get
  creates "create-$tag" "$SERVER" create "$makes"
  kill -TERM "$SERVER"
  wait "$SERVER" || true
  SERVER=
}

# reference CORES: the verify-only reference on cores 0..CORES-1.
reference() {
  local cores=$1 makes=$((PER_CORE * $1 / 5)) vdir=$DIR-verify
  rm -rf "$vdir" && mkdir -p "$vdir"
  taskset -c "0-$((cores - 1))" "$T/verify_server" --data-dir "$vdir" --listen 127.0.0.1:18090 \
    --synchronous full >"$vdir/verify.out" 2>"$vdir/verify.log" &
  VERIFY=$!
  for _ in $(seq 100); do [ -f "$vdir/sandbox-credentials.json" ] && break; sleep 0.1; done
  sleep 0.5
  "$T/bench_setup" --data-dir "$vdir" rate-limit >/dev/null
  C=$vdir/sandbox-credentials.json
  creates "verify-n$cores" "$VERIFY" verify "$makes" --url http://127.0.0.1:18090
  kill -TERM "$VERIFY"
  wait "$VERIFY" || true
  VERIFY=
}

echo "# $CPUS cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), kernel $(uname -r), load generator on $LOADGEN_CORES"
# Whether the kernel enforces the pinning (a sandbox such as gVisor records an affinity and
# may not keep to it): four busy loops of one second on core 0 use one CPU second if it does.
echo "# 4 busy seconds pinned to core 0 used $(taskset -c 0 bash -c 'for _ in 1 2 3 4; do timeout 1 sh -c "while :; do :; done" & done; wait; times' |
  tail -1 | awk '{print $1}') of CPU in children"
for rep in $(seq "$REPS"); do
  for cores in $CORES; do
    echo "# rep $rep"
    server "$cores" ""
    IFS=';' read -ra variants <<< "${VARIANTS:-}"
    for variant in "${variants[@]}"; do
      [ -n "$variant" ] && server "$cores" "$variant"
    done
    reference "$cores"
  done
done
