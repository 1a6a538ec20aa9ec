#!/usr/bin/env bash
# Builds the playground into www/dist: the core compiled to wasm with its JavaScript
# bindings (dist/pkg) and the static page. The result is plain static files: serve
# them with `engage serve` (at /playground) or from any static host.
# Idempotent: tools already present at the right version are not reinstalled.
set -euo pipefail

WWW="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$WWW")"
DIST="$WWW/dist"
WASM_BINDGEN_VERSION=0.2.130   # must equal the wasm-bindgen pin in Cargo.toml
export PATH="$HOME/.cargo/bin:$PATH"

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  rustup target add wasm32-unknown-unknown
fi
if [ "$(wasm-bindgen --version 2>/dev/null)" != "wasm-bindgen $WASM_BINDGEN_VERSION" ]; then
  # Not --locked: the CLI's own lock file pins a crate version the index may lack.
  cargo install wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION"
fi

cd "$ROOT"
cargo build -p engage-www --target wasm32-unknown-unknown --release
rm -rf "$DIST"
mkdir -p "$DIST"
wasm-bindgen --target web --no-typescript --out-dir "$DIST/pkg" \
  target/wasm32-unknown-unknown/release/engage_www.wasm
cp "$WWW"/static/* "$DIST/"

wasm="$DIST/pkg/engage_www_bg.wasm"
echo "built $DIST: wasm $(wc -c <"$wasm") bytes raw, $(gzip -9 -c "$wasm" | wc -c) bytes gzip -9"
