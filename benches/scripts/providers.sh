#!/usr/bin/env bash
# Create throughput with one HTTP requisite provider against three behind the router (issue
# 44), same build, same run: three example upstreams (release build of
# `payments-examples --example upstream`) on 127.0.0.1:19301-19303; the server alternates
# between ONE (`[[upstream.providers]]` with the first upstream alone) and THREE (all three, one
# priority, equal weights), each rep on a fresh data dir, closed-loop signed creates from the
# load generator. Every RESULT line goes to ${PERF_DIR:-/tmp/perf}/providers/results.jsonl.
#
#   benches/scripts/providers.sh [REPS=3] [CONNECTIONS=64]
set -euo pipefail
# shellcheck source=benches/scripts/common.sh
source "$(dirname "$0")/common.sh"
require_free_port
REPS=${1:-3}
CONNS=${2:-64}
REQUESTS=${REQUESTS:-20000}
WARMUP=${WARMUP:-2000}
OUT=${PERF_DIR:-/tmp/perf}/providers
mkdir -p "$OUT"
RESULTS=$OUT/results.jsonl
: >"$RESULTS"
SECRET=whsec_YmVuY2gtdXBzdHJlYW0tc2VjcmV0LTAxMjM0NTY3ODlhYmNk
UPSTREAMS=()
stop_all() {
  for p in $SERVER "${UPSTREAMS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
}
trap stop_all EXIT
for port in 19301 19302 19303; do
  UPSTREAM_SECRET=$SECRET "$T/examples/upstream" --listen "127.0.0.1:$port" >/dev/null 2>&1 &
  UPSTREAMS+=($!)
done
sleep 1

# config N: the settings with the first N upstreams.
config() {
  local n=$1 i
  printf '[upstream]\nprovider = "http"\n'
  for i in $(seq "$n"); do
    printf '\n[[upstream.providers]]\nname = "up%s"\nurl = "http://127.0.0.1:1930%s/requisites"\nsecrets = ["%s"]\n' "$i" "$i" "$SECRET"
  done
}

for rep in $(seq "$REPS"); do
  if [ $((rep % 2)) = 1 ]; then order="1 3"; else order="3 1"; fi
  for n in $order; do
    dir=$OUT/n$n-$rep
    mkdir -p "$dir"
    config "$n" >"$OUT/n$n.toml"
    start_bench_server "$dir" --config "$OUT/n$n.toml"
    l=$(cut -d' ' -f1 /proc/loadavg)
    "$T/loadgen" --credentials "$dir/sandbox-credentials.json" --mode create \
      --connections "$CONNS" --requests "$REQUESTS" --warmup "$WARMUP" \
      --label "create-$n-$rep" | sed -n 's/^RESULT //p' |
      jq -c --argjson n "$n" --argjson r "$rep" --argjson l "$l" '. + {providers: $n, rep: $r, load: $l}' |
      tee -a "$RESULTS" |
      jq -r '"rep \(.rep) \(.providers) provider(s): \(.ok_throughput | round) creates/s 2xx of \(.requests), p99 \(.latency.p99_ms) ms, load \(.load)"'
    kill "$SERVER"; wait "$SERVER" 2>/dev/null || true; SERVER=
  done
done

jq -rs '
  def med: sort | if length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end;
  def v(n): [.[] | select(.providers == n)] | sort_by(.rep) | map(.ok_throughput);
  . as $all
  | "one provider   creates/s  \($all | v(1) | map(round) | sort | "\(.[0]) / \(med) / \(.[-1])")",
    "three providers creates/s \($all | v(3) | map(round) | sort | "\(.[0]) / \(med) / \(.[-1])")",
    "three/one per rep         \([($all | v(3)), ($all | v(1))] | transpose | map(.[0] / .[1] * 100 | round / 100))",
    "non-2xx                   \([$all[] | .requests - .ok] | add)"
' "$RESULTS"
