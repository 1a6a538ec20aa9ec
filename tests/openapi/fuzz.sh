#!/usr/bin/env bash
# A client generated from a fresh native server's /openapi.json (openapi-python-client,
# from PyPI) calls each family once (tests/openapi/client.py); the description's
# examples are checked against their schemas and sent (tests/openapi/examples.py);
# then schemathesis
# (from PyPI) against the same server: every
# operation, every check (5xx, status codes, content types, headers and bodies as
# described, schema-valid requests accepted and schema-violating ones refused,
# authentication, use after delete) in every phase (examples, coverage, fuzzing,
# stateful), bounded in examples and time. Each kind of
# credential is a run of its own: the API key's routes, SCIM's, the operator's (and
# last the operator's routes that replace data).
# tests/openapi/schemathesis.toml holds the documented rules JSON Schema cannot say.
#
#   bash tests/openapi/fuzz.sh        (needs target/debug/engage: cargo build -p engage)
#   FUZZ_TIME=60 bash tests/openapi/fuzz.sh    (seconds per run; default 60)
#   FUZZ_SEED=1 bash tests/openapi/fuzz.sh     (another seed, to explore; CI keeps the default)
set -euo pipefail
cd "$(dirname "$0")/../.."

TOOL=tests/openapi/fuzz.sh
source tests/lib/pycheck.sh
VENV=target/fuzz-venv
venv_with "$VENV" schemathesis tests/openapi/fuzz-requirements.txt

ADMIN="fuzz-admin-token-$$-$RANDOM-0123456789abcdef"
KEY="$("$BIN" keys create --db "$DIR/engage.db" 2>/dev/null | tail -1)"
export ENGAGE_ADMIN_TOKEN="$ADMIN"
# A settable clock: `POST /_engage/clock`'s example is sent too.
export ENGAGE_TEST_CLOCK=true
# The test kit's faults: `POST /_engage/faults`'s example is sent too (and removed
# before schemathesis runs, which leaves those routes alone: see schemathesis.toml).
export ENGAGE_FAULTS=true
# Bodies kept: the request finders' examples match a body.
export ENGAGE_JOURNAL_BODIES=true
# schemathesis presents wrong admin tokens on purpose (its authentication checks),
# thousands a minute from one address: the throttle would answer its valid requests 429.
export ENGAGE_ADMIN_FAILURES_PER_MINUTE=1000000
start_server
BASE="http://127.0.0.1:$PORT"
ORIGIN="https://idp.example.com"
SCIM="$(curl -sf -X POST -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' \
    -d "{\"origin\":\"$ORIGIN\"}" "$BASE/_engage/scim-tokens" | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')"

log "openapi-python-client: a client generated from $BASE/openapi.json calls every family"
PATH="$PWD/$VENV/bin:$PATH" "$VENV/bin/openapi-python-client" generate --url "$BASE/openapi.json" --meta none \
    --output-path "$DIR/client/engage_client" > "$DIR/generate.log" 2>&1 || { cat "$DIR/generate.log"; exit 1; }
if grep -q "WARNING" "$DIR/generate.log"; then
    cat "$DIR/generate.log"
    log "the generator left operations out"
    exit 1
fi
ENGAGE_URL="$BASE" ENGAGE_KEY="$KEY" ENGAGE_ADMIN="$ADMIN" ENGAGE_SCIM="$SCIM" ENGAGE_ORIGIN="$ORIGIN" \
    CLIENT_DIR="$DIR/client" "$VENV/bin/python" tests/openapi/client.py

log "examples: each valid against its schema; each request body's example accepted as documented"
ENGAGE_URL="$BASE" ENGAGE_KEY="$KEY" ENGAGE_ADMIN="$ADMIN" ENGAGE_SCIM="$SCIM" ENGAGE_ORIGIN="$ORIGIN" \
    "$VENV/bin/python" tests/openapi/examples.py
curl -sf -X DELETE -H "Authorization: Bearer $ADMIN" "$BASE/_engage/faults" > /dev/null

TIME="${FUZZ_TIME:-60}"
# No crashes replayed from earlier runs (schemathesis keeps them in .schemathesis/):
# every run, here as in CI, is its seed's alone.
rm -rf .schemathesis
failed=0
fuzz() {
    local what="$1"; shift
    log "schemathesis: $what"
    if ! "$VENV/bin/schemathesis" --config-file tests/openapi/schemathesis.toml run "$BASE/openapi.json" \
        --no-color --max-time "$TIME" --seed "${FUZZ_SEED:-20261126}" "$@" > "$DIR/fuzz.log" 2>&1; then
        cat "$DIR/fuzz.log"
        failed=1
    else
        grep -E "^(API Operations|  Selected|  Tested|Test cases|  [0-9]+ generated|=+ )" "$DIR/fuzz.log" >&2 || true
    fi
}

fuzz "the API key's routes" --exclude-path-regex '^/(_engage|scim)/' -H "Authorization: Bearer $KEY"
fuzz "SCIM" --include-path-regex '^/scim/' -H "Authorization: Bearer $SCIM" -H "X-Request-Origin: $ORIGIN"
# The operator's routes. Warehouse sources are always loopback ones (tests/openapi/hooks.py).
# The routes that replace the workspace's data (reset, seed, the store's own conformance
# run) come last, in a run of their own, so they do not pull the data from under the
# others' stateful checks.
export SCHEMATHESIS_HOOKS=hooks PYTHONPATH="$PWD/tests/openapi${PYTHONPATH:+:$PYTHONPATH}"
fuzz "operator routes" --include-path-regex '^/_engage/' -H "Authorization: Bearer $ADMIN" \
    --exclude-path-regex '^/_engage/(reset|seed|conformance)$'
fuzz "operator routes that replace data" --include-path-regex '^/_engage/(reset|seed|conformance)$' \
    -H "Authorization: Bearer $ADMIN"
exit "$failed"
