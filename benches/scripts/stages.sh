#!/usr/bin/env bash
# cpu.sh over several builds in turn, round robin, so that the machine's noise falls on every
# build alike: for each rep, each build runs `cpu.sh 1` (creates, verify-only reference and
# /healthz on a fresh server). Prints every run's line prefixed by its build, then min /
# median / max per build and mode.
#
#   benches/scripts/stages.sh REPS DIR...    (each DIR holds payments-server, loadgen,
#                                             bench_setup and verify_server of one build)
set -euo pipefail
REPS=$1
shift
HERE=$(dirname "$0")
OUT=${PERF_DIR:-/tmp/perf}/stages
mkdir -p "$OUT"
: >"$OUT/all.txt"
for rep in $(seq "$REPS"); do
  for dir in "$@"; do
    name=$(basename "$dir")
    T=$dir PERF_DIR=$OUT/$name "$HERE/cpu.sh" 1 |
      grep ' run ' | sed "s,^,$name ,; s, run 1:, run $rep:," | tee -a "$OUT/all.txt"
  done
done
echo "# min / median / max over $REPS runs"
mmm() { sort -g | awk -v f="${1:-%.1f}" '{ v[NR] = $1 } END { printf f " / " f " / " f, v[1], v[int((NR + 1) / 2)], v[NR] }'; }
for dir in "$@"; do
  name=$(basename "$dir")
  for mode in create verify healthz; do
    lines=$(grep "^$name $mode run" "$OUT/all.txt" || true)
    [ -n "$lines" ] || continue
    rates=$(echo "$lines" | sed 's,.*: \([0-9.]*\)/s;.*,\1,' | mmm)
    cpus=$(echo "$lines" | sed 's,.*server \([0-9.]*\) us.*,\1,' | mmm)
    syncs=$(echo "$lines" | grep -o '[0-9.]* fsync' | cut -d' ' -f1 | mmm %.3f || true)
    echo "$name $mode: $rates per s; $cpus us server CPU per request${syncs:+; fsync per request $syncs}"
  done
done
