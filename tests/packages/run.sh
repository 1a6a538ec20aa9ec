#!/usr/bin/env bash
# The test kit's packages as a user gets them: scripts/packages.sh builds the wheel
# and the npm tarball (from the release tarball, built if missing), then each is
# installed into an environment that holds nothing else and runs its example suite
# against the server it starts on 127.0.0.1:
#   a new virtualenv: the wheel, pytest and braze-client (the pins of
#   examples/pytest/requirements.txt), then pytest on a copy of examples/pytest;
#   a new npm project: the tarball and braze-api, then node --test on a copy of
#   examples/node.
#
#   bash tests/packages/run.sh     (ENGAGE_PACKAGE_BIN=PATH packages that binary instead)
set -euo pipefail
cd "$(dirname "$0")/../.."

log() { printf '[tests/packages] %s\n' "$*" >&2; }

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
# Only 127.0.0.1 is talked to: no proxy stands in front of the servers.
export NO_PROXY="127.0.0.1,localhost${NO_PROXY:+,$NO_PROXY}" no_proxy="127.0.0.1,localhost${no_proxy:+,$no_proxy}"

log "building the packages"
bash scripts/packages.sh "$WORK/dist" >"$WORK/built"
mapfile -t built <"$WORK/built"
WHEEL="${built[0]}"
TGZ="${built[1]}"

log "pytest: a new virtualenv with $(basename "$WHEEL")"
python3 -m venv "$WORK/venv"
PIP=("$WORK/venv/bin/pip" install --quiet --disable-pip-version-check)
"${PIP[@]}" "$WHEEL" -r examples/pytest/requirements.txt
"${PIP[@]}" --no-deps braze-client==2.3.3
"$WORK/venv/bin/engage" --version >&2
cp -R examples/pytest "$WORK/pytest"
failed=()
# (errexit does not hold left of ||: each step is chained with &&)
(
    cd "$WORK/pytest" &&
        env -u PYTHONPATH PATH="$WORK/venv/bin:$PATH" "$WORK/venv/bin/python" -m pytest -q -p no:cacheprovider
) || failed+=(pytest)

log "node --test: a new npm project with $(basename "$TGZ")"
cp -R examples/node "$WORK/node"
(
    cd "$WORK/node" &&
        # and braze-api, pinned in package.json
        npm install --no-audit --no-fund --loglevel=error "$TGZ" >&2 &&
        npx --no-install engage --version >&2 &&
        node --test ./*.test.mjs
) || failed+=(node:test)

if [ "${#failed[@]}" -gt 0 ]; then
    log "failed suites: ${failed[*]}"
    exit 1
fi
log "both packages passed their example suites"
