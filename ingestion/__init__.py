"""Ingestion: one loader per format, a suffix -> loader table, file discovery and JSONL records.

Nothing heavy is imported here: PyMuPDF, pdfplumber, python-docx, python-pptx, ebooklib,
trafilatura, Pillow and the OCR models load inside the loaders.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import math
import os
import re
import signal
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, TextIO

from fathom.core.base import Document, Loader, PageSpan, SectionSpan
from fathom.core.errors import ParseError
from fathom.ingestion.clean import check_text_size, sections_from_headings, strip_controls
from fathom.ingestion.epub import EpubLoader
from fathom.ingestion.html import HtmlLoader
from fathom.ingestion.image import ImageLoader
from fathom.ingestion.ocr import OcrSettings
from fathom.ingestion.options import LoadOptions
from fathom.ingestion.pdf import PdfLoader
from fathom.ingestion.slides import PptxLoader
from fathom.ingestion.text import MarkdownLoader, TextLoader
from fathom.ingestion.word import DocxLoader

__all__ = [
    "LOADERS",
    "SUPPORTED_SUFFIXES",
    "DocxLoader",
    "EpubLoader",
    "HtmlLoader",
    "ImageLoader",
    "LoadOptions",
    "MarkdownLoader",
    "OcrSettings",
    "PdfLoader",
    "PptxLoader",
    "Source",
    "TextLoader",
    "discover",
    "load_document",
    "load_records",
]

# suffix (lower-case, with the dot) -> loader class; each is built with one ``LoadOptions``.
LOADERS: dict[str, Callable[[LoadOptions], Loader]] = {
    ".pdf": PdfLoader,
    ".png": ImageLoader,
    ".jpg": ImageLoader,
    ".jpeg": ImageLoader,
    ".tif": ImageLoader,
    ".tiff": ImageLoader,
    ".docx": DocxLoader,
    ".pptx": PptxLoader,
    ".epub": EpubLoader,
    ".html": HtmlLoader,
    ".htm": HtmlLoader,
    ".txt": TextLoader,
    ".md": MarkdownLoader,
    ".markdown": MarkdownLoader,
}
SUPPORTED_SUFFIXES: frozenset[str] = frozenset(LOADERS)


def load_document(path: str | Path, options: LoadOptions | None = None) -> Document:
    """Load one file with the loader for its (lower-cased) suffix, built with ``options``;
    ParseError if unsupported.

    ``options.timeout_s`` limits the time spent on the file (a ParseError when it runs out): in
    the main thread of a POSIX process by SIGALRM, elsewhere (another thread, or a platform with
    no interval timer) by parsing in a child process that is killed when the time is up
    (``ingestion.child``). ``options.max_text_chars`` refuses a document with more text than
    that (plain text and Markdown are refused by their size, before they are read), since
    indexing holds a document's text several times over. ``options.ocr`` says how pages
    without a text layer are read; ``options.on_page(done, total)`` is called after each page
    OCR read (not when the file is parsed in a child process), and ``options.on_words(number,
    words)`` with the words of each page whose OCR text was kept (from a child process, once it
    is done).
    """
    options = options or LoadOptions()
    name = str(path)
    factory = _loader_for(name, Path(path).suffix.lower())
    seconds = options.timeout_s
    if seconds is not None and seconds > 0 and not _alarm_usable():
        from fathom.ingestion.child import load_in_child

        return load_in_child(path, options, lambda extra: _out_of_time(name, seconds, extra))
    with time_limit(name, seconds) as limit:
        doc = factory(replace(options, on_page=_pages_done(limit, options))).load(path)
    if options.max_text_chars is not None:
        check_text_size(name, len(doc.text), options.max_text_chars)
    return doc


def _loader_for(name: str, suffix: str) -> Callable[[LoadOptions], Loader]:
    factory = LOADERS.get(suffix)
    if factory is None:
        raise ParseError(
            name,
            f"unsupported file type {suffix or '(no suffix)'!r}",
            f"supported: {', '.join(sorted(SUPPORTED_SUFFIXES))}",
        )
    return factory


def _pages_done(limit: TimeLimit, options: LoadOptions) -> Callable[[int, int], None]:
    """The loader's ``on_page``: the pages OCR is about to read extend the time limit, and
    ``options.on_page`` hears each one."""

    def pages_done(done: int, total: int) -> None:
        if done == 0:  # OCR is about to read ``total`` pages: each adds to the limit
            limit.extend(total * options.ocr.page_timeout_s)
        if options.on_page is not None:
            options.on_page(done, total)

    return pages_done


class _OutOfTime(BaseException):
    """Raised by the alarm; a BaseException so loaders' ``except Exception`` cannot swallow it."""


def _alarm_usable() -> bool:
    """Whether SIGALRM can interrupt a parse here (the main thread of a POSIX process)."""
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


