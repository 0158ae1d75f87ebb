"""A collection's document entries: what each input became (path, sha256, status, rows,
metadata), and the ``documents.jsonl`` files that keep them (``index.manifest`` names the
generation; ``index.segments`` says which files a generation's entries are read from)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

DOCUMENTS = "documents.jsonl"

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


def read_documents(path: Path) -> list[DocEntry]:
    """The entries of a ``documents.jsonl``, one JSON object per line."""
    fields = DocEntry.__dataclass_fields__.keys()
    out = []
    with open(path, "rb") as fh:
        for line in fh:
            if not line.strip():
                continue
            d = json.loads(line)
            if d.keys() <= fields and isinstance(d.get("meta", {}), dict):  # as written here
                d["rows"] = tuple(d.get("rows", (0, 0)))
                out.append(DocEntry(**d))
            else:
                out.append(DocEntry.from_dict(d))
    return out


def write_documents(path: Path, entries: list[DocEntry]) -> None:
    """Write ``entries`` to ``path`` (one JSON object per line), fsynced."""
    with open(path, "w", encoding="utf-8") as fh:
        for entry in entries:
            d = dict(entry.__dict__)  # its fields: strings, numbers, a list and a dict of them
            d["rows"] = list(d["rows"])
            fh.write(json.dumps(d, ensure_ascii=False, separators=(",", ":")) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
