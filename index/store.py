"""The chunk store: ``chunks.jsonl`` (row i = vector i) plus ``chunks.offsets.npy``.

Readers memory-map the file and parse only the rows they need, so opening a collection does not
parse every chunk. Every row written carries its chunk's sentence spans (``sentences``), so the
query-time stages that work sentence by sentence never run the splitter; rows of an older
store, which lack them, are split when read by those stages, and get them when next written.
"""

from __future__ import annotations

import dataclasses
import json
import mmap
import os
import re
from collections.abc import Iterable
from pathlib import Path

import numpy as np
from fathom.chunking.sentences import split_sentences
from fathom.core.base import Chunk

CHUNKS = "chunks.jsonl"
OFFSETS = "chunks.offsets.npy"


def write_chunks(directory: Path, chunks: Iterable[Chunk]) -> int:
    """Write the store; returns the number of rows. ``offsets`` has n + 1 entries."""
    offsets = [0]
    with open(directory / CHUNKS, "wb") as fh:
        pos = 0
        for chunk in chunks:
            if chunk.sentences is None:
                chunk = dataclasses.replace(chunk, sentences=tuple(split_sentences(chunk.text)))
            line = json.dumps(chunk.to_dict(), ensure_ascii=False).encode("utf-8") + b"\n"
            fh.write(line)
            pos += len(line)
            offsets.append(pos)
        fh.flush()
        os.fsync(fh.fileno())
    np.save(directory / OFFSETS, np.asarray(offsets, dtype=np.int64), allow_pickle=False)
    return len(offsets) - 1


class ChunkStore:
    """Random access to chunk rows."""

    def __init__(self, directory: Path) -> None:
        self.offsets = np.load(directory / OFFSETS, allow_pickle=False)
        self._fh = open(directory / CHUNKS, "rb")  # noqa: SIM115 - kept open for the mmap's life
        size = os.fstat(self._fh.fileno()).st_size
        if size != int(self.offsets[-1]):
            self._fh.close()
            raise ValueError(f"{directory / CHUNKS}: {size} bytes, offsets say {self.offsets[-1]}")
        self._mm = mmap.mmap(self._fh.fileno(), 0, access=mmap.ACCESS_READ) if size else None

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def get(self, row: int) -> Chunk:
        if not 0 <= row < len(self):
            raise IndexError(row)
        assert self._mm is not None
        start, end = int(self.offsets[row]), int(self.offsets[row + 1])
        return Chunk.from_dict(json.loads(self._mm[start:end]))

    def find(self, chunk_id: str) -> int | None:
        """The row of the chunk with id ``chunk_id`` (hex), or None: one scan of the file for
        its key, without parsing any other row."""
        if self._mm is None or not re.fullmatch(r"[0-9a-f]{1,64}", chunk_id):
            return None
        key = b'{"chunk_id": "' + chunk_id.encode("ascii") + b'"'
        start = 0
        while (pos := self._mm.find(key, start)) >= 0:
            row = int(np.searchsorted(self.offsets, pos, side="right")) - 1
            if int(self.offsets[row]) == pos:  # the key opens a row, not text inside one
                return row
            start = pos + 1
        return None

    def rows(self, rows: Iterable[int]) -> list[Chunk]:
        return [self.get(int(r)) for r in rows]

    def all(self) -> list[Chunk]:
        if self._mm is None:
            return []
        return [Chunk.from_dict(json.loads(line)) for line in self._mm[:].splitlines()]

    def close(self) -> None:
        if self._mm is not None:
            self._mm.close()
        self._fh.close()
