"""Parsing one file in a child process that can be killed: the per-file time limit wherever
SIGALRM cannot hold it (off the main thread, or where the platform has no interval timer).

The parent starts ``python -c CHILD_CODE <package folder>``: the child registers that folder as
the package ``fathom`` (so it runs the parent's code whether or not, and wherever, Fathom is
installed), reads one JSON request on stdin, loads the document with no time limit of its own
and writes it as JSON on stdout (with the words of the pages OCR read, for ``on_words``). Past
the limit the parent kills it. Nothing is pickled.
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

from fathom.core.base import DocMeta, Document, PageSpan, SectionSpan
from fathom.core.errors import ParseError
from fathom.ingestion.ocr import OcrSettings
from fathom.ingestion.options import LoadOptions
from fathom.ingestion.page_words import Word, words_from_json, words_json

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
        meta=DocMeta.from_dict(d.get("meta")),
    )


PROGRESS = "fathom-ocr-pages"  # a stderr line: "<PROGRESS> <done> <total>"


def options_json(options: LoadOptions) -> dict[str, Any]:
    """What the child needs of ``options``, as JSON types: no callback, and no time limit of its
    own (the parent holds it)."""
    return {
        "max_bytes": options.max_bytes,
        "password": options.password,
        "max_text_chars": options.max_text_chars,
        "ocr": dataclasses.asdict(options.ocr),
    }


def options_from_json(
    d: dict[str, Any],
    on_page: Callable[[int, int], None] | None = None,
    on_words: Callable[[int, list[Word]], None] | None = None,
) -> LoadOptions:
    return LoadOptions(
        max_bytes=d["max_bytes"],
        password=d["password"],
        max_text_chars=d["max_text_chars"],
        ocr=OcrSettings(**d["ocr"]),
        on_page=on_page,
        on_words=on_words,
    )


def serve(load_document: Callable[..., Document]) -> None:
    """The child's side: one request on stdin, one reply on stdout (``load_document`` is
    ``fathom.ingestion.load_document``, passed in: this module is below the package's own).
    Pages read by OCR are reported on stderr as they finish; their words come with the reply."""
    request = json.loads(sys.stdin.read())
    words: dict[str, list[list[Any]]] = {}

    def on_page(done: int, total: int) -> None:
        sys.stderr.write(f"{PROGRESS} {done} {total}\n")
        sys.stderr.flush()

    def on_words(number: int, page: list[Word]) -> None:
        words[str(number)] = words_json(page)

    try:
        options = options_from_json(request["options"], on_page, on_words)
        doc = load_document(request["path"], options)
        reply: dict[str, Any] = {"document": document_json(doc), "words": words}
    except ParseError as exc:
        reply = {"error": {"path": exc.path, "problem": exc.problem, "fix": exc.fix}}
    sys.stdout.write(json.dumps(reply, ensure_ascii=False))


def load_in_child(
    path: str | Path, options: LoadOptions, out_of_time: Callable[[float], ParseError]
) -> Document:
    """``load_document`` in a child process, killed after ``options.timeout_s`` plus
    ``options.ocr.page_timeout_s`` for each page the child says OCR will read (then
    ``out_of_time(seconds added)`` is raised). A child that dies, or a loader bug in it, is a
    ParseError naming the file. ``options.on_page`` hears the child's OCR progress."""
    import fathom

    request = {"path": str(path), "options": options_json(options)}
    root = os.path.dirname(os.path.abspath(fathom.__file__))
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD_CODE, root],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )
    child = _Child(proc, options.timeout_s or 0.0, options)
    child.send(json.dumps(request))
    child.wait(out_of_time)
    doc, words = _reply(str(path), proc.returncode, "".join(child.out), "".join(child.err))
    if options.on_words is not None:
        for number, rows in sorted(words.items(), key=lambda item: int(item[0])):
            options.on_words(int(number), words_from_json(rows))
    return doc


class _Child:
    """A running child parse: its stdout and stderr read on two threads, OCR's progress lines
    moving the deadline later and reaching ``options.on_page``."""

    def __init__(self, proc: subprocess.Popen[str], timeout_s: float, options: LoadOptions):
        self.proc = proc
        self.options = options
        self.deadline = time.monotonic() + timeout_s
        self.added = 0.0  # the seconds OCR's pages added
        self.out: list[str] = []
        self.err: list[str] = []
        self.readers = [
            threading.Thread(target=f, daemon=True) for f in (self._read_out, self._read_err)
        ]
        for reader in self.readers:
            reader.start()

    def _read_out(self) -> None:
        self.out.append(self.proc.stdout.read())  # type: ignore[union-attr]

    def _read_err(self) -> None:
        for line in self.proc.stderr:  # type: ignore[union-attr]
            parts = line.split()
            if len(parts) == 3 and parts[0] == PROGRESS:
                done, total = int(parts[1]), int(parts[2])
                if done == 0:
                    extra = total * self.options.ocr.page_timeout_s
                    self.deadline += extra
                    self.added += extra
                if self.options.on_page is not None:
                    self.options.on_page(done, total)
            else:
                self.err.append(line)

    def send(self, request: str) -> None:
        try:
            self.proc.stdin.write(request)  # type: ignore[union-attr]
            self.proc.stdin.close()  # type: ignore[union-attr]
        except BrokenPipeError:  # the child died at once: its stderr says why
            pass

    def wait(self, out_of_time: Callable[[float], ParseError]) -> None:
        """Until the child exits (then its output is all read); killed past the deadline."""
        while self.proc.poll() is None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                self.proc.kill()
                self.proc.wait()
                raise out_of_time(self.added)
            try:
                self.proc.wait(timeout=min(left, 1.0))
            except subprocess.TimeoutExpired:
                continue
        for reader in self.readers:
            reader.join()


def _reply(
    name: str, returncode: int, out: str, err: str
) -> tuple[Document, dict[str, list[list[Any]]]]:
    """The document the child wrote and the words of its OCR pages (by page number), or the
    ParseError it reported or that its death means."""
    try:
        reply = json.loads(out) if returncode == 0 else None
    except json.JSONDecodeError:
        reply = None
    if not isinstance(reply, dict):
        last = (err.strip().splitlines() or [f"exit status {returncode}"])[-1]
        raise ParseError(name, f"the parser failed ({last[:300]})")
    if "error" in reply:
        e = reply["error"]
        raise ParseError(e["path"], e["problem"], e["fix"])
    return document_from_json(reply["document"]), reply.get("words", {})
