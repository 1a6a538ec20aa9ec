#!/usr/bin/env bash
# Builds the playground into www/dist: the core compiled to wasm with its JavaScript
# bindings (dist/pkg) and the static page. The result is plain static files: serve
# them with `engage serve` (at /playground) or from any static host.
# Idempotent: tools already present at the right version are not reinstalled.
# `--if-stale` (what serve.sh at the root uses) builds only when www/dist is missing or
# was built from other sources: dist/.sources holds a hash of the inputs listed below.
# `--check` builds nothing: exits 0 when www/dist is up to date, 1 when not.
# The new build is made beside www/dist and put in its place at the end, so a server
# serving www/dist never sees half of it.
set -euo pipefail

WWW="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$WWW")"
DIST="$WWW/dist"
WASM_BINDGEN_VERSION=0.2.130   # must equal the wasm-bindgen pin in Cargo.toml
export PATH="$HOME/.cargo/bin:$PATH"

# Everything the build reads from the repository (files or directories under ROOT).
sources_hash() (
  cd "$ROOT"
  inputs=()
  for p in Cargo.toml Cargo.lock .cargo rust-toolchain rust-toolchain.toml core/Cargo.toml core/src \
    www/Cargo.toml www/src www/static www/build.sh; do
    if [ -e "$p" ]; then inputs+=("$p"); fi
  done
  find "${inputs[@]}" -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1
)
SOURCES="$(sources_hash)"
up_to_date() {
  [ -f "$DIST/index.html" ] && [ -f "$DIST/pkg/engage_www_bg.wasm" ] &&
    [ "$(cat "$DIST/.sources" 2>/dev/null)" = "$SOURCES" ]
}
case "${1:-}" in
  --check) if up_to_date; then exit 0; else exit 1; fi ;;
  --if-stale)
    if up_to_date; then
      echo "playground up to date in $DIST"
      exit 0
    fi
    ;;
esac

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  rustup target add wasm32-unknown-unknown
fi
if [ "$(wasm-bindgen --version 2>/dev/null)" != "wasm-bindgen $WASM_BINDGEN_VERSION" ]; then
  # Not --locked: the CLI's own lock file pins a crate version the index may lack.
  cargo install wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION"
fi

cd "$ROOT"
cargo build -p engage-www --target wasm32-unknown-unknown --release
# The target directory may be elsewhere (CARGO_TARGET_DIR, cargo config).
TARGET_DIR="$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
NEW="$DIST.new"
rm -rf "$NEW"
mkdir -p "$NEW"
wasm-bindgen --target web --no-typescript --out-dir "$NEW/pkg" \
  "${TARGET_DIR:-target}/wasm32-unknown-unknown/release/engage_www.wasm"
cp "$WWW"/static/* "$NEW/"
echo "$SOURCES" >"$NEW/.sources"
rm -rf "$DIST"
mv "$NEW" "$DIST"

wasm="$DIST/pkg/engage_www_bg.wasm"
echo "built $DIST: wasm $(wc -c <"$wasm") bytes raw, $(gzip -9 -c "$wasm" | wc -c) bytes gzip -9"
