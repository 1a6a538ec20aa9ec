# Shared by the Python checkers of a running native server (tests/scim/run.sh,
# tests/openapi/check.sh): a virtualenv with the checker's requirements, and a fresh
# `engage serve` on a new database. Source it from the repository root, after
# setting TOOL (the caller's name for log lines).

log() { printf '[%s] %s\n' "$TOOL" "$*" >&2; }

BIN="${ENGAGE_BIN:-target/debug/engage}"
[ -x "$BIN" ] || { log "no $BIN: run cargo build -p engage first"; exit 1; }

# venv_with DIR MODULE REQUIREMENTS: a virtualenv at DIR where MODULE imports.
venv_with() {
    if ! "$1/bin/python" -c "import $2" 2>/dev/null; then
        log "installing $3 into $1"
        python3 -m venv "$1"
        "$1/bin/pip" install --quiet --disable-pip-version-check -r "$3"
    fi
}

DIR="$(mktemp -d)"
PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
SERVER_PID=""
cleanup() {
    [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
    rm -rf "$DIR"
}
trap cleanup EXIT

# start_server: `engage serve` on $DIR/engage.db at 127.0.0.1:$PORT, once it accepts.
start_server() {
    RUST_LOG=warn "$BIN" serve --db "$DIR/engage.db" --listen "127.0.0.1:$PORT" &
    SERVER_PID=$!
    for _ in $(seq 1 150); do
        python3 -c "import socket; socket.create_connection(('127.0.0.1', $PORT), 1)" 2>/dev/null && return 0
        sleep 0.1
    done
    log "the server did not start"
    return 1
}
