"""Collection locks, advisory and cross-platform (``flock`` on Linux and macOS,
``LockFileEx`` on Windows, through portalocker).

* One writer at a time: ``writer_lock`` holds ``.lock`` in the collection's folder; a second
  ingest waits for it (``ingest.lock_timeout_s``), then fails clearly.
* Readers hold a shared lock on their generation's ``READERS`` file while the collection is
  open, so a writer's clean-up leaves a generation in use alone (a later ingest removes it);
  the clean-up takes that lock exclusively and unlinks the file before removing the folder, so
  a reader that finds the file gone reads the manifest again.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import portalocker
from fathom.core.errors import CollectionLocked, FathomError

READERS = ".readers"

Progress = Callable[..., None]


def hold_shared(path: Path) -> int | None:
    """A shared lock on the file at ``path``: its open descriptor (close it to release), or
    None when the file is gone (or was removed while the lock was awaited)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    portalocker.lock(fd, portalocker.LOCK_SH)  # waits only while a clean-up is deciding
    if not path.exists():
        os.close(fd)
        return None
    return fd


@contextlib.contextmanager
def writer_lock(directory: Path, timeout: float = 600.0, on_wait: Progress | None = None):
    """Exclusive writer lock on a collection (an advisory lock on ``.lock``: ``flock`` on
    Linux and macOS, ``LockFileEx`` on Windows, through portalocker)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(directory / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise FathomError(
            f"{directory}: cannot write the collection ({exc.strerror or exc}) — set FATHOM_HOME "
            "or `home` in fathom.toml to a writable folder"
        ) from None
    try:
        deadline = time.monotonic() + timeout
        waited = False
        while True:
            try:
                portalocker.lock(fd, portalocker.LOCK_EX | portalocker.LOCK_NB)
                break
            except portalocker.AlreadyLocked:
                if not waited and on_wait is not None:
                    on_wait("waiting", collection=directory.name)
                waited = True
                if time.monotonic() >= deadline:
                    raise CollectionLocked(
                        f"collection {directory.name!r} is being written by another process "
                        f"(waited {timeout:g} s) — wait for it to finish, or retry later "
                        "(ingest.lock_timeout_s sets the wait)"
                    ) from None
                time.sleep(0.1)
        yield
    finally:
        os.close(fd)


def remove_unread(generation: Path) -> None:
    """Remove ``generation`` unless a reader holds its shared lock."""
    try:
        fd = os.open(generation / READERS, os.O_RDONLY)
    except FileNotFoundError:
        shutil.rmtree(generation, ignore_errors=True)  # no reader lock to respect
        return
    try:
        portalocker.lock(fd, portalocker.LOCK_EX | portalocker.LOCK_NB)
    except portalocker.AlreadyLocked:
        return  # in use
    else:
        # Readers that opened the file but wait for the lock see it gone and re-read.
        (generation / READERS).unlink(missing_ok=True)
        shutil.rmtree(generation, ignore_errors=True)
    finally:
        os.close(fd)
