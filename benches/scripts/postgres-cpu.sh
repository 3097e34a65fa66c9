#!/usr/bin/env bash
# Where the machine's CPU goes per PostgreSQL create, beside pgbench's one-transaction (the
# nonce, the payment and an outbox row in one transaction), in one run: CPU of PostgreSQL's
# backends (every postgres process, and the postmaster's reaped children: pgbench's
# connections exit), of payments-server (one node, pool 16) and of the load generator /
# pgbench client, each divided by the creates or transactions. PostgreSQL 15 with the
# defaults (fsync, synchronous_commit on), 64 connections, 30,000 signed creates per rep.
#
#   benches/scripts/postgres-cpu.sh [REPS=2]
#   PIN=1 benches/scripts/postgres-cpu.sh [REPS]
#
# PIN=1 gives PostgreSQL a core of its own (taskset: the server and its backends on the last
# CPU; payments-server, the load generator and the pgbench client on the others), as when the
# database runs on a machine of its own: then both rates are the database's, on the same core.
#
# Needs `cargo build --release -p payments-server -p payments-benches --bins`, GNU time
# (/usr/bin/time) and PostgreSQL 15 binaries; run as root (the database runs as user
# postgres). Port 15433 for PostgreSQL, 18080/18180/18280 for the server; data under
# ${PERF_DIR:-/tmp/perf-pgcpu}.
set -euo pipefail
REPS=${1:-2}
DB_CPU=""; APP_CPU=""
if [ "${PIN:-0}" = "1" ]; then
  last=$(( $(nproc) - 1 ))
  DB_CPU="taskset -c $last"; APP_CPU="taskset -c 0-$(( last - 1 ))"
  [ "$last" -ge 1 ] || { echo "PIN=1 needs 2 CPUs or more" >&2; exit 1; }
fi
T=${T:-target/release}
BASE=${PERF_DIR:-/tmp/perf-pgcpu}; PG_BIN=/usr/lib/postgresql/15/bin; PGPORT=15433
rm -rf $BASE; mkdir -p $BASE/pg; chown postgres $BASE/pg
runuser -u postgres -- $PG_BIN/initdb -D $BASE/pg/data -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
$DB_CPU runuser -u postgres -- $PG_BIN/pg_ctl -D $BASE/pg/data -l $BASE/pg/server.log -w -t 60 -o "-p $PGPORT -k $BASE/pg -c listen_addresses=127.0.0.1 -c max_connections=200" start >/dev/null
SERVER=
trap 'kill ${SERVER:-} 2>/dev/null || true; runuser -u postgres -- $PG_BIN/pg_ctl -D $BASE/pg/data -m fast -w stop >/dev/null' EXIT
PSQL() { $PG_BIN/psql -h 127.0.0.1 -p $PGPORT -U postgres -qAt "$@"; }
TICK=$(getconf CLK_TCK)
pgcpu() { local s=0 pm; pm=$(head -1 $BASE/pg/data/postmaster.pid); for p in $(pgrep -u postgres postgres); do s=$(awk -v s=$s '{print s+$14+$15}' /proc/$p/stat 2>/dev/null || echo $s); done; awk -v s=$s '{print s+$16+$17}' /proc/$pm/stat; }
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
PSQL -d postgres -c "CREATE DATABASE b"
URL="postgres://postgres@127.0.0.1:$PGPORT/b"
D=$BASE/node; mkdir -p $D
PAYMENTS_DATABASE_URL=$URL $APP_CPU $T/payments-server serve --data-dir $D --listen 127.0.0.1:18080 --operator-listen 127.0.0.1:18180 --cabinet-listen 127.0.0.1:18280 2>$D/server.log &
SERVER=$!
for i in $(seq 200); do curl -fs http://127.0.0.1:18080/readyz >/dev/null 2>&1 && break; sleep 0.1; done
id=$(python3 -c 'import json,sys;print(json.load(open(sys.argv[1]))["project_id"])' $D/sandbox-credentials.json)
$T/payments-server project set "$id" --rate-limit 1000000/1000000 --data-dir $D --database-url $URL >/dev/null
for rep in $(seq "$REPS"); do
  # pgbench one-transaction, its CPU: backends + pgbench client
  cp "$(dirname "$0")/pgbench/one-transaction.sql" "$BASE/create.sql"
  p0=$(pgcpu); t0=$(awk '{print $14+$15+$16+$17}' /proc/self/stat)
  out=$( { /usr/bin/time -f "CLIENT %U %S" $APP_CPU $PG_BIN/pgbench -h 127.0.0.1 -p $PGPORT -U postgres -n -M prepared -c 16 -j 2 -T 10 -f $BASE/create.sql b; } 2>&1 )
  p1=$(pgcpu)
  tx=$(echo "$out" | grep -oE "number of transactions actually processed: [0-9]+" | grep -oE "[0-9]+$")
  tps=$(echo "$out" | grep -oE "^tps = [0-9.]+" | grep -oE "[0-9.]+")
  cl=$(echo "$out" | grep CLIENT | awk '{print $2+$3}')
  echo "rep $rep pgbench: $tps tps; backends $(python3 -c "print(round(($p1-$p0)/$TICK/$tx*1e6,1))") us/tx; client $(python3 -c "print(round($cl/$tx*1e6,1))") us/tx"
  # creates
  s0=$(cpu $SERVER); p0=$(pgcpu)
  out=$( { /usr/bin/time -f "CLIENT %U %S" $APP_CPU $T/loadgen --credentials $D/sandbox-credentials.json --url http://127.0.0.1:18080 --mode create --connections 64 --requests 30000 --warmup 0 --label c; } 2>&1 )
  s1=$(cpu $SERVER); p1=$(pgcpu)
  rate=$(echo "$out" | grep RESULT | grep -oE '"ok_throughput":[0-9.]+' | cut -d: -f2)
  cl=$(echo "$out" | grep CLIENT | awk '{print $2+$3}')
  echo "rep $rep creates: $rate/s; server $(python3 -c "print(round(($s1-$s0)/$TICK/30000*1e6,1))") us; backends $(python3 -c "print(round(($p1-$p0)/$TICK/30000*1e6,1))") us; loadgen $(python3 -c "print(round($cl/30000*1e6,1))") us (incl. pre-signing)"
done
