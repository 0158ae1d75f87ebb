"""A generation as segments: what lets adding or removing one document in a collection of a
million chunks write only that document.

A generation folder lists its segments in ``segments.json``; each ``seg-*`` folder is a whole
chunk store, FAISS index and BM25 index over its rows (``index.store``, ``index.dense``,
``index.sparse``), written once by the generation that names it and never changed. A later
generation keeps a segment by hard-linking its files into its own folder (no byte of it is
written again), so every generation stays self-contained: the reader locks, the clean-up and the
crash safety of ``index.generation`` are those of a one-folder generation.

The collection's rows are the segments' rows in order (segment ``i`` starts where ``i − 1``
ends). A document removed or replaced from a kept segment is a tombstone: its rows are listed
under ``deleted`` and never returned by a search; they stay in the files until the segment is
merged. Which segments an ingest merges into its new one is ``plan``'s choice.

A generation folder without ``segments.json`` (written before segments) is one segment: the
folder itself.
"""

from __future__ import annotations

import bisect
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fathom.index.entries import DocEntry

LAYOUT = "segments.json"
FORMAT = 1
PARAMS = "index-params.json"  # a segment's dense and BM25 parameters, as the manifest gives them


@dataclass
class Segment:
    """One segment: its folder's name (``""`` for a generation written before segments, whose
    files lie in the generation folder itself), its rows, and BM25's totals over them
    (``tokens``: terms indexed; 0 when not recorded)."""

    name: str
    rows: int
    tokens: int = 0


@dataclass
class Layout:
    """The segments of one generation, in row order, and its tombstones (``deleted``: sorted,
    disjoint ``[start, end)`` ranges of rows no search returns)."""

    segments: list[Segment]
    deleted: list[tuple[int, int]] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return sum(s.rows for s in self.segments)

    @property
    def bases(self) -> list[int]:
        """Each segment's first row."""
        out, pos = [], 0
        for s in self.segments:
            out.append(pos)
            pos += s.rows
        return out

    @property
    def dead(self) -> int:
        return sum(b - a for a, b in self.deleted)

    def folder(self, data_dir: Path, segment: Segment) -> Path:
        return data_dir / segment.name if segment.name else data_dir

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "segments": [
                {"name": s.name, "rows": s.rows, "tokens": s.tokens} for s in self.segments
            ],
            "deleted": [list(r) for r in self.deleted],
        }


