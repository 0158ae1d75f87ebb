"""Extra views of one collection: other retrieval units over the same text, for portfolios.

A view indexes *units* that are spans of the collection's stored chunks — it keeps no copy of
the text, only the units' positions, their vectors and a BM25 index:

* ``sentences``: windows of ``window`` consecutive sentences (NLTK Punkt, as the chunker
  splits), moving by ``stride``, inside each chunk. Each window is embedded on its own, so a
  passage is found by its single best-matching sentence pair rather than by a chunk vector
  that averages six topics.
* ``sections``: consecutive chunks of one document that share a section heading, merged up to
  ``max_tokens``. Its vector is the normalised mean of its chunks' stored vectors (no model
  call, and no truncation at the embedder's 256-token window); BM25 reads its whole text.
* ``chunks``: the collection's own chunks under another BM25 parameterisation (``k1``, ``b``);
  a sparse index only.

Whatever the unit, a view member answers in the collection's chunk rows (``View.chunk_rows``):
a sentence window stands for the chunk it lies in (a chunk ranks by its best window), a
section for its chunks in reading order. So views fuse with every other member, are scored
the same way and feed the same rerank–compress–generate path.

Layout: ``<collection>/views/<name>/`` with ``view.json`` (spec, the generation it was built
from, unit count), ``units.npz`` (per unit: CSR list of chunk rows and the span's start and end
within the first and last chunk's text), ``dense.faiss`` and ``bm25/``. A view is written to a
temporary directory and renamed into place, under the collection's writer lock; a view built
from an older generation is stale and is ignored (``fathom collections views`` rebuilds it).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fathom.core.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np
    from fathom.core.base import Chunk, Embedder
    from fathom.index.collection import Collection

VIEW_FORMAT = 1
GRANULARITIES = ("sentences", "sections", "chunks")


@dataclass(frozen=True)
class ViewSpec:
    """A view's name, granularity and parameters."""

    name: str
    granularity: str
    params: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "granularity": self.granularity, "params": dict(self.params)}


DEFAULT_VIEWS: tuple[ViewSpec, ...] = (
    ViewSpec("sentences", "sentences", {"window": 2, "stride": 1}),
    ViewSpec("sections", "sections", {"max_tokens": 1024}),
    ViewSpec("bm25-k1=0.9-b=0.4", "chunks", {"k1": 0.9, "b": 0.4}),
    ViewSpec("bm25-k1=1.2-b=1.0", "chunks", {"k1": 1.2, "b": 1.0}),
)


def views_dir(collection: Collection) -> Path:
    return collection.directory / "views"


def _units_sentences(
    chunks: list[Chunk], window: int, stride: int
) -> tuple[list[list[int]], list[int], list[int]]:
    from fathom.chunking.sentences import chunk_sentences

    rows: list[list[int]] = []
    starts: list[int] = []
    ends: list[int] = []
    for row, chunk in enumerate(chunks):
        spans = chunk_sentences(chunk) or [(0, len(chunk.text))]
        last = max(1, len(spans) - window + 1)
        for i in range(0, last, stride):
            group = spans[i : i + window]
            rows.append([row])
            starts.append(group[0][0])
            ends.append(group[-1][1])
        if (last - 1) % stride and len(spans) > window:  # the tail the stride stepped over
            rows.append([row])
            starts.append(spans[-window][0])
            ends.append(spans[-1][1])
    return rows, starts, ends


def _units_sections(
    chunks: list[Chunk], max_tokens: int
) -> tuple[list[list[int]], list[int], list[int]]:
    rows: list[list[int]] = []
    current: list[int] = []
    tokens = 0
    for row, chunk in enumerate(chunks):
        prev = chunks[current[-1]] if current else None
        same = (
            prev is not None
            and prev.doc_id == chunk.doc_id
            and prev.section == chunk.section
            and chunk.ordinal == prev.ordinal + 1
        )
        if current and (not same or tokens + chunk.n_tokens > max_tokens):
            rows.append(current)
            current, tokens = [], 0
        current.append(row)
        tokens += chunk.n_tokens
    if current:
        rows.append(current)
    starts = [0] * len(rows)
    ends = [len(chunks[r[-1]].text) for r in rows]
    return rows, starts, ends


