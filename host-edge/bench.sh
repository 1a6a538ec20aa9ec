#!/usr/bin/env bash
# Track load on the edge host under `wrangler dev --local` (local D1 and KV):
# builds the Worker, starts it on a free port with the API's rate limits off,
# creates a key, offers full /users/track batches (75 attributes + 75 events + 75
# purchases, 225 objects) with the native host's benchmark in BENCH_TARGET mode
# (host-native/benches/track_load.rs), then watches the backlog drain through the
# operator route GET /_engage/queue. Prints one line per figure:
#
#   edge warm-up 200/s for 5 s: p99 Z ms            the same load on a fresh Worker first
#   edge track 200/s: acked A/B p50 X ms p99 Y ms    the load's acknowledgements
#   edge apply objects/s: N                          backlog applied once the load stops
#
# Knobs (environment): BENCH_RATE (200 requests/s), BENCH_SECONDS (30),
# BENCH_WARMUP_SECONDS (5: the same load first, not counted; 0 for none),
# BENCH_PROFILES (10000: users the objects pick from at random; once the first
# jobs are applied nearly every object updates an existing profile), BENCH_DRAIN_SECONDS
# (60: how long the drain is watched), BENCH_CONNECTIONS (64), BENCH_APPLY_BATCH
# (queued jobs applied per commit: the Worker's ENGAGE_APPLY_BATCH; its default
# when unset). BENCH_BARE=1 loads a bare Worker instead, the floor of the figure:
# plain JavaScript that parses each body with JSON.parse, inserts it into a local D1
# table and answers 201 (no wasm, no key, no ledger, nothing applied). It prints
# "edge bare track ..." and watches no drain.
#
# Needs the tools host-edge/test.sh installs (run it once first).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
cd "$HERE"

RATE="${BENCH_RATE:-200}"
SECONDS_OF_LOAD="${BENCH_SECONDS:-30}"
PROFILES="${BENCH_PROFILES:-10000}"
DRAIN_SECONDS="${BENCH_DRAIN_SECONDS:-60}"
WARMUP_SECONDS="${BENCH_WARMUP_SECONDS:-5}"

log() { printf '[host-edge/bench.sh] %s\n' "$*" >&2; }
# shellcheck source=local-worker.sh
. "$HERE/local-worker.sh"

for tool in worker-build wasm-bindgen node_modules/.bin/wrangler node_modules/.bin/wasm-opt node_modules/.bin/esbuild; do
    if ! command -v "$tool" >/dev/null; then
        log "$tool is missing: run host-edge/test.sh once (it installs the edge toolchain)"
        exit 1
    fi
done
use_local_tools

BARE="${BENCH_BARE:-0}"
# Both builds first, so that no compilation runs beside the load.
if [ "$BARE" != 1 ]; then
    log "building the Worker (worker-build --release)"
    worker-build --release >/dev/null
fi
log "building the load generator"
(cd "$ROOT" && cargo bench -q -p engage --bench track_load --no-run)

