"""Keeping a collection in step with the folders it was ingested from (``fathom ingest --watch``).

After the first ingest, the paths are watched with watchfiles (inotify, FSEvents or
ReadDirectoryChangesW; polling where none works). A burst of changes is gathered until the
paths have been quiet for ``ingest.watch_debounce_ms``; files that are still growing are waited
for until their size and modification time hold still for ``ingest.watch_stable_ms``; then the
batch is ingested incrementally: the added and changed files are read (the rest keep their
chunks and vectors), documents whose file is gone are dropped, and the batch is one atomic
commit, as any ingest is (``index.ingest``). Readers keep the generation they opened meanwhile.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fathom.core.errors import FathomError
from fathom.index.collection import collections_root
from fathom.index.manifest import read_manifest

if TYPE_CHECKING:
    from fathom.core.config import Config
    from fathom.index.ingest import IngestReport

Emit = Callable[..., None]


@dataclass
class WatchBatch:
    """One batch of changes, ingested: how many events it gathered, what they did to the
    collection (files added, changed and removed) and the ingest's report."""

    events: int
    added: int
    changed: int
    removed: int
    report: IngestReport
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "events": self.events,
            "added": self.added,
            "changed": self.changed,
            "removed": self.removed,
            "seconds": round(self.seconds, 3),
            "report": self.report.to_dict(),
        }


class _Root:
    """A watched path as ingest stores it (absolute, symlinks kept) and as the OS may report
    it (symlinks resolved)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(os.path.abspath(os.path.expanduser(str(path))))
        self.real = Path(os.path.realpath(self.path))
        self.is_dir = self.path.is_dir()

    def rebase(self, event: Path) -> Path | None:
        """``event`` as a path under this root (as given), or None when it is not under it."""
        for base in (self.path, self.real):
            if self.is_dir and (event == base or base in event.parents):
                return self.path / event.relative_to(base)
            if not self.is_dir and event == base:
                return self.path
        return None


class DocumentFilter:
    """Which events concern a collection: a watched file itself, or an entry under a watched
    folder that ingest would read (a supported suffix, nothing hidden on the way, nothing
    watchfiles ignores by default such as editor swap files); deletions of folders too."""

    def __init__(self, roots: list[_Root], follow_symlinks: bool) -> None:
        from fathom import ingestion
        from watchfiles import DefaultFilter

        self.roots = roots
        self.follow = follow_symlinks
        self.suffixes = set(ingestion.SUPPORTED_SUFFIXES)
        self.default = DefaultFilter()

    def path_of(self, raw: str) -> Path | None:
        """The event's path under a root, if it concerns the collection."""
        event = Path(raw)
        for root in self.roots:
            path = root.rebase(event)
            if path is None:
                continue
            if not root.is_dir or path == root.path:
                return path
            if any(part.startswith(".") for part in path.relative_to(root.path).parts):
                return None  # folder discovery skips hidden entries
            if path.is_symlink() and not self.follow:
                return None  # as ingest.follow_symlinks = false skips it in the folder
            supported = path.suffix.lower() in self.suffixes
            if path.exists():
                return path if supported or path.is_dir() else None
            return path if supported or not path.suffix else None  # a file or folder gone
        return None

    def __call__(self, change: Any, raw: str) -> bool:
        return self.default(change, raw) and self.path_of(raw) is not None


def _snapshot(paths: Iterable[Path]) -> dict[Path, tuple[int, int]]:
    """``{file: (size, mtime_ns)}`` for the paths that are files now."""
    out: dict[Path, tuple[int, int]] = {}
    for p in paths:
        try:
            st = p.stat()
        except OSError:
            continue
        if not p.is_dir():
            out[p] = (st.st_size, st.st_mtime_ns)
    return out


def wait_until_stable(
    paths: Iterable[Path], stable_s: float, stop: threading.Event, emit: Emit
) -> bool:
    """Wait until none of the files in ``paths`` changes size or modification time for
    ``stable_s`` seconds (a file still being written is not read half-way); False when
    ``stop`` was set meanwhile."""
    paths = list(paths)
    before = _snapshot(paths)
    told = False
    while True:
        if stop.wait(stable_s):
            return False
        now = _snapshot(paths)
        if now == before:
            return True
        if not told:
            growing = sorted(str(p) for p in now if now[p] != before.get(p))
            emit("waiting", files=growing)
            told = True
        before = now


def ingest_batch(
    cfg: Config,
    name: str,
    paths: list[Path],
    events: int,
    embedder: Any | None = None,
    password: str | None = None,
) -> WatchBatch:
    """Ingest the changed ``paths`` that still exist into ``name`` (documents whose file is
    gone are dropped by the same ingest): one commit, or none when nothing changed."""
    from fathom.index.ingest import ingest_paths

    t0 = time.perf_counter()
    old = read_manifest(collections_root(cfg) / name)
    before = {d.path for d in old.documents if d.status == "ok"} if old else set()
    present: list[str | Path] = [p for p in sorted(paths) if p.exists()]
    report = ingest_paths(cfg, present, name, embedder=embedder, password=password)
    ok = [f.path for f in report.files if f.status == "ok"]
    changed = sum(1 for path in ok if path in before)
    return WatchBatch(
        events=events,
        added=len(ok) - changed,
        changed=changed,
        removed=report.count("removed"),
        report=report,
        seconds=time.perf_counter() - t0,
    )


def watch_collection(
    cfg: Config,
    paths: list[Path],
    name: str,
    *,
    emit: Emit,
    stop: threading.Event | None = None,
    password: str | None = None,
) -> None:
    """Keep collection ``name`` in step with ``paths`` (files and folders, as ingested) until
    ``stop`` is set; Ctrl-C raises KeyboardInterrupt between or inside batches, and a batch cut
    short commits nothing. ``emit("watching", paths=…)`` once, ``emit("waiting", files=…)``
    while files are being written, ``emit("batch", batch=WatchBatch)`` after each batch."""
    import watchfiles
    from fathom.index.embed import make_embedder

    stop = stop or threading.Event()
    embedder = make_embedder(cfg.embedder, cfg.models_path())  # loaded once, kept
    roots = [_Root(p) for p in paths]
    # A watched file is watched through its folder: an editor that saves by renaming a new
    # file over the old one would end a watch on the file itself.
    watched = sorted({str(r.path if r.is_dir else r.path.parent) for r in roots})
    missing = [w for w in watched if not Path(w).is_dir()]
    if missing:
        raise FathomError(f"{missing[0]}: no such folder to watch — create it, or watch another")
    flt = DocumentFilter(roots, cfg.ingest.follow_symlinks)
    quiet = max(1, int(cfg.ingest.watch_debounce_ms))
    # The model loads now, not inside the first change's batch: a change is then followed in
    # the time its own embedding takes.
    embedder.embed(["watching"])
    emit("watching", paths=[str(r.path) for r in roots])
    for changes in watchfiles.watch(
        *watched,
        watch_filter=flt,
        step=quiet,
        debounce=max(10 * quiet, 2000),  # a long burst still yields a batch this often
        stop_event=stop,
        raise_interrupt=True,
    ):
        changed = {p for _, raw in changes if (p := flt.path_of(raw)) is not None}
        if not changed:
            continue
        if not wait_until_stable(changed, cfg.ingest.watch_stable_ms / 1000, stop, emit):
            return
        batch = ingest_batch(cfg, name, sorted(changed), len(changes), embedder, password)
        emit("batch", batch=batch)
