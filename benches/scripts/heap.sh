#!/usr/bin/env bash
# Is the server's memory growth live data or memory the allocator keeps? Runs closed-loop
# creates (64 connections, synchronous=FULL, fresh data directory) in bursts and, in the idle
# pause after each burst, asks glibc malloc inside the server for its totals (`malloc_stats()`
# called through gdb): "system" is what malloc holds from the kernel, "in use" what the program
# has allocated and not freed. At the end it calls `malloc_trim(0)` and prints the RSS after it.
#
#   benches/scripts/heap.sh [BURSTS="180 300 300" seconds]
#
# Needs gdb, ptrace permission on the server (root or kernel.yama.ptrace_scope=0) and
# `cargo build --release -p payments-server -p payments-benches --bins`. Ports 18080/18081; data
# under ${PERF_DIR:-/tmp/perf}/heap. Calls into malloc only while no request is in flight.
set -euo pipefail
. "$(dirname "$0")/common.sh"
require_free_port
BURSTS=${1:-"180 300 300"}
DIR=${PERF_DIR:-/tmp/perf}/heap
trap 'kill ${SERVER:-} 2>/dev/null || true' EXIT
start_bench_server "$DIR"
rss() { awk '/^VmRSS/{r=$2} /^RssAnon/{a=$2} /^Threads/{t=$2} END{print "rss_kb", r, "anon_kb", a, "threads", t}' "/proc/$SERVER/status"; }
# malloc_stats() writes to the server's stderr; the totals are the block it just wrote. When
# gdb could not attach, no new block appears and nothing older is reported in its place.
malloc_totals() {
  local before
  before=$(grep -c '^Total (incl. mmap)' "$DIR/server.log" || true)
  timeout 60 gdb -p "$SERVER" -batch -ex 'call (void)malloc_stats()' >/dev/null 2>&1 || true
  if [ "$(grep -c '^Total (incl. mmap)' "$DIR/server.log" || true)" -le "$before" ]; then
    echo "unavailable (gdb could not call malloc_stats; ptrace permission?)"
    return
  fi
  grep -A2 '^Total (incl. mmap)' "$DIR/server.log" | tail -2 |
    awk 'NR == 1 {printf "system_kb %d ", $NF / 1024} NR == 2 {printf "in_use_kb %d\n", $NF / 1024}'
}
echo "idle: $(rss)"
elapsed=0
for burst in $BURSTS; do
  end=$((SECONDS + burst))
  while [ $SECONDS -lt $end ]; do
    "$T/loadgen" --credentials "$DIR/sandbox-credentials.json" --mode create \
      --connections 64 --requests 30000 --warmup 0 | grep RESULT >>"$DIR/loadgen.log"
  done
  elapsed=$((elapsed + burst))
  sleep 5
  created=$(grep -o '"ok":[0-9]*' "$DIR/loadgen.log" | awk -F: '{s+=$2} END{print s+0}')
  echo "after ${elapsed} s of load, $created created: $(rss); malloc: $(malloc_totals)"
done
timeout 60 gdb -p "$SERVER" -batch -ex 'call (int)malloc_trim(0)' >/dev/null 2>&1 || true
sleep 1
echo "after malloc_trim(0): $(rss); malloc: $(malloc_totals)"
