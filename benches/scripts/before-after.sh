#!/usr/bin/env bash
# Two builds of the server, BEFORE and AFTER a change, alternating in the same run: closed-loop
# signed creates against each build's payments-server and the same requests against that
# build's own verify-only reference, then signed reads of the created payments (each GET with
# its own nonce: the nonce write of every signed request). One load generator (AFTER's, or
# $LOADGEN) for every run.
#
#   T_BEFORE=../before/target/release T_AFTER=target/release \
#     benches/scripts/before-after.sh [REPS=3] [CONNECTIONS="64 16"]
#
# ENV_BEFORE / ENV_AFTER: extra `NAME=value` settings for each build's server (space
# separated), to compare two settings of one build, e.g. T_BEFORE=T_AFTER=target/release
# ENV_BEFORE="PAYMENTS_SECRETS__SEAL_REQUISITES=false" (requisites in clear against sealed).
#
# Each rep runs both builds, one at a time on the same ports (18080/18081/18090), each on a
# fresh data directory under ${PERF_DIR:-/tmp/perf}/before-after; the order of the two builds
# flips every rep. Before each build's block it waits (polling every 20 s, at most LOAD_WAIT
# seconds, then measures anyway) until the 1-minute load average is below LOAD_MAX. Every
# RESULT line, with build, rep and the load average taken just before it, goes to
# results.jsonl; the summary at the end is computed from it.
set -euo pipefail
if curl -fs -o /dev/null http://127.0.0.1:18080/healthz 2>/dev/null; then
  echo "something already answers on 127.0.0.1:18080 (a server left running?)" >&2
  exit 1
fi
T_BEFORE=${T_BEFORE:?set T_BEFORE to the target/release directory of the BEFORE build}
T_AFTER=${T_AFTER:-target/release}
LOADGEN=${LOADGEN:-$T_AFTER/loadgen}
REPS=${1:-3}
CONNS=${2:-"64 16"}
REQUESTS=${REQUESTS:-30000}
WARMUP=${WARMUP:-3000}
LOAD_MAX=${LOAD_MAX:-1.0}
LOAD_WAIT=${LOAD_WAIT:-600}
OUT=${PERF_DIR:-/tmp/perf}/before-after
mkdir -p "$OUT"
RESULTS=$OUT/results.jsonl
: >"$RESULTS"
SERVER=
VERIFY=
stop() {
  for p in $SERVER $VERIFY; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  SERVER= VERIFY=
}
trap stop EXIT
load() { cut -d' ' -f1 /proc/loadavg; }

wait_for_quiet() {
  local waited=0
  while awk -v l="$(load)" -v m="$LOAD_MAX" 'BEGIN { exit !(l >= m) }'; do
    if [ "$waited" -ge "$LOAD_WAIT" ]; then
      echo "# load still $(load) after ${waited} s: measuring anyway"
      return
    fi
    sleep 20
    waited=$((waited + 20))
  done
  echo "# load $(load) after waiting ${waited} s"
}

