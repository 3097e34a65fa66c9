# Sourced by .ci/run: starts a throwaway PostgreSQL 15 for the tests when DATABASE_URL is not
# set, exports DATABASE_URL, and stops it (removing its files) when the sourcing shell exits.
# PostgreSQL refuses to run as root, so the server runs as the system user `postgres`
# (created if missing); no Docker. Installs Debian's postgresql-15 when the binaries are
# missing.
#
# PG_TEST_FAST=1 (the default here) starts it with fsync, synchronous_commit and
# full_page_writes off: the tests do not measure durability, and it makes them fast.
# The benchmark scripts start their own server with the defaults.

pg_ci_start() {
    local pg_bin=/usr/lib/postgresql/15/bin
    if [ ! -x "$pg_bin/initdb" ]; then
        echo "== installing postgresql-15"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15 >/dev/null
    fi
    id -u postgres >/dev/null 2>&1 ||
        useradd --system --no-create-home --shell /usr/sbin/nologin postgres
    PG_CI_DIR=$(mktemp -d /tmp/pgci.XXXXXX)
    chown postgres "$PG_CI_DIR"
    local port
    port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
    local fast=""
    if [ "${PG_TEST_FAST:-1}" = "1" ]; then
        fast="-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    fi
    runuser -u postgres -- "$pg_bin/initdb" -D "$PG_CI_DIR/data" -U postgres --auth=trust \
        -E UTF8 --locale=C.UTF-8 >/dev/null
    runuser -u postgres -- "$pg_bin/pg_ctl" -D "$PG_CI_DIR/data" -l "$PG_CI_DIR/server.log" \
        -w -t 60 -o "-p $port -k $PG_CI_DIR -c listen_addresses=127.0.0.1 -c max_connections=300 $fast" \
        start >/dev/null
    runuser -u postgres -- "$pg_bin/createdb" -h "$PG_CI_DIR" -p "$port" -U postgres payments_test
    export DATABASE_URL="postgres://postgres@127.0.0.1:$port/payments_test"
    # For the multi-node test's database restart: the server's control program and data dir.
    export PAYMENTS_TEST_PG_CTL="$pg_bin/pg_ctl"
    export PAYMENTS_TEST_PG_DATA="$PG_CI_DIR/data"
    echo "== PostgreSQL 15 on 127.0.0.1:$port (data in $PG_CI_DIR)"
    trap pg_ci_stop EXIT
}

pg_ci_stop() {
    if [ -n "${PG_CI_DIR:-}" ] && [ -d "$PG_CI_DIR/data" ]; then
        runuser -u postgres -- /usr/lib/postgresql/15/bin/pg_ctl -D "$PG_CI_DIR/data" -m fast \
            -w stop >/dev/null 2>&1 || true
        rm -rf "$PG_CI_DIR"
    fi
}
