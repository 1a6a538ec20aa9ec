#!/usr/bin/env bash
# The release artifacts as a user gets them, built from this checkout by
# `scripts/release.sh`, then checked:
# - SHA256SUMS holds for both files; the tarball holds `engage` and README.md;
# - the binary is static (`ldd`: not a dynamic executable) and `--version` names the
#   version and the commit;
# - the container image: tests/release/image.py, in a network namespace of its own;
# - `cargo install --path host-native --locked` installs a working `engage`.
# The binary alone in an empty directory, in Chromium, is the newcomer test's second
# part (tests/newcomer/run.sh). Sizes and build times are printed.
# ENGAGE_RELEASE_OUT: where the artifacts go (default target/artifacts).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${ENGAGE_RELEASE_OUT:-$ROOT/target/artifacts}"
export PATH="$HOME/.cargo/bin:$PATH"
step() { printf '\n== %s release: %s\n' "$(date +%T)" "$*"; }
cd "$ROOT"
VERSION="$(awk -F'"' '/^\[workspace.package\]/ { on = 1 } on && /^version *=/ { print $2; exit }' Cargo.toml)"
COMMIT="$(git rev-parse --short=12 HEAD)"
NAME="engage-$VERSION-x86_64-linux-musl"

t0=$(date +%s)
bash scripts/release.sh "$OUT" >/dev/null
echo "scripts/release.sh took $(($(date +%s) - t0)) s"

step "checksums, tarball, static binary, --version"
(cd "$OUT" && sha256sum -c SHA256SUMS)
listed="$(tar -tzf "$OUT/$NAME.tar.gz" | sort | tr '\n' ' ')"
[ "$listed" = "$NAME/ $NAME/README.md $NAME/engage " ] || { echo "tarball holds: $listed" >&2; exit 1; }
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
tar -xzf "$OUT/$NAME.tar.gz" -C "$TMP"
BIN="$TMP/$NAME/engage"
linked="$(ldd "$BIN" 2>&1 || true)"
case "$linked" in
  *"not a dynamic executable"*) echo "ldd: $linked" ;;
  *) echo "the binary is dynamically linked: $linked" >&2; exit 1 ;;
esac
said="$("$BIN" --version)"
[ "$said" = "engage $VERSION (commit $COMMIT)" ] || { echo "engage --version said: $said" >&2; exit 1; }
echo "engage --version: $said"
ls -l "$OUT"
echo "sizes: binary $(stat -c %s "$BIN") bytes, tarball $(stat -c %s "$OUT/$NAME.tar.gz") bytes, image archive $(stat -c %s "$OUT/engage-$VERSION-image.tar") bytes"

step "the container image, run from its exported filesystem"
if unshare -n true 2>/dev/null; then
  unshare -n sh -c 'ip link set lo up && exec python3 "$@"' sh tests/release/image.py \
    "$OUT/engage-$VERSION-image.tar" "$VERSION" "$COMMIT"
else
  echo "no network namespace here: the image's server shares this machine's port 8080" >&2
  python3 tests/release/image.py "$OUT/engage-$VERSION-image.tar" "$VERSION" "$COMMIT"
fi

step "cargo install --path host-native --locked"
t0=$(date +%s)
TARGET_DIR="$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
CARGO_TARGET_DIR="$TARGET_DIR" cargo install --quiet --path host-native --locked --root "$TMP/install"
said="$("$TMP/install/bin/engage" --version)"
[ "$said" = "engage $VERSION (commit $COMMIT)" ] || { echo "the installed engage --version said: $said" >&2; exit 1; }
echo "cargo install: $said, in $(($(date +%s) - t0)) s"
