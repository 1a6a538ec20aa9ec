#!/usr/bin/env bash
# The edge host's one entry point: installs what it needs (skipping what is
# present), builds the Worker, checks D1's batch atomicity, runs the black-box
# suite (tests/) against `wrangler dev --local` on 127.0.0.1, and exits with the
# suite's status.
#
#   host-edge/test.sh                 # everything
#   host-edge/test.sh -- track::      # extra arguments go to `cargo test --test api`
#
# Needs: rustup + cargo, Node >= 20.3 with npm, and access to the package registries
# only (nothing is downloaded at build time).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
cd "$HERE"
[ "${1:-}" = "--" ] && shift
TEST_ARGS=("$@")

WORKER_BUILD_VERSION=0.8.7
WASM_BINDGEN_VERSION=0.2.130
WRANGLER_VERSION=4.86.0

log() { printf '[host-edge/test.sh %s] %s\n' "$(date +%T)" "$*" >&2; }
# shellcheck source=local-worker.sh
. "$HERE/local-worker.sh"

# --- Installs (idempotent) ------------------------------------------------------
if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
    log "adding the wasm32-unknown-unknown target"
    rustup target add wasm32-unknown-unknown
fi
if ! worker-build --version 2>/dev/null | grep -q "$WORKER_BUILD_VERSION"; then
    log "installing worker-build $WORKER_BUILD_VERSION"
    cargo install worker-build --version "$WORKER_BUILD_VERSION" --locked
fi
if ! wasm-bindgen --version 2>/dev/null | grep -q "$WASM_BINDGEN_VERSION"; then
    # Without --locked: the CLI's own lock file pins a crate version the index lacks.
    log "installing wasm-bindgen-cli $WASM_BINDGEN_VERSION"
    cargo install wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION"
fi
if ! { [ -x node_modules/.bin/wasm-opt ] && [ -x node_modules/.bin/esbuild ] &&
       node_modules/.bin/wrangler --version 2>/dev/null | grep -q "$WRANGLER_VERSION"; }; then
    log "npm ci (wrangler $WRANGLER_VERSION, binaryen, esbuild)"
    npm ci --no-audit --no-fund
fi

use_local_tools

# --- Build ----------------------------------------------------------------------
log "building the Worker (worker-build --release)"
worker-build --release
wasm="$(ls build/*.wasm build/**/*.wasm 2>/dev/null | head -n1 || true)"
if [ -n "$wasm" ]; then
    raw=$(wc -c <"$wasm")
    gz=$(gzip -9 -c "$wasm" | wc -c)
    js=$(cat build/*.js 2>/dev/null | wc -c)
    log "bundle: $wasm $raw bytes raw, $gz bytes gzip -9; JS glue $js bytes"
fi

# --- D1 semantics the store relies on (rollback of a failed batch, guards) ----
log "checking D1 batch atomicity under the pinned Miniflare"
node --test tests/

# --- Local Worker -----------------------------------------------------------------
STATE="$(mktemp -d "${TMPDIR:-/tmp}/engage-edge-state.XXXXXX")"
WRANGLER_LOG="$STATE/wrangler.log"
PID=""
cleanup() {
    stop_worker
    rm -rf "$STATE"
}
trap cleanup EXIT

read_admin_token
PORT="${ENGAGE_EDGE_PORT:-$(free_port)}"
INSPECTOR_PORT="$(free_port)"

# wrangler dev re-runs the [build] command; the Worker is built already, so it
# runs from a copy of the config without it (same directory: same relative paths).
CONFIG=".wrangler.test.toml"
# It also gets a scratch database for the store conformance suite (src/conformance.rs).
sed '/^\[build\]/,/^command/d' wrangler.toml >"$CONFIG"
cat >>"$CONFIG" <<'TOML'

[[d1_databases]]
binding = "CONFORMANCE_DB"
database_name = "engage-conformance"
database_id = "00000000-0000-0000-0000-00000000c0f0"
migrations_dir = "../migrations"
TOML

start_worker "$CONFIG" "$STATE" "$WRANGLER_LOG" "$PORT" "$INSPECTOR_PORT" engage engage-conformance
log "ready at $BASE; running the store conformance suite on D1"
if ! node -e '
    fetch(process.argv[1] + "/_engage/conformance", { method: "POST", headers: { Authorization: "Bearer " + process.argv[2] } })
        .then(async (r) => { const t = await r.text(); console.error(r.status, t); process.exit(r.status === 200 ? 0 : 1); },
              (e) => { console.error(e); process.exit(1); });' "$BASE" "$ADMIN_TOKEN"; then
    log "store conformance failed on D1; last lines of the wrangler log:"
    tail -n 40 "$WRANGLER_LOG" >&2
    exit 1
fi

log "checking that a burst of /users/track is applied in the background once it ends"
if ! node tests/background_drain.mjs "$BASE" "$ADMIN_TOKEN"; then
    log "the background drain check failed; last lines of the wrangler log:"
    tail -n 40 "$WRANGLER_LOG" >&2
    exit 1
fi

log "running the black-box suite"

status=0
# The packages of tests/run.sh's native test build, so its build is used as it is.
(cd "$ROOT" && ENGAGE_BASE_URL="$BASE" ENGAGE_ADMIN_TOKEN="$ADMIN_TOKEN" \
    cargo test --workspace --exclude engage-edge --exclude engage-www --test api -- "${TEST_ARGS[@]}") || status=$?
if [ "$status" -ne 0 ]; then
    log "suite failed (status $status); last lines of the wrangler log:"
    tail -n 40 "$WRANGLER_LOG" >&2
fi
exit "$status"
