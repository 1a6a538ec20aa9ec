#!/usr/bin/env bash
# The SCIM 2.0 compliance tester (scim2-tester, from PyPI) against a fresh native
# server's Users resource. Installs the tester in a virtualenv under target/ (once),
# starts `engage serve` on a new database with a SCIM token made by
# `engage scim-tokens create`, and fails on any check that applies and does not pass.
#
#   bash tests/scim/run.sh        (needs target/debug/engage: cargo build -p engage)
set -euo pipefail
cd "$(dirname "$0")/../.."

log() { printf '[tests/scim/run.sh] %s\n' "$*" >&2; }

BIN="${ENGAGE_BIN:-target/debug/engage}"
[ -x "$BIN" ] || { log "no $BIN: run cargo build -p engage first"; exit 1; }

VENV=target/scim-venv
if ! "$VENV/bin/python" -c 'import scim2_tester' 2>/dev/null; then
    log "installing the SCIM compliance tester into $VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check -r tests/scim/requirements.txt
fi

DIR="$(mktemp -d)"
PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
ORIGIN="https://idp.compliance.test"
SERVER_PID=""
cleanup() {
    [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
    rm -rf "$DIR"
}
trap cleanup EXIT

TOKEN="$("$BIN" scim-tokens create --db "$DIR/engage.db" --origin "$ORIGIN")"
RUST_LOG=warn "$BIN" serve --db "$DIR/engage.db" --listen "127.0.0.1:$PORT" &
SERVER_PID=$!
for _ in $(seq 1 150); do
    python3 -c "import socket; socket.create_connection(('127.0.0.1', $PORT), 1)" 2>/dev/null && break
    sleep 0.1
done

log "scim2-tester against http://127.0.0.1:$PORT/scim/v2"
SCIM_URL="http://127.0.0.1:$PORT/scim/v2" SCIM_TOKEN="$TOKEN" SCIM_ORIGIN="$ORIGIN" \
    "$VENV/bin/python" tests/scim/compliance.py