def read_layout(data_dir: Path, n_rows: int) -> Layout:
    """The layout of generation folder ``data_dir``; one without ``segments.json`` is one
    segment of ``n_rows`` rows, the folder itself."""
    try:
        raw = json.loads((data_dir / LAYOUT).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return Layout([Segment("", n_rows)])
    if raw.get("format") != FORMAT:
        raise ValueError(f"{data_dir / LAYOUT}: format {raw.get('format')!r}, not {FORMAT}")
    segments = [
        Segment(s["name"], int(s["rows"]), int(s.get("tokens", 0))) for s in raw["segments"]
    ]
    deleted = [(int(a), int(b)) for a, b in raw.get("deleted", [])]
    return Layout(segments, deleted)


def write_layout(data_dir: Path, layout: Layout) -> None:
    with open(data_dir / LAYOUT, "w", encoding="utf-8") as fh:
        json.dump(layout.to_dict(), fh)
        fh.flush()
        os.fsync(fh.fileno())


def link_segment(source: Path, target: Path) -> None:
    """Give ``target`` (a new folder) every file of segment folder ``source`` as hard links —
    nothing is copied — or as copies where the file system refuses a link. Only a segment's own
    files: a generation folder written before segments also holds the generation's files."""
    for path in _segment_files(source):
        dest = target / path.relative_to(source)
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(path, dest)
        except OSError:
            shutil.copyfile(path, dest)


def _segment_files(folder: Path) -> list[Path]:
    from fathom.index.dense import DenseIndex
    from fathom.index.entries import DOCUMENTS
    from fathom.index.sparse import Bm25Index
    from fathom.index.store import CHUNKS, OFFSETS

    files = [folder / CHUNKS, folder / OFFSETS, folder / DenseIndex.FILE]
    files.extend(p for p in (folder / Bm25Index.DIR).iterdir() if p.is_file())
    files.extend(folder / f for f in (PARAMS, DOCUMENTS) if (folder / f).is_file())
    return files


def read_documents_of(data_dir: Path, n_rows: int) -> tuple[list[DocEntry], set[DocKey]]:
    """Every document's entry of generation folder ``data_dir`` (indexed ones by path, then
    the failed and skipped ones by path), and the keys of those its own ``documents.jsonl``
    overrides.

    A generation of one segment keeps every entry in its own ``documents.jsonl``. Each segment
    of a generation of several keeps the entries of the documents written into it (rows local
    to it), written once with it and linked from then on; the generation's own file holds the
    failed and skipped entries and the indexed ones that differ from their segment's (a
    document moved to a new path keeps its rows). A segment's entry whose rows are tombstoned
    is a document removed since."""
    from fathom.index.entries import DOCUMENTS, read_documents

    top_file = data_dir / DOCUMENTS
    top = read_documents(top_file) if top_file.is_file() else []
    if not (data_dir / LAYOUT).is_file():
        return top, set()
    layout = read_layout(data_dir, n_rows)
    over = {doc_key(e) for e in top if e.status == "ok"}
    starts = [a for a, _ in layout.deleted]
    out = [e for e in top if e.status == "ok"]
    for base, seg in zip(layout.bases, layout.segments, strict=True):
        for e in read_documents(data_dir / seg.name / DOCUMENTS):
            if e.status != "ok":
                continue
            start = base + e.rows[0]
            i = bisect.bisect_right(starts, start) - 1
            dead = i >= 0 and start < layout.deleted[i][1] and e.chunks > 0
            if dead or (start, e.doc_id) in over:
                continue
            e.rows = (start, start + e.chunks)
            out.append(e)
    out.sort(key=lambda e: e.path)
    out.extend(sorted((e for e in top if e.status != "ok"), key=lambda e: e.path))
    return out, over


DocKey = tuple[int, str]


def doc_key(entry: DocEntry) -> DocKey:
    """An indexed document's place: its first row and its content id."""
    return (entry.rows[0], entry.doc_id)


@dataclass
class Plan:
    """What a new generation does with the old one's segments: ``keep``, the indexes of those
    linked in as they are; their rows ``moved`` into the new segment are those of the others
    (``merge``), whose live documents are indexed again with the new ones."""

    keep: list[int]
    merge: list[int]


def plan(
    layout: Layout, live: list[int], new_rows: int, merge_factor: float, max_dead: float
) -> Plan:
    """Choose which old segments to keep: ``live[i]``, segment ``i``'s rows that stay (of its
    documents kept); ``new_rows``, the rows this ingest adds.

    A segment whose dead share would pass ``max_dead`` is merged (its live rows indexed again).
    Going back from the last segment, one holding fewer live rows than ``merge_factor`` times
    what the new segment already holds is merged into it, so segment sizes grow geometrically
    and a row is indexed again about log(n) times over a collection's life, never all of them
    for one small change. A kept segment with no live row is dropped."""
    n = len(layout.segments)
    merge = {
        i
        for i, s in enumerate(layout.segments)
        if s.rows and (s.rows - live[i]) / s.rows > max_dead
    }
    carried = new_rows + sum(live[i] for i in merge)
    for i in range(n - 1, -1, -1):
        if i in merge:
            continue
        if live[i] < merge_factor * carried:
            merge.add(i)
            carried += live[i]
        else:
            break
    keep = [i for i in range(n) if i not in merge and live[i] > 0]
    merge_list = [i for i in range(n) if i in merge or (i not in keep)]
    return Plan(keep, merge_list)
