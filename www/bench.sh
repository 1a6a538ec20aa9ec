#!/usr/bin/env bash
# Time per request of the playground in Chromium (performance issue 20): builds the page
# when its sources changed, then bench.mjs serves www/dist on 127.0.0.1 and times
# /users/track and /users/export/ids through the page's wasm engine. Prints tables;
# asserts nothing about speed (fails only when a request is not answered 2xx).
# Knobs (environment, passed to bench.mjs): BENCH_SMALL, BENCH_FULL, BENCH_EXPORT,
# BENCH_WARMUP, CHROMIUM.
set -euo pipefail

WWW="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$WWW")"
export PATH="$HOME/.cargo/bin:$PATH"
# The machines are small and shared: one compile job at a time.
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}"

# Chromium and playwright-core, as the e2e test gets them (installed only when missing).
source "$ROOT/tests/lib/browser.sh"
# The same release wasm the page ships; skipped when www/dist matches its sources.
bash "$WWW/build.sh" --if-stale

cd "$WWW"
node bench.mjs