# block BUILD REP: one server of BUILD (before|after) and its reference, every connection count.
block() {
  local build=$1 rep=$2 t dir conns
  local extra
  if [ "$build" = before ]; then t=$T_BEFORE extra=${ENV_BEFORE:-}; else t=$T_AFTER extra=${ENV_AFTER:-}; fi
  dir=$OUT/$build-$rep
  rm -rf "$dir" && mkdir -p "$dir"
  wait_for_quiet
  # shellcheck disable=SC2086 # $extra is a list of NAME=value words
  env PAYMENTS_SYNCHRONOUS=full PAYMENTS_ALLOW_LOCAL_CALLBACKS=1 $extra \
    "$t/payments-server" serve --data-dir "$dir" \
    --listen 127.0.0.1:18080 --operator-listen 127.0.0.1:18081 --cabinet-listen 127.0.0.1:18082 2>"$dir/server.log" &
  SERVER=$!
  for _ in $(seq 100); do [ -f "$dir/sandbox-credentials.json" ] && break; sleep 0.1; done
  sleep 0.5
  curl -fs -o /dev/null http://127.0.0.1:18080/healthz ||
    { echo "the $build server does not answer: $dir/server.log" >&2; exit 1; }
  "$t/bench_setup" --data-dir "$dir" rate-limit >/dev/null
  for conns in $CONNS; do measure create "$build" "$rep" "$dir" "$conns"; done
  for conns in $CONNS; do measure get "$build" "$rep" "$dir" "$conns" --sign-get; done
  # The server holds the data dir's lock (payments.lock): the verify-only reference opens the
  # same data dir once the server has stopped, right after its creates.
  stop
  "$t/verify_server" --data-dir "$dir" --listen 127.0.0.1:18090 --synchronous full \
    >/dev/null 2>"$dir/verify.log" &
  VERIFY=$!
  # It serves one route and no health check: wait until it accepts connections.
  for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/18090) 2>/dev/null && break; sleep 0.1; done
  for conns in $CONNS; do measure verify "$build" "$rep" "$dir" "$conns" --url http://127.0.0.1:18090; done
  stop
}

# measure MODE BUILD REP DIR CONNS [loadgen args]: one closed-loop run, its RESULT line kept.
measure() {
  local mode=$1 build=$2 rep=$3 dir=$4 conns=$5 l
  shift 5
  l=$(load)
  "$LOADGEN" --credentials "$dir/sandbox-credentials.json" --mode "$mode" "$@" \
    --connections "$conns" --requests "$REQUESTS" --warmup "$WARMUP" \
    --label "$mode-$build-$conns-$rep" | sed -n 's/^RESULT //p' |
    jq -c --arg b "$build" --argjson r "$rep" --argjson l "$l" '. + {build: $b, rep: $r, load: $l}' |
    tee -a "$RESULTS" |
    jq -r '"rep \(.rep) \(.build) \(.connections) conns \(.mode): \(.ok_throughput | round)/s 2xx of \(.requests), p99 \(.latency.p99_ms) ms, load \(.load)"'
}

for rep in $(seq "$REPS"); do
  if [ $((rep % 2)) = 1 ]; then order="before after"; else order="after before"; fi
  for build in $order; do block "$build" "$rep"; done
done

# Summary: per connection count, min / median / max over the reps of each build's create/s,
# verify/s and create/verify (same server, same rep), and AFTER/BEFORE create/s (same rep).
jq -rs '
  def med: sort | if length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end;
  def r2: . * 100 | round / 100;
  def mmm: . as $x | sort | "\(.[0]) / \(med) / \(.[-1])   per rep: \($x | map(tostring) | join(" "))";
  group_by(.connections) | reverse[] | . as $g | .[0].connections as $c
  | def v(b; m): [$g[] | select(.build == b and .mode == m)] | sort_by(.rep) | map(.ok_throughput);
    def ratio(a; b): [a, b] | transpose | map(.[0] / .[1] | r2);
    "\($c) connections",
    "  before create/s        \(v("before"; "create") | map(round) | mmm)",
    "  before verify/s        \(v("before"; "verify") | map(round) | mmm)",
    "  before create/verify   \(ratio(v("before"; "create"); v("before"; "verify")) | mmm)",
    "  after  create/s        \(v("after"; "create") | map(round) | mmm)",
    "  after  verify/s        \(v("after"; "verify") | map(round) | mmm)",
    "  after  create/verify   \(ratio(v("after"; "create"); v("after"; "verify")) | mmm)",
    "  after/before create/s  \(ratio(v("after"; "create"); v("before"; "create")) | mmm)",
    "  after/before verify/s  \(ratio(v("after"; "verify"); v("before"; "verify")) | mmm)",
    "  before signed get/s    \(v("before"; "get") | map(round) | mmm)",
    "  after  signed get/s    \(v("after"; "get") | map(round) | mmm)",
    "  after/before get/s     \(ratio(v("after"; "get"); v("before"; "get")) | mmm)",
    "  non-2xx responses      \([$g[] | .requests - .ok] | add)"
' "$RESULTS"
