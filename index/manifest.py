"""The collection manifest: what was built, from what, with which models — the commit marker.

``manifest.json`` is written last (temporary file, fsync, ``os.replace``); a collection whose
manifest is absent or names a missing generation is not a collection.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from fathom.core.errors import IndexMismatchError

FORMAT_VERSION = 1
MANIFEST = "manifest.json"

DocStatus = Literal["ok", "failed", "skipped"]


@dataclass
class DocEntry:
    """One input of the collection. ``rows`` is its ``[start, end)`` range in the chunk store."""

    path: str
    status: DocStatus
    sha256: str = ""
    doc_id: str = ""
    title: str = ""
    format: str = ""
    source_id: str = ""
    size: int = 0
    pages: int = 0
    sections: int = 0
    chunks: int = 0
    rows: tuple[int, int] = (0, 0)
    error: str = ""
    warnings: list[str] = field(default_factory=list)
    ocr_pages: int = 0  # pages read by OCR (absent from manifests written before OCR: 0)
    # ``DocMeta.to_dict()`` of what the document says about itself (title, authors,
    # organisation, date, version); {} in manifests written before metadata was read.
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DocEntry:
        d = dict(d)
        d["rows"] = tuple(d.get("rows", (0, 0)))
        if not isinstance(d.get("meta"), dict):
            d["meta"] = {}
        known = cls.__dataclass_fields__
        return cls(**{k: v for k, v in d.items() if k in known})


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

    @property
    def data_dir_name(self) -> str:
        return f"gen-{self.generation:06d}"

    def counts(self) -> dict[str, int]:
        out = {"documents": 0, "failed": 0, "skipped": 0, "chunks": self.n_chunks}
        for doc in self.documents:
            key = "documents" if doc.status == "ok" else doc.status
            out[key] += 1
        return out

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["counts"] = self.counts()
        for doc in d["documents"]:
            doc["rows"] = list(doc["rows"])
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Manifest:
        d = dict(d)
        d.pop("counts", None)
        d["documents"] = [DocEntry.from_dict(x) for x in d.get("documents", [])]
        known = cls.__dataclass_fields__
        return cls(**{k: v for k, v in d.items() if k in known})


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
    if version != FORMAT_VERSION:
        raise IndexMismatchError(
            f"collection {coll_dir.name!r} has format version {version}, this Fathom reads "
            f"{FORMAT_VERSION} — re-ingest it with `fathom ingest ... --collection {coll_dir.name} "
            "--rebuild`"
        )
    return Manifest.from_dict(data)


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
    data = json.dumps(manifest.to_dict(), indent=1, ensure_ascii=False)
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, coll_dir / MANIFEST)
    fsync_dir(coll_dir)
