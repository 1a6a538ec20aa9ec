#!/usr/bin/env bash
# The API description a fresh native server serves at /openapi.json, validated as
# OpenAPI 3.1 by openapi-spec-validator (from PyPI). Installs the validator in a
# virtualenv under target/ (once), starts `engage serve` on a new database, fetches
# the document and fails on any validation error (see check.py for the extra checks).
#
#   bash tests/openapi/check.sh        (needs target/debug/engage: cargo build -p engage)
set -euo pipefail
cd "$(dirname "$0")/../.."

TOOL=tests/openapi/check.sh
source tests/lib/pycheck.sh
VENV=target/openapi-venv
venv_with "$VENV" openapi_spec_validator tests/openapi/requirements.txt

start_server

log "openapi-spec-validator against http://127.0.0.1:$PORT/openapi.json"
OPENAPI_URL="http://127.0.0.1:$PORT/openapi.json" "$VENV/bin/python" tests/openapi/check.py
