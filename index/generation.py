"""Writing one generation of a collection (``index.ingest`` decides what goes into it).

The next manifest, chunks and vectors are assembled from the documents kept from the old
generation and those parsed in this run, written to a temporary folder with the words OCR read
on their pages (``index.ocr_words``), fsynced and renamed to ``gen-*``; replacing
``manifest.json`` is the commit point. Generations and temporary builds
that no reader holds are removed afterwards.
"""

from __future__ import annotations

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
from fathom.index.locks import READERS, remove_unread
from fathom.index.manifest import (
    FORMAT_VERSION,
    DocEntry,
    Manifest,
    fsync_dir,
    write_manifest,
)
from fathom.index.store import ChunkStore, write_chunks

if TYPE_CHECKING:
    import numpy as np
    from fathom.core.base import Embedder
    from fathom.core.config import Config
    from fathom.index.dense import DenseIndex
    from fathom.index.ocr_words import PageWords, WordsUpdate

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
) -> tuple[Manifest, list[Chunk], np.ndarray]:
    """Order documents by path, copy kept rows from the old generation, stack the vectors.

    ``kept`` (path → entry) are the documents whose rows the old generation holds, ``pending``
    those parsed and chunked in this run (``new_vecs`` their vectors, in order), ``failed``
    the failed and skipped entries the manifest keeps.
    """
    import numpy as np

    old_chunks, old_dense = _read_old(old_dir) if kept else ([], None)
    chunks, vec_parts, entries = _in_path_order(kept, pending, new_vecs, old_chunks, old_dense)
    entries.extend(sorted(failed, key=lambda d: d.path))
    dim = embedder.dim
    vectors = (
        np.concatenate(vec_parts, axis=0).astype(np.float32, copy=False)
        if vec_parts
        else np.zeros((0, dim), dtype=np.float32)
    )
    manifest = _new_manifest(
        cfg, name, generation, old, embedder, chunker_params, len(chunks), entries
    )
    return manifest, chunks, vectors


def _in_path_order(
    kept: dict[str, DocEntry],
    pending: list[Pending],
    new_vecs: np.ndarray,
    old_chunks: list[Chunk],
    old_dense: DenseIndex | None,
) -> tuple[list[Chunk], list[np.ndarray], list[DocEntry]]:
    """Every kept and pending document by path: its chunks, its vectors (rows of the old
    generation, or of ``new_vecs``) and its entry with its rows in the new generation."""
    new_offsets: dict[str, int] = {}
    pos = 0
    for p in pending:
        new_offsets[p.entry.path] = pos
        pos += len(p.chunks)
    by_path: dict[str, tuple[DocEntry, str]] = {k: (v, "old") for k, v in kept.items()}
    by_path.update({p.entry.path: (p.entry, "new") for p in pending})
    pending_by_path = {p.entry.path: p for p in pending}

    chunks: list[Chunk] = []
    vec_parts: list[np.ndarray] = []
    entries: list[DocEntry] = []
    row = 0
    for path in sorted(by_path):
        entry, origin = by_path[path]
        if origin == "old":
            s, e = entry.rows
            doc_chunks = old_chunks[s:e]
            assert old_dense is not None
            vec_parts.append(old_dense.vectors(s, e))
        else:
            doc_chunks = pending_by_path[path].chunks
            s = new_offsets[path]
            vec_parts.append(new_vecs[s : s + len(doc_chunks)])
        entry = DocEntry.from_dict({**entry.__dict__, "rows": (row, row + len(doc_chunks))})
        entries.append(entry)
        chunks.extend(doc_chunks)
        row += len(doc_chunks)
    return chunks, vec_parts, entries


def _read_old(old_dir: Path | None) -> tuple[list[Chunk], DenseIndex | None]:
    """The chunks and the dense index of the old generation in ``old_dir`` (none without one)."""
    from fathom.index.dense import DenseIndex

    if old_dir is None:
        return [], None
    old_store = ChunkStore(old_dir)
    old_chunks = old_store.all()
    old_store.close()
    return old_chunks, DenseIndex.load(old_dir)


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
    chunks: list[Chunk],
    vectors: np.ndarray,
    cfg: Config,
    emit: Progress,
    words: WordsUpdate | None = None,
) -> None:
    """Write generation ``manifest.generation`` of the collection in ``directory``: chunks,
    indexes and the OCR words ``words`` keeps, fsynced, then commit its manifest."""
    from fathom.index.dense import DenseIndex
    from fathom.index.sparse import Bm25Index

    emit("writing", chunks=len(chunks))
    final = directory / manifest.data_dir_name
    tmp = directory / f".tmp-{manifest.data_dir_name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    write_chunks(tmp, chunks)
    if words is not None:
        words.write(tmp)
    (tmp / READERS).touch()
    dense = DenseIndex.build(vectors, cfg.index)
    dense.save(tmp)
    texts = [embed_input(c, manifest.embed_title_prefix) for c in chunks]
    bm25 = Bm25Index.build(texts, cfg.index)
    bm25.save(tmp)
    manifest.dense = dense.params(cfg.index)
    manifest.bm25 = bm25.params(cfg.index)
    for f in tmp.rglob("*"):
        if f.is_file():
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
    fsync_dir(tmp / Bm25Index.DIR)
    fsync_dir(tmp)
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    fsync_dir(directory)
    write_manifest(directory, manifest)  # the commit point


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
