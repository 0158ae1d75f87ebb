"""Records that flow between stages, and one small protocol per stage.

Leaf module: imports nothing from the project. Records are frozen dataclasses with a stable
``to_dict()``; ids derive from content so re-ingesting unchanged text yields the same ids.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:  # numpy only for annotations: this module stays stdlib-only at run time
    import numpy as np

QueryType = Literal["factual", "summarization", "reasoning", "multi_hop"]
SearchMode = Literal["dense", "bm25", "hybrid"]


def content_id(*parts: str | bytes, length: int = 16) -> str:
    """A short hex id from the sha256 of the parts (stable across runs and machines)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part if isinstance(part, bytes) else part.encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()[:length]


@dataclass(frozen=True, slots=True)
class PageSpan:
    """Page ``number`` (1-based) covers ``text[start:end]`` of its document."""

    number: int
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class SectionSpan:
    """A titled section (heading ``level`` 1 = top) covering ``text[start:end]``. ``headed``:
    whether its text opens with its heading; a section marked without one (the text of a page
    read by OCR) is not, so its first paragraph is body text, not a heading."""

    title: str
    level: int
    start: int
    end: int
    headed: bool = True


MetaSource = Literal["properties", "title block", "text"]
META_FIELDS = ("title", "authors", "organisation", "date", "version")


