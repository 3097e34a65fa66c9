#!/usr/bin/env bash
# PostgreSQL figures in one run, on one machine: signed creates/s with 1 and with 3
# payments-server nodes over one database (durable commit), GET/s, the same machine's pgbench
# rate for the equivalent transaction (nonce + payment + outbox rows in one transaction,
# durable commit), and SQLite's creates/s for comparison. Prints loadgen's and pgbench's
# result lines; docs/performance.md reads them.
#
#   benches/scripts/postgres.sh [REPS=3]
#   BEFORE=/path/to/other/target/release benches/scripts/postgres.sh [REPS]
#
# With BEFORE, the PostgreSQL creates (one and three nodes) also run with that build's
# payments-server right before this build's, in every rep: a before/after in the same run,
# beside the same pgbench figures (result labels gain a `before-` prefix).
#
# Needs `cargo build --release -p payments-server -p payments-benches --bins` first and
# PostgreSQL 15 binaries (/usr/lib/postgresql/15/bin; run as root: the server runs as user
# postgres). Starts its own PostgreSQL with the defaults (fsync, synchronous_commit and
# full_page_writes on) on port 15432, data under ${PERF_DIR:-/tmp/perf-pg}. Server ports
# 18080-18082 (merchant APIs), 18180-18182 (operator APIs) and 18280-18282 (cabinets).
set -euo pipefail
REPS=${1:-3}
T=${T:-target/release}
BASE=${PERF_DIR:-/tmp/perf-pg}
PG_BIN=/usr/lib/postgresql/15/bin
PGPORT=15432
CONNECTIONS=64
REQUESTS=30000
WARMUP=3000
PIDS=()

cleanup() {
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -d "$BASE/pg/data" ] && runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$BASE/pg/data" -m fast -w stop >/dev/null 2>&1 || true
}
trap cleanup EXIT

rm -rf "$BASE" && mkdir -p "$BASE/pg"
chown postgres "$BASE/pg"
runuser -u postgres -- "$PG_BIN/initdb" -D "$BASE/pg/data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$BASE/pg/data" -l "$BASE/pg/server.log" -w -t 60 \
  -o "-p $PGPORT -k $BASE/pg -c listen_addresses=127.0.0.1 -c max_connections=200" start >/dev/null
PSQL() { "$PG_BIN/psql" -h 127.0.0.1 -p $PGPORT -U postgres -qAt "$@"; }
echo "# PostgreSQL: $(PSQL -d postgres -c 'SHOW server_version') fsync=$(PSQL -d postgres -c 'SHOW fsync') synchronous_commit=$(PSQL -d postgres -c 'SHOW synchronous_commit') full_page_writes=$(PSQL -d postgres -c 'SHOW full_page_writes')"

start_node() { # i, data dir, database url; the server from ${SERVER_T:-$T}
  local i=$1 dir=$2 url=$3
  PAYMENTS_DATABASE_URL="$url" PAYMENTS_DATABASE_POOL_SIZE=${POOL:-16} \
    "${SERVER_T:-$T}/payments-server" serve --data-dir "$dir" \
    --listen "127.0.0.1:1808$i" --operator-listen "127.0.0.1:1818$i" \
    --cabinet-listen "127.0.0.1:1828$i" 2>>"$dir/server-$i.log" &
  PIDS+=($!)
  for _ in $(seq 200); do
    curl -fs "http://127.0.0.1:1808$i/readyz" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "node $i did not start" >&2; exit 1
}
stop_nodes() {
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  PIDS=()
}
fresh_db() { # name -> url; a new database, migrated, its demo project unthrottled after start
  PSQL -d postgres -c "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1"
  echo "postgres://postgres@127.0.0.1:$PGPORT/$1"
}
unthrottle() { # data dir, url
  local id
  id=$(python3 -c 'import json,sys;print(json.load(open(sys.argv[1]))["project_id"])' "$1/sandbox-credentials.json")
  "${SERVER_T:-$T}/payments-server" project set "$id" --rate-limit 1000000/1000000 --data-dir "$1" --database-url "$2" >/dev/null
}
load() { echo "load $(cut -d' ' -f1 /proc/loadavg)"; }

# The pgbench transactions (benches/scripts/pgbench/): the rows of one create in one
# transaction, and the same writes as the server's create (two commits).
PGB=$(cd "$(dirname "$0")" && pwd)/pgbench
cp "$PGB/one-transaction.sql" "$BASE/create.sql"
cp "$PGB/as-the-server.sql" "$BASE/create2.sql"