STATE="$(mktemp -d "${TMPDIR:-/tmp}/engage-edge-bench.XXXXXX")"
CONFIG=".wrangler.bench.toml"
PID=""
DEVTOOLS=""
cleanup() {
    local status=$?
    if [ "$status" -ne 0 ] && [ -f "$STATE/wrangler.log" ]; then
        log "failed (status $status); last lines of the wrangler log:"
        tail -n 40 "$STATE/wrangler.log" >&2
    fi
    if [ -n "$DEVTOOLS" ]; then kill "$DEVTOOLS" 2>/dev/null || true; fi
    stop_worker
    rm -rf "$STATE" "$HERE/$CONFIG"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

read_admin_token
PORT="$(free_port)"
INSPECTOR_PORT="$(free_port)"

if [ "$BARE" = 1 ]; then
    # The bare Worker: its script, a table for the bodies, and a configuration of
    # its own beside them (paths in it are relative to it).
    mkdir -p "$STATE/bare/migrations"
    cat >"$STATE/bare/worker.js" <<'JS'
export default {
  async fetch(request, env) {
    if (request.method !== "POST") return new Response("{}");
    const text = await request.text();
    try { JSON.parse(text); } catch { return new Response('{"message":"bad json"}', { status: 400 }); }
    await env.DB.prepare("INSERT INTO bodies (body) VALUES (?1)").bind(text).run();
    return new Response('{"message":"success"}', { status: 201, headers: { "Content-Type": "application/json" } });
  },
};
JS
    echo 'CREATE TABLE bodies (seq INTEGER PRIMARY KEY, body TEXT NOT NULL);' >"$STATE/bare/migrations/0001_bodies.sql"
    cat >"$STATE/bare/wrangler.toml" <<'TOML'
name = "engage-bare"
main = "worker.js"
compatibility_date = "2026-04-01"
send_metrics = false

[[d1_databases]]
binding = "DB"
database_name = "bare"
database_id = "00000000-0000-0000-0000-000000000000"
migrations_dir = "migrations"
TOML
    start_worker "$STATE/bare/wrangler.toml" "$STATE" "$STATE/wrangler.log" "$PORT" "$INSPECTOR_PORT" bare
else
    # The Worker is built already (wrangler dev would rebuild it), and a load test
    # must not meet the API's rate limits.
    sed -e '/^\[build\]/,/^command/d' -e 's/^ENGAGE_RATE_LIMITS = .*/ENGAGE_RATE_LIMITS = "off"/' wrangler.toml >"$CONFIG"
    if [ -n "${BENCH_APPLY_BATCH:-}" ]; then
        sed -i "s/^ENGAGE_RATE_LIMITS = .*/&\nENGAGE_APPLY_BATCH = \"$BENCH_APPLY_BATCH\"/" "$CONFIG"
    fi
    start_worker "$CONFIG" "$STATE" "$STATE/wrangler.log" "$PORT" "$INSPECTOR_PORT" engage
fi

# Requests to the running Worker (node's fetch: the same client test.sh uses).
# `api METHOD PATH [BODY]` prints the response body, and fails unless it is a 2xx.
api() {
    node -e '
        const [base, token, method, path, body] = process.argv.slice(1);
        fetch(base + path, { method, body: body || undefined,
                             headers: { Authorization: "Bearer " + token, "Content-Type": "application/json" } })
            .then(async (r) => { const t = await r.text(); console.log(t); process.exit(r.ok ? 0 : 1); },
                  (e) => { console.error(String(e)); process.exit(1); });' "$BASE" "$ADMIN_TOKEN" "$@"
}

# wrangler's inspector proxy asks the runtime for every network event (each D1
# query, with its response body) and keeps them until DevTools attaches: under
# this load its workerd reached V8's heap limit and aborted within minutes. A
# client attached for the run turns the Network domain off.
node -e '
    const WebSocket = globalThis.WebSocket ?? require(require.resolve("ws", { paths: [require.resolve("miniflare")] }));
    const devtools = new WebSocket(process.argv[1]);
    devtools.addEventListener("open", () => devtools.send(JSON.stringify({ id: 1, method: "Network.disable" })));
    devtools.addEventListener("close", () => process.exit(0));' "ws://127.0.0.1:$INSPECTOR_PORT/ws" &
DEVTOOLS=$!
if [ "$BARE" = 1 ]; then
    KEY=bare # the bare Worker reads no key
else
    KEY="$(api POST /_engage/keys '{"workspace": "bench"}' | node -e 'process.stdin.on("data", (d) => console.log(JSON.parse(d).key))')"
fi

# `offer SECONDS OUT`: the load for that long, its report in OUT.
offer() {
    (cd "$ROOT" && BENCH_TARGET="$BASE" BENCH_KEY="$KEY" BENCH_RATE="$RATE" BENCH_SECONDS="$1" \
        BENCH_PROFILES="$PROFILES" cargo bench -q -p engage --bench track_load) | tee "$2" >&2
}

# A fresh Worker runs its first seconds of wasm in V8's baseline compiler, until the
# optimizing one has compiled the hot functions in the background: acknowledgement
# p50 was 220-320 ms in the first second of load, ~8 ms from the third. The figure
# is the warm Worker's; the warm-up's own latencies are printed as well.
if [ "$WARMUP_SECONDS" -gt 0 ]; then
    log "warming up: $RATE full batches/s for $WARMUP_SECONDS s"
    offer "$WARMUP_SECONDS" "$STATE/warmup.txt"
    warm_p99="$(sed -n 's/.*latency from scheduled send: .* p99 \([0-9.]*\) ms.*/\1/p' "$STATE/warmup.txt")"
    echo "edge warm-up $RATE/s for $WARMUP_SECONDS s: p99 $warm_p99 ms"
fi
log "offering $RATE full batches/s for $SECONDS_OF_LOAD s ($PROFILES profiles)"
offer "$SECONDS_OF_LOAD" "$STATE/load.txt"

# "  acknowledged: 5994/6000 (6 failed) in 30.0s = 200 req/s" and
# "  latency from scheduled send: p50 3.1 ms, p90 ..., p99 9.8 ms, max ..."
acked="$(sed -n 's/^ *acknowledged: \([0-9]*\/[0-9]*\).*/\1/p' "$STATE/load.txt")"
p50="$(sed -n 's/.*latency from scheduled send: p50 \([0-9.]*\) ms.*/\1/p' "$STATE/load.txt")"
p99="$(sed -n 's/.*latency from scheduled send: .* p99 \([0-9.]*\) ms.*/\1/p' "$STATE/load.txt")"
if [ "$BARE" = 1 ]; then
    echo "edge bare track $RATE/s: acked $acked p50 $p50 ms p99 $p99 ms"
    exit 0
fi
echo "edge track $RATE/s: acked $acked p50 $p50 ms p99 $p99 ms"

# The backlog once the load has stopped: every acknowledged request is one queued
# job of 225 objects, and nothing is queued any more, so the fall of `pending`
# over time is the apply rate.
log "watching the backlog drain for up to $DRAIN_SECONDS s"
node -e '
    const [base, token, seconds] = process.argv.slice(1);
    const pending = async () => {
        const r = await fetch(base + "/_engage/queue", { headers: { Authorization: "Bearer " + token } });
        if (!r.ok) throw new Error("GET /_engage/queue: " + r.status);
        return (await r.json()).pending;
    };
    (async () => {
        const first = { at: Date.now(), pending: await pending() };
        let last = first;
        while (last.pending > 0 && last.at - first.at < seconds * 1000) {
            await new Promise((r) => setTimeout(r, 1000));
            last = { at: Date.now(), pending: await pending() };
        }
        if (first.pending === 0) {
            console.log("edge apply objects/s: n/a (the applier kept up: no backlog when the load stopped; raise BENCH_RATE)");
            return;
        }
        const jobs = first.pending - last.pending;
        const secs = (last.at - first.at) / 1000;
        console.error(`backlog: ${first.pending} jobs pending when the load stopped; ${jobs} applied in ${secs.toFixed(1)} s`);
        console.log(`edge apply objects/s: ${Math.round((jobs * 225) / secs)}`);
    })().catch((e) => { console.error(String(e)); process.exit(1); });' "$BASE" "$ADMIN_TOKEN" "$DRAIN_SECONDS"
