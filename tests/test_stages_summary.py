"""stages/summary.py: a section's kept chunks become one source for a model-free summary."""

from __future__ import annotations

from fathom.core.base import Chunk, Hit
from fathom.stages.summary import merged


def _hit(text: str, start: int, page: int, spans) -> Hit:
    chunk = Chunk(
        chunk_id=Chunk.make_id("d", start, start + len(text)),
        doc_id="d",
        text=text,
        char_start=start,
        char_end=start + len(text),
        page_start=page,
        page_end=page,
        section="Intro",
        n_tokens=len(text.split()),
        ordinal=page,
        sentences=spans,
    )
    return Hit(chunk=chunk, score=1.0)


def test_merged_keeps_every_text_page_and_sentence_span() -> None:
    a = _hit("One two. Three.", 0, 1, ((0, 8), (9, 15)))
    b = _hit("Four five.", 16, 3, ((0, 10),))
    m = merged([a, b])
    assert m.text == "One two. Three.\n\nFour five."
    assert (m.page_start, m.page_end) == (1, 3)
    assert [m.text[s:e] for s, e in m.sentences] == ["One two.", "Three.", "Four five."]
    assert m.chunk_id == a.chunk.chunk_id
    assert merged([a]) is a.chunk


def test_merged_without_spans_leaves_the_split_to_the_reader() -> None:
    a = _hit("One two. Three.", 0, 1, None)
    b = _hit("Four five.", 16, 2, ((0, 10),))
    assert merged([a, b]).sentences is None
