"""The chunk store: rows read back as written, and a chunk found by its id."""

from __future__ import annotations

from pathlib import Path

from fathom.core.base import Chunk
from fathom.index.store import ChunkStore, write_chunks


def _chunk(i: int, text: str) -> Chunk:
    return Chunk(
        chunk_id=Chunk.make_id("doc", i * 100, i * 100 + len(text)),
        doc_id="doc",
        text=text,
        char_start=i * 100,
        char_end=i * 100 + len(text),
        page_start=i + 1,
        page_end=i + 1,
        section="",
        n_tokens=len(text.split()),
        ordinal=i,
    )


def test_find_returns_the_row_of_an_id_and_nothing_for_others(tmp_path: Path) -> None:
    chunks = [_chunk(i, f"Paragraph {i} about pumps.") for i in range(5)]
    # A chunk whose text quotes another chunk's id in the store's own syntax.
    trap = f'see {{"chunk_id": "{chunks[4].chunk_id}"}} here'
    chunks.insert(1, _chunk(9, trap))
    write_chunks(tmp_path, chunks)
    store = ChunkStore(tmp_path)
    try:
        for row, c in enumerate(chunks):
            assert store.find(c.chunk_id) == row
            assert store.get(row) == c
        assert store.find("0" * 16) is None
        assert store.find("not-hex") is None and store.find("") is None
        assert store.find('"} {"chunk_id": "') is None
    finally:
        store.close()


def test_find_in_an_empty_store(tmp_path: Path) -> None:
    write_chunks(tmp_path, [])
    store = ChunkStore(tmp_path)
    assert store.find("abc") is None
    store.close()