def _out_of_time(name: str, seconds: float, ocr_seconds: float = 0.0) -> ParseError:
    if ocr_seconds:
        return ParseError(
            name,
            f"took longer than {seconds + ocr_seconds:g} s to read (ingest.file_timeout_s, "
            f"{seconds:g} s, and ingest.ocr_page_timeout_s for each page read by OCR)",
            "raise those limits, or split the file",
        )
    return ParseError(
        name,
        f"took longer than {seconds:g} s to read (ingest.file_timeout_s)",
        "raise ingest.file_timeout_s, or split or convert the file",
    )


class TimeLimit:
    """The running limit of ``time_limit``: ``extend`` moves its deadline later."""

    def __init__(self, seconds: float | None) -> None:
        self.deadline = time.monotonic() + seconds if seconds else math.inf
        self.armed = False
        self.extended = 0.0

    def extend(self, seconds: float) -> None:
        """Allow ``seconds`` more (OCR adds its pages' share once it knows how many)."""
        if seconds <= 0 or self.deadline == math.inf:
            return
        self.deadline += seconds
        self.extended += seconds
        if self.armed:
            signal.setitimer(signal.ITIMER_REAL, max(self.deadline - time.monotonic(), 1e-3))


@contextlib.contextmanager
def time_limit(name: str, seconds: float | None) -> Iterator[TimeLimit]:
    """Raise ParseError for ``name`` when the block runs longer than ``seconds`` (SIGALRM: in
    the main thread only; elsewhere the block runs unlimited, and ``load_document`` parses in a
    child process instead). The block may ``extend`` the limit it is given."""
    if seconds is None or seconds <= 0 or not _alarm_usable():
        yield TimeLimit(None)
        return

    limit = TimeLimit(seconds)

    def on_alarm(signum: int, frame: object) -> None:
        if not limit.armed:
            return
        left = limit.deadline - time.monotonic()
        if left > 1e-3:  # extended since the timer was set
            signal.setitimer(signal.ITIMER_REAL, left)
            return
        raise _OutOfTime

    previous = signal.signal(signal.SIGALRM, on_alarm)
    limit.armed = True
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield limit
        limit.armed = False  # an alarm due right now must not fire outside the block
        # The alarm's exception can be swallowed when it lands in a library's Python callback
        # run from C (PyMuPDF's), and the work then finishes: late is still too late.
        if time.monotonic() > limit.deadline:
            raise _out_of_time(name, seconds, limit.extended)
    except _OutOfTime:
        raise _out_of_time(name, seconds, limit.extended) from None
    finally:
        limit.armed = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# ---------------------------------------------------------------------------------------------
# Discovery
# ---------------------------------------------------------------------------------------------

SourceStatus = Literal["ok", "skipped", "failed"]


@dataclass(frozen=True, slots=True)
class Source:
    """A path found by ``discover``: ``ok`` (load it), ``skipped`` or ``failed`` with the reason."""

    path: Path
    problem: str | None = None
    status: SourceStatus = "ok"

    def __post_init__(self) -> None:
        if (self.status == "ok") != (self.problem is None):
            raise ValueError(f"Source status {self.status!r} does not fit problem {self.problem!r}")

    def to_dict(self) -> dict[str, str | None]:
        return {"path": str(self.path), "status": self.status, "problem": self.problem}


def _skipped(path: Path, reason: str) -> Source:
    return Source(path, reason, "skipped")


def _failed(path: Path, reason: str) -> Source:
    return Source(path, reason, "failed")


def discover(paths: Iterable[str | Path], follow_symlinks: bool = True) -> Iterator[Source]:
    """Expand files and folders (recursively, sorted by name) into Sources; never raises.

    Hidden entries (name starts with '.') inside folders and unsupported suffixes are skipped;
    broken symlinks, symlink loops and unreadable folders are failed. A file reached twice is
    reported once. Paths given explicitly are taken even if hidden.
    """
    seen_files: set[tuple[int, int]] = set()
    for raw in paths:
        path = Path(raw)
        try:
            st = os.lstat(path)
        except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
            reason = _os_reason(exc) if isinstance(exc, OSError) else str(exc)
            yield _failed(path, reason)
            continue
        active_dirs: set[tuple[int, int]] = set()
        yield from _visit(path, st, follow_symlinks, seen_files, active_dirs, top=True)


def _os_reason(exc: OSError) -> str:
    """The OS's reason in lower case ('permission denied'), without the path it repeats."""
    return exc.strerror.lower() if exc.strerror else str(exc)


def _visit(
    path: Path,
    lst: os.stat_result,
    follow: bool,
    seen_files: set[tuple[int, int]],
    active_dirs: set[tuple[int, int]],
    top: bool = False,
) -> Iterator[Source]:
    st: os.stat_result | Source = lst
    if stat.S_ISLNK(lst.st_mode):
        st = _follow_link(path, follow, top)
        if isinstance(st, Source):
            yield st
            return
    if stat.S_ISDIR(st.st_mode):
        yield from _visit_folder(path, st, follow, seen_files, active_dirs)
    else:
        yield _file_source(path, st, seen_files)


