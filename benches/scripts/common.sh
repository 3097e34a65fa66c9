# Shared by cpu.sh, heap.sh, profile.sh and rss.sh; sourced after `set -euo pipefail`.
# Binaries come from ${T:-target/release}.
T=${T:-target/release}
SERVER=

# Refuses to go on when something already answers on the server's port (a server left running
# would be measured instead of the fresh one).
require_free_port() {
  if curl -fs -o /dev/null http://127.0.0.1:18080/healthz 2>/dev/null; then
    echo "something already answers on 127.0.0.1:18080 (a server left running?)" >&2
    exit 1
  fi
}

# Starts payments-server in the sandbox with synchronous=FULL over a fresh data directory $1
# (further arguments are passed to `serve`), listening on 127.0.0.1:18080 (merchant API) and
# 127.0.0.1:18081 (operator API), its log in $1/server.log; sets SERVER to its pid, waits for
# the sandbox credentials and raises the demo project's rate limit so that the load generator
# measures the server and not the limiter.
start_bench_server() {
  local dir=$1
  shift
  rm -rf "$dir" && mkdir -p "$dir"
  PAYMENTS_SYNCHRONOUS=full "$T/payments-server" serve --data-dir "$dir" \
    --listen 127.0.0.1:18080 --operator-listen 127.0.0.1:18081 --cabinet-listen 127.0.0.1:18082 "$@" 2>"$dir/server.log" &
  SERVER=$!
  for _ in $(seq 100); do [ -f "$dir/sandbox-credentials.json" ] && break; sleep 0.1; done
  sleep 0.5
  "$T/bench_setup" --data-dir "$dir" rate-limit >/dev/null
}
