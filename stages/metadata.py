"""Metadata questions answered from the document's own metadata, kept at ingest.

"Who wrote this report?", "When was it published?", "Which organisation issued it?", "What
version is this?", "What is its title?" (``router.answer_kind``: kind ``metadata`` with its
field) are answered from ``Collection.metadata()`` — the title, authors, organisation, date and
version read from the file's properties and its first page's title block — not from whichever
passage retrieval finds. The document is the one the question's best-ranked passage comes from
(the only one in a single-document collection, or within ``--doc``). The answer cites the
passage on the page the field was read from (the first page for the file's properties, and
says so). A field the document does not state is answered as any other question is.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from fathom.core.base import Draft, Hit

if TYPE_CHECKING:
    from fathom.stages.parts import Parts
    from fathom.stages.records import Prepared

# How each field is said in the answer.
_SAID = {
    "title": "The document's title is {value}",
    "authors": "Written by {value}",
    "organisation": "Published by {value}",
    "date": "Dated {value}",
    "version": "Version: {value}",
}


def metadata_answer(parts: Parts, prepared: Prepared) -> tuple[list[Hit], Draft] | None:
    """``(sources, draft)`` answering a metadata question from the document's metadata, or
    None when the question is not one, or its document does not state the field."""
    kind = prepared.kind
    if kind is None or kind.name != "metadata" or not kind.field:
        return None
    t0 = time.perf_counter()
    doc_id = document_of(parts, prepared)
    meta = parts.collection.metadata().get(doc_id) if doc_id else None
    if meta is None:
        return None
    field = kind.field
    value: Any = getattr(meta, field)
    if not value:
        return None
    origin = meta.source_of(field) or ("properties", 0)
    chunk = _chunk_on_page(parts, doc_id, origin[1] or 1)
    if chunk is None:
        return None
    shown = _join(value) if isinstance(value, tuple) else str(value)
    where = (
        "the document's properties"
        if origin[0] == "properties"
        else f"the title page (p. {origin[1] or 1})"
        if origin[0] == "title block"
        else f"p. {origin[1] or 1}"
    )
    text = f"{_SAID[field].format(value=shown)} — from {where} [1]."
    short = tuple(value) if isinstance(value, tuple) else shown
    draft = stated_draft(parts, text, "document metadata", t0, citations=(1,), short=short)
    return [Hit(chunk, score=1.0)], draft


def document_of(parts: Parts, prepared: Prepared) -> str:
    """The document the question is about: the only one in scope, else the best-ranked
    passage's."""
    docs = prepared.docs
    if docs is not None and len(docs.documents) == 1:
        return docs.documents[0].doc_id
    entries = [d for d in parts.collection.manifest.documents if d.status == "ok"]
    if len(entries) == 1:
        return entries[0].doc_id
    hits = prepared.probe.hits
    return hits[0].chunk.doc_id if hits else ""


def _chunk_on_page(parts: Parts, doc_id: str, page: int) -> Any:
    """The document's first chunk on ``page`` (else its first chunk); None when it has none."""
    coll = parts.collection
    entry = next((d for d in coll.manifest.documents if d.doc_id == doc_id), None)
    if entry is None or entry.rows[1] <= entry.rows[0]:
        return None
    start, end = entry.rows
    first = None
    for chunk in coll.chunks(range(start, min(end, start + 40))):
        if first is None:
            first = chunk
        if chunk.page_start <= page <= chunk.page_end:
            return chunk
    return first


def _join(names: tuple[str, ...]) -> str:
    """ "A", "A and B", "A, B and C"."""
    if len(names) <= 2:
        return " and ".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]


def missing_pages_answer(parts: Parts, prepared: Prepared) -> tuple[list[Hit], Draft] | None:
    """``(sources, draft)`` saying the document does not say, when the question asks about
    pages (or slides) past the end of its only document ("In the picture on page 50, …" of a
    20-page report); None otherwise. The best-ranked passages are listed as related."""
    kind = prepared.kind
    named = [p for p in (kind.pages if kind is not None else ()) if p > 0]
    if not named:
        return None
    entries = [d for d in parts.collection.manifest.documents if d.status == "ok"]
    docs = prepared.docs
    if docs is not None and len(docs.documents) == 1:
        entries = [d for d in entries if d.doc_id == docs.documents[0].doc_id]
    if len(entries) != 1 or entries[0].pages <= 0:
        return None  # several documents, or one without pages: no page count to hold it to
    pages = entries[0].pages
    if min(named) <= pages:
        return None
    t0 = time.perf_counter()
    asked = ", ".join(str(p) for p in named[:3]) + (" …" if len(named) > 3 else "")
    text = (
        f"I don't know — the document does not say: it has {pages} page"
        f"{'s' if pages != 1 else ''}, and the question asks about page {asked}."
    )
    used = list(prepared.probe.hits[:3])
    related = tuple(range(1, len(used) + 1))
    draft = stated_draft(parts, text, "document pages", t0, abstained=True, related=related)
    return used, draft


def stated_draft(parts: Parts, text: str, model: str, t0: float, **fields: Any) -> Draft:
    """A draft of what the collection states about a document (no model read anything): sure
    when it cites (``citations``), else an abstention."""
    confidence = 1.0 if fields.get("citations") else 0.0
    return Draft(
        text=text,
        citations=fields.pop("citations", ()),
        prompt_tokens=0,
        completion_tokens=0,
        backend=parts.generator.name,
        model=model,
        finish_reason="stop",
        ms=(time.perf_counter() - t0) * 1000,
        confidence=confidence,
        **fields,
    )
