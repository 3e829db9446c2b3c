#!/usr/bin/env python3
"""Finds import cycles between the files of each crate: an edge A -> B when file A names an
item of module B through ``crate::`` or ``super::`` paths (in ``use`` lines or inline). A
module naming its own submodules (``mod``/``pub use child::X``: a parent registering its
children) is structure, not dependence, and is left out; every other cycle is reported, with
the line that makes each edge. Exit status 1 when there is one.

    python3 scripts/check_import_cycles.py [crates/...]
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

PATH = re.compile(r"\b(crate|super)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
USE_GROUP = re.compile(r"\buse\s+(crate|super)((?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{([^;]*)\}", re.S)


def module_of(src: Path, file: Path) -> tuple[str, ...]:
    """``src/a/b.rs`` and ``src/a/b/mod.rs`` are module ``a::b``; ``lib.rs``/``main.rs`` root."""
    parts = list(file.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts.pop()
    return tuple(parts)


def strip_comments(text: str) -> str:
    """The code without comments and without its unit tests (``#[cfg(test)]`` to the end of
    the file, where this codebase keeps them: a test may use anything)."""
    text = text.split("#[cfg(test)]", 1)[0]
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(line.split("//", 1)[0] for line in text.splitlines())


def resolve(modules: set[tuple[str, ...]], here: tuple[str, ...], kind: str, segs: list[str]):
    """The deepest existing module a ``crate::``/``super::`` path points into."""
    base = () if kind == "crate" else here[:-1]
    while segs and segs[0] == "super":  # super::super::…
        base, segs = base[:-1], segs[1:]
    target = base
    for seg in segs:
        if (*target, seg) in modules:
            target = (*target, seg)
        else:
            break
    return target


def edges_of(src: Path) -> dict[tuple[str, ...], dict[tuple[str, ...], str]]:
    files = {module_of(src, f): f for f in src.rglob("*.rs")}
    modules = set(files)
    edges: dict[tuple[str, ...], dict[tuple[str, ...], str]] = {m: {} for m in modules}
    for here, file in files.items():
        text = strip_comments(file.read_text())
        found: list[tuple[str, list[str], str]] = []
        for m in USE_GROUP.finditer(text):
            prefix = [s for s in m.group(2).split("::") if s]
            for item in m.group(3).split(","):
                head = item.strip().split("::")[0].split(" ")[0]
                if head and head != "self":
                    found.append((m.group(1), [*prefix, head], m.group(0).splitlines()[0]))
                elif head == "self":
                    found.append((m.group(1), prefix, m.group(0).splitlines()[0]))
        for m in PATH.finditer(text):
            found.append((m.group(1), [s for s in m.group(2).split("::") if s], m.group(0)))
        for kind, segs, line in found:
            target = resolve(modules, here, kind, segs)
            # Itself, or its own descendant (a parent registering its children): no edge.
            if target[: len(here)] == here:
                continue
            edges[here].setdefault(target, line.strip())
    return edges


def cycles(edges: dict[tuple[str, ...], dict[tuple[str, ...], str]]) -> list[list[tuple[str, ...]]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[tuple[str, ...], int] = {}
    low: dict[tuple[str, ...], int] = {}
    stack: list[tuple[str, ...]] = []
    on: set[tuple[str, ...]] = set()
    out: list[list[tuple[str, ...]]] = []

    def visit(v: tuple[str, ...]) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
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
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def main() -> int:
    roots = [Path(a) for a in sys.argv[1:]] or sorted(Path("crates").glob("*"))
    failed = False
    for crate in roots:
        src = crate / "src"
        if not src.is_dir():
            continue
        edges = edges_of(src)
        for comp in cycles(edges):
            failed = True
            names = ["::".join(m) or "(root)" for m in comp]
            print(f"{crate.name}: import cycle between {', '.join(names)}")
            members = set(comp)
            for a in comp:
                for b, line in sorted(edges[a].items()):
                    if b in members:
                        print(f"    {'::'.join(a) or '(root)'} -> {'::'.join(b) or '(root)'}: {line}")
    if not failed:
        print("no import cycles between files")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
