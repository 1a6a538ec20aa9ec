#!/usr/bin/env bash
# Builds the test kit's installable packages into target/artifacts/ (or the
# directory given), around the static `engage` binary:
#   engage_server-VERSION-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl
#       pip: `engage` on PATH and the pytest fixtures `engage_server` / `engage`
#       (packaging/python, built by packaging/python/build_wheel.py: no build backend)
#   engage-server-VERSION.tgz
#       npm: `engage` as a bin and startEngage() (packaging/npm, through `npm pack`)
# and adds their lines to SHA256SUMS there.
# Usage: bash scripts/packages.sh [OUT_DIR]
# The binary is read out of target/artifacts/engage-VERSION-x86_64-linux-musl.tar.gz,
# which `ENGAGE_RELEASE_NO_IMAGE=1 bash scripts/release.sh` builds first when it is
# missing (release.sh empties target/artifacts). ENGAGE_PACKAGE_BIN=PATH packages
# that binary instead. Needs python3, node and npm; nothing is fetched.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:-$ROOT/target/artifacts}"
cd "$ROOT"
VERSION="$(awk -F'"' '/^\[workspace.package\]/ { on = 1 } on && /^version *=/ { print $2; exit }' Cargo.toml)"
NAME="engage-$VERSION-x86_64-linux-musl"
TARBALL="target/artifacts/$NAME.tar.gz"
step() { printf '\n== %s packages: %s\n' "$(date +%T)" "$*" >&2; }

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

BIN="${ENGAGE_PACKAGE_BIN:-}"
if [ -z "$BIN" ]; then
    if [ ! -f "$TARBALL" ]; then
        step "no $TARBALL: building it (scripts/release.sh, no image)"
        ENGAGE_RELEASE_NO_IMAGE=1 bash scripts/release.sh >&2
    fi
    tar -xzf "$TARBALL" -C "$WORK" "$NAME/engage"
    BIN="$WORK/$NAME/engage"
fi
[ -x "$BIN" ] || { echo "packages: $BIN is not an executable" >&2; exit 1; }
MTIME="$(git log -1 --format=%ct 2>/dev/null || echo 315532800)"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"

step "the wheel (engage-server $VERSION)"
WHEEL="$(SOURCE_DATE_EPOCH="$MTIME" python3 packaging/python/build_wheel.py \
    --binary "$BIN" --version "$VERSION" --out "$OUT")"

step "the npm package (engage-server $VERSION)"
STAGE="$WORK/npm"
cp -R packaging/npm "$STAGE"
install -m 0755 "$BIN" "$STAGE/bin/engage-linux-x64"
chmod 0755 "$STAGE/bin/engage.js"
(cd "$STAGE" && VERSION="$VERSION" node -e '
    const fs = require("node:fs");
    const manifest = JSON.parse(fs.readFileSync("package.json", "utf8"));
    manifest.version = process.env.VERSION;
    fs.writeFileSync("package.json", JSON.stringify(manifest, null, 2) + "\n");')
TGZ="$(cd "$STAGE" && npm pack --pack-destination "$OUT" --loglevel=error --json |
    node -e 'let s = ""; process.stdin.on("data", (c) => (s += c)).on("end", () => console.log(JSON.parse(s)[0].filename))')"

step "SHA256SUMS"
files=("$(basename "$WHEEL")" "$TGZ")
(
    cd "$OUT"
    touch SHA256SUMS
    grep -v -F -e "${files[0]}" -e "${files[1]}" SHA256SUMS >SHA256SUMS.new || true
    sha256sum "${files[@]}" >>SHA256SUMS.new
    mv SHA256SUMS.new SHA256SUMS
    ls -l "${files[@]}" >&2
)
printf '%s\n' "$OUT/${files[0]}" "$OUT/${files[1]}"
