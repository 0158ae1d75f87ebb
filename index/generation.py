"""Writing one generation of a collection (``index.ingest`` decides what goes into it).

The next generation keeps the old one's large segments as they are (hard links, with
tombstones for the rows of documents removed or replaced) and writes one new segment: the
documents parsed in this run and those of the small old segments it merges
(``index.segments``). It is written to a temporary folder with its documents' entries and the
words OCR read on their pages (``index.ocr_words``), fsynced and renamed to ``gen-*``;
replacing ``manifest.json`` is the commit point. Generations and temporary builds that no
reader holds are removed afterwards.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fathom import __version__
from fathom.core.base import Chunk
from fathom.index.collection import embed_input, now_stamp
from fathom.index.entries import DOCUMENTS, DocEntry, write_documents
from fathom.index.locks import READERS, remove_unread
from fathom.index.manifest import FORMAT_VERSION, Manifest, fsync_dir, write_manifest
from fathom.index.segments import (
    PARAMS,
    Layout,
    Segment,
    doc_key,
    link_segment,
    plan,
    read_layout,
    write_layout,
)
from fathom.index.store import ChunkStore, write_chunks

if TYPE_CHECKING:
    import numpy as np
    from fathom.core.base import Embedder
    from fathom.core.config import Config
    from fathom.index.ocr_words import PageWords, WordsUpdate
    from fathom.index.sparse import CorpusStats

Progress = Callable[..., None]


@dataclass
class Pending:
    """A document parsed and chunked in this run, waiting for its vectors; ``words``, those
    OCR read on its pages (kept for showing them)."""

    entry: DocEntry
    chunks: list[Chunk]
    words: PageWords = field(default_factory=dict)


def embedder_precision(embedder: Embedder) -> str:
    """The ``embedder.precision`` an embedder (or the one a wrapper such as Ray's holds) runs."""
    return getattr(getattr(embedder, "inner", embedder), "precision", "fp32")


@dataclass
class Build:
    """The next generation: the old segments it keeps (``(folder, segment)``, linked in as
    they are, in order), the chunks and vectors of its new segment (the documents parsed in
    this run and those of the merged old segments, by path), and its tombstones."""

    keep: list[tuple[Path, Segment]]
    chunks: list[Chunk]
    vectors: np.ndarray
    deleted: list[tuple[int, int]]
    # Each kept segment's entries and its first row (its documents.jsonl, rows made local,
    # for a segment written before segments kept one), and the entries the generation's own
    # file holds when it keeps segments: the overrides and the failed and skipped entries.
    keep_docs: list[tuple[list[DocEntry], int]] = field(default_factory=list)
    top_docs: list[DocEntry] = field(default_factory=list)


def assemble_generation(
    cfg: Config,
    name: str,
    generation: int,
    old: Manifest | None,
    old_dir: Path | None,
    kept: dict[str, DocEntry],
    pending: list[Pending],
    failed: list[DocEntry],
    new_vecs: np.ndarray,
    embedder: Embedder,
    chunker_params: dict[str, Any],
) -> tuple[Manifest, Build]:
    """Choose the old segments to keep (``index.segments.plan``), carry the kept documents of
    the others into the new segment with those parsed in this run, and give every document its
    rows in the new generation.

    ``kept`` (path → entry) are the documents whose rows the old generation holds, ``pending``
    those parsed and chunked in this run (``new_vecs`` their vectors, in order), ``failed``
    the failed and skipped entries the manifest keeps.
    """
    layout = read_layout(old_dir, old.n_rows) if old is not None and old_dir else Layout([])
    bases = layout.bases
    seg_of = {path: _segment_of(bases, e.rows[0]) for path, e in kept.items()}
    live = [0] * len(layout.segments)
    for path, entry in kept.items():
        live[seg_of[path]] += entry.chunks
    new_rows = sum(len(p.chunks) for p in pending)
    merge = set(plan(layout, live, new_rows, cfg.index.merge_factor, cfg.index.max_dead).merge)
    keep = [i for i in range(len(layout.segments)) if i not in merge]
    carried = {p: e for p, e in kept.items() if seg_of[p] in merge}
    kept_in = {i: [e for p, e in kept.items() if seg_of[p] == i] for i in keep}
    entries, keep_out, deleted, top_docs, keep_docs = _keep_segments(layout, old, old_dir, kept_in)
    row = sum(seg.rows for _, seg in keep_out)
    chunks, vec_parts, new_entries = _in_path_order(
        carried, pending, new_vecs, _carried_rows(layout, old_dir, carried, embedder.dim), row
    )
    entries.extend(new_entries)
    entries.sort(key=lambda e: e.path)
    entries.extend(sorted(failed, key=lambda d: d.path))
    vectors = _stack(vec_parts, embedder.dim)
    n_live = sum(e.chunks for e in entries if e.status == "ok")
    manifest = _new_manifest(cfg, name, generation, old, embedder, chunker_params, n_live, entries)
    manifest.n_rows = row + len(chunks)
    top_docs.extend(e for e in entries if e.status != "ok")
    build = Build(keep_out, chunks, vectors, _merge_ranges(deleted), keep_docs, top_docs)
    return manifest, build


def _keep_segments(
    layout: Layout, old: Manifest | None, old_dir: Path | None, kept_in: dict[int, list[DocEntry]]
) -> tuple[list[DocEntry], list[tuple[Path, Segment]], list[tuple[int, int]], list[DocEntry], list]:
    """The old segments kept (``kept_in``: segment index → its kept documents), in order:
    their documents' entries with rows in the new generation, ``(folder, segment)`` of each,
    the tombstones (every row of theirs no kept document holds), the entries that differ from
    their segment's, and each segment's entries with its old first row."""
    entries: list[DocEntry] = []
    keep_out, deleted, top_docs, keep_docs = [], [], [], []
    changed = _changed_since(old) if kept_in else (lambda e: False)
    bases, row = layout.bases, 0
    for i, docs in kept_in.items():
        seg = layout.segments[i]
        name_i = seg.name or f"seg-{old.generation:06d}"  # type: ignore[union-attr]
        keep_out.append((layout.folder(old_dir, seg), Segment(name_i, seg.rows, seg.tokens)))  # type: ignore[arg-type]
        docs = sorted(docs, key=lambda e: e.rows)
        keep_docs.append((docs, bases[i]))
        covered, shift = bases[i], row - bases[i]
        for e in docs:
            if e.rows[0] > covered:
                deleted.append((covered + shift, e.rows[0] + shift))
            entries.append(_moved(e, e.rows[0] + shift))
            if changed(e):
                top_docs.append(entries[-1])
            covered = e.rows[1]
        if covered < bases[i] + seg.rows:
            deleted.append((covered + shift, row + seg.rows))
        row += seg.rows
    return entries, keep_out, deleted, top_docs, keep_docs


def _changed_since(old: Manifest | None) -> Callable[[DocEntry], bool]:
    """Whether a kept document's entry (rows as in ``old``) is no longer the one its segment
    holds: it differs from ``old``'s (moved to a new path), or ``old`` overrode it already."""
    if old is None:
        return lambda e: False
    by_key = {doc_key(e): e for e in old.documents if e.status == "ok"}
    over = old.overridden

    def changed(entry: DocEntry) -> bool:
        key = doc_key(entry)
        if key in over:
            return True
        was = by_key.get(key)
        return was is not entry and was != entry

    return changed


def _segment_of(bases: list[int], row: int) -> int:
    import bisect

    return bisect.bisect_right(bases, row) - 1


def _moved(entry: DocEntry, start: int) -> DocEntry:
    """``entry`` with its rows from ``start`` (itself when they already are: a collection of
    a million documents copies none for its base segment)."""
    if entry.rows[0] == start:
        return entry
    out = copy.copy(entry)
    out.rows = (start, start + entry.chunks)
    return out


def _merge_ranges(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(r for r in ranges if r[1] > r[0]):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _stack(parts: list[np.ndarray], dim: int) -> np.ndarray:
    import numpy as np

    if not parts:
        return np.zeros((0, dim), dtype=np.float32)
    return np.concatenate(parts, axis=0).astype(np.float32, copy=False)


def _carried_rows(
    layout: Layout, old_dir: Path | None, carried: dict[str, DocEntry], dim: int
) -> dict[str, tuple[list[Chunk], np.ndarray]]:
    """The chunks and vectors of each carried document (path → both), read from its old
    segment: only the merged segments' stores and indexes are opened."""
    from fathom.index.dense import DenseIndex

    out: dict[str, tuple[list[Chunk], np.ndarray]] = {}
    if not carried or old_dir is None:
        return out
    bases = layout.bases
    by_seg: dict[int, list[tuple[str, DocEntry]]] = {}
    for path, e in carried.items():
        by_seg.setdefault(_segment_of(bases, e.rows[0]), []).append((path, e))
    for i, docs in by_seg.items():
        folder = layout.folder(old_dir, layout.segments[i])
        store = ChunkStore(folder)
        dense = DenseIndex.load(folder)
        try:
            for path, e in docs:
                s, t = e.rows[0] - bases[i], e.rows[1] - bases[i]
                out[path] = (store.rows(range(s, t)), dense.vectors(s, t))
        finally:
            store.close()
    return out


def _in_path_order(
    carried: dict[str, DocEntry],
    pending: list[Pending],
    new_vecs: np.ndarray,
    old_rows: dict[str, tuple[list[Chunk], np.ndarray]],
    base: int,
) -> tuple[list[Chunk], list[np.ndarray], list[DocEntry]]:
    """The new segment, every carried and pending document by path: its chunks, its vectors
    (of its old segment, or of ``new_vecs``) and its entry with its rows, from ``base``."""
    new_offsets: dict[str, int] = {}
    pos = 0
    for p in pending:
        new_offsets[p.entry.path] = pos
        pos += len(p.chunks)
    by_path: dict[str, tuple[DocEntry, str]] = {k: (v, "old") for k, v in carried.items()}
    by_path.update({p.entry.path: (p.entry, "new") for p in pending})
    pending_by_path = {p.entry.path: p for p in pending}

    chunks: list[Chunk] = []
    vec_parts: list[np.ndarray] = []
    entries: list[DocEntry] = []
    row = base
    for path in sorted(by_path):
        entry, origin = by_path[path]
        if origin == "old":
            doc_chunks, vecs = old_rows[path]
            vec_parts.append(vecs)
        else:
            doc_chunks = pending_by_path[path].chunks
            s = new_offsets[path]
            vec_parts.append(new_vecs[s : s + len(doc_chunks)])
        entry = DocEntry.from_dict({**entry.__dict__, "rows": (row, row + len(doc_chunks))})
        entries.append(entry)
        chunks.extend(doc_chunks)
        row += len(doc_chunks)
    return chunks, vec_parts, entries


def _new_manifest(
    cfg: Config,
    name: str,
    generation: int,
    old: Manifest | None,
    embedder: Embedder,
    chunker_params: dict[str, Any],
    n_chunks: int,
    entries: list[DocEntry],
) -> Manifest:
    """The manifest of generation ``generation``; its index parameters are filled in when the
    indexes are written (``write_generation``)."""
    now = now_stamp()
    return Manifest(
        name=name,
        generation=generation,
        fathom_version=__version__,
        embedder_id=embedder.id,
        embedder_precision=embedder_precision(embedder),
        embedder_dim=embedder.dim,
        embed_title_prefix=cfg.embedder.title_prefix,
        chunker=chunker_params,
        dense={},
        bm25={},
        n_chunks=n_chunks,
        documents=entries,
        created=old.created if old else now,
        updated=now,
        format_version=FORMAT_VERSION,
    )


def write_generation(
    directory: Path,
    manifest: Manifest,
    build: Build,
    cfg: Config,
    emit: Progress,
    words: WordsUpdate | None = None,
) -> None:
    """Write generation ``manifest.generation`` of the collection in ``directory``: the kept
    segments linked in, the new one's chunks and indexes, the tombstones, the documents and
    the OCR words ``words`` keeps, fsynced, then commit its manifest.

    A generation that keeps no old segment is one segment in the generation folder itself."""
    emit("writing", chunks=len(build.chunks))
    final = directory / manifest.data_dir_name
    tmp = directory / f".tmp-{manifest.data_dir_name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    if words is not None:
        words.write(tmp)
    (tmp / READERS).touch()
    if build.keep:
        write_documents(tmp / DOCUMENTS, build.top_docs)
        segments = [seg for _, seg in build.keep]
        for (folder, seg), (docs, first) in zip(build.keep, build.keep_docs, strict=True):
            link_segment(folder, tmp / seg.name)
            if not (tmp / seg.name / DOCUMENTS).is_file():  # written before segments
                local = [_moved(e, e.rows[0] - first) for e in docs]
                write_documents(tmp / seg.name / DOCUMENTS, local)
        if build.chunks:
            new = Segment(f"seg-{manifest.generation:06d}", len(build.chunks))
            new.tokens = _write_segment(tmp / new.name, manifest, build, cfg, _stats(build))
            base = sum(s.rows for s in segments)
            write_documents(
                tmp / new.name / DOCUMENTS,
                [
                    _moved(e, e.rows[0] - base)
                    for e in manifest.documents
                    if e.status == "ok" and e.rows[0] >= base and e.chunks
                ],
            )
            segments.append(new)
        write_layout(tmp, Layout(segments, build.deleted))
        manifest.dense = {**_params(build.keep[0][0], "dense"), "segments": len(segments)}
        manifest.bm25 = {**_params(build.keep[0][0], "bm25"), "segments": len(segments)}
    else:
        write_documents(tmp / DOCUMENTS, manifest.documents)
        _write_segment(tmp, manifest, build, cfg, None)
    _fsync_tree(tmp)
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    fsync_dir(directory)
    write_manifest(directory, manifest)  # the commit point


def _write_segment(
    folder: Path, manifest: Manifest, build: Build, cfg: Config, stats: CorpusStats | None
) -> int:
    """Write a segment of ``build``'s new chunks into ``folder`` (its chunk store, FAISS and
    BM25 indexes; BM25 scored with ``stats`` when it joins other segments); the terms its
    BM25 indexed. The manifest records the indexes' parameters."""
    from fathom.index.dense import DenseIndex
    from fathom.index.sparse import Bm25Index

    folder.mkdir(parents=True, exist_ok=True)
    write_chunks(folder, build.chunks)
    dense = DenseIndex.build(build.vectors, cfg.index)
    dense.save(folder)
    texts = [embed_input(c, manifest.embed_title_prefix) for c in build.chunks]
    bm25 = Bm25Index.build(texts, cfg.index, stats)
    bm25.save(folder)
    params = {"dense": dense.params(cfg.index), "bm25": bm25.params(cfg.index)}
    (folder / PARAMS).write_text(json.dumps(params), encoding="utf-8")
    manifest.dense, manifest.bm25 = params["dense"], params["bm25"]
    return bm25.tokens


def _stats(build: Build) -> CorpusStats:
    """The BM25 statistics of the kept segments, which the new segment is scored with."""
    from fathom.index.sparse import Bm25Index, CorpusStats

    stats = CorpusStats()
    for folder, seg in build.keep:
        stats.add(Bm25Index.load(folder, mmap=True), seg.tokens)
    return stats


def _params(folder: Path, key: str) -> dict[str, Any]:
    """The index parameters segment ``folder`` was written with (none for a segment written
    before they were kept beside it)."""
    try:
        return dict(json.loads((folder / PARAMS).read_text(encoding="utf-8"))[key])
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def _fsync_tree(tmp: Path) -> None:
    for f in tmp.rglob("*"):
        if f.is_file():
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
    for d in [tmp, *(p for p in tmp.rglob("*") if p.is_dir())]:
        fsync_dir(d)


def max_generation(directory: Path) -> int:
    best = 0
    if directory.is_dir():
        for child in directory.iterdir():
            m = re.match(r"^gen-(\d+)$", child.name)
            if m:
                best = max(best, int(m.group(1)))
    return best


def collect_garbage(directory: Path, keep: str) -> None:
    """Remove generations and temporary builds other than ``keep`` (caller holds the writer
    lock). A generation a reader still has open is left for a later ingest."""
    for child in directory.iterdir():
        if child.name == keep or not child.is_dir():
            continue
        if child.name.startswith(".tmp-"):
            shutil.rmtree(child, ignore_errors=True)
        elif child.name.startswith("gen-"):
            remove_unread(child)
