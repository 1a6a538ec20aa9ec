#!/usr/bin/env bash
# Public clients of the hosted platform, from their registries, pointed at a fresh
# native server: PyPI braze-client and edx-braze-client (each in a virtualenv of its
# own: both install a package named `braze`), npm braze-api. Each sends what its
# users send (ids as numbers, its language's time forms) and checks what Engage
# then holds (tests/clients/python_clients.py, tests/clients/npm/braze-api.mjs).
#
#   bash tests/clients/run.sh     (needs target/debug/engage: cargo build -p engage)
set -euo pipefail
cd "$(dirname "$0")/../.."

TOOL=tests/clients/run.sh
source tests/lib/pycheck.sh

# braze-client 2.3.3 pins tenacity<6, which no longer imports on Python 3.11: its
# own code is installed without dependencies, and a tenacity that works beside it.
BC=target/clients-braze-client
if ! "$BC/bin/python" -c "import braze.client, tenacity" 2>/dev/null; then
    log "installing braze-client into $BC"
    python3 -m venv "$BC"
    "$BC/bin/pip" install --quiet --disable-pip-version-check --no-deps braze-client==2.3.3
    "$BC/bin/pip" install --quiet --disable-pip-version-check -r tests/clients/requirements-braze-client.txt
fi
EDX=target/clients-edx
venv_with "$EDX" braze.client tests/clients/requirements-edx.txt
(cd tests/clients/npm && npm ci --no-audit --no-fund --loglevel=error)

KEY="clients-known-key-0123456789abcdef012345"
RUST_LOG=warn "$BIN" serve --db "$DIR/engage.db" --listen "127.0.0.1:$PORT" --api-key "$KEY" &
SERVER_PID=$!
for _ in $(seq 1 150); do
    python3 -c "import socket; socket.create_connection(('127.0.0.1', $PORT), 1)" 2>/dev/null && break
    sleep 0.1
done
export ENGAGE_URL="http://127.0.0.1:$PORT" ENGAGE_KEY="$KEY"
CLIENT=braze-client "$BC/bin/python" tests/clients/python_clients.py
CLIENT=edx "$EDX/bin/python" tests/clients/python_clients.py
(cd tests/clients/npm && node braze-api.mjs)
log "3 clients passed"
