#!/usr/bin/env python3
"""Writes docs/parity.md from the code and the tests, never by hand: every route of
the route table with the tests that call it and the hosts those tests run on; every
form the hosted platform accepts beyond the reference (docs/decisions/fidelity.md)
with the tests that check it; and the known differences from the platform.

A test "calls" a route when its body names the route's path (a literal, or a format
string whose `{...}` stand where the route's parameters do). Hosts by suite, as
tests/run.sh runs them: the black-box suite (tests/tests/api) on native SQLite,
native PostgreSQL and the edge (wrangler + D1); host-native/tests on native SQLite;
the browser tests (www/e2e) in the playground or against a native server.

Usage: python3 tests/checks/parity.py           (rewrites docs/parity.md)
       python3 tests/checks/parity.py --check   (fails when docs/parity.md is stale)
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(__file__))
from rules import RULES  # noqa: E402

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "docs", "parity.md")

SUITES = [
    # (folder, file pattern, test pattern, hosts)
    ("tests/tests/api", r"\.rs$", r"#\[tokio::test\]\s*async fn (\w+)", "native SQLite, native PostgreSQL, edge"),
    ("host-native/tests", r"\.rs$", r"#\[test\]\s*fn (\w+)", "native SQLite"),
    ("www/e2e", r"\.test\.mjs$", r"\btest\(\s*\"([^\"]+)\"", "browser (playground or native)"),
]

ROW = re.compile(r'^\s*(api|scim|public|operator|kit)!\((Get|Post|Put|Patch|Delete) "([^"]+)"', re.M)


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def routes():
    """(kind, METHOD, pattern) of every row of the route table, in its order."""
    return [(k, m.upper(), p) for k, m, p in ROW.findall(read("core/src/routes/mod.rs"))]


def split(pattern, with_header):
    """(suite folder, file, name, text, hosts) of every piece of the suites' files
    that `pattern` starts (its group 1 or 2 the name), each with the comments right
    above it; `with_header`: a file's first piece takes the file's header too."""
    out = []
    for folder, files, _, hosts in SUITES:
        for dirpath, _, names in sorted(os.walk(os.path.join(ROOT, folder))):
            for name in sorted(names):
                if not re.search(files, name):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, name), ROOT)
                text = read(rel)
                p = pattern(folder) if callable(pattern) else pattern
                starts = [(comments_before(text, m.start()), m.group(1) or m.group(2)) for m in re.finditer(p, text)]
                for i, (at, piece) in enumerate(starts):
                    at = 0 if i == 0 and with_header else at
                    end = starts[i + 1][0] if i + 1 < len(starts) else len(text)
                    out.append((folder, rel, piece, text[at:end], hosts))
    return out


def tests():
    """(suite folder, file, test name, body, hosts) of every test; a file's first test
    takes its header too (what the file says of all)."""
    patterns = {folder: pattern for folder, _, pattern, _ in SUITES}
    return split(lambda folder: "(?:" + patterns[folder] + ")|(?!x)x()", True)


def comments_before(text, at):
    """Where the comment lines right above `at` start (a test's doc comment)."""
    lines = text[:at].split("\n")
    # The line `at` starts on (the test's attribute) is the last, partial one.
    start = len(text[:at]) - len(lines[-1])
    for line in reversed(lines[:-1]):
        if not line.strip().startswith("//"):
            break
        start -= len(line) + 1
    return start


def route_regex(pattern):
    """A path pattern as a regex over test text: `{}` is any segment, a format
    argument, or a value spliced in."""
    parts = [re.escape(p) for p in pattern.split("{}")]
    return re.compile(r'"' + r"[^\"/]*".join(parts) + r'(?:[?"])')


def blocks():
    """(file, function, text, hosts) of every function of the suites' files, tests or
    not (the SCIM suite's checks are functions one test runs in order)."""
    pieces = split(r"\bfn (\w+)|\btest\(\s*\"([^\"]+)\"", False)
    return [(rel, name, text, hosts) for _, rel, name, text, hosts in pieces]


def calls(body, pattern):
    return route_regex(pattern).search(body) is not None


def fidelity_forms():
    """(id, title) of each decision in docs/decisions/fidelity.md."""
    text = read("docs/decisions/fidelity.md")
    out = []
    for m in re.finditer(r"^### (fidelity-[\w-]+)\n\*\*(.+?)\*\*", text, re.M | re.S):
        out.append((m.group(1), " ".join(m.group(2).split())))
    return out


def differences():
    """The README's list of what differs from the hosted platform."""
    text = read("README.md")
    start = text.index("What differs from the hosted platform:")
    block = text[start:].split("\n\n", 1)[0].splitlines()[1:]
    items, current = [], None
    for line in block:
        if line.startswith("- "):
            current = line[2:].strip()
            items.append(current)
        elif current is not None:
            items[-1] += " " + line.strip()
    return items


def render():
    all_tests = tests()
    lines = [
        "# Parity with the hosted platform",
        "",
        "Generated by `python3 tests/checks/parity.py` from the route table, the tests and",
        "docs/decisions/fidelity.md; `tests/run.sh` fails when this file is stale. Do not edit it.",
        "",
        "Hosts by suite, as `tests/run.sh` runs them: the black-box suite (`tests/tests/api`) on",
        "native SQLite, native PostgreSQL and the edge; `host-native/tests` on native SQLite; the",
        "browser tests (`www/e2e`) in the playground or against a native server. Core unit tests",
        "(`core/src`) hold on every host (one core) and are not listed.",
        "",
        "## Endpoints",
        "",
        "| route | tests | hosts |",
        "|---|---|---|",
    ]
    untested = []
    for kind, method, pattern in routes():
        shown = pattern.replace("{}", "{…}")
        found = [(rel, name, hosts) for _, rel, name, body, hosts in all_tests if calls(body, pattern)]
        if not found:
            untested.append(f"`{method} {shown}`")
            lines.append(f"| `{method} {shown}` | (none) | |")
            continue
        names = sorted({f"`{os.path.basename(rel)}::{name}`" for rel, name, _ in found})
        hosts = sorted({h for _, _, h in found})
        more = f" and {len(names) - 6} more" if len(names) > 6 else ""
        lines.append(f"| `{method} {shown}` | {len(names)}: {', '.join(names[:6])}{more} | {'; '.join(hosts)} |")
    lines += ["", "## What the platform accepts beyond the reference", "",
              "Each read as the platform reads it by default and refused with `--strict`.", "",
              "| form | tests |", "|---|---|"]
    for ident, title in fidelity_forms():
        found = sorted({f"`{os.path.basename(rel)}::{name}`" for _, rel, name, body, _ in all_tests if ident in body})
        lines.append(f"| [{title}](decisions/fidelity.md#{ident}) | {', '.join(found) or '(none)'} |")
    lines += ["", "## Rules the reference states", "",
              "From tests/checks/rules.py: each rule of the API reference, the section it is stated in,",
              "and the tests that check it.", "",
              "| rule | section | tests | hosts |", "|---|---|---|---|"]
    all_blocks = blocks()
    for ident, section, rule, pattern in RULES:
        found = [(rel, fn, hosts) for rel, fn, text, hosts in all_blocks if re.search(pattern, fn + "\n" + text)]
        names = sorted({f"`{os.path.basename(rel)}::{fn}`" for rel, fn, _ in found})
        hosts = sorted({h for _, _, h in found})
        more = f" and {len(names) - 4} more" if len(names) > 4 else ""
        shown = f"{', '.join(names[:4])}{more}" if names else "(none)"
        lines.append(f"| {rule} <a id=\"rule-{ident}\"></a> | {section} | {shown} | {'; '.join(hosts)} |")
    lines += ["", "## Known differences from the hosted platform", ""]
    lines += [f"- {d}" for d in differences()]
    lines += ["", f"Routes no test names: {', '.join(untested) if untested else 'none'}.", ""]
    return "\n".join(lines)


def main():
    text = render()
    if "--check" in sys.argv:
        untested = [r[0] for r in RULES if f"<a id=\"rule-{r[0]}\"></a> | {r[1]} | (none)" in text]
        if untested:
            sys.exit(f"rules of the reference no test checks: {', '.join(untested)} (tests/checks/rules.py)")
        current = open(OUT, encoding="utf-8").read() if os.path.exists(OUT) else ""
        if current != text:
            sys.exit("docs/parity.md is stale: run python3 tests/checks/parity.py and commit it")
        print("docs/parity.md is up to date")
        return
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {os.path.relpath(OUT, ROOT)}")


if __name__ == "__main__":
    main()
