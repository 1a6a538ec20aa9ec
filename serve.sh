#!/usr/bin/env bash
# The README's run command: `bash serve.sh [engage serve options]`.
# 1. Builds the server (`cargo build --release -p engage`) and starts it at once: the
#    API answers as soon as the server is built.
# 2. Beside the running server, builds the browser playground into www/dist when it
#    is missing or was built from other sources (www/build.sh --if-stale: the core
#    compiled to wasm; the first time it also installs the wasm32 target and
#    wasm-bindgen-cli, a few minutes). Meanwhile the landing page says "being built"
#    and the server serves /playground/ as soon as the files are there. Up to date:
#    nothing is built and the playground is served from the start.
# The database and other relative paths are taken from the current directory, as
# with `engage serve` itself. ENGAGE_PLAYGROUND_DIR or --playground-dir serve another
# playground folder (then nothing is built here).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export PATH="$HOME/.cargo/bin:$PATH"

cargo build --release --manifest-path "$ROOT/Cargo.toml" -p engage
# The target directory may be elsewhere (CARGO_TARGET_DIR, cargo config).
TARGET_DIR="$(cargo metadata --manifest-path "$ROOT/Cargo.toml" --format-version 1 --no-deps |
  sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
ENGAGE="${TARGET_DIR:-$ROOT/target}/release/engage"

given_dir=""
for arg in "$@"; do
  case "$arg" in --playground-dir | --playground-dir=*) given_dir=1 ;; esac
done
if [ -z "${ENGAGE_PLAYGROUND_DIR:-}" ] && [ -z "$given_dir" ]; then
  DIST="$ROOT/www/dist"
  export ENGAGE_PLAYGROUND_DIR="$DIST"
  if ! bash "$ROOT/www/build.sh" --check >/dev/null 2>&1; then
    echo "serve.sh: building the playground (the core compiled to wasm) into www/dist beside the" \
      "server; the first time this installs wasm-bindgen-cli and takes a few minutes" >&2
    # The server serves the directory once its index.html is there; until then the
    # landing page says the playground is being built (or that its build failed).
    mkdir -p "$DIST"
    rm -f "$DIST/.build-failed"
    (
      if ! bash "$ROOT/www/build.sh" --if-stale >&2; then
        mkdir -p "$DIST"
        echo "the playground's build failed: see the server's terminal" >"$DIST/.build-failed"
        echo "serve.sh: building the playground failed (see above); the API server runs on" >&2
      fi
    ) &
  fi
fi

exec "$ENGAGE" serve "$@"
