#!/usr/bin/env bash
# The README's run command: `bash serve.sh [engage serve options]`.
# 1. Builds the browser playground into www/dist when it is missing or was built from
#    other sources (www/build.sh --if-stale: the core compiled to wasm; the first time it
#    also installs the wasm32 target and wasm-bindgen-cli). Up to date: about 20 ms.
# 2. Runs `cargo run --release -p engage -- serve` with the arguments given, serving
#    the playground at /playground/ (ENGAGE_PLAYGROUND_DIR or --playground-dir choose
#    another folder). The database and other relative paths are taken from the current
#    directory, as with `engage serve` itself.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export PATH="$HOME/.cargo/bin:$PATH"

if [ ! -f "$ROOT/www/dist/.sources" ]; then
  echo "serve.sh: building the playground (the core compiled to wasm) into www/dist;" \
    "the first time this installs wasm-bindgen-cli and takes a few minutes" >&2
fi
if ! bash "$ROOT/www/build.sh" --if-stale >&2; then
  echo "serve.sh: building the playground failed (see above). The API server alone:" \
    "cargo run --release -p engage -- serve" >&2
  exit 1
fi

export ENGAGE_PLAYGROUND_DIR="${ENGAGE_PLAYGROUND_DIR:-$ROOT/www/dist}"
exec cargo run --release --manifest-path "$ROOT/Cargo.toml" -p engage -- serve "$@"
