#!/usr/bin/env bash
# The newcomer test: clone the repository fresh, run ONLY the README's run command,
# exactly as written there (the one line in the code block between the README's
# `<!-- run-command -->` and `<!-- /run-command -->` markers, so this test follows the
# README), wait for the server, then in Chromium open `/`, follow its link to
# /playground/, send a request through the in-page wasm engine and see the response;
# then stop the server (SIGTERM to its process group). The run command starts the
# API first: while the landing page says the playground is being built, the API must
# answer, and the page is reloaded until the playground is there.
# Then the second way in: the release binary (scripts/release.sh's tarball) alone in
# an empty directory, `./engage serve`, and the same walk in Chromium, with the
# playground there at once (it is inside the binary).
#
# What is cloned: `git clone` of this repository, i.e. its committed HEAD, which is what
# a newcomer gets. ENGAGE_NEWCOMER_WORKTREE=1 copies this working tree's uncommitted
# changes (modified and untracked files, ignored ones excepted) over the clone, to try
# changes before they are committed.
#
# Where the command builds (CARGO_TARGET_DIR; a newcomer's build starts from nothing):
# - the workspace's own target directory (CARGO_TARGET_DIR, else target/) when the clone
#   holds the same sources as the working tree (HEAD clone, no uncommitted change to a
#   tracked file: what CI runs). The clone's files then get the working tree's
#   modification times, so cargo takes the workspace's build products for up to date
#   (same sources, same paths relative to the workspace root) and builds only what the
#   workspace has not built yet; the command still runs every step a newcomer's does
#   (www/build.sh into the clone's empty www/dist, wasm-bindgen, cargo run).
# - otherwise target/newcomer/ (kept between runs; the clone's crates are rebuilt, about
#   5 minutes), so artifacts built from sources other than the working tree's never land
#   where the workspace's own builds would take them for up to date;
# - ENGAGE_NEWCOMER_TARGET_DIR=DIR to choose, or =fresh for the clone's own target/
#   (removed afterwards): the full first-run time of a newcomer.
# The server listens on 127.0.0.1 and a free port (ENGAGE_LISTEN=127.0.0.1:0, which
# `engage serve` reads), so a server already on :8080 does not matter; the test reads
# the address from the log. ENGAGE_NEWCOMER_TIMEOUT_SECS bounds the wait (default 2400).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/tests/newcomer"
export PATH="$HOME/.cargo/bin:$PATH"
step() { printf '\n== %s newcomer: %s\n' "$(date +%T)" "$*"; }

step "tools for the test (chromium, playwright-core)"
source "$ROOT/tests/lib/browser.sh"

TMP="$(mktemp -d "${TMPDIR:-/tmp}/engage-newcomer.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
CLONE="$TMP/engage"
ARTIFACTS="${ENGAGE_RELEASE_OUT:-$ROOT/target/artifacts}"

step "git clone $ROOT"
git clone -q "$ROOT" "$CLONE"
echo "HEAD $(git -C "$CLONE" log -1 --format='%h %s')"
same_sources=1
if ! git -C "$ROOT" diff --quiet HEAD --; then same_sources=0; fi
if [ -n "${ENGAGE_NEWCOMER_WORKTREE:-}" ]; then
  same_sources=0   # a snapshot of files others may still be editing
  n=0
  while IFS= read -r -d '' f; do
    if [ -f "$ROOT/$f" ]; then
      mkdir -p "$(dirname "$CLONE/$f")"
      cp "$ROOT/$f" "$CLONE/$f"
    else
      rm -f "$CLONE/$f"
    fi
    n=$((n + 1))
  done < <({ git -C "$ROOT" diff -z --name-only HEAD --; git -C "$ROOT" ls-files -z -o --exclude-standard; })
  echo "ENGAGE_NEWCOMER_WORKTREE: $n uncommitted files copied over the clone"
fi

case "${ENGAGE_NEWCOMER_TARGET_DIR:-}" in
  fresh) TARGET="$CLONE/target" ;;
  "")
    if [ "$same_sources" = 1 ]; then
      TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
      (cd "$CLONE" && git ls-files -z | xargs -0 -I{} touch -r "$ROOT/{}" "{}")
      echo "same sources as the working tree: their modification times given to the clone"
    else
      TARGET="$ROOT/target/newcomer"
    fi
    ;;
  *) TARGET="$ENGAGE_NEWCOMER_TARGET_DIR" ;;
esac
case "$TARGET" in /*) ;; *) TARGET="$ROOT/$TARGET" ;; esac
echo "CARGO_TARGET_DIR=$TARGET"

step "the README's run command"
COMMAND="$(awk '/<!-- *run-command/ { on = 1; next } /<!-- *\/run-command *-->/ { on = 0 }
  on && !/^ *```/ && NF' "$CLONE/README.md")"
if [ -z "$COMMAND" ] || [ "$(printf '%s\n' "$COMMAND" | wc -l)" -ne 1 ]; then
  echo "README.md must hold exactly one command line between <!-- run-command --> and <!-- /run-command -->; found:" >&2
  printf '%s\n' "$COMMAND" >&2
  exit 1
fi
echo "$COMMAND"

TIMEOUT="${ENGAGE_NEWCOMER_TIMEOUT_SECS:-2400}"
# A newcomer's shell sets no ENGAGE_* variable; only the listen address is chosen here.
for v in $(compgen -e | grep '^ENGAGE_' || true); do unset "$v"; done
ENGAGE_LISTEN=127.0.0.1:0 CARGO_TARGET_DIR="$TARGET" \
  node "$HERE/newcomer.mjs" "$CLONE" "$COMMAND" "$TIMEOUT"

step "the release binary alone, in an empty directory: ./engage serve"
# The tarball scripts/release.sh made (tests/release/run.sh runs before this in
# tests/run.sh); made here without the image when it is not there.
VERSION="$(awk -F'"' '/^\[workspace.package\]/ { on = 1 } on && /^version *=/ { print $2; exit }' "$ROOT/Cargo.toml")"
TARBALL="$ARTIFACTS/engage-$VERSION-x86_64-linux-musl.tar.gz"
if [ ! -f "$TARBALL" ]; then
  ENGAGE_RELEASE_NO_IMAGE=1 bash "$ROOT/scripts/release.sh" "$ARTIFACTS" >/dev/null
fi
EMPTY="$TMP/empty"
mkdir -p "$EMPTY"
tar -xzf "$TARBALL" -C "$EMPTY" --strip-components=1 --wildcards '*/engage'
echo "$(ls -A "$EMPTY" | tr '\n' ' ')in $EMPTY (no www/dist anywhere above it)"
ENGAGE_LISTEN=127.0.0.1:0 node "$HERE/newcomer.mjs" "$EMPTY" "./engage serve" 60 now
