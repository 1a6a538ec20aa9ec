#!/usr/bin/env bash
# Everything the playground's tests need, on a fresh machine or again (idempotent:
# installs already present are skipped), then the tests:
#   1. native unit tests of engage-www (session, examples, curl);
#   2. the wasm bindings under Node (wasm-bindgen-test);
#   3. the page built (build.sh) and driven in Debian's chromium by playwright-core,
#      served as static files and by `engage serve` at /playground/.
# Exits non-zero on the first failure.
set -euo pipefail

WWW="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$WWW")"
export PATH="$HOME/.cargo/bin:$PATH"
step() { printf '\n== %s playground: %s\n' "$(date +%T)" "$*"; }

step "tools"
if ! command -v curl >/dev/null; then
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y curl
fi
source "$ROOT/tests/lib/browser.sh"

step "build (wasm + page)"
bash "$WWW/build.sh"   # also installs the wasm32 target and wasm-bindgen-cli when missing

cd "$ROOT"
step "native unit tests"
cargo test -p engage-www

step "wasm bindings (wasm-bindgen-test under Node)"
CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
  cargo test -p engage-www --target wasm32-unknown-unknown --release

step "engage binary (serves /playground)"
# Built as tests/run.sh's native test build builds it (same packages, so the same
# features): after that build, nothing to do; `cargo build -p engage` rebuilt
# dependencies with another feature set.
cargo test --workspace --exclude engage-edge --exclude engage-www --no-run

step "browser end-to-end"
cd "$WWW"
ENGAGE_BIN="$ROOT/target/debug/engage" node --test e2e/
