"""Sizes that show the design: in the package (bench and tests aside) no class over 400 lines,
no function over 60 (nested functions count inside their parent too) and no module over 600;
and outside ``router/`` nothing asks which depth-policy class it holds (``isinstance``): code
downstream of a decision branches on the decision, not on the class that made it."""

from __future__ import annotations

import ast
from pathlib import Path

from fathom.tests.support.imports import ROOT, package_modules

MAX_CLASS = 400
MAX_FUNCTION = 60
MAX_MODULE = 600


def _sources(root: Path) -> list[tuple[Path, str, ast.Module]]:
    """``(path, text, tree)`` for every module of the package under ``root``."""
    found = []
    for path in sorted(package_modules(root).values()):
        text = path.read_text(encoding="utf-8")
        found.append((path, text, ast.parse(text, filename=str(path))))
    return found


def oversized(root: Path = ROOT) -> list[str]:
    """``path:line: what name is N lines (limit L)`` for every module, class and function over
    its limit, in path and line order."""
    offenders: list[tuple[Path, int, str]] = []
    for path, text, tree in _sources(root):
        rel = path.relative_to(root)
        lines = len(text.splitlines())
        if lines > MAX_MODULE:
            offenders.append((rel, 1, f"module is {lines} lines (limit {MAX_MODULE})"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                kind, limit = "class", MAX_CLASS
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                kind, limit = "function", MAX_FUNCTION
            else:
                continue
            size = (node.end_lineno or node.lineno) - node.lineno + 1
            if size > limit:
                what = f"{kind} {node.name} is {size} lines (limit {limit})"
                offenders.append((rel, node.lineno, what))
    return [f"{rel}:{line}: {what}" for rel, line, what in sorted(offenders)]


def _defines_decide(node: ast.ClassDef) -> bool:
    return any(
        isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name == "decide"
        for item in node.body
    )


def _base_names(node: ast.ClassDef) -> set[str]:
    return {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}


def policy_classes(root: Path = ROOT) -> set[str]:
    """Names of the depth-policy classes: those in ``router/`` that define ``decide``, and
    their subclasses there."""
    classes = [
        node
        for path, _, tree in _sources(root)
        if path.relative_to(root).parts[0] == "router"
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
    ]
    names = {c.name for c in classes if _defines_decide(c)}
    grew = True
    while grew:
        more = {c.name for c in classes if _base_names(c) & names} - names
        names |= more
        grew = bool(more)
    return names


def _named(node: ast.expr) -> list[str]:
    """Class names an ``isinstance`` second argument mentions (``A``, ``mod.A``, ``(A, B)``)."""
    if isinstance(node, ast.Tuple):
        return [name for elt in node.elts for name in _named(elt)]
    if isinstance(node, ast.BinOp):  # A | B
        return _named(node.left) + _named(node.right)
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    return []


def policy_isinstance(root: Path = ROOT) -> list[str]:
    """``path:line: isinstance on NAME`` for every ``isinstance`` outside ``router/`` whose
    second argument names a depth-policy class."""
    policies = policy_classes(root)
    offenders: list[tuple[Path, int, str]] = []
    for path, _, tree in _sources(root):
        rel = path.relative_to(root)
        if rel.parts[0] == "router":
            continue
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "isinstance"
                and len(node.args) == 2
            ):
                continue
            hits = sorted(set(_named(node.args[1])) & policies)
            if hits:
                offenders.append((rel, node.lineno, f"isinstance on {', '.join(hits)}"))
    return [f"{rel}:{line}: {what}" for rel, line, what in sorted(offenders)]


def test_no_module_class_or_function_over_its_limit() -> None:
    offenders = oversized()
    assert not offenders, "over the size limits:\n" + "\n".join(offenders)


def test_no_isinstance_on_a_depth_policy_outside_router() -> None:
    assert {"FixedDepth", "ForestPolicy"} <= policy_classes()
    offenders = policy_isinstance()
    assert not offenders, "branching on a policy's class:\n" + "\n".join(offenders)


def test_the_walk_finds_what_is_too_long(tmp_path: Path) -> None:
    """The checks can fail: a scratch package with a long function nested in a long class, a
    long module and an isinstance on a policy class outside router/."""
    (tmp_path / "__init__.py").write_text("")
    body = "".join(f"    x{i} = {i}\n" for i in range(60))
    (tmp_path / "long.py").write_text(f"def outer():\n    def inner():\n        pass\n{body}")
    (tmp_path / "wide.py").write_text("class Big:\n" + "    a = 1\n" * 400)
    (tmp_path / "tall.py").write_text("x = 1\n" * 601)
    (tmp_path / "router").mkdir()
    (tmp_path / "router" / "__init__.py").write_text("")
    (tmp_path / "router" / "depth.py").write_text(
        "class FixedDepth:\n    def decide(self):\n        pass\n"
        "class Deeper(FixedDepth):\n    pass\n"
        "isinstance(1, FixedDepth)\n"  # inside router/: allowed
    )
    (tmp_path / "stages.py").write_text(
        "from router import depth\nisinstance(1, (int, depth.Deeper))\nisinstance(1, int)\n"
    )
    assert oversized(tmp_path) == [
        "long.py:1: function outer is 63 lines (limit 60)",
        "tall.py:1: module is 601 lines (limit 600)",
        "wide.py:1: class Big is 401 lines (limit 400)",
    ]
    assert policy_classes(tmp_path) == {"FixedDepth", "Deeper"}
    assert policy_isinstance(tmp_path) == ["stages.py:2: isinstance on Deeper"]