@dataclass(frozen=True, slots=True)
class DocMeta:
    """What a document says about itself: title, authors, organisation, date and version.

    Every field may be empty (not found). ``date`` is as written ("March 2012"); ``iso_date``
    is its reading as ``YYYY-MM-DD``, ``YYYY-MM`` or ``YYYY`` ('' when it cannot be read).
    ``origin`` says where each found field came from: ``(field, source, page)`` with source
    ``"properties"`` (the file's own metadata: PDF info/XMP, DOCX/PPTX core properties, HTML
    ``<meta>``, EPUB package), ``"title block"`` (the title area of the first page) or
    ``"text"`` (elsewhere in the opening text), and the 1-based page (0: no page).
    """

    title: str = ""
    authors: tuple[str, ...] = ()
    organisation: str = ""
    date: str = ""
    iso_date: str = ""
    version: str = ""
    origin: tuple[tuple[str, str, int], ...] = ()

    def source_of(self, name: str) -> tuple[str, int] | None:
        """``(source, page)`` of field ``name`` (``"date"`` covers ``iso_date``); None when
        the field was not found."""
        for fld, source, page in self.origin:
            if fld == name:
                return source, page
        return None

    def is_empty(self) -> bool:
        return not (self.title or self.authors or self.organisation or self.date or self.version)

    def to_dict(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "authors": list(self.authors),
            "organisation": self.organisation,
            "date": self.date,
            "iso_date": self.iso_date,
            "version": self.version,
            "origin": [[f, s, p] for f, s, p in self.origin],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> DocMeta:
        """The record ``to_dict`` wrote; missing keys (an older or empty dict) read as empty."""
        if not d:
            return cls()
        return cls(
            title=str(d.get("title") or ""),
            authors=tuple(str(a) for a in d.get("authors") or ()),
            organisation=str(d.get("organisation") or ""),
            date=str(d.get("date") or ""),
            iso_date=str(d.get("iso_date") or ""),
            version=str(d.get("version") or ""),
            origin=tuple((str(f), str(s), int(p)) for f, s, p in d.get("origin") or ()),
        )


@dataclass(frozen=True, slots=True)
class Document:
    """Clean text of one source, with page and section spans.

    Paragraphs in ``text`` are separated by a blank line; a table row is one line with cells
    joined by `` | ``. ``doc_id`` is derived from the source bytes (``sha256``) so unchanged
    files keep their id. ``source_id`` is an external id (e.g. a BEIR doc id) when there is one.
    """

    doc_id: str
    path: str
    title: str
    text: str
    sha256: str
    format: str
    pages: tuple[PageSpan, ...] = ()
    sections: tuple[SectionSpan, ...] = ()
    source_id: str = ""
    warnings: tuple[str, ...] = ()
    ocr_pages: tuple[int, ...] = ()  # pages whose text was read by OCR
    meta: DocMeta = DocMeta()  # title, authors, organisation, date, version as read at ingest

    def page_at(self, offset: int) -> int:
        """The page number containing character ``offset`` (1 when the format has no pages)."""
        number = 1
        for page in self.pages:
            if page.start <= offset:
                number = page.number
            else:
                break
        return number

    def section_at(self, offset: int) -> str:
        """The innermost section title containing ``offset`` ('' outside any section)."""
        title, level = "", 0
        for sec in self.sections:
            if sec.start <= offset < sec.end and sec.level >= level:
                title, level = sec.title, sec.level
        return title

    def to_dict(self) -> dict[str, Any]:
        return {
            "doc_id": self.doc_id,
            "path": self.path,
            "title": self.title,
            "sha256": self.sha256,
            "format": self.format,
            "source_id": self.source_id,
            "pages": [[p.number, p.start, p.end] for p in self.pages],
            "sections": [[s.title, s.level, s.start, s.end, s.headed] for s in self.sections],
            "chars": len(self.text),
            "warnings": list(self.warnings),
            "ocr_pages": list(self.ocr_pages),
            "meta": self.meta.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class Chunk:
    """A retrievable span of a document: ``text == document.text[char_start:char_end]``."""

    chunk_id: str
    doc_id: str
    text: str
    char_start: int
    char_end: int
    page_start: int
    page_end: int
    section: str
    n_tokens: int
    ordinal: int
    title: str = ""
    source_id: str = ""
    # Sentence spans ``(start, end)`` into ``text``, stored at ingestion; None when unknown
    # (a collection written before chunks carried them, or a chunk made outside a collection).
    sentences: tuple[tuple[int, int], ...] | None = field(default=None, compare=False)

    @staticmethod
    def make_id(doc_id: str, char_start: int, char_end: int) -> str:
        return content_id(doc_id, str(char_start), str(char_end))

    @property
    def pages(self) -> str:
        """Human page label: '3' or '3-4'."""
        if self.page_start == self.page_end:
            return str(self.page_start)
        return f"{self.page_start}-{self.page_end}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "chunk_id": self.chunk_id,
            "doc_id": self.doc_id,
            "text": self.text,
            "char_start": self.char_start,
            "char_end": self.char_end,
            "page_start": self.page_start,
            "page_end": self.page_end,
            "section": self.section,
            "n_tokens": self.n_tokens,
            "ordinal": self.ordinal,
            "title": self.title,
            "source_id": self.source_id,
            **({} if self.sentences is None else {"sentences": [list(s) for s in self.sentences]}),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Chunk:
        spans = d.get("sentences")
        if spans is None:
            return cls(**d)
        return cls(**{**d, "sentences": tuple((int(a), int(b)) for a, b in spans)})


def source_id(chunk: Chunk) -> str:
    """The document id a question's gold ``doc_ids`` name: the source's own id (``doc_id`` of a
    ``docs.jsonl`` line), else its title, else Fathom's content id."""
    return chunk.source_id or chunk.title or chunk.doc_id


@dataclass(frozen=True, slots=True)
class Hit:
    """A chunk found for a query: fused score plus each retriever's 1-based rank and score."""

    chunk: Chunk
    score: float
    ranks: dict[str, int] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)
    row: int = -1  # the chunk's row in its collection (its vector id); -1 when not from one

    def to_dict(self) -> dict[str, Any]:
        return {
            "chunk_id": self.chunk.chunk_id,
            "doc_id": self.chunk.doc_id,
            "title": self.chunk.title,
            "source_id": self.chunk.source_id,
            "pages": self.chunk.pages,
            "section": self.chunk.section,
            "score": self.score,
            "ranks": dict(self.ranks),
            "scores": dict(self.scores),
            "text": self.chunk.text,
        }


@dataclass(frozen=True, slots=True)
class Probe:
    """One first-stage retrieval to the deepest budget, shared by the depth policy and stages."""

    query: str
    hits: tuple[Hit, ...]
    timings_ms: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Decision:
    """How deep to retrieve: ``k`` chunks (0 = answer without context), who chose it and why."""

    k: int
    policy: str
    reason: str
    scores: dict[str, float] = field(default_factory=dict)
    # A priced choice (``router.cost``): the reading cost it was priced with, what the chosen
    # depth costs in that unit, and the trade in words (None: the policy prices nothing).
    cost: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {"k": self.k, "policy": self.policy, "reason": self.reason, "scores": self.scores}
        if self.cost is not None:
            out["cost"] = self.cost
        return out


@dataclass(frozen=True, slots=True)
class DepthQuery:
    """What a depth policy decides from: the question, its probe, its query type and the type
    probabilities, the query vector ``(dim,) float32`` (None where none was embedded) and, for
    a policy that prices its choice, what a context token costs the answering backend
    (``router.cost.ReadingCost``; None otherwise); for a policy that reads passages, the
    probe's first candidates as Fathom's reader read them, best reading first (each hit's
    ``scores["reading"]`` and ``scores["margin"]``; None where the reader could not run)."""

    question: str
    probe: Probe
    qtype: QueryType
    type_probs: dict[str, float] | None = None
    qvec: Any = None
    cost: Any = None
    readings: tuple[Hit, ...] | None = None


# ---------------------------------------------------------------------------------------------
# Stage protocols
# ---------------------------------------------------------------------------------------------


@runtime_checkable
class Loader(Protocol):
    def load(self, path: str) -> Document: ...


@runtime_checkable
class Chunker(Protocol):
    name: str

    def params(self) -> dict[str, Any]: ...

    def split(self, doc: Document) -> list[Chunk]: ...


@runtime_checkable
class TokenCounter(Protocol):
    def count(self, texts: list[str]) -> list[int]: ...


@runtime_checkable
class Embedder(Protocol):
    """Maps texts to L2-normalised vectors: ``embed(texts) -> (n, dim) float32``."""

    id: str
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...


@runtime_checkable
class Retriever(Protocol):
    def search(self, query: str, k: int) -> list[Hit]: ...


@runtime_checkable
class DepthPolicy(Protocol):
    """How many chunks go to the generator. One signature for every policy: ``decide`` reads
    what it needs of one ``DepthQuery`` (the probe, the query type and its probabilities, the
    query vector, the reading cost).

    Three attributes tell the Engine how the decision is carried out, so it never asks which
    class a policy is: ``reads_passages`` (``decide`` reads the reader's readings of the
    candidates, so the Engine reads them first), ``follows_strategy`` (the depth is the query
    type's strategy default, so that type's context budget and whole-document map-reduce
    apply) and ``climb`` (a
    ``router.cascade.Cascade`` whose ladder the answer climbs while its confidence is low;
    None for a one-shot decision)."""

    name: str
    deepest_k: int  # how deep the probe must go for the policy (0: the default depth)
    prices_reading: bool  # whether ``decide`` reads ``cost`` (the Engine then works it out)
    reads_passages: bool  # whether ``decide`` reads ``readings`` (the Engine reads them first)
    follows_strategy: bool
    climb: Any

    def decide(self, query: DepthQuery) -> Decision: ...


# ---------------------------------------------------------------------------------------------
# Generation, answers and traces
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Draft:
    """One generation: the text, the source numbers it cites ([n] → ``hits[n-1]``), its tokens.

    ``logprobs`` are per-token log-probabilities when the backend gives them.
    """

    text: str
    citations: tuple[int, ...]
    prompt_tokens: int
    completion_tokens: int
    backend: str
    model: str
    finish_reason: str = ""
    logprobs: tuple[float, ...] | None = None
    ms: float = 0.0
    # The answerer's own probability that the answer is right, when it states one (the
    # extractive answerer: the reader's for a sure span, else its calibrated sentence
    # scorer's); None for language models.
    confidence: float | None = None
    # The exact answer span when the answerer gave one (the extractive answerer's reader):
    # its text, source number, characters in the chunk and the document, score, and whether
    # it clears the reader's bar (``sure``).
    span: dict[str, Any] | None = None
    # The short answer apart from the text, when the answerer states one (the extractive
    # answerer: a span, a number, a count, a list's items, a metadata field); None otherwise.
    short: str | tuple[str, ...] | None = None
    # Whether the answer says the sources do not answer (the answerer's own word; a language
    # model's abstention is read from its text by ``feedback.judges.is_abstention``).
    abstained: bool = False
    # Passages close to the question that did not answer it (source numbers), listed with an
    # abstention as "related".
    related: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "citations": list(self.citations),
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "backend": self.backend,
            "model": self.model,
            "finish_reason": self.finish_reason,
            "mean_logprob": (sum(self.logprobs) / len(self.logprobs) if self.logprobs else None),
            "ms": self.ms,
        }