# One node (creates, then GETs), then three nodes on one database (creates, one load
# generator each with a third of the connections); the server from $SERVER_T, labels
# prefixed with $2.
pg_nodes() { # rep, label prefix
  local rep=$1 P=$2 D URL LOADS i p
  # One node.
  D=$BASE/one; rm -rf "$D" && mkdir -p "$D"
  URL=$(fresh_db bench_one)
  start_node 0 "$D" "$URL"; unthrottle "$D" "$URL"
  echo "# rep $rep ${P}pg 1 node create, $(load)"
  "$T/loadgen" --credentials "$D/sandbox-credentials.json" --url http://127.0.0.1:18080 \
    --mode create --connections $CONNECTIONS --requests $REQUESTS --warmup $WARMUP \
    --label "${P}pg1-create-$rep" | grep RESULT
  echo "# rep $rep ${P}pg 1 node get, $(load)"
  "$T/loadgen" --credentials "$D/sandbox-credentials.json" --url http://127.0.0.1:18080 \
    --mode get --connections $CONNECTIONS --requests 100000 --warmup 10000 \
    --label "${P}pg1-get-$rep" | grep RESULT
  stop_nodes

  # Three nodes on one database, one load generator each (a third of the connections).
  D=$BASE/three; rm -rf "$D" && mkdir -p "$D"
  URL=$(fresh_db bench_three)
  start_node 0 "$D" "$URL"; start_node 1 "$D" "$URL"; start_node 2 "$D" "$URL"
  unthrottle "$D" "$URL"
  echo "# rep $rep ${P}pg 3 nodes create, $(load)"
  LOADS=()
  for i in 0 1 2; do
    "$T/loadgen" --credentials "$D/sandbox-credentials.json" --url "http://127.0.0.1:1808$i" \
      --mode create --connections $((CONNECTIONS / 3)) --requests $((REQUESTS / 3)) \
      --warmup $((WARMUP / 3)) --label "${P}pg3-create-$rep-node$i" >"$D/loadgen-$i.out" &
    LOADS+=($!)
  done
  for p in "${LOADS[@]}"; do wait "$p"; done
  grep -h RESULT "$D"/loadgen-*.out
  stop_nodes
}

for rep in $(seq "$REPS"); do
  # pgbench: the ceiling of the database for this transaction, on this machine.
  URL=$(fresh_db bench_pgbench)
  "$T/payments-server" migrate --database-url "$URL" >/dev/null
  for c in 16 $CONNECTIONS; do
    echo "# rep $rep pgbench $c clients, $(load)"
    "$PG_BIN/pgbench" -h 127.0.0.1 -p $PGPORT -U postgres -n -M prepared -c "$c" -j 2 -T 10 \
      -f "$BASE/create.sql" bench_pgbench 2>&1 | grep -E "^tps" | sed "s/^/PGBENCH one-transaction c=$c rep=$rep /"
    "$PG_BIN/pgbench" -h 127.0.0.1 -p $PGPORT -U postgres -n -M prepared -c "$c" -j 2 -T 10 \
      -f "$BASE/create2.sql" bench_pgbench 2>&1 | grep -E "^tps" | sed "s/^/PGBENCH as-the-server c=$c rep=$rep /"
  done

  for build in ${BEFORE:+before} after; do
    if [ "$build" = before ]; then SERVER_T=$BEFORE; P=before-; else SERVER_T=$T; P=; fi
    pg_nodes "$rep" "$P"
  done
  SERVER_T=$T

  # SQLite, the same load, the same run.
  D=$BASE/sqlite; rm -rf "$D" && mkdir -p "$D"
  PAYMENTS_SYNCHRONOUS=full "$T/payments-server" serve --data-dir "$D" \
    --listen 127.0.0.1:18080 --operator-listen 127.0.0.1:18180 2>>"$D/server.log" &
  PIDS+=($!)
  for _ in $(seq 100); do curl -fs http://127.0.0.1:18080/readyz >/dev/null 2>&1 && break; sleep 0.1; done
  "$T/bench_setup" --data-dir "$D" rate-limit >/dev/null
  echo "# rep $rep sqlite create, $(load)"
  "$T/loadgen" --credentials "$D/sandbox-credentials.json" --mode create \
    --connections $CONNECTIONS --requests $REQUESTS --warmup $WARMUP \
    --label "sqlite-create-$rep" | grep RESULT
  echo "# rep $rep sqlite get, $(load)"
  "$T/loadgen" --credentials "$D/sandbox-credentials.json" --mode get \
    --connections $CONNECTIONS --requests 100000 --warmup 10000 --label "sqlite-get-$rep" | grep RESULT
  stop_nodes
done
