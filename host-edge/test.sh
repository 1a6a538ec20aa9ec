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

log() { printf '[host-edge/test.sh] %s\n' "$*" >&2; }

# Quiet and offline: no telemetry, no error reports, no Cloudflare lookups.
export CI=true WRANGLER_SEND_METRICS=false WRANGLER_SEND_ERROR_REPORTS=false CLOUDFLARE_CF_FETCH_ENABLED=false
export PATH="$HOME/.cargo/bin:$PATH"

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

# worker-build would otherwise download wasm-bindgen and wasm-opt from the internet.
WASM_BINDGEN_BIN="$(command -v wasm-bindgen)"
export WASM_BINDGEN_BIN
export WASM_OPT_BIN="$HERE/node_modules/.bin/wasm-opt"
export ESBUILD_BIN="$HERE/node_modules/.bin/esbuild"
WRANGLER="$HERE/node_modules/.bin/wrangler"

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
    if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
        log "stopping wrangler (process group $PID)"
        kill -TERM -- "-$PID" 2>/dev/null || true
        for _ in $(seq 1 50); do kill -0 "$PID" 2>/dev/null || break; sleep 0.2; done
        kill -KILL -- "-$PID" 2>/dev/null || true
    fi
    rm -rf "$STATE"
}
trap cleanup EXIT

# The admin token enabling /_engage/ routes: .dev.vars is git-ignored; keep an
# existing token, otherwise generate one.
if [ -f .dev.vars ] && grep -q '^ENGAGE_ADMIN_TOKEN=' .dev.vars; then
    ADMIN_TOKEN="$(sed -n 's/^ENGAGE_ADMIN_TOKEN=//p' .dev.vars | head -n1 | tr -d '"')"
else
    ADMIN_TOKEN="$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')"
    umask 077
    printf 'ENGAGE_ADMIN_TOKEN="%s"\n' "$ADMIN_TOKEN" >>.dev.vars
fi

free_port() {
    node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}
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

log "applying D1 migrations locally"
for db in engage engage-conformance; do
    "$WRANGLER" d1 migrations apply "$db" --local --persist-to "$STATE" -c "$CONFIG" >"$STATE/migrations.log" 2>&1 ||
        { cat "$STATE/migrations.log" >&2; exit 1; }
done

log "starting wrangler dev on 127.0.0.1:$PORT"
set -m # own process group, so stopping it also stops workerd
"$WRANGLER" dev -c "$CONFIG" --local --ip 127.0.0.1 --port "$PORT" --inspector-ip 127.0.0.1 --inspector-port "$INSPECTOR_PORT" \
    --show-interactive-dev-session=false --persist-to "$STATE" >"$WRANGLER_LOG" 2>&1 </dev/null &
PID=$!
set +m

BASE="http://127.0.0.1:$PORT"
ready=""
for _ in $(seq 1 240); do
    if ! kill -0 "$PID" 2>/dev/null; then break; fi
    if node -e 'fetch(process.argv[1]).then(r=>process.exit(r.status>0?0:1),()=>process.exit(1))' "$BASE/" 2>/dev/null; then
        ready=1
        break
    fi
    sleep 0.5
done
if [ -z "$ready" ]; then
    log "wrangler dev did not become ready within 120 s; its log:"
    cat "$WRANGLER_LOG" >&2
    exit 1
fi
log "ready at $BASE; running the store conformance suite on D1"
if ! node -e '
    fetch(process.argv[1] + "/_engage/conformance", { method: "POST", headers: { Authorization: "Bearer " + process.argv[2] } })
        .then(async (r) => { const t = await r.text(); console.error(r.status, t); process.exit(r.status === 200 ? 0 : 1); },
              (e) => { console.error(e); process.exit(1); });' "$BASE" "$ADMIN_TOKEN"; then
    log "store conformance failed on D1; last lines of the wrangler log:"
    tail -n 40 "$WRANGLER_LOG" >&2
    exit 1
fi

log "running the black-box suite"

status=0
(cd "$ROOT" && ENGAGE_BASE_URL="$BASE" ENGAGE_ADMIN_TOKEN="$ADMIN_TOKEN" \
    cargo test -p engage-tests --test api -- "${TEST_ARGS[@]}") || status=$?
if [ "$status" -ne 0 ]; then
    log "suite failed (status $status); last lines of the wrangler log:"
    tail -n 40 "$WRANGLER_LOG" >&2
fi
exit "$status"
