#!/usr/bin/env python3
"""Docs are references, not diaries: no doc, comment or script names a numbered work
period (one of the words in PERIOD followed by a number); a measurement is named by its date
and commit, and history stays in git. Also: no line of docs/decisions/*.md is over 400
characters (one decision a heading, its text wrapped), and every decision heading's
id is unique across those files, so links to them hold.

Usage: python3 tests/checks/docs.py
"""
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
SKIP = {"target", "node_modules", ".git", "pkg", "dist"}
EXTS = (".md", ".rs", ".py", ".sh", ".mjs", ".js", ".toml", ".yml", ".yaml", ".sql", ".html")
PERIOD = re.compile(r"\b(session|round|sprint|iteration|work period)s? (\d+|one|two|three)\b", re.I)


def files():
    for dirpath, dirs, names in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP and not d.startswith(".")]
        for name in names:
            if name.endswith(EXTS):
                yield os.path.join(dirpath, name)


def main():
    problems = []
    for path in files():
        rel = os.path.relpath(path, ROOT)
        if rel == os.path.join("tests", "checks", "docs.py"):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                if PERIOD.search(line):
                    problems.append(f"{rel}:{n}: names a work period: {PERIOD.search(line).group(0)!r}")
    ids = {}
    folder = os.path.join(ROOT, "docs", "decisions")
    for name in sorted(os.listdir(folder)):
        rel = os.path.join("docs", "decisions", name)
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if len(line.rstrip("\n")) > 400 and not line.startswith("|"):
                    problems.append(f"{rel}:{n}: a line over 400 characters: wrap it")
                m = re.match(r"### ([\w-]+)\s*$", line)
                if m:
                    if m.group(1) in ids:
                        problems.append(f"{rel}:{n}: decision id {m.group(1)} is also at {ids[m.group(1)]}")
                    ids[m.group(1)] = f"{rel}:{n}"
    if problems:
        print("\n".join(problems))
        return 1
    print(f"docs: no work periods named; {len(ids)} decisions, ids unique")
    return 0


if __name__ == "__main__":
    sys.exit(main())
