#!/usr/bin/env bash
# Fails on any tracked .rs file over 25 KB: split files long before they get there.
set -euo pipefail
cd "$(dirname "$0")/../.."
limit=25600
over=""
while IFS= read -r -d '' f; do
  [ -f "$f" ] || continue
  n=$(wc -c <"$f")
  if [ "$n" -gt "$limit" ]; then over+="  $f ($n bytes)"$'\n'; fi
done < <(git ls-files -z --cached --others --exclude-standard '*.rs')
if [ -n "$over" ]; then
  echo "source files over 25 KB (split them):"
  printf '%s' "$over"
  exit 1
fi
echo "no .rs file over 25 KB"
