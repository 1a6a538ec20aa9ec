# Running the built Worker under `wrangler dev --local` on 127.0.0.1: sourced by
# test.sh (the black-box suite) and bench.sh (the track load), which both start it
# the same way. Expects HERE (this directory, the working directory) and a `log`
# function; sets WRANGLER, ADMIN_TOKEN, and after `start_worker` PID and BASE.

# Quiet and offline: no telemetry, no error reports, no Cloudflare lookups.
export CI=true WRANGLER_SEND_METRICS=false WRANGLER_SEND_ERROR_REPORTS=false CLOUDFLARE_CF_FETCH_ENABLED=false
export PATH="$HOME/.cargo/bin:$PATH"

# worker-build would otherwise download wasm-bindgen and wasm-opt from the internet
# (call after the tools are installed).
use_local_tools() {
    WASM_BINDGEN_BIN="$(command -v wasm-bindgen)"
    export WASM_BINDGEN_BIN
    export WASM_OPT_BIN="$HERE/node_modules/.bin/wasm-opt"
    export ESBUILD_BIN="$HERE/node_modules/.bin/esbuild"
    WRANGLER="$HERE/node_modules/.bin/wrangler"
}

# The admin token enabling /_engage/ routes: .dev.vars is git-ignored; keep an
# existing token, otherwise generate one.
read_admin_token() {
    if [ -f .dev.vars ] && grep -q '^ENGAGE_ADMIN_TOKEN=' .dev.vars; then
        ADMIN_TOKEN="$(sed -n 's/^ENGAGE_ADMIN_TOKEN=//p' .dev.vars | head -n1 | tr -d '"')"
    else
        ADMIN_TOKEN="$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')"
        (umask 077 && printf 'ENGAGE_ADMIN_TOKEN="%s"\n' "$ADMIN_TOKEN" >>.dev.vars)
    fi
}

free_port() {
    node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}

# `start_worker CONFIG STATE LOG PORT INSPECTOR_PORT DB...`: applies the migrations
# to each local D1 database, starts wrangler dev in a process group of its own (so
# stopping it also stops workerd) and waits until it answers; fails with its log
# when it does not within 120 s.
start_worker() {
    local config="$1" state="$2" wrangler_log="$3" port="$4" inspector_port="$5" db
    shift 5
    log "applying D1 migrations locally"
    for db in "$@"; do
        "$WRANGLER" d1 migrations apply "$db" --local --persist-to "$state" -c "$config" >"$state/migrations.log" 2>&1 ||
            { cat "$state/migrations.log" >&2; return 1; }
    done
    log "starting wrangler dev on 127.0.0.1:$port"
    set -m
    "$WRANGLER" dev -c "$config" --local --ip 127.0.0.1 --port "$port" --inspector-ip 127.0.0.1 --inspector-port "$inspector_port" \
        --show-interactive-dev-session=false --persist-to "$state" >"$wrangler_log" 2>&1 </dev/null &
    PID=$!
    set +m
    BASE="http://127.0.0.1:$port"
    for _ in $(seq 1 240); do
        kill -0 "$PID" 2>/dev/null || break
        if node -e 'fetch(process.argv[1]).then(r=>process.exit(r.status>0?0:1),()=>process.exit(1))' "$BASE/" 2>/dev/null; then
            return 0
        fi
        sleep 0.5
    done
    log "wrangler dev did not become ready within 120 s; its log:"
    cat "$wrangler_log" >&2
    return 1
}

# Stops the worker's whole process group, even when wrangler itself is gone: its
# workerd children outlive it.
stop_worker() {
    if [ -n "${PID:-}" ] && kill -0 -- "-$PID" 2>/dev/null; then
        log "stopping wrangler (process group $PID)"
        kill -TERM -- "-$PID" 2>/dev/null || true
        for _ in $(seq 1 50); do kill -0 -- "-$PID" 2>/dev/null || break; sleep 0.2; done
        kill -KILL -- "-$PID" 2>/dev/null || true
    fi
}
