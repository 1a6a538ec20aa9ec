#!/usr/bin/env bash
# Two SCIM 2.0 conformance tools from PyPI against a fresh native server's Users
# resource, one after the other on one server: scim2-tester (tests/scim/compliance.py)
# and scim-sanity (tests/scim/sanity.py), each in its own virtualenv under target/
# (made once), each with its own SCIM token made by `engage scim-tokens create`
# (scim-sanity's with a default department: its users carry none). Fails on any
# check that applies and does not pass.
#
#   bash tests/scim/run.sh        (needs target/debug/engage: cargo build -p engage)
set -euo pipefail
cd "$(dirname "$0")/../.."

TOOL=tests/scim/run.sh
source tests/lib/pycheck.sh
VENV=target/scim-venv
venv_with "$VENV" scim2_tester tests/scim/requirements.txt
SANITY_VENV=target/scim-sanity-venv
venv_with "$SANITY_VENV" scim_sanity tests/scim/requirements-sanity.txt

ORIGIN="https://idp.compliance.test"
TOKEN="$("$BIN" scim-tokens create --db "$DIR/engage.db" --origin "$ORIGIN")"
SANITY_ORIGIN="https://idp.sanity.test"
SANITY_TOKEN="$("$BIN" scim-tokens create --db "$DIR/engage.db" --origin "$SANITY_ORIGIN" --default-department engineering)"
start_server

log "scim2-tester against http://127.0.0.1:$PORT/scim/v2"
SCIM_URL="http://127.0.0.1:$PORT/scim/v2" SCIM_TOKEN="$TOKEN" SCIM_ORIGIN="$ORIGIN" \
    "$VENV/bin/python" tests/scim/compliance.py

log "scim-sanity against http://127.0.0.1:$PORT/scim/v2"
SCIM_URL="http://127.0.0.1:$PORT/scim/v2" SCIM_TOKEN="$SANITY_TOKEN" SCIM_ORIGIN="$SANITY_ORIGIN" \
    "$SANITY_VENV/bin/python" tests/scim/sanity.py
