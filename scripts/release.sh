#!/usr/bin/env bash
# Builds Engage's release artifacts into target/artifacts/ (or the directory given):
#   engage-VERSION-x86_64-linux-musl.tar.gz  the `engage` binary, statically linked
#                                            (musl), with the playground inside it,
#                                            and README.md
#   engage-VERSION-image.tar                 the container image (Containerfile, FROM
#                                            scratch) as an archive `podman load` and
#                                            `docker load` read; also tagged
#                                            engage:VERSION in local podman storage
#   SHA256SUMS                               both files' SHA-256 (sha256sum -c)
# Usage: bash scripts/release.sh [OUT_DIR]
# Installs what it needs: the musl target (rustup), musl-tools (Debian: the C in
# SQLite and jemalloc is compiled with musl-gcc) and podman (Debian); the playground
# is built first (www/build.sh). ENGAGE_RELEASE_NO_IMAGE=1 leaves out the image.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:-$ROOT/target/artifacts}"
TRIPLE=x86_64-unknown-linux-musl
export PATH="$HOME/.cargo/bin:$PATH"
step() { printf '\n== %s release: %s\n' "$(date +%T)" "$*" >&2; }

cd "$ROOT"
VERSION="$(awk -F'"' '/^\[workspace.package\]/ { on = 1 } on && /^version *=/ { print $2; exit }' Cargo.toml)"
COMMIT="$(git rev-parse --short=12 HEAD 2>/dev/null || true)"
NAME="engage-$VERSION-x86_64-linux-musl"
echo "Engage $VERSION${COMMIT:+ (commit $COMMIT)} into $OUT" >&2

step "tools: the $TRIPLE target, musl-gcc, podman"
rustup target list --installed | grep -qx "$TRIPLE" || rustup target add "$TRIPLE"
need=()
command -v musl-gcc >/dev/null || need+=(musl-tools)
if [ -z "${ENGAGE_RELEASE_NO_IMAGE:-}" ]; then command -v podman >/dev/null || need+=(podman); fi
if [ "${#need[@]}" -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null 2>&1 ||
    { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}"; }
fi

step "the playground (www/dist), to embed"
bash www/build.sh --if-stale >&2

step "the static binary"
# CC for the C in the dependencies (SQLite, jemalloc): musl's, not glibc's. Linked
# static and position-dependent: nothing for a loader to do (`ldd`: not a dynamic
# executable); the stack, heap and mappings are still placed at random.
CC_x86_64_unknown_linux_musl=musl-gcc \
  CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_RUSTFLAGS="-C target-feature=+crt-static -C relocation-model=static" \
  ENGAGE_COMMIT="$COMMIT" ENGAGE_PLAYGROUND_EMBED_DIR="$ROOT/www/dist" \
  cargo build --release --locked --target "$TRIPLE" -p engage --features embed-playground >&2
TARGET_DIR="$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
BIN="$TARGET_DIR/$TRIPLE/release/engage"
case "$(ldd "$BIN" 2>&1 || true)" in
  *"not a dynamic executable"*) ;;
  *) echo "release: $BIN is not a static executable: $(ldd "$BIN" 2>&1)" >&2; exit 1 ;;
esac

step "the tarball"
rm -rf "$OUT"
mkdir -p "$OUT/$NAME"
# Symbols stay out (a third of the size); line tables are kept for panics' backtraces
# in the build directory's copy only.
strip -o "$OUT/$NAME/engage" "$BIN"
cp README.md "$OUT/$NAME/"
tar -C "$OUT" --owner=0 --group=0 --numeric-owner --sort=name --mtime="@$(git log -1 --format=%ct 2>/dev/null || echo 0)" \
  -czf "$OUT/$NAME.tar.gz" "$NAME"

artifacts=("$NAME.tar.gz")
if [ -z "${ENGAGE_RELEASE_NO_IMAGE:-}" ]; then
  step "the container image"
  CONTEXT="$OUT/image-context"
  mkdir -p "$CONTEXT/rootfs/data" "$CONTEXT/rootfs/tmp"
  cp "$OUT/$NAME/engage" "$CONTEXT/engage"
  podman build --quiet --format docker -f Containerfile -t "engage:$VERSION" \
    --build-arg "VERSION=$VERSION" --build-arg "COMMIT=$COMMIT" "$CONTEXT" >&2
  podman save --quiet --format docker-archive -o "$OUT/engage-$VERSION-image.tar" "engage:$VERSION"
  rm -rf "$CONTEXT"
  artifacts+=("engage-$VERSION-image.tar")
fi
rm -rf "${OUT:?}/$NAME"

(cd "$OUT" && sha256sum "${artifacts[@]}" >SHA256SUMS)
step "done"
(cd "$OUT" && ls -l "${artifacts[@]}" SHA256SUMS) >&2
echo "$OUT"
