"""The collection manifest: what was built, from what, with which models — the commit marker.

``manifest.json`` is written last (temporary file, fsync, ``os.replace``); a collection whose
manifest is absent or names a missing generation is not a collection.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from fathom.core.errors import IndexMismatchError
from fathom.index.entries import DOCUMENTS, DocEntry

FORMAT_VERSION = 2
# Versions this Fathom reads: 1 kept every document's entry inside ``manifest.json``; 2 keeps
# them in the generation's ``documents.jsonl`` (``DOCUMENTS``), read when first needed, so
# opening a collection of a million documents reads a few hundred bytes of manifest.
READS = (1, 2)
MANIFEST = "manifest.json"


@dataclass
class Manifest:
    name: str
    generation: int
    fathom_version: str
    embedder_id: str
    embedder_dim: int
    embed_title_prefix: bool
    chunker: dict[str, Any]
    dense: dict[str, Any]
    bm25: dict[str, Any]
    n_chunks: int
    documents: list[DocEntry]
    created: str
    updated: str
    format_version: int = FORMAT_VERSION
    # embedder.precision the chunks were embedded at; queries must use the same.
    embedder_precision: str = "fp32"
    # Rows of the generation's indexes: ``n_chunks`` plus its tombstones (index.segments).
    n_rows: int = 0

    def __post_init__(self) -> None:
        self._counts: dict[str, int] | None = None  # as the manifest file says, unread docs
        # Indexed documents whose entry the generation's own documents.jsonl gives, not their
        # segment's (``index.segments.read_documents_of``), by ``doc_key``.
        self.overridden: set[tuple[int, str]] = set()
        if not self.n_rows:
            self.n_rows = self.n_chunks  # a manifest written before tombstones

    @property
    def data_dir_name(self) -> str:
        return f"gen-{self.generation:06d}"

    def counts(self) -> dict[str, int]:
        if self._docs is None and self._counts is not None:
            return dict(self._counts)  # without reading every document's entry
        out = {"documents": 0, "failed": 0, "skipped": 0, "chunks": self.n_chunks}
        for doc in self.documents:
            key = "documents" if doc.status == "ok" else doc.status
            out[key] += 1
        return out

    def to_dict(self, documents: bool = True) -> dict[str, Any]:
        """As saved; ``documents``: with every document's entry (else they are the
        generation's ``documents.jsonl``)."""
        d = asdict(self)
        d["counts"] = self.counts()
        if not documents:
            del d["documents"]
            return d
        for doc in d["documents"]:
            doc["rows"] = list(doc["rows"])
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any], documents: Path | None = None) -> Manifest:
        """The manifest in ``d``; without documents in it, they are read from ``documents``
        (a ``documents.jsonl``) when first used."""
        d = dict(d)
        counts = d.pop("counts", None)
        inline = "documents" in d
        d["documents"] = [DocEntry.from_dict(x) for x in d.get("documents", [])] if inline else None
        known = cls.__dataclass_fields__
        out = cls(**{k: v for k, v in d.items() if k in known})
        if not inline:
            out._docs_file = documents
            if isinstance(counts, dict):
                out._counts = {k: int(v) for k, v in counts.items()}
        return out


def _get_documents(self: Manifest) -> list[DocEntry]:
    if self._docs is None:
        if self._docs_file is None:
            self._docs = []
        else:
            from fathom.index.segments import read_documents_of

            self._docs, self.overridden = read_documents_of(self._docs_file.parent, self.n_rows)
    return self._docs


def _set_documents(self: Manifest, value: list[DocEntry] | None) -> None:
    self._docs = value
    self._docs_file = None


# Every document's entry, read from the generation's file when first used (a property over
# the dataclass field, so ``Manifest(documents=[...])`` and ``asdict`` work as for a field).
Manifest.documents = property(_get_documents, _set_documents)  # type: ignore[assignment]


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_manifest(coll_dir: Path) -> Manifest | None:
    """The committed manifest of a collection directory, or None when nothing is committed."""
    path = coll_dir / MANIFEST
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise IndexMismatchError(
            f"{path}: manifest is not valid JSON ({exc}) — remove the collection with "
            f"`fathom collections remove {coll_dir.name}` and ingest again"
        ) from None
    version = data.get("format_version")
    if version not in READS:
        raise IndexMismatchError(
            f"collection {coll_dir.name!r} has format version {version}, this Fathom reads "
            f"{FORMAT_VERSION} — re-ingest it with `fathom ingest ... --collection {coll_dir.name} "
            "--rebuild`"
        )
    generation = data.get("generation")
    folder = f"gen-{generation:06d}" if isinstance(generation, int) else ""
    return Manifest.from_dict(data, documents=coll_dir / folder / DOCUMENTS)


def fsync_dir(path: Path) -> None:
    """Make a rename or file creation in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_manifest(coll_dir: Path, manifest: Manifest) -> None:
    """Atomically replace the manifest: the single commit point of a build."""
    tmp = coll_dir / f".{MANIFEST}.{os.getpid()}.tmp"
    inline = manifest.format_version < 2
    data = json.dumps(manifest.to_dict(documents=inline), indent=1, ensure_ascii=False)
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, coll_dir / MANIFEST)
    fsync_dir(coll_dir)