@dataclass(frozen=True, slots=True)
class Citation:
    """Source ``n`` of an answer, resolved to its document, pages and section."""

    n: int
    chunk_id: str
    doc_id: str
    title: str
    path: str
    pages: str
    section: str
    score: float
    text: str = ""  # what the generator read of it, at most SOURCE_TEXT_CHARS (see cited_text)

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "chunk_id": self.chunk_id,
            "doc_id": self.doc_id,
            "title": self.title,
            "path": self.path,
            "pages": self.pages,
            "section": self.section,
            "score": self.score,
            "text": self.text,
        }


SOURCE_TEXT_CHARS = 2000


def cited_text(text: str, limit: int = SOURCE_TEXT_CHARS) -> str:
    """``text`` as a source shows it in ``--json``: whitespace as written, at most ``limit``
    characters, cut at a word boundary and marked with "…" when longer."""
    text = text.strip()
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip() + "…"


@runtime_checkable
class Generator(Protocol):
    """Answers a question from numbered sources (``hits``; may be empty).

    Every ability the engine uses is declared here (``stages.generate.base.BaseGenerator``
    gives each a neutral default), so nothing asks a backend what it can do."""

    name: str  # backend name, e.g. "llamacpp"
    model: str
    selection: str  # why ``auto`` chose this backend ("" when configured)
    supports_deadline: bool  # generate() holds to ``time_budget_ms``
    keeps_prompt_cache: bool  # a prompt's state carries over to the next until forget()
    language_model: bool  # answers are written by a model (False: quoted from the sources)
    concurrent_requests: bool  # several requests are answered at once (a server)
    template_source: str  # where a GGUF's chat template came from when it has none ("")

    @property
    def context_window(self) -> int: ...

    @property
    def replayed_ms(self) -> float:
        """Generation time an evaluation cache replayed instead of running."""
        ...

    def count_tokens(self, texts: list[str]) -> list[int]: ...

    def prompt_tokens(self, question: str, hits: list[Hit]) -> int:
        """Tokens of the full rendered prompt (template included), counted conservatively."""
        ...

    def generate(
        self,
        question: str,
        hits: list[Hit],
        on_token: Any | None = None,
        time_budget_ms: float | None = None,
    ) -> Draft: ...

    def complete(self, messages: list[dict[str, str]], time_budget_ms: float | None) -> str:
        """The model's reply to chat ``messages`` (a short side prompt such as a follow-up's
        rewrite), not streamed; raises ``FathomError`` when the backend fails."""
        ...

    def expected_prefill_ms(self, prompt_tokens: int) -> float | None: ...

    def measure_prefill(self, question: str, hits: list[Hit]) -> float | None: ...

    def summarize(
        self, hits: list[Hit], on_token: Any | None = None, question: str | None = None
    ) -> Draft | None: ...

    def use_vectors(self, vectors: Any) -> None: ...

    def forget(self) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class Reranker(Protocol):
    name: str

    def rerank(self, query: str, hits: list[Hit]) -> list[Hit]: ...


@runtime_checkable
class Compressor(Protocol):
    # Fathom's own also takes ``lead`` (chunk ids kept first, in order: a cascade's last rung);
    # the Engine passes it only when there is one.
    def fit(self, query: str, hits: list[Hit], budget: int) -> list[Hit]: ...
