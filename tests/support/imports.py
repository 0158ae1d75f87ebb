"""Fathom's own import graph, read from the source (every import, including those inside
functions and under ``TYPE_CHECKING``), for the layer and cycle tests."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Folders that are not part of the installed package.
NOT_PACKAGE = {"tests", "bench", "docs", "examples", "build", "dist", ".git", ".venv"}


def package_modules(root: Path = ROOT) -> dict[str, Path]:
    """``{"fathom.index.collection": path, …}`` for every module of the package."""
    mods: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if rel.parts[0] in NOT_PACKAGE or any(p.startswith(".") for p in rel.parts):
            continue
        if any(p.endswith(".egg-info") for p in rel.parts):
            continue
        parts = ["fathom", *rel.with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        mods[".".join(parts)] = path
    return mods


def _imported(module: str, path: Path) -> Iterator[tuple[str, int]]:
    """``(imported name, line)`` for every import statement in the file, absolute."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            yield target, node.lineno
            for alias in node.names:
                yield f"{target}.{alias.name}", node.lineno


def import_graph(root: Path = ROOT) -> tuple[dict[str, set[str]], list[str]]:
    """The module → imported modules graph inside ``fathom``, and every import of a
    top-level name that is one of the package's own folders (``import index``: wrong)."""
    mods = package_modules(root)
    own_tops = {m.split(".")[1] for m in mods if m.count(".") >= 1}
    graph: dict[str, set[str]] = {m: set() for m in mods}
    stray: list[str] = []
    for module, path in mods.items():
        for name, line in _imported(module, path):
            if name.split(".")[0] in own_tops:
                stray.append(f"{path.relative_to(root)}:{line}: import of {name}")
                continue
            if not name.startswith("fathom"):
                continue
            while name and name not in mods:  # `from fathom.x import name` → fathom.x
                name = name.rpartition(".")[0]
            if name and name != module:
                graph[module].add(name)
    return graph, stray


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)
