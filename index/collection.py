"""A collection on disk, read: manifest, chunk store, FAISS and BM25 (``index.ingest`` builds
one, atomically and incrementally; ``index.locks`` keeps readers and writers apart).

Layout under ``FATHOM_HOME/collections/<name>/``::

    manifest.json        the commit marker; names the live generation
    gen-000007/          documents.jsonl (every document's entry), ocr-words/ (the words OCR
                         read on each scanned page, ``index.ocr_words``), and either one
                         segment's chunks.jsonl, chunks.offsets.npy, dense.faiss, bm25/, or
                         segments.json and seg-*/ folders holding them (``index.segments``)
    .lock                held by the one writer

A build writes a new ``gen-*`` directory, fsyncs it, then replaces ``manifest.json``; older
generations are removed after the commit. A crash at any point leaves the previous manifest and
its generation intact, so the collection always loads.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import shutil
import time
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from fathom.core.base import Chunk, DocMeta, content_id
from fathom.core.errors import (
    CollectionNotFound,
    ConfigError,
    FathomError,
    IndexMismatchError,
)
from fathom.index.locks import READERS, hold_shared, writer_lock
from fathom.index.manifest import (
    Manifest,
    file_sha256,
    fsync_dir,
    read_manifest,
)
from fathom.index.segmented import live_mask, open_bm25, open_dense, open_store
from fathom.index.segments import Layout, read_layout
from fathom.index.store import ChunkStore

if TYPE_CHECKING:
    from fathom.core.config import Config
    from fathom.index.dense import DenseIndex
    from fathom.index.sparse import Bm25Index


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")

Progress = Callable[..., None]


def now_stamp() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def collections_root(cfg: Config) -> Path:
    return cfg.home_path() / "collections"


def is_valid_name(name: str) -> bool:
    """Whether ``name`` can name a collection (letters, digits, '.', '_', '-')."""
    return bool(_NAME.match(name))


def check_name(name: str) -> str:
    if not is_valid_name(name):
        raise ConfigError(
            f"collection name {name!r}: use letters, digits, '.', '_' or '-' "
            "(starting with a letter or digit)"
        )
    return name


def embed_input(chunk: Chunk, title_prefix: bool) -> str:
    """What the embedder and BM25 read for a chunk: its text, headed by title and section."""
    if not title_prefix:
        return chunk.text
    head = [h for h in (chunk.title, chunk.section) if h and not chunk.text.startswith(h)]
    if len(head) == 2 and head[0] == head[1]:
        head = head[:1]
    return (" — ".join(head) + "\n" + chunk.text) if head else chunk.text


# ---------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------


class Collection:
    """A committed collection, opened read-only. Indexes load on first use."""

    def __init__(self, directory: Path, manifest: Manifest, cfg: Config) -> None:
        self.directory = directory
        self.manifest = manifest
        self.cfg = cfg
        self.data_dir = directory / manifest.data_dir_name
        self._store: ChunkStore | None = None
        self._dense: DenseIndex | None = None
        self._bm25: Bm25Index | None = None
        self._layout: Layout | None = None
        self._release: weakref.finalize | None = None  # closes the reader lock's fd

    def _hold(self) -> bool:
        """Take the shared reader lock on this generation; False when the generation is gone
        (a writer's clean-up removed it first) and the manifest must be read again."""
        fd = hold_shared(self.data_dir / READERS)
        if fd is None:
            # A generation written before reader locks existed (still the manifest's: a
            # clean-up never removes the current one), or one a clean-up is removing now.
            current = read_manifest(self.directory)
            return current is not None and current.data_dir_name == self.manifest.data_dir_name
        # Released by close(), or when the collection is garbage-collected unclosed.
        self._release = weakref.finalize(self, os.close, fd)
        return True

    @property
    def name(self) -> str:
        return self.manifest.name

    @classmethod
    def open(cls, cfg: Config, name: str, expect_embedder: str | None = None) -> Collection:
        """Open ``name``; ``expect_embedder`` (an id) must match the one it was built with."""
        directory = collections_root(cfg) / check_name(name)
        for _attempt in range(3):
            manifest = read_manifest(directory)
            if manifest is None:
                raise CollectionNotFound(
                    f"no collection named {name!r} in {collections_root(cfg)} — "
                    f"create it with `fathom ingest PATH --collection {name}`"
                )
            coll = cls(directory, manifest, cfg)
            if coll.data_dir.is_dir() and coll._hold():
                break
            time.sleep(0.05)  # a writer committed and removed our generation: read again
        else:
            raise IndexMismatchError(
                f"collection {name!r}: manifest names {manifest.data_dir_name}, which is missing — "
                f"re-ingest with `fathom ingest ... --collection {name} --rebuild`"
            )
        if expect_embedder and expect_embedder != manifest.embedder_id:
            raise IndexMismatchError(
                f"collection {name!r} was built with embedder {manifest.embedder_id!r}, but "
                f"{expect_embedder!r} is configured — use --embedder {manifest.embedder_id} or "
                f"re-ingest with `fathom ingest ... --collection {name} --rebuild`"
            )
        return coll

    @property
    def layout(self) -> Layout:
        """The generation's segments and tombstones."""
        if self._layout is None:
            self._layout = read_layout(self.data_dir, self.manifest.n_rows)
        return self._layout

    @property
    def store(self) -> ChunkStore:
        """The chunk store (rows of every segment, in order)."""
        if self._store is None:
            self._store = open_store(self.data_dir, self.layout)
        return self._store

    @property
    def dense(self) -> DenseIndex:
        """The dense index (every segment's; searches skip tombstones)."""
        if self._dense is None:
            self._dense = open_dense(self.data_dir, self.layout, self.cfg)
        return self._dense

    @property
    def bm25(self) -> Bm25Index:
        """The BM25 index (every segment's; searches skip tombstones)."""
        if self._bm25 is None:
            self._bm25 = open_bm25(self.data_dir, self.layout, self.cfg)
        return self._bm25

    def live(self) -> list[tuple[int, Chunk]]:
        """Every live chunk with its row, in row order (tombstoned rows left out)."""
        dead = self.layout.deleted
        rows = enumerate(self.store.all())
        if not dead:
            return list(rows)
        mask = live_mask(self.layout)
        assert mask is not None
        return [(r, c) for r, c in rows if mask[r]]

    def __len__(self) -> int:
        return self.manifest.n_chunks

    def chunks(self, rows: Iterable[int]) -> list[Chunk]:
        return self.store.rows(rows)

    def embed_text(self, chunk: Chunk) -> str:
        return embed_input(chunk, self.manifest.embed_title_prefix)

    def metadata(self) -> dict[str, DocMeta]:
        """What each indexed document says about itself, by ``doc_id`` (the ``Chunk.doc_id``
        of its chunks): title, authors, organisation, date as written and as ISO
        (``iso_date``), version, and where each came from (``DocMeta.origin``: the file's
        properties, its first page's title block, or its opening text, with the page).

        Read at ingest and kept in the manifest, so this reads no file and loads no index.
        Every indexed ("ok") document has an entry; a field not found is empty, and a document
        indexed before Fathom read metadata has an empty ``DocMeta`` until it is ingested again
        with ``--rebuild``. A ``.jsonl`` record's entry is empty too (records carry only text
        and a title)."""
        return {
            d.doc_id: DocMeta.from_dict(d.meta) for d in self.manifest.documents if d.status == "ok"
        }

    def check(self) -> list[str]:
        """Consistency problems (empty when the collection is sound)."""
        import numpy as np

        problems: list[str] = []
        m = self.manifest
        n = m.n_rows
        if self.layout.rows != n:
            problems.append(f"segments hold {self.layout.rows} rows, manifest says {n}")
        if len(self.store) != n:
            problems.append(f"chunk store has {len(self.store)} rows, manifest says {n}")
        if self.dense.size != n:
            problems.append(f"dense index has {self.dense.size} vectors, manifest says {n}")
        if self.dense.dim != m.embedder_dim:
            problems.append(f"dense dim {self.dense.dim} != manifest {m.embedder_dim}")
        if self.bm25.n != n:
            problems.append(f"bm25 has {self.bm25.n} rows, manifest says {n}")
        spans = sorted(
            [d.rows for d in m.documents if d.status == "ok"] + list(self.layout.deleted)
        )
        covered = 0
        for start, end in spans:
            if start != covered:
                problems.append(f"rows {start}-{end} do not follow {covered}")
            covered = max(covered, end)
        for doc in m.documents:
            if doc.status == "ok" and doc.rows[1] - doc.rows[0] != doc.chunks:
                problems.append(f"{doc.path}: rows {doc.rows} for {doc.chunks} chunks")
        if covered != n:
            problems.append(f"documents and tombstones cover {covered} rows of {n}")
        if sum(d.chunks for d in m.documents if d.status == "ok") != m.n_chunks:
            problems.append(f"documents hold other than the manifest's {m.n_chunks} chunks")
        if problems:
            return problems
        chunks = self.store.all()
        mask = live_mask(self.layout)
        ids = [c.chunk_id for r, c in enumerate(chunks) if mask is None or mask[r]]
        if len(set(ids)) != len(ids):
            problems.append("duplicate chunk ids")
        for doc in m.documents:
            if doc.status != "ok":
                continue
            for c in chunks[doc.rows[0] : doc.rows[1]]:
                if c.doc_id != doc.doc_id:
                    problems.append(f"row of {c.chunk_id} belongs to {c.doc_id}, not {doc.doc_id}")
                    break
        if n:
            norms = np.linalg.norm(self.dense.vectors(0, min(n, 2048)), axis=1)
            if not np.all(np.abs(norms - 1) < 1e-3):
                problems.append("dense vectors are not unit length")
        return problems

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
        if self._release is not None:
            self._release()  # closes the fd: releases the shared lock
            self._release = None


def list_collections(
    cfg: Config, unreadable: list[tuple[str, str]] | None = None
) -> list[Manifest]:
    """The readable collections; each one that cannot be read (another format version, a
    broken manifest) is appended to ``unreadable`` as ``(name, reason)`` when it is given."""
    root = collections_root(cfg)
    out = []
    if root.is_dir():
        for child in sorted(root.iterdir()):
            if child.is_dir() and not child.name.startswith("."):
                try:
                    manifest = read_manifest(child)
                except IndexMismatchError as exc:
                    if unreadable is not None:
                        unreadable.append((child.name, str(exc)))
                    continue
                if manifest is not None:
                    out.append(manifest)
    return out


def remove_collection(cfg: Config, name: str) -> None:
    directory = collections_root(cfg) / check_name(name)
    if not (directory / "manifest.json").exists() and not directory.is_dir():
        raise CollectionNotFound(f"no collection named {name!r} in {collections_root(cfg)}")
    with writer_lock(directory, timeout=10.0):
        # Uncommit first, so a crash mid-removal never leaves a half collection that looks valid.
        with contextlib.suppress(FileNotFoundError):
            os.remove(directory / "manifest.json")
        fsync_dir(directory)
    shutil.rmtree(directory, ignore_errors=True)


def collection_for(paths: Iterable[str | Path], embedder: str | None = None) -> str:
    """The cached collection name for files/folders, keyed by the sha256 of each file, and by
    the embedder id when it is not the default one (so asking with another ``--embedder``
    builds its own collection instead of taking over, or refusing, the default's)."""
    from fathom import ingestion

    shas = []
    paths = [Path(p) for p in paths]
    for p in paths:
        if p.suffix.lower() == ".jsonl" and p.is_file():  # records, as ingest reads them
            shas.append(file_sha256(p))
    for src in ingestion.discover([p for p in paths if p.suffix.lower() != ".jsonl"]):
        if src.status == "ok":
            try:
                shas.append(file_sha256(Path(src.path)))
            except OSError:
                continue
    if not shas:
        raise FathomError(
            f"{', '.join(map(str, paths))}: no supported documents "
            f"({', '.join(sorted(ingestion.SUPPORTED_SUFFIXES))}, or a docs.jsonl)"
        )
    from fathom.core.config import EmbedderConfig
    from fathom.index.embed import embedder_id_for

    default = embedder_id_for(EmbedderConfig())
    extra = (embedder,) if embedder and embedder != default else ()
    return "auto-" + content_id(*sorted(shas), *extra)
