#!/usr/bin/env bash
# The README's walk-through, run as written: every ```sh block marked
# `<!-- readme-tour -->` (Try it, preference centers, SCIM, warehouse syncs), in order,
# in one shell, against a fresh server on a new database, started with the admin token
# the test-kit block names (`dev-admin-token-for-local-testing`). Only two things differ from a reader's
# terminal: the server listens on a free port (the blocks' 127.0.0.1:8080 is rewritten
# to it) and the blocks run in a scratch directory holding a copy of `docs/` (`cargo` is
# given the workspace's manifest; `ENGAGE_DB` points every command at the scratch
# database).
#
#   bash tests/readme/run.sh        (builds the release binary if needed)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
log() { printf '[tests/readme/run.sh] %s\n' "$*" >&2; }

TMP="$(mktemp -d)"
SERVER_PID=""
cleanup() {
    [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT

# The marked blocks, in order.
python3 - "$ROOT/README.md" > "$TMP/tour.sh" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
blocks = re.findall(r"<!-- readme-tour[^>]*-->\n```sh\n(.*?)```", text, re.S)
if len(blocks) < 4:
    sys.exit(f"expected at least 4 marked blocks in README.md, found {len(blocks)}")
print("\n".join(blocks))
PY

PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
export ENGAGE_DB="$TMP/engage.db" ENGAGE_LISTEN="127.0.0.1:$PORT"
cp -r "$ROOT/docs" "$TMP/docs"
# Cargo finds .cargo/config.toml from the directory it runs in, and the blocks run in
# the scratch directory: name it, or cargo builds another server (without its SQLite
# build flags) and rebuilds the dependencies for it.
AT_ROOT=(--manifest-path "$ROOT/Cargo.toml" --config "$ROOT/.cargo/config.toml")
cargo build -q --release -p engage "${AT_ROOT[@]}"
ENGAGE_ADMIN_TOKEN=dev-admin-token-for-local-testing \
    cargo run -q --release -p engage "${AT_ROOT[@]}" -- serve 2> "$TMP/server.log" &
SERVER_PID=$!
for _ in $(seq 1 300); do
    python3 -c "import socket; socket.create_connection(('127.0.0.1', $PORT), 1)" 2>/dev/null && break
    sleep 0.1
done

log "running $(grep -c . "$TMP/tour.sh") lines of README blocks against 127.0.0.1:$PORT"
cd "$TMP"
OUT="$(
    cargo() { command cargo "$1" "${AT_ROOT[@]}" "${@:2}"; }
    set -euo pipefail
    source <(sed "s/127\.0\.0\.1:8080/127.0.0.1:$PORT/g" "$TMP/tour.sh")
)"
printf '%s\n' "$OUT"

# What each block's comments say it prints.
expect() {
    grep -qF -- "$1" <<<"$OUT" || { log "the tour's output lacks: $1"; exit 1; }
}
expect '{"attributes_processed":1,"events_processed":1,"message":"success"}'
expect '"external_id":"user-1"'
expect '"custom_attributes":{"visits":1}'
expect '{"already_loaded":false,"loaded":11}'
expect '"external_id":"ada","first_name":"Ada"'
expect '"removed":'
expect '"liquid_tag":"{{preference_center.${prefs}}}"'
expect "\"preference_center_url\":\"http://127.0.0.1:$PORT/preferences/"
expect '"userName":"ada@example.com"'
expect '"totalResults":1'
expect '"job_status":"success"'
expect '"rows_synced":1'
log "every README walk-through block ran and printed what it says"
