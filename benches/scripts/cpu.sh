#!/usr/bin/env bash
# Server CPU per request and throughput, in one run, on a fresh data directory
# (synchronous=FULL): closed-loop signed creates against payments-server, the same against the
# verify-only reference, and unsigned GET /healthz against payments-server (the HTTP floor),
# 64 connections, REPS runs of each, alternating. CPU is utime + stime of the serving process
# from /proc/<pid>/stat (all its threads, kernel time included) from before the load
# generator starts to after it ends, divided by the requests it sent (no warm-up: every
# request is counted; the server is idle while the load generator pre-signs). Prints one line
# per run and a min / median / max summary per mode.
#
#   benches/scripts/cpu.sh [REPS=3] [CREATES=40000] [HEALTHZ=300000]
#
# Needs `cargo build --release -p payments-server -p payments-benches --bins` first. Ports
# 18080-18082/18090; data under ${PERF_DIR:-/tmp/perf}.
set -euo pipefail
. "$(dirname "$0")/common.sh"
require_free_port
REPS=${1:-3}
CREATES=${2:-40000}
HEALTHZ=${3:-300000}
DIR=${PERF_DIR:-/tmp/perf}/cpu
trap 'kill ${SERVER:-} ${VERIFY:-} 2>/dev/null || true' EXIT
start_bench_server "$DIR"
# The reference on a data directory of its own (one server per data directory), with its own
# sandbox credentials and the same raised rate limit.
VDIR=$DIR-verify
rm -rf "$VDIR" && mkdir -p "$VDIR"
"$T/verify_server" --data-dir "$VDIR" --listen 127.0.0.1:18090 --synchronous full 2>"$DIR/verify.log" &
VERIFY=$!
for _ in $(seq 100); do [ -f "$VDIR/sandbox-credentials.json" ] && break; sleep 0.1; done
sleep 0.5
"$T/bench_setup" --data-dir "$VDIR" rate-limit >/dev/null
TICK=$(getconf CLK_TCK)
cpu() { awk -v t="$TICK" '{print ($14 + $15) / t}' "/proc/$1/stat"; }
: >"$DIR/runs.txt"
for rep in $(seq "$REPS"); do
  for mode in create verify healthz; do
    case $mode in
      create) P=$SERVER; URL=http://127.0.0.1:18080; N=$CREATES; C=$DIR/sandbox-credentials.json ;;
      verify) P=$VERIFY; URL=http://127.0.0.1:18090; N=$CREATES; C=$VDIR/sandbox-credentials.json ;;
      healthz) P=$SERVER; URL=http://127.0.0.1:18080; N=$HEALTHZ; C=$DIR/sandbox-credentials.json ;;
    esac
    load=$(cut -d' ' -f1 /proc/loadavg)
    # fsyncs of the serving process during the run (group commits), when perf can count them.
    PERF=
    if command -v perf >/dev/null && [ "$mode" != healthz ]; then
      perf stat -x, -e syscalls:sys_enter_fsync,syscalls:sys_enter_fdatasync -p "$P" \
        -o "$DIR/fsync.csv" 2>/dev/null &
      PERF=$!
      sleep 0.3
    fi
    s0=$(cpu $P)
    "$T/loadgen" --credentials "$C" --mode "$mode" --url "$URL" \
      --connections 64 --requests "$N" --warmup 0 --label "cpu-$mode-$rep" >"$DIR/loadgen.out" 2>&1
    s1=$(cpu $P)
    syncs=
    if [ -n "$PERF" ]; then
      kill -INT "$PERF"; wait "$PERF" 2>/dev/null || true
      syncs=$(awk -F, '$1 ~ /^[0-9]+$/ { n += $1 } END { print n + 0 }' "$DIR/fsync.csv")
    fi
    thr=$(grep -o '"throughput":[0-9.]*' "$DIR/loadgen.out" | cut -d: -f2)
    awk -v m="$mode" -v r="$rep" -v s0="$s0" -v s1="$s1" -v n="$N" -v thr="$thr" -v load="$load" \
      -v syncs="$syncs" 'BEGIN {
        f = syncs == "" ? "" : sprintf("; %.3f fsync per request", syncs / n)
        printf "%s run %s: %.0f/s; server %.1f us CPU per request%s (load before: %s)\n",
          m, r, thr, (s1 - s0) / n * 1e6, f, load }' | tee -a "$DIR/runs.txt"
  done
done
echo "# min / median / max over $REPS runs"
# min / median / max of a column of numbers.
mmm() { sort -g | awk '{ v[NR] = $1 } END { printf "%.1f / %.1f / %.1f", v[1], v[int((NR + 1) / 2)], v[NR] }'; }
for mode in create verify healthz; do
  rates=$(grep "^$mode run" "$DIR/runs.txt" | sed 's,.*: \([0-9.]*\)/s;.*,\1,' | mmm)
  cpus=$(grep "^$mode run" "$DIR/runs.txt" | sed 's,.*server \([0-9.]*\) us.*,\1,' | mmm)
  echo "$mode: $rates per s; $cpus us server CPU per request"
done
