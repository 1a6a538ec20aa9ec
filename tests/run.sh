#!/usr/bin/env bash
# Runs every test of Engage on a fresh machine: installs what it needs first.
# Usage: bash tests/run.sh            (everything)
#        ENGAGE_SKIP_EDGE=1 ENGAGE_SKIP_WWW=1 ENGAGE_SKIP_RELEASE=1 bash tests/run.sh   (Rust only)
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s %s\n' "$(date +%T)" "$*"; }

step "toolchain: wasm32 target, rustfmt, clippy"
rustup target add wasm32-unknown-unknown >/dev/null
rustup component add rustfmt clippy >/dev/null 2>&1 || true

step "style and structure: rustfmt, file sizes, import graphs (modules and folders), docs without work periods, the parity report up to date"
cargo fmt --all --check
bash tests/checks/sizes.sh
python3 tests/checks/imports.py
python3 tests/checks/imports.py host-native/src
python3 tests/checks/docs.py
python3 tests/checks/parity.py --check

step "clippy (native and wasm32), warnings are errors"
cargo clippy --workspace --all-targets -- -D warnings
# --all-targets leaves out tests that `cargo test` does not run (the reliability tests).
cargo clippy --workspace --test reliability -- -D warnings
cargo clippy -p engage-core -p engage-www -p engage-edge --target wasm32-unknown-unknown -- -D warnings

step "core builds for wasm32-unknown-unknown (no I/O, no OS dependencies)"
cargo build -p engage-core --target wasm32-unknown-unknown --release

step "PostgreSQL for the warehouse-sync tests (a throwaway server on loopback)"
source tests/postgres.sh
trap stop_postgres EXIT
start_postgres

# Every native test build selects the same packages, so that cargo unifies the same
# features and builds each dependency once (`-p engage-tests` alone rebuilt a third of
# them). The test build also builds target/debug/engage, which the suites run.
# www/test.sh and host-edge/test.sh name the same packages: change all three together.
NATIVE=(--workspace --exclude engage-edge --exclude engage-www)

step "unit tests (core, host-native) and the black-box suite against the native host"
cargo test "${NATIVE[@]}"

step "the black-box suite again, against a native server on PostgreSQL"
psql "$ENGAGE_TEST_POSTGRES_URL" -v ON_ERROR_STOP=1 -qc "DROP DATABASE IF EXISTS engage_blackbox" -c "CREATE DATABASE engage_blackbox"
ENGAGE_TEST_DB="${ENGAGE_TEST_POSTGRES_URL%/*}/engage_blackbox" cargo test "${NATIVE[@]}" --test api

step "the black-box suite again, against two and then three native servers sharing one PostgreSQL database"
for servers in 2 3; do
  psql "$ENGAGE_TEST_POSTGRES_URL" -v ON_ERROR_STOP=1 -qc "DROP DATABASE IF EXISTS engage_blackbox" -c "CREATE DATABASE engage_blackbox"
  ENGAGE_TEST_SERVERS=$servers ENGAGE_TEST_DB="${ENGAGE_TEST_POSTGRES_URL%/*}/engage_blackbox" cargo test "${NATIVE[@]}" --test api
done

step "SCIM 2.0 conformance tools (scim2-tester, scim-sanity) against the native host"
bash tests/scim/run.sh

step "OpenAPI 3.1 description (openapi-spec-validator) of the native host's /openapi.json"
bash tests/openapi/check.sh

step "schemathesis: every operation of /openapi.json, every check, schema-valid requests accepted and others refused"
bash tests/openapi/fuzz.sh

step "public clients from their registries (PyPI braze-client, edx-braze-client, npm braze-api) against the native host"
bash tests/clients/run.sh

step "reliability: the release server killed under load, read through a backlog, on a full disk"
# The same release build as serve.sh's, the README walk-through's and the newcomer
# test's (engage has no dev-dependencies, so only the test itself is compiled again).
# ENGAGE_CRASH_KILLS=25 (say) for the longer crash test; see host-native/tests/reliability.rs.
cargo test --release -p engage --test reliability -- --nocapture --test-threads 1

step "README walk-through: its marked blocks run as written against a fresh server"
bash tests/readme/run.sh

if [ -z "${ENGAGE_SKIP_RELEASE:-}" ]; then
  step "release artifacts: the static binary with the playground inside, its tarball, the container image"
  bash tests/release/run.sh
  step "test-kit packages: the wheel and the npm tarball installed into empty environments, their example suites"
  bash tests/packages/run.sh
fi

if [ -z "${ENGAGE_SKIP_WWW:-}" ] && [ -f www/test.sh ]; then
  step "playground: wasm bindings and browser end-to-end test"
  bash www/test.sh
  step "newcomer: a fresh clone, the README's run command, / and /playground/ in Chromium"
  bash tests/newcomer/run.sh
fi

if [ -z "${ENGAGE_SKIP_EDGE:-}" ] && [ -f host-edge/test.sh ]; then
  step "edge host: the black-box suite against wrangler dev (D1 + KV)"
  bash host-edge/test.sh
fi

step "all tests passed"
