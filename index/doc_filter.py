"""Which documents of a collection a question reads: ``--doc PATTERN`` (``ask``, ``search``,
``chat``) and the MCP tools' ``doc`` argument.

A pattern selects a document of the collection (one the manifest lists as ``ok``) when,
compared case-insensitively, it

1. equals the document's title, its file name (the last part of its path; a ``docs.jsonl``
   record's is ``docs.jsonl#ID``), its path (a relative pattern is taken from the working
   folder), its source id (a record's ``doc_id``) or Fathom's ``doc_id``; or
2. holds a glob character (``*``, ``?``, ``[``) and matches, as an ``fnmatch`` pattern over the
   whole string, its path, its file name or its title; or
3. is part of its title.

Several patterns select every document any of them selects (a union). A pattern that selects
nothing is a ``DocumentNotFound`` error naming it and the closest titles (``difflib``). The
result, a ``DocFilter``, holds the documents' chunk rows — each document's ``[start, end)``
range in the manifest — which the retrievers search within (``index.retrieve``).
"""

from __future__ import annotations

import difflib
import fnmatch
import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fathom.core.errors import DocumentNotFound, FathomError

if TYPE_CHECKING:
    import numpy as np
    from fathom.index.manifest import DocEntry, Manifest

GLOB = frozenset("*?[")
CLOSEST = 3  # titles an unmatched pattern's error names
HOW = "give a title, a file name, a path glob (*.pdf) or part of a title"


@dataclass(frozen=True, slots=True)
class SelectedDocument:
    """One document a filter kept: its ids, title, path and ``[start, end)`` chunk rows."""

    doc_id: str
    title: str
    path: str
    rows: tuple[int, int]

    def to_dict(self) -> dict[str, Any]:
        return {
            "doc_id": self.doc_id,
            "title": self.title,
            "path": self.path,
            "chunks": self.rows[1] - self.rows[0],
        }


@dataclass(frozen=True, slots=True)
class DocFilter:
    """The documents ``patterns`` selected (in row order) out of ``collection_documents``, and
    their chunk rows: ``ranges`` (sorted, disjoint ``[start, end)``) and ``rows``
    (``(n,) int64``, ascending)."""

    patterns: tuple[str, ...]
    documents: tuple[SelectedDocument, ...]
    collection_documents: int
    ranges: tuple[tuple[int, int], ...] = field(init=False)
    rows: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        import numpy as np

        spans = sorted(d.rows for d in self.documents if d.rows[1] > d.rows[0])
        merged: list[tuple[int, int]] = []
        for start, end in spans:
            if merged and start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], end))
            else:
                merged.append((start, end))
        rows = [np.arange(a, b, dtype=np.int64) for a, b in merged]
        object.__setattr__(self, "ranges", tuple(merged))
        object.__setattr__(self, "rows", np.concatenate(rows) if rows else np.zeros(0, np.int64))

    def __len__(self) -> int:
        """How many chunks the selected documents hold."""
        return sum(b - a for a, b in self.ranges)

    def to_dict(self) -> dict[str, Any]:
        """What ``--json`` reports: the patterns, the documents kept and the collection's
        count."""
        return {
            "patterns": list(self.patterns),
            "documents": [d.to_dict() for d in self.documents],
            "collection_documents": self.collection_documents,
        }


def file_name(path: str) -> str:
    """The last part of a document's path (``docs.jsonl#ID`` for a record)."""
    return path.replace("\\", "/").rsplit("/", 1)[-1]


def matches(pattern: str, doc: DocEntry) -> bool:
    """Whether ``pattern`` selects ``doc`` (the rule in the module docstring)."""
    p = pattern.casefold()
    title, name, path = doc.title.casefold(), file_name(doc.path).casefold(), doc.path.casefold()
    exact = {title, name, path, doc.source_id.casefold(), doc.doc_id.casefold()} - {""}
    if p in exact or os.path.abspath(pattern).casefold() == path:
        return True
    if GLOB & set(p) and any(fnmatch.fnmatchcase(s, p) for s in (path, name, title)):
        return True
    return bool(title) and p in title


def select_documents(manifest: Manifest, patterns: Sequence[str]) -> DocFilter | None:
    """The documents of ``manifest`` that ``patterns`` select (a union), or None for no
    patterns. Raises ``DocumentNotFound`` for a pattern that selects nothing, naming the
    closest titles, and ``FathomError`` for an empty one."""
    wanted = tuple(dict.fromkeys(p.strip() for p in patterns))
    if not wanted:
        return None
    if "" in wanted:
        raise FathomError(f"a document pattern is empty — {HOW}")
    docs = [d for d in manifest.documents if d.status == "ok"]
    kept: dict[str, DocEntry] = {}
    for pattern in wanted:
        found = [d for d in docs if matches(pattern, d)]
        if not found:
            raise DocumentNotFound(unmatched(pattern, manifest.name, docs))
        kept.update((d.path, d) for d in found)
    return _doc_filter(wanted, list(kept.values()), len(docs))


def select_sources(manifest: Manifest, source_ids: Collection[str]) -> DocFilter:
    """The documents of ``manifest`` whose source id (a ``docs.jsonl`` record's ``doc_id``) is
    in ``source_ids``: the exact selection a trainer needs (no pattern rules)."""
    docs = [d for d in manifest.documents if d.status == "ok"]
    chosen = [d for d in docs if d.source_id in source_ids]
    return _doc_filter(("source ids",), chosen, len(docs))


def _doc_filter(patterns: tuple[str, ...], chosen: list[DocEntry], total: int) -> DocFilter:
    chosen = sorted(chosen, key=lambda d: (d.rows, d.path))
    return DocFilter(
        patterns=patterns,
        documents=tuple(SelectedDocument(d.doc_id, d.title, d.path, d.rows) for d in chosen),
        collection_documents=total,
    )


def unmatched(pattern: str, collection: str, docs: list[DocEntry]) -> str:
    """The error for a pattern that selects none of ``docs``: it, and the closest titles."""
    if not docs:
        return f"no document matches {pattern!r}: collection {collection!r} holds none"
    labels = {(d.title or file_name(d.path)).casefold(): d.title or file_name(d.path) for d in docs}
    close = difflib.get_close_matches(pattern.casefold(), list(labels), n=CLOSEST, cutoff=0.0)
    listed = ", ".join(repr(labels[c]) for c in close)
    return (
        f"no document matches {pattern!r} in collection {collection!r} — closest titles: "
        f"{listed}; {HOW}"
    )
