"""Sentence splitting with NLTK Punkt, trained on the document itself (no NLTK data downloads).

Punkt learns abbreviations, collocations and sentence starters unsupervised from raw text. We
train a ``PunktTrainer`` on (the first ``TRAIN_CHARS`` characters of) the document, then add a
built-in set of common English abbreviations so "e.g.", "Fig. 3" and "U.S." never end a sentence
however little text there was to learn from. Documents shorter than ``MIN_TRAIN_CHARS`` use the
built-in abbreviations alone: Punkt's statistics mean nothing on a few sentences.

Lines are respected where the cleaned text keeps them on purpose: a table row (cells joined by
`` | ``) is always one unit and never split, every line of a table block is its own unit, and a
list item ("- x", "2) x") starts a new unit. Other newlines are ordinary whitespace to Punkt.

NLTK (``chunking.punkt``) is imported on the first real split, not with this module. Ingestion
stores each chunk's ``split_sentences`` with the chunk, and query-time stages read them through
``chunk_sentences``, so answering from a collection never loads NLTK.
"""

from __future__ import annotations

import re
from functools import lru_cache
from itertools import pairwise
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fathom.core.base import Chunk
    from nltk.tokenize.punkt import PunktParameters

# Lower case, without the final period (Punkt's form); internal periods stay ("e.g", "u.s").
BUILTIN_ABBREVIATIONS: frozenset[str] = frozenset(
    {
        # Latin and scholarly
        *("e.g", "i.e", "etc", "cf", "viz", "vs", "al", "ibid", "approx", "ca", "est", "resp"),
        *("incl", "excl", "esp", "fig", "figs", "eq", "eqs", "no", "nos", "vol", "vols", "pp"),
        *("p", "ch", "chap", "sec", "sect", "tab", "ref", "refs", "ed", "eds", "ver", "suppl"),
        # titles, places, organisations
        *("dr", "mr", "mrs", "ms", "prof", "st", "sr", "jr", "rev", "gen", "col", "lt", "sgt"),
        *("capt", "hon", "mt", "ave", "blvd", "dept", "univ", "inst", "assoc", "inc", "ltd"),
        *("co", "corp", "bros"),
        # months ("may" is a word)
        *("jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec"),
        # with internal periods
        *("u.s", "u.s.a", "u.k", "e.u", "u.n", "ph.d", "m.d", "b.a", "m.a", "b.sc", "m.sc"),
        *("a.m", "p.m", "n.b"),
    }
)

TRAIN_CHARS = 200_000  # Punkt training is pure Python: cap it so big documents stay cheap
MIN_TRAIN_CHARS = 20_000

_TABLE_CELL_SEP = " | "
# A line that starts a list item (same markers the ingestion cleaner keeps line breaks for).
_LIST_ITEM = re.compile(r"\s*(?:[-*+•▪◦●‣–]|\d{1,3}[.)]|[a-zA-Z][.)])\s")
_NON_SPACE = re.compile(r"\S")


@lru_cache(maxsize=16)
def _trained_params(sample: str) -> PunktParameters:
    """Punkt parameters learned from ``sample`` plus the built-in abbreviations (cached)."""
    from fathom.chunking.punkt import trained_params

    return trained_params(sample, BUILTIN_ABBREVIATIONS)


class SentenceSplitter:
    """Splits text into sentence spans; train once per document with ``trained_on``, reuse per
    paragraph with ``spans``."""

    def __init__(self, params: PunktParameters | None = None) -> None:
        # NLTK loads when text is first split, not on import.
        from fathom.chunking.punkt import builtin_params, tokenizer

        if params is None:
            params = builtin_params(BUILTIN_ABBREVIATIONS)
        self._tokenizer = tokenizer(params)

    @classmethod
    def trained_on(cls, text: str, max_chars: int = TRAIN_CHARS) -> SentenceSplitter:
        """A splitter trained unsupervised on ``text[:max_chars]`` (cached by that sample)."""
        if len(text) < MIN_TRAIN_CHARS:
            return _default_splitter()
        return cls(_trained_params(text[:max_chars]))

    def spans(self, text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
        """Sentence spans ``(s, e)`` into ``text`` covering every non-whitespace character of
        ``text[start:end]``, in order; each span starts and ends on non-whitespace."""
        end = len(text) if end is None else end
        out: list[tuple[int, int]] = []
        for a, b, split in _line_blocks(text, start, end):
            if split:
                self._punkt(text, a, b, out)
            else:
                out.append((a, b))
        return out

    def _punkt(self, text: str, a: int, b: int, out: list[tuple[int, int]]) -> None:
        block = text[a:b]
        # Punkt's span starts are its sentence boundaries; deriving each end from the next start
        # (minus whitespace) makes the spans cover every non-whitespace character by construction.
        starts = [s for s, _ in self._tokenizer.span_tokenize(block)]
        if not starts:
            return
        starts[0] = 0
        starts.append(len(block))
        for s, e in pairwise(starts):
            piece = block[s:e]
            stripped = piece.strip()
            if stripped:
                lead = len(piece) - len(piece.lstrip())
                out.append((a + s + lead, a + s + lead + len(stripped)))


@lru_cache(maxsize=1)
def _default_splitter() -> SentenceSplitter:
    return SentenceSplitter()


def _line_blocks(text: str, start: int, end: int) -> list[tuple[int, int, bool]]:
    """``(a, b, punkt?)`` blocks of ``text[start:end]``, trimmed to non-whitespace.

    A table row line is a block that Punkt must not split; in a block of lines containing a table
    row every line is its own block; a list item starts a new block; other lines run together.
    """
    chunk = text[start:end]
    if "\n" not in chunk:
        return _trimmed(text, start, end, _TABLE_CELL_SEP not in chunk)
    is_table = _TABLE_CELL_SEP in chunk
    blocks: list[tuple[int, int, bool]] = []
    run_start = -1  # start of the current run of prose lines
    pos = start
    for line in chunk.split("\n"):
        line_end = pos + len(line)
        if is_table or _LIST_ITEM.match(line):
            if run_start >= 0:
                blocks += _trimmed(text, run_start, pos, True)
                run_start = -1
            if is_table:
                blocks += _trimmed(text, pos, line_end, _TABLE_CELL_SEP not in line)
            else:
                run_start = pos
        elif run_start < 0:
            run_start = pos
        pos = line_end + 1
    if run_start >= 0:
        blocks += _trimmed(text, run_start, end, True)
    return blocks


def _trimmed(text: str, a: int, b: int, split: bool) -> list[tuple[int, int, bool]]:
    """``[(a', b', split)]`` with whitespace trimmed from both ends, or ``[]`` if blank."""
    m = _NON_SPACE.search(text, a, b)
    if m is None:
        return []
    a = m.start()
    b = a + len(text[a:b].rstrip())
    return [(a, b, split)]


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Sentence spans into ``text`` (covering all its non-whitespace), Punkt trained on ``text``."""
    if not text or text.isspace():
        return []
    return list(_split_cached(text))


def chunk_sentences(chunk: Chunk) -> list[tuple[int, int]]:
    """The sentence spans of ``chunk.text``: those stored with it at ingestion (the
    ``split_sentences`` of its text), else split now — a chunk of a collection written before
    chunks carried their sentences, or one made outside a collection."""
    if chunk.sentences is not None:
        return list(chunk.sentences)
    return split_sentences(chunk.text)


@lru_cache(maxsize=8192)
def _split_cached(text: str) -> tuple[tuple[int, int], ...]:
    # Cached: at query time the same chunks are split again by every compression round.
    return tuple(SentenceSplitter.trained_on(text).spans(text))
