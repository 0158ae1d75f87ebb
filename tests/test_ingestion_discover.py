"""discover(): folders into sources with reasons; and loading the shared sample files."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from fathom.bench.support import docgen
from fathom.ingestion import SUPPORTED_SUFFIXES, Source, discover, load_document


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """root/ with good files, hidden entries, an unsupported file and broken/looping symlinks."""
    root = tmp_path / "root"
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / ".git" / "config.txt").write_text("hidden inside a hidden folder")
    (root / ".hidden.txt").write_text("hidden file")
    (root / "a.txt").write_text("a text file")
    (root / "B.MD").write_text("# upper-case suffix")
    (root / "sub" / "c.md").write_text("# c")
    (root / "sub" / "deeper" / "d.txt").write_text("d")
    (root / "sub" / "image.gif").write_bytes(b"GIF89a")
    (root / "sub" / "noext").write_text("no suffix")
    os.symlink("loop_b", root / "loop_a")  # a -> b -> a
    os.symlink("loop_a", root / "loop_b")
    os.symlink("does-not-exist.txt", root / "broken.txt")
    os.symlink("..", root / "sub" / "up")  # a folder loop back to root
    os.symlink("a.txt", root / "link_to_a.txt")  # the same file again
    return root


def by_name(sources: list[Source], root: Path) -> dict[str, Source]:
    return {str(s.path.relative_to(root)): s for s in sources}


def test_discover_tree(tree: Path) -> None:
    sources = list(discover([tree]))
    found = by_name(sources, tree)
    ok = sorted(name for name, s in found.items() if s.status == "ok")
    assert ok == ["B.MD", "a.txt", "sub/c.md", "sub/deeper/d.txt"]
    for name in ("B.MD", "a.txt"):
        assert found[name].problem is None
        assert found[name].path == tree / name  # as given, not resolved

    assert found[".git"].status == "skipped" and "hidden" in found[".git"].problem
    assert found[".hidden.txt"].status == "skipped"
    assert not any(".git/" in name for name in found)  # hidden folders are not entered
    assert found["sub/image.gif"].status == "skipped" and "'.gif'" in found["sub/image.gif"].problem
    assert found["sub/noext"].status == "skipped"

    for name in ("loop_a", "loop_b"):
        assert found[name].status == "failed" and "symlink loop" in found[name].problem
    assert found["broken.txt"].status == "failed"
    assert (
        "broken symlink" in found["broken.txt"].problem
        and "does-not-exist.txt" in found["broken.txt"].problem
    )
    assert found["sub/up"].status == "failed" and "loop" in found["sub/up"].problem
    assert (
        found["link_to_a.txt"].status == "skipped" and "duplicate" in found["link_to_a.txt"].problem
    )


def test_discover_is_sorted_and_deterministic(tree: Path) -> None:
    first = [s.path for s in discover([tree])]
    assert first == [s.path for s in discover([str(tree)])]
    top = [p.name for p in first if p.parent == tree]
    assert top == sorted(top)


def test_do_not_follow_symlinks(tree: Path) -> None:
    found = by_name(list(discover([tree], follow_symlinks=False)), tree)
    for name in ("loop_a", "broken.txt", "sub/up", "link_to_a.txt"):
        assert found[name].status == "skipped" and "symlink" in found[name].problem
    assert found["a.txt"].status == "ok"


def test_explicit_paths(tree: Path, tmp_path: Path) -> None:
    given = [tree / "a.txt", tree / ".hidden.txt", tmp_path / "missing", tree / "a.txt"]
    sources = list(discover([*given, tree / "sub" / "image.gif"]))
    assert [s.status for s in sources] == ["ok", "ok", "failed", "skipped", "skipped"]
    assert "no such file" in sources[2].problem
    assert sources[3].problem.startswith("duplicate")
    assert "unsupported" in sources[4].problem


def test_unreadable_folder(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    locked = tree / "locked"
    locked.mkdir()
    (locked / "inside.txt").write_text("unreachable")
    real_scandir = os.scandir

    def scandir(path: str | os.PathLike[str]) -> Iterator[os.DirEntry[str]]:
        if Path(path) == locked:  # root reads every folder, so simulate chmod 000
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    found = by_name(list(discover([tree])), tree)
    assert found["locked"].status == "failed"
    assert found["locked"].problem == "cannot read folder: permission denied"
    assert found["a.txt"].status == "ok"  # the rest goes on


def test_source_record() -> None:
    assert Source(Path("x.txt")).status == "ok"
    assert Source(Path("x.bin"), "unsupported", "skipped").to_dict() == {
        "path": "x.bin",
        "status": "skipped",
        "problem": "unsupported",
    }
    with pytest.raises(ValueError):
        Source(Path("x.txt"), "a reason", "ok")


def test_discovered_files_load(tmp_path: Path) -> None:
    docgen.make_sample_pdf(tmp_path / "s.pdf")
    docgen.make_docx(tmp_path / "d.docx")
    docgen.make_utf8_text(tmp_path / "t.txt")
    docgen.make_markdown(tmp_path / "m.md")
    docgen.make_empty_file(tmp_path / "empty.txt")
    results = {}
    for source in discover([tmp_path]):
        try:
            results[source.path.name] = load_document(source.path).format
        except Exception as exc:
            results[source.path.name] = type(exc).__name__
    assert results == {
        "d.docx": "docx",
        "empty.txt": "ParseError",
        "m.md": "md",
        "s.pdf": "pdf",
        "t.txt": "txt",
    }


# ---------------------------------------------------------------------------------------------
# The shared sample files (../shared/data)
# ---------------------------------------------------------------------------------------------

DATA = Path(
    os.environ.get("FATHOM_DATA", Path(__file__).resolve().parents[1].parent / "shared" / "data")
)


@pytest.mark.data
def test_shared_pdfs_and_docx_load() -> None:
    folders = [DATA / "pdfs", DATA / "docx"]
    if not all(f.is_dir() for f in folders):
        pytest.skip(f"no shared data at {DATA} (set FATHOM_DATA)")
    sources = [s for s in discover(folders) if s.status == "ok"]
    assert {s.path.suffix for s in sources} <= SUPPORTED_SUFFIXES
    assert sum(s.path.suffix == ".pdf" for s in sources) >= 5
    assert sum(s.path.suffix == ".docx" for s in sources) >= 4
    for source in sources:
        doc = load_document(source.path)
        assert doc.text.strip(), source.path
        assert doc.title, source.path
        if doc.format == "pdf":
            assert doc.pages and doc.pages[-1].end == len(doc.text), source.path
            assert [p.number for p in doc.pages] == list(range(1, len(doc.pages) + 1))
        if "usdoj" in source.path.name:
            assert len(doc.sections) > 50
            assert any("INTRODUCTION" in s.title.upper() for s in doc.sections)
        for sec in doc.sections:
            assert 0 <= sec.start <= sec.end <= len(doc.text)
