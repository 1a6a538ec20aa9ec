#!/usr/bin/env python3
"""The import graph of a crate's src (core/src by default; host-native/src too),
module by module (a module is a file), without test code. Every module path a file
uses counts: `crate::`, `super::` and `self::` paths, names brought in by `use`, and
a child module named bare (`errors::schemas()` in `openapi/mod.rs`).

Fails when a module imports one that imports it back (a cycle), or when a folder
(a top-level module with its children: one layer) imports one that imports it back;
prints the graph by level: a module's level is one more than the highest level of
the modules it imports, so the ground (modules importing nothing) is level 0.

Usage: python3 tests/checks/imports.py [SRC_DIR] [--dot]
"""
import os
import re
import sys

_ARGS = [a for a in sys.argv[1:] if not a.startswith("--")]
ROOT = (_ARGS[0] if _ARGS else None) or os.environ.get("CORE_SRC") or os.path.join(
    os.path.dirname(__file__), "..", "..", "core", "src"
)
NAME = os.path.relpath(ROOT, os.path.join(os.path.dirname(__file__), "..", ".."))


def module_of(path):
    rel = os.path.relpath(path, ROOT)[:-3].split(os.sep)
    if rel[-1] == "mod":
        rel = rel[:-1]
    if rel == ["lib"]:
        return ""
    return "::".join(rel)


def strip_tests(text):
    # Test modules sit at the end of a file, after `#[cfg(test)]`.
    m = re.search(r"^#\[cfg\(test\)\]\s*\n\s*mod \w+ \{", text, re.M)
    text = text[: m.start()] if m else text
    text = re.sub(r"#\[cfg\(test\)\]\s*\n\s*(pub(\(crate\))? )?mod \w+;", "", text)
    return re.sub(r"//[^\n]*", "", text)


def paths_in(text, me, is_dir, children=()):
    """Every `crate::a::b`, `super::x`, `self::x` path mentioned, and every path that
    starts with the bare name of a child module, made absolute."""
    out = set()
    bare = [c for c in children if re.search(r"(?<![\w:])" + c + r"::", text)]
    # Expand `use x::{a, b::{c}}` one level deep: enough for this code base.
    for m in re.finditer(r"\buse\s+((?:crate|super|self)(?:::\w+)*)::\{([^;]*)\};", text, re.S):
        base = m.group(1)
        for item in re.split(r",\s*(?![^{]*\})", m.group(2)):
            item = item.strip()
            if not item:
                continue
            head = re.match(r"(\w+(?:::\w+)*)", item)
            if head:
                out.add(base + "::" + head.group(1) if head.group(1) != "self" else base)
    for m in re.finditer(r"\b((?:crate|super|self)(?:::\w+)+)", text):
        out.add(m.group(1))
    # A name brought in by `use` and used as a path prefix (`identity::merge::merge`)
    # reaches further than the `use` line says.
    for p in list(out):
        name = p.split("::")[-1]
        for m in re.finditer(r"(?<![\w:])" + name + r"((?:::\w+)+)", text):
            out.add(p + m.group(1))
    parent = me.split("::")[:-1] if me else []
    here = me.split("::") if me else []
    resolved = set()
    for p in out:
        parts = p.split("::")
        if parts[0] == "crate":
            parts = parts[1:]
        elif parts[0] == "super":
            parts = (here if is_dir else parent)[:-1] + parts[1:] if is_dir else parent + parts[1:]
        elif parts[0] == "self":
            parts = (here if is_dir else parent) + parts[1:]
        resolved.add(tuple(parts))
    for c in bare:
        resolved.add(tuple(me.split("::") if me else []) + (c,))
    return resolved


def main():
    modules = {}
    for dirpath, _, files in os.walk(ROOT):
        for f in files:
            if f.endswith(".rs"):
                path = os.path.join(dirpath, f)
                modules[module_of(path)] = path
    # Test-only modules.
    test_only = {m for m, p in modules.items() if m.endswith("testkit") or m.endswith("::tests")}
    # Items the crate root re-exports (`pub use engine::{Ctx, ...}`): a path to one
    # of them depends on the module that defines it.
    reexports = {}
    lib = strip_tests(open(modules[""], encoding="utf-8").read())
    for m in re.finditer(r"^pub use (\w+(?:::\w+)*)::\{([^}]*)\};|^pub use (\w+(?:::\w+)*)::(\w+);", lib, re.M):
        base = m.group(1) or m.group(3)
        names = m.group(2).split(",") if m.group(1) else [m.group(4)]
        for name in names:
            reexports[name.strip()] = base
    edges = {}
    for m, path in modules.items():
        if m in test_only:
            continue
        text = strip_tests(open(path, encoding="utf-8").read())
        is_dir = path.endswith("mod.rs") or path.endswith("lib.rs")
        deps = set()
        prefix = m + "::" if m else ""
        children = [c[len(prefix):] for c in modules if c.startswith(prefix) and "::" not in c[len(prefix):] and c != m]
        for parts in paths_in(text, m, is_dir, children):
            if len(parts) >= 1 and parts[0] in reexports:
                parts = tuple(reexports[parts[0]].split("::")) + tuple(parts)
            # The longest prefix that names a module.
            for n in range(len(parts), -1, -1):
                cand = "::".join(parts[:n])
                if cand in modules:
                    if cand != m and cand not in test_only:
                        deps.add(cand)
                    break
        edges[m] = deps
    # The crate root only declares modules and re-exports the engine API.
    edges.pop("", None)
    for deps in edges.values():
        deps.discard("")
    # A folder's root naming its own children is how the folder is assembled (its
    # children use the types it declares): within a module and its descendants, only
    # the children's edges count; across folders, every edge counts (below).
    inner = {m: {d for d in deps if not (m == "" or d.startswith(m + "::"))} for m, deps in edges.items()}
    sccs = cycles(inner)
    # Folders: a top-level module and its children are one layer.
    folders = {}
    for m, deps in edges.items():
        top = m.split("::")[0]
        folders.setdefault(top, set()).update(d.split("::")[0] for d in deps if d.split("::")[0] != top)
    folder_sccs = cycles(folders)
    if "--dot" in sys.argv:
        print("digraph core {")
        for m in sorted(edges):
            for d in sorted(edges[m]):
                print(f'  "{m}" -> "{d}";')
        print("}")
        return 0 if not sccs else 1
    if sccs or folder_sccs:
        for what, graph, found in [("module", inner, sccs), ("folder", folders, folder_sccs)]:
            if not found:
                continue
            print(f"import cycles in {NAME} (a {what} imports one that imports it back):")
            for c in found:
                print("  " + " <-> ".join(c))
                for m in c:
                    via = sorted(d for d in graph[m] if d in c)
                    if what == "folder":
                        via = [f"{d} ({', '.join(sorted(x for x in edges if x.split('::')[0] == m and any(y.split('::')[0] == d for y in edges[x])))})" for d in via]
                    print(f"    {m} imports {', '.join(via)}")
        return 1
    level = {}

    def lvl(v):
        if v not in level:
            level[v] = 1 + max((lvl(d) for d in inner[v]), default=-1)
        return level[v]

    for v in inner:
        lvl(v)
    print(f"{NAME}: {len(edges)} modules, {sum(len(d) for d in edges.values())} imports, no cycles, {max(level.values()) + 1} levels")
    for n in range(max(level.values()), -1, -1):
        print(f"  level {n}: {', '.join(sorted(m for m in level if level[m] == n))}")
    return 0


def cycles(edges):
    """The strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sccs


if __name__ == "__main__":
    sys.exit(main())