def _follow_link(path: Path, follow: bool, top: bool) -> os.stat_result | Source:
    """What the symlink ``path`` points at, or the Source saying why it is not followed."""
    if not follow and not top:
        return _skipped(path, "symlink (not followed)")
    try:
        return os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return _failed(path, "symlink loop (too many levels of symbolic links)")
        if isinstance(exc, FileNotFoundError):
            target = _readlink(path)
            return _failed(path, f"broken symlink (target {target!r} does not exist)")
        return _failed(path, f"cannot follow symlink: {_os_reason(exc)}")


def _visit_folder(
    path: Path,
    st: os.stat_result,
    follow: bool,
    seen_files: set[tuple[int, int]],
    active_dirs: set[tuple[int, int]],
) -> Iterator[Source]:
    """The folder's entries by name, hidden ones skipped; a folder inside itself is a loop."""
    key = (st.st_dev, st.st_ino)
    if key in active_dirs:
        yield _failed(path, "symlink loop (points back to a parent folder)")
        return
    try:
        with os.scandir(path) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError as exc:
        yield _failed(path, f"cannot read folder: {_os_reason(exc)}")
        return
    active_dirs.add(key)
    for entry in entries:
        child = path / entry.name
        if entry.name.startswith("."):
            yield _skipped(child, "hidden")
            continue
        try:
            child_lst = entry.stat(follow_symlinks=False)
        except OSError as exc:
            yield _failed(child, _os_reason(exc))
            continue
        yield from _visit(child, child_lst, follow, seen_files, active_dirs)
    active_dirs.discard(key)


def _file_source(path: Path, st: os.stat_result, seen_files: set[tuple[int, int]]) -> Source:
    """A file to load, or why not: not a regular file, an unsupported type, a duplicate or
    unreadable."""
    if not stat.S_ISREG(st.st_mode):
        return _skipped(path, "not a regular file")
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        return _skipped(path, f"unsupported file type {suffix or '(no suffix)'!r}")
    key = (st.st_dev, st.st_ino)
    if key in seen_files:
        return _skipped(path, "duplicate (same file already listed)")
    seen_files.add(key)
    if not os.access(path, os.R_OK):
        return _failed(path, "cannot read: permission denied")
    return Source(path)


def _readlink(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"


# ---------------------------------------------------------------------------------------------
# JSONL records
# ---------------------------------------------------------------------------------------------

_MD_HEADING = re.compile(r"(?m)^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$")
_NEEDS_CLEANING = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u200b\u2060\ufeff\u2028\u2029]")


def load_records(jsonl_path: str | Path) -> Iterator[Document]:
    """Documents from a ``docs.jsonl`` (one ``{"doc_id", "title", "text", ...}`` per line).

    The text is kept as given (only newlines and control characters normalised) so answer
    spans in the data still match; ``doc_id`` is the sha256 of text + title. Markdown ``#``
    headings, if any, become sections (their text stays as written).
    """
    name = str(jsonl_path)
    try:
        # not a with-block here: only opening errors are "cannot read"
        fh = open(jsonl_path, encoding="utf-8")  # noqa: SIM115 - closed by the with below
    except OSError as exc:
        raise ParseError(name, f"cannot read: {_os_reason(exc)}", "check the path") from None
    with fh:
        yield from _records(name, fh)


def _records(name: str, fh: TextIO) -> Iterator[Document]:
    lineno = 0
    try:
        for lineno, line in enumerate(fh, 1):
            if line.strip():
                yield _parse_record(name, lineno, line)
    except UnicodeDecodeError as exc:
        raise ParseError(
            f"{name}:{lineno + 1}", f"not UTF-8 ({exc.reason})", "JSONL files must be UTF-8"
        ) from None


def _parse_record(name: str, lineno: int, line: str) -> Document:
    try:
        record = json.loads(line)
        source_id = str(record["doc_id"] if "doc_id" in record else record["_id"])  # _id: BEIR
        text = record["text"]
        title = record.get("title") or ""
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ParseError(
            f"{name}:{lineno}",
            f"not a record ({type(exc).__name__}: {exc})",
            'each line must be a JSON object with "doc_id" (or BEIR\'s "_id") and "text"',
        ) from None
    if not isinstance(text, str) or not isinstance(title, str):
        raise ParseError(f"{name}:{lineno}", "text and title must be strings")
    return _record_document(name, source_id, title, text)


def _record_document(name: str, source_id: str, title: str, text: str) -> Document:
    sha = hashlib.sha256((text + title).encode("utf-8")).hexdigest()
    if _NEEDS_CLEANING.search(text):  # cheap test first: almost every record is clean
        text = strip_controls(text)
    sections: tuple[SectionSpan, ...] = ()
    if "#" in text:
        heads = [(m.start(), m.group(2), len(m.group(1))) for m in _MD_HEADING.finditer(text)]
        sections = sections_from_headings(heads, len(text))
    return Document(
        doc_id=sha[:16],
        path=f"{name}#{source_id}",
        title=title,
        text=text,
        sha256=sha,
        format="record",
        pages=(PageSpan(1, 0, len(text)),),
        sections=sections,
        source_id=source_id,
    )
