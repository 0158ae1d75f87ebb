"""The package's shape: every import is Fathom's own by its full name, and no module imports,
directly or through others, one that imports it back (imports inside functions and under
``TYPE_CHECKING`` included). The layer order itself is import-linter's contract (pyproject)."""

from __future__ import annotations

from fathom.tests.support.imports import ROOT, cycles, import_graph, package_modules


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
    folders |= {"evaluation", "cli", "bench"}
    across = {"reliability", "architecture", "docs"}
    names = sorted(p.stem for p in (ROOT / "tests").glob("test_*.py"))
    assert len(names) > 40
    odd = [n for n in names if n.split("_")[1] not in folders | across]
    assert odd == []