def unit_text(chunks: list[Chunk], start: int, end: int) -> str:
    """The text a unit spans: ``chunks`` are its consecutive chunks of one document; ``start``
    is within the first chunk's text and ``end`` within the last's. Overlap between chunks is
    taken once, and a gap between them becomes a blank line."""
    if len(chunks) == 1:
        return chunks[0].text[start:end]
    parts = [chunks[0].text[start:]]
    reached = chunks[0].char_end
    for i, c in enumerate(chunks[1:], start=1):
        text = c.text[:end] if i == len(chunks) - 1 else c.text
        skip = max(0, reached - c.char_start)
        if skip == 0 and c.char_start > reached:
            parts.append("\n\n")
        parts.append(text[skip:])
        reached = max(reached, c.char_start + len(text))
    return "".join(parts)


def build_view(
    collection: Collection, spec: ViewSpec, embedder: Embedder | None, batch: int = 256
) -> View:
    """Build (or rebuild) one view of ``collection`` and return it opened."""
    from fathom.index.collection import embed_input
    from fathom.index.segmented import live_mask
    from fathom.index.sparse import Bm25Index

    if spec.granularity not in GRANULARITIES:
        raise ConfigError(f"view {spec.name!r}: granularity {spec.granularity!r} is not one of "
                          f"{', '.join(GRANULARITIES)}")  # fmt: skip
    chunks = collection.store.all()
    rows, starts, ends = _view_units(spec, chunks)
    mask = live_mask(collection.layout)
    if mask is not None:  # units of removed documents' rows (tombstones) are left out
        keep = [i for i, rr in enumerate(rows) if all(mask[r] for r in rr)]
        rows, starts, ends = (
            [rows[i] for i in keep],
            [starts[i] for i in keep],
            [ends[i] for i in keep],
        )
    # What the embedder and BM25 read: the unit's text headed by its title and section, as the
    # collection's chunks are (``embed_input``).
    prefix = collection.manifest.embed_title_prefix
    texts = [
        embed_input(replace(chunks[rr[0]], text=unit_text([chunks[r] for r in rr], s, e)), prefix)
        for rr, s, e in zip(rows, starts, ends, strict=True)
    ]
    index_cfg = collection.cfg.index
    if spec.granularity == "chunks":
        p = spec.params
        index_cfg = replace(index_cfg, bm25_k1=float(p["k1"]), bm25_b=float(p["b"]))
    sparse = Bm25Index.build(texts, index_cfg)
    dense = _view_dense(collection, spec, rows, texts, embedder, index_cfg, batch)
    _write_view(collection, spec, (rows, starts, ends), sparse, dense)
    return View.open(collection, spec.name)


def _view_units(
    spec: ViewSpec, chunks: list[Chunk]
) -> tuple[list[list[int]], list[int], list[int]]:
    """The view's units: each one's chunk rows and its character span in their text."""
    p = spec.params
    if spec.granularity == "sentences":
        window, stride = int(p.get("window", 2)), int(p.get("stride", 1))
        if window < 1 or stride < 1:
            raise ConfigError(f"view {spec.name!r}: window and stride must be ≥ 1")
        return _units_sentences(chunks, window, stride)
    if spec.granularity == "sections":
        return _units_sections(chunks, int(p.get("max_tokens", 1024)))
    return [[r] for r in range(len(chunks))], [0] * len(chunks), [len(c.text) for c in chunks]


def _view_dense(
    collection: Collection,
    spec: ViewSpec,
    rows: list[list[int]],
    texts: list[str],
    embedder: Embedder | None,
    index_cfg: Any,
    batch: int,
) -> Any:
    """The view's dense index: sentence windows embedded, a section's chunk vectors averaged
    (and normalised); None for a view of other BM25 parameters over the same chunks."""
    import numpy as np
    from fathom.index.dense import DenseIndex

    if spec.granularity == "sentences":
        if embedder is None:
            raise ConfigError(f"view {spec.name!r} needs the collection's embedder")
        vecs = np.vstack(
            [embedder.embed(texts[i : i + batch]) for i in range(0, len(texts), batch)]
            or [np.zeros((0, collection.dense.dim), np.float32)]
        )
        return DenseIndex.build(vecs, index_cfg)
    if spec.granularity == "sections":
        vecs = np.zeros((len(rows), collection.dense.dim), dtype=np.float32)
        for i, rr in enumerate(rows):
            v = collection.dense.rows_vectors(rr).mean(axis=0)
            vecs[i] = v / max(float(np.linalg.norm(v)), 1e-12)
        return DenseIndex.build(vecs, index_cfg)
    return None


