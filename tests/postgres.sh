#!/usr/bin/env bash
# A throwaway PostgreSQL server for the warehouse-sync tests, sourced by
# tests/run.sh: `start_postgres` installs Debian's postgresql when it is missing,
# starts a server on a temporary data directory on a free loopback port (trust
# login, no fsync: test data only) and exports ENGAGE_TEST_POSTGRES_URL;
# `stop_postgres` stops it and removes the directory.

start_postgres() {
    if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then
        apt-get update
        DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql
    fi
    PG_BIN="$(dirname "$(ls /usr/lib/postgresql/*/bin/pg_ctl | sort -V | tail -n1)")"
    PG_DIR="$(mktemp -d)"
    PG_PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    # PostgreSQL refuses to run as root: as root, run it as the postgres user.
    if [ "$(id -u)" = 0 ]; then
        chown postgres "$PG_DIR"
        PG_AS=(runuser -u postgres --)
    else
        PG_AS=()
    fi
    "${PG_AS[@]}" "$PG_BIN/initdb" -D "$PG_DIR/data" -A trust -U engage --no-sync >/dev/null
    "${PG_AS[@]}" "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/log" -w \
        -o "-p $PG_PORT -k $PG_DIR -c listen_addresses=127.0.0.1 -c fsync=off" start >/dev/null
    "${PG_AS[@]}" "$PG_BIN/createdb" -h 127.0.0.1 -p "$PG_PORT" -U engage warehouse
    export ENGAGE_TEST_POSTGRES_URL="postgres://engage@127.0.0.1:$PG_PORT/warehouse"
    echo "PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}') on 127.0.0.1:$PG_PORT"
}

stop_postgres() {
    if [ -n "${PG_DIR:-}" ] && [ -d "$PG_DIR/data" ]; then
        "${PG_AS[@]}" "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m fast -w stop >/dev/null 2>&1 || true
        rm -rf "$PG_DIR"
    fi
}
