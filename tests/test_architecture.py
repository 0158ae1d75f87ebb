"""The package's shape: every import is Fathom's own by its full name, and no module imports,
directly or through others, one that imports it back (imports inside functions and under
``TYPE_CHECKING`` included). The layer order itself is import-linter's contract (pyproject)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from fathom.tests.support.imports import ROOT, _imported, cycles, import_graph, package_modules


def test_the_graph_covers_the_package() -> None:
    mods = package_modules()
    assert {"fathom", "fathom.cli", "fathom.core.config", "fathom.stages.pipeline"} <= set(mods)
    assert not any(m.startswith(("fathom.tests", "fathom.bench")) for m in mods)


def test_no_module_imports_a_folder_as_a_top_level_name() -> None:
    _, stray = import_graph()
    assert stray == []


def test_no_import_cycle() -> None:
    graph, _ = import_graph()
    assert cycles(graph) == []


def test_the_cycle_finder_finds_one(tmp_path) -> None:
    """The check can fail: a package whose two modules import each other inside functions."""
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "a.py").write_text("def f():\n    from fathom.b import g\n")
    (tmp_path / "b.py").write_text("def g():\n    from fathom import a\n")
    (tmp_path / "c.py").write_text("import b\n")  # the package's own module, by a bare name
    graph, stray = import_graph(tmp_path)
    assert cycles(graph) == [["fathom.a", "fathom.b"]]
    assert stray == ["c.py:1: import of b"]
    assert (ROOT / "cli.py").is_file()  # the real tree is read from the checkout


def test_tests_follow_the_layout() -> None:
    """Each test file is named for the folder it tests (``test_<folder>_*.py``), or for what
    it checks across them (reliability, the benchmarks, the architecture, the docs)."""
    folders = {"core", "ingestion", "chunking", "index", "feedback", "router", "stages"}
    folders |= {"learn", "evaluation", "cli", "bench", "web"}
    across = {"reliability", "architecture", "docs"}
    names = sorted(p.stem for p in (ROOT / "tests").glob("test_*.py"))
    assert len(names) > 40
    odd = [n for n in names if n.split("_")[1] not in folders | across]
    assert odd == []


def test_the_benchmarks_never_import_the_tests() -> None:
    """``tests`` is not a package import-linter sees (no ``__init__.py``), so this walks every
    import of ``bench/``, inside functions included."""
    found = []
    for path in sorted((ROOT / "bench").rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        module = ".".join(["fathom", *rel.parts]).removesuffix(".__init__")
        found += [
            f"{path.relative_to(ROOT)}:{line}: {name}"
            for name, line in _imported(module, path)
            if name == "fathom.tests" or name.startswith("fathom.tests.")
        ]
    assert found == []


def _lint_imports(tmp_path: Path, edits: dict[str, str]) -> subprocess.CompletedProcess:
    """``lint-imports`` with the real contracts over a copy of the package's Python files, with
    ``edits`` (module path → a line appended to it) applied to the copy."""
    copy = tmp_path / "fathom"
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in ("tests", "docs", "examples", "build") or any(
            part.startswith(".") or part.endswith(".egg-info") for part in rel.parts
        ):
            continue
        (copy / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, copy / rel)
    for rel, line in edits.items():
        with (copy / rel).open("a", encoding="utf-8") as f:
            f.write(f"\n{line}\n")
    shutil.copyfile(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    lint = Path(sys.executable).with_name("lint-imports")
    return subprocess.run(
        [str(lint) if lint.is_file() else "lint-imports", "--no-cache", "--no-logo"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_import_contracts_hold(tmp_path) -> None:
    done = _lint_imports(tmp_path, {})
    assert done.returncode == 0, done.stdout + done.stderr
    for name in (
        "Layers point down",
        "The runtime never imports training, evaluation, scikit-learn or matplotlib",
        "Nothing below the rendering modules imports rich",
        "Nothing below the web layer imports starlette, uvicorn or jinja2",
        "Terminal: tables and shown pages above render, above images",
        "Router: decisions above their features and costs",
        "Router portfolios: the runtime above its parts",
    ):
        assert f"{name} KEPT" in done.stdout


def test_the_import_contracts_can_fail(tmp_path) -> None:
    """A scratch import of training code from the answering stages, of rich from the router,
    and of the terminal's renderer from its image protocols each break a contract (an import
    inside a function counts too)."""
    done = _lint_imports(
        tmp_path,
        {
            "stages/records.py": "def _scratch():\n    import fathom.learn.sweep",
            "router/cost.py": "import rich",
            "terminal/images.py": "def _scratch():\n    import fathom.terminal.render",
        },
    )
    assert done.returncode != 0
    out = done.stdout
    assert (
        "The runtime never imports training, evaluation, scikit-learn or matplotlib BROKEN" in out
    )
    assert "fathom.stages.records -> fathom.learn.sweep" in out
    assert "Nothing below the rendering modules imports rich BROKEN" in out
    assert "fathom.router.cost -> rich" in out
    assert "Terminal: tables and shown pages above render, above images BROKEN" in out
