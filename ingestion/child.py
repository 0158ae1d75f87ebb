"""Parsing one file in a child process that can be killed: the per-file time limit wherever
SIGALRM cannot hold it (off the main thread, or where the platform has no interval timer).

The parent starts ``python -c CHILD_CODE <package folder>``: the child registers that folder as
the package ``fathom`` (so it runs the parent's code whether or not, and wherever, Fathom is
installed), reads one JSON request on stdin, loads the document with no time limit of its own
and writes it as JSON on stdout. Past the limit the parent kills it. Nothing is pickled.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fathom.core.base import Document, PageSpan, SectionSpan
from fathom.core.errors import ParseError
from fathom.ingestion.ocr import OcrSettings

CHILD_CODE = (
    "import importlib.util as u, os, sys\n"
    "root = sys.argv[1]\n"
    "spec = u.spec_from_file_location('fathom', os.path.join(root, '__init__.py'),"
    " submodule_search_locations=[root])\n"
    "package = u.module_from_spec(spec)\n"
    "sys.modules['fathom'] = package\n"
    "spec.loader.exec_module(package)\n"
    "from fathom.ingestion import load_document\n"
    "from fathom.ingestion.child import serve\n"
    "serve(load_document)\n"
)


def document_json(doc: Document) -> dict[str, Any]:
    """Everything of ``doc``, as JSON types (its ``to_dict`` leaves the text out)."""
    return {**doc.to_dict(), "text": doc.text}


def document_from_json(d: dict[str, Any]) -> Document:
    return Document(
        doc_id=d["doc_id"],
        path=d["path"],
        title=d["title"],
        text=d["text"],
        sha256=d["sha256"],
        format=d["format"],
        pages=tuple(PageSpan(*p) for p in d["pages"]),
        sections=tuple(SectionSpan(*s) for s in d["sections"]),
        source_id=d["source_id"],
        warnings=tuple(d["warnings"]),
        ocr_pages=tuple(d.get("ocr_pages", ())),
    )


def serve(load_document: Callable[..., Document]) -> None:
    """The child's side: one request on stdin, one reply on stdout (``load_document`` is
    ``fathom.ingestion.load_document``, passed in: this module is below the package's own)."""
    request = json.loads(sys.stdin.read())
    try:
        doc = load_document(
            request["path"],
            max_bytes=request["max_bytes"],
            password=request["password"],
            max_text_chars=request["max_text_chars"],
            ocr=OcrSettings(**request["ocr"]) if request.get("ocr") else None,
        )
        reply: dict[str, Any] = {"document": document_json(doc)}
    except ParseError as exc:
        reply = {"error": {"path": exc.path, "problem": exc.problem, "fix": exc.fix}}
    sys.stdout.write(json.dumps(reply, ensure_ascii=False))


def load_in_child(
    path: str | Path,
    *,
    max_bytes: int,
    password: str | None,
    max_text_chars: int | None,
    timeout_s: float,
    out_of_time: ParseError,
    ocr: OcrSettings | None = None,
) -> Document:
    """``load_document`` in a child process, killed after ``timeout_s`` (``out_of_time`` is
    raised then). A child that dies, or a loader bug in it, is a ParseError naming the file."""
    import fathom

    request = {
        "path": str(path),
        "max_bytes": max_bytes,
        "password": password,
        "max_text_chars": max_text_chars,
        "ocr": None if ocr is None else dataclasses.asdict(ocr),
    }
    root = os.path.dirname(os.path.abspath(fathom.__file__))
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD_CODE, root],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )
    try:
        out, err = proc.communicate(json.dumps(request), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise out_of_time from None
    try:
        reply = json.loads(out) if proc.returncode == 0 else None
    except json.JSONDecodeError:
        reply = None
    if not isinstance(reply, dict):
        last = (err.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        raise ParseError(str(path), f"the parser failed ({last[:300]})")
    if "error" in reply:
        e = reply["error"]
        raise ParseError(e["path"], e["problem"], e["fix"])
    return document_from_json(reply["document"])
