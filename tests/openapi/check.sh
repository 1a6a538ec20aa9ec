#!/usr/bin/env bash
# The API description a fresh native server serves at /openapi.json, validated as
# OpenAPI 3.1 by openapi-spec-validator (from PyPI). Installs the validator in a
# virtualenv under target/ (once), starts `engage serve` on a new database, fetches
# the document and fails on any validation error (see check.py for the extra checks).
#
#   bash tests/openapi/check.sh        (needs target/debug/engage: cargo build -p engage)
set -euo pipefail
cd "$(dirname "$0")/../.."

log() { printf '[tests/openapi/check.sh] %s\n' "$*" >&2; }

BIN="${ENGAGE_BIN:-target/debug/engage}"
[ -x "$BIN" ] || { log "no $BIN: run cargo build -p engage first"; exit 1; }

VENV=target/openapi-venv
if ! "$VENV/bin/python" -c 'import openapi_spec_validator' 2>/dev/null; then
    log "installing openapi-spec-validator into $VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check -r tests/openapi/requirements.txt
fi

DIR="$(mktemp -d)"
PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
SERVER_PID=""
cleanup() {
    [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
    rm -rf "$DIR"
}
trap cleanup EXIT

RUST_LOG=warn "$BIN" serve --db "$DIR/engage.db" --listen "127.0.0.1:$PORT" &
SERVER_PID=$!
for _ in $(seq 1 150); do
    python3 -c "import socket; socket.create_connection(('127.0.0.1', $PORT), 1)" 2>/dev/null && break
    sleep 0.1
done

log "openapi-spec-validator against http://127.0.0.1:$PORT/openapi.json"
OPENAPI_URL="http://127.0.0.1:$PORT/openapi.json" "$VENV/bin/python" tests/openapi/check.py
