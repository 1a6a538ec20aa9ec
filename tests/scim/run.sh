#!/usr/bin/env bash
# The SCIM 2.0 compliance tester (scim2-tester, from PyPI) against a fresh native
# server's Users resource. Installs the tester in a virtualenv under target/ (once),
# starts `engage serve` on a new database with a SCIM token made by
# `engage scim-tokens create`, and fails on any check that applies and does not pass.
#
#   bash tests/scim/run.sh        (needs target/debug/engage: cargo build -p engage)
set -euo pipefail
cd "$(dirname "$0")/../.."

TOOL=tests/scim/run.sh
source tests/lib/pycheck.sh
VENV=target/scim-venv
venv_with "$VENV" scim2_tester tests/scim/requirements.txt

ORIGIN="https://idp.compliance.test"
TOKEN="$("$BIN" scim-tokens create --db "$DIR/engage.db" --origin "$ORIGIN")"
start_server

log "scim2-tester against http://127.0.0.1:$PORT/scim/v2"
SCIM_URL="http://127.0.0.1:$PORT/scim/v2" SCIM_TOKEN="$TOKEN" SCIM_ORIGIN="$ORIGIN" \
    "$VENV/bin/python" tests/scim/compliance.py