def _write_view(
    collection: Collection,
    spec: ViewSpec,
    units: tuple[list[list[int]], list[int], list[int]],
    sparse: Any,
    dense: Any,
) -> None:
    """Write the view into a temporary folder and swap it in under the collection's writer
    lock, so a reader sees the old view or the new one, never a mix."""
    import numpy as np
    from fathom.index.locks import writer_lock

    rows, starts, ends = units
    indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([len(r) for r in rows])
    root = views_dir(collection)
    root.mkdir(exist_ok=True)
    with writer_lock(collection.directory, timeout=60.0):
        tmp = root / f".tmp-{spec.name}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        np.savez(
            tmp / "units.npz",
            indptr=indptr,
            rows=np.asarray([r for rr in rows for r in rr], dtype=np.int64),
            start=np.asarray(starts, dtype=np.int64),
            end=np.asarray(ends, dtype=np.int64),
        )
        sparse.save(tmp)
        if dense is not None:
            dense.save(tmp)
        meta = {
            "format": VIEW_FORMAT,
            **spec.to_dict(),
            "generation": collection.manifest.data_dir_name,
            "embedder": collection.manifest.embedder_id if dense is not None else None,
            "n_units": len(rows),
        }
        (tmp / "view.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        final = root / spec.name
        old = root / f".old-{spec.name}-{os.getpid()}"
        if final.exists():
            final.rename(old)
        tmp.rename(final)
        shutil.rmtree(old, ignore_errors=True)


def list_views(collection: Collection) -> list[dict[str, Any]]:
    """Every view's ``view.json`` with a ``stale`` flag (built from another generation)."""
    out = []
    root = views_dir(collection)
    if not root.is_dir():
        return out
    for d in sorted(root.iterdir()):
        meta_path = d / "view.json"
        if d.name.startswith(".") or not meta_path.is_file():
            continue
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        meta["stale"] = (
            meta.get("generation") != collection.manifest.data_dir_name
            or meta.get("format") != VIEW_FORMAT
        )
        out.append(meta)
    return out


class View:
    """An opened view: search its units, map them to the collection's chunk rows."""

    def __init__(self, collection: Collection, directory: Path, meta: dict[str, Any]) -> None:
        import numpy as np
        from fathom.index.dense import DenseIndex
        from fathom.index.sparse import Bm25Index

        self.collection = collection
        self.meta = meta
        self.spec = ViewSpec(meta["name"], meta["granularity"], meta.get("params", {}))
        with np.load(directory / "units.npz", allow_pickle=False) as data:
            self.indptr, self.rows = data["indptr"], data["rows"]
            self.start, self.end = data["start"], data["end"]
        self.bm25 = Bm25Index.load(directory)
        self.dense = (
            DenseIndex.load(
                directory, collection.cfg.index.hnsw_ef_search, collection.cfg.index.mmap
            )
            if (directory / DenseIndex.FILE).is_file()
            else None
        )

    @classmethod
    def open(cls, collection: Collection, name: str) -> View:
        directory = views_dir(collection) / name
        meta_path = directory / "view.json"
        if not meta_path.is_file():
            raise ConfigError(
                f"collection {collection.name!r} has no view {name!r} — build it with "
                f"`fathom collections views {collection.name} --build {name}`"
            )
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if meta.get("format") != VIEW_FORMAT:
            raise ConfigError(f"view {name!r}: format {meta.get('format')}, expected "
                              f"{VIEW_FORMAT} — rebuild it")  # fmt: skip
        if meta.get("generation") != collection.manifest.data_dir_name:
            raise ConfigError(
                f"view {name!r} of {collection.name!r} was built from {meta.get('generation')}, "
                f"the collection is now {collection.manifest.data_dir_name} — rebuild it with "
                f"`fathom collections views {collection.name} --build {name}`"
            )
        return cls(collection, directory, meta)

    def __len__(self) -> int:
        return len(self.start)

    def unit_rows(self, unit: int) -> list[int]:
        return self.rows[self.indptr[unit] : self.indptr[unit + 1]].tolist()

    def text(self, unit: int) -> str:
        rows = self.unit_rows(unit)
        return unit_text(self.collection.chunks(rows), int(self.start[unit]), int(self.end[unit]))

    def ranked(self, question: str, qvec: np.ndarray | None, depth: int) -> dict[str, tuple]:
        """Each of the view's retrievers' ``(scores, units)`` to ``depth``."""
        out: dict[str, tuple] = {"bm25": self.bm25.search(question, depth)}
        if self.dense is not None and qvec is not None:
            out["dense"] = self.dense.search(qvec, depth)
        return out

    def chunk_rows(self, units: list[int], n: int) -> list[int]:
        """The chunk rows ``units`` (best first) stand for, first occurrence wins, up to ``n``."""
        out: list[int] = []
        seen: set[int] = set()
        for u in units:
            for r in self.unit_rows(int(u)):
                if r not in seen:
                    seen.add(r)
                    out.append(r)
                    if len(out) == n:
                        return out
        return out
