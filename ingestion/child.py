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
import threading
import time
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


PROGRESS = "fathom-ocr-pages"  # a stderr line: "<PROGRESS> <done> <total>"


def serve(load_document: Callable[..., Document]) -> None:
    """The child's side: one request on stdin, one reply on stdout (``load_document`` is
    ``fathom.ingestion.load_document``, passed in: this module is below the package's own).
    Pages read by OCR are reported on stderr as they finish."""
    request = json.loads(sys.stdin.read())

    def on_page(done: int, total: int) -> None:
        sys.stderr.write(f"{PROGRESS} {done} {total}\n")
        sys.stderr.flush()

    try:
        doc = load_document(
            request["path"],
            max_bytes=request["max_bytes"],
            password=request["password"],
            max_text_chars=request["max_text_chars"],
            ocr=OcrSettings(**request["ocr"]) if request.get("ocr") else None,
            on_page=on_page,
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
    out_of_time: Callable[[float], ParseError],
    ocr: OcrSettings | None = None,
    on_page: Callable[[int, int], None] | None = None,
) -> Document:
    """``load_document`` in a child process, killed after ``timeout_s`` plus
    ``ocr.page_timeout_s`` for each page the child says OCR will read (then
    ``out_of_time(seconds added)`` is raised). A child that dies, or a loader bug in it, is a
    ParseError naming the file. ``on_page`` hears the child's OCR progress."""
    import fathom

    ocr = ocr or OcrSettings()
    request = {
        "path": str(path),
        "max_bytes": max_bytes,
        "password": password,
        "max_text_chars": max_text_chars,
        "ocr": dataclasses.asdict(ocr),
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
    deadline = [time.monotonic() + timeout_s, 0.0]  # when, and the seconds OCR added
    out: list[str] = []
    err: list[str] = []

    def read_out() -> None:
        out.append(proc.stdout.read())  # type: ignore[union-attr]

    def read_err() -> None:
        for line in proc.stderr:  # type: ignore[union-attr]
            parts = line.split()
            if len(parts) == 3 and parts[0] == PROGRESS:
                done, total = int(parts[1]), int(parts[2])
                if done == 0:
                    extra = total * ocr.page_timeout_s
                    deadline[0] += extra
                    deadline[1] += extra
                if on_page is not None:
                    on_page(done, total)
            else:
                err.append(line)

    readers = [threading.Thread(target=f, daemon=True) for f in (read_out, read_err)]
    for reader in readers:
        reader.start()
    try:
        proc.stdin.write(json.dumps(request))  # type: ignore[union-attr]
        proc.stdin.close()  # type: ignore[union-attr]
    except BrokenPipeError:  # the child died at once: its stderr says why
        pass
    while proc.poll() is None:
        left = deadline[0] - time.monotonic()
        if left <= 0:
            proc.kill()
            proc.wait()
            raise out_of_time(deadline[1])
        try:
            proc.wait(timeout=min(left, 1.0))
        except subprocess.TimeoutExpired:
            continue
    for reader in readers:
        reader.join()
    text = "".join(out)
    try:
        reply = json.loads(text) if proc.returncode == 0 else None
    except json.JSONDecodeError:
        reply = None
    if not isinstance(reply, dict):
        last = ("".join(err).strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        raise ParseError(str(path), f"the parser failed ({last[:300]})")
    if "error" in reply:
        e = reply["error"]
        raise ParseError(e["path"], e["problem"], e["fix"])
    return document_from_json(reply["document"])
