"""Short sources for a generator: one-chunk documents as search hits, and three about the
Eiffel Tower whose answer is in source 3, page 2."""

from __future__ import annotations

from fathom.core.base import Chunk, Hit

EIFFEL = [
    ("Paint", "The tower is repainted every seven years with about 60 tonnes of paint.", 1),
    ("Fuji", "Mount Fuji is the highest mountain in Japan.", 1),
    ("Eiffel", "The Eiffel Tower is in Paris. It was completed in March 1889.", 2),
]


def make_hit(n: int, text: str, page: int = 1, title: str = "") -> Hit:
    """A hit on a one-chunk document ``doc<n>`` with the chunk on ``page``."""
    chunk = Chunk(
        chunk_id=Chunk.make_id(f"doc{n}", 0, len(text)),
        doc_id=f"doc{n}",
        text=text,
        char_start=0,
        char_end=len(text),
        page_start=page,
        page_end=page,
        section="",
        n_tokens=len(text.split()),
        ordinal=0,
        title=title or f"Document {n}",
    )
    return Hit(chunk=chunk, score=1.0 / n)


def eiffel_hits() -> list[Hit]:
    """Three short sources; the answer to "Where is the Eiffel Tower?" is in source 3, page 2."""
    return [make_hit(i, text, page, title) for i, (title, text, page) in enumerate(EIFFEL, 1)]
