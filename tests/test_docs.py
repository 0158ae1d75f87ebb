"""The README and docs speak of Fathom only, and stay readable: no history of their making, no
issue numbers as status, no paths of the machine a result was made on, no links outside the
repository, and every relative link resolves."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TEXT = (".md", ".txt", ".json", ".toml")
HISTORY = re.compile(
    r"\bsessions? \d|\bbefore the fix\b|\blast week\b|\bissue #?\d|\b#\d+ (?:is|was) "
    r"(?:blocked|resolved)|\bStatus:",
    re.IGNORECASE,
)
MACHINE_PATH = re.compile(r"(?<![\w.~$])/(?:work|root|tmp|home|opt|Users|mnt|srv)/")
OUTSIDE = re.compile(r"\.\./shared|\.\./\.\.")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def documents() -> list[Path]:
    docs = [REPO / "README.md", REPO / "CONTRIBUTING.md"]
    docs += sorted(p for p in (REPO / "docs").rglob("*") if p.suffix in TEXT)
    return docs


def test_there_are_docs_to_check() -> None:
    names = {p.relative_to(REPO).as_posix() for p in documents()}
    assert {"README.md", "CONTRIBUTING.md", "docs/architecture.md"} <= names
    assert any(n.startswith("docs/results/") for n in names)


@pytest.mark.parametrize("path", documents(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_speaks_of_fathom_only(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    found = [
        f"{path.relative_to(REPO)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)!r}"
        for rx in (HISTORY, MACHINE_PATH, OUTSIDE)
        for m in rx.finditer(text)
    ]
    assert found == []


@pytest.mark.parametrize(
    "path", [p for p in documents() if p.suffix == ".md"], ids=lambda p: p.name
)
def test_relative_links_resolve(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    broken = [
        target
        for target in LINK.findall(text)
        if "://" not in target
        and not target.startswith("mailto:")
        and not (path.parent / target).exists()
    ]
    assert broken == []


def test_the_readme_is_short() -> None:
    assert len((REPO / "README.md").read_text(encoding="utf-8")) < 12_000


def test_the_checks_catch_what_they_look_for() -> None:
    assert HISTORY.search("Status: done") and HISTORY.search("as it was last week")
    assert MACHINE_PATH.search("made in /home/someone/docs") and not MACHINE_PATH.search("a/b/c")
    assert OUTSIDE.search("see ../shared/DESIGN.md")
