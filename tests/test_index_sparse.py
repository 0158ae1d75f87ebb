"""The BM25 index on its own: Unicode-normalised terms shared by documents and queries (and
unchanged for ordinary text, so older indexes keep working), and an exact top-k order."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import numpy as np
import pytest
from fathom.bench.support import docgen
from fathom.core.config import IndexConfig
from fathom.index.sparse import Analyzer, Bm25Index

MULTILINGUAL = [
    "Café naïve résumé: Zoë wrote her CV in Köln and Zürich.",
    "Die Straße ist groß, und der Fluß fließt.",  # ß must stay ß (no casefold)
    "Ærø, Øresund, Ångström, señor, São Paulo, Łódź, İstanbul.",
    "Ελληνικά κείμενα και Русский текст, 東京 と 大阪, 서울.",
    "Numbers 1789 and 3.14, e-mail: someone@example.org, snake_case_word.",
    "“Quoted” text — with dashes – and ellipses... and emoji ✓ here.",
]


def _ordinary_texts() -> list[str]:
    pages = docgen.SAMPLE_PAGES + docgen.USER_GUIDE_PAGES
    texts = [text for page in pages for _kind, text in page]
    texts += [*docgen.DOCX_PARAGRAPHS, docgen.NON_ASCII_TEXT, docgen.MARKDOWN_TEXT]
    return texts + MULTILINGUAL


def _terms_before_nfkc(analyzer: Analyzer, text: str) -> list[str]:
    """The analyzer as it was before NFKC: lower-case, tokens, stopwords, stems."""
    import Stemmer

    words = re.findall(r"(?u)\b\w\w+\b", text.lower())
    words = [w for w in words if w not in analyzer._stop]
    return Stemmer.Stemmer(analyzer.stemmer_name).stemWords(words)


def test_ordinary_text_keeps_its_terms() -> None:
    """ASCII and NFC text without compatibility characters: the same terms as before NFKC, so
    indexes built before it need no re-ingest."""
    texts = _ordinary_texts()
    assert all(unicodedata.is_normalized("NFKC", t) for t in texts)
    analyzer = Analyzer()
    got = analyzer.terms_batch(texts)
    assert got == [_terms_before_nfkc(analyzer, t) for t in texts]
    assert sum(map(len, got)) > 500  # a real sample, not a handful of words
    assert "straße" in analyzer.terms("Straße")  # str.lower, not casefold


def test_decomposed_and_compatibility_forms_give_the_same_terms() -> None:
    analyzer = Analyzer()
    nfc = "Zoë wrote her résumé in the café"
    nfd = unicodedata.normalize("NFD", nfc)
    assert nfd != nfc
    assert analyzer.terms(nfd) == analyzer.terms(nfc) == ["zoë", "wrote", "her", "résumé", "café"]
    assert analyzer.terms("ﬁnancial ﬂow") == analyzer.terms("financial flow")
    assert analyzer.terms("ＦＵＬＬ ｗｉｄｔｈ") == analyzer.terms("full width")
    assert Analyzer(stemmer="none").terms_batch(["ＲÉＳＵＭÉ", nfd]) == [
        ["résumé"],
        ["zoë", "wrote", "her", "résumé", "café"],
    ]


@pytest.mark.parametrize("form", ["NFC", "NFD"])
def test_index_and_query_in_different_forms_match(tmp_path: Path, form: str) -> None:
    """Documents and queries go through the same analyzer, also after a save and load."""
    texts = [
        unicodedata.normalize(form, "Le café sert un résumé des nouvelles."),
        "The ﬁnancial report of the year.",
        "Nothing related here at all.",
    ]
    built = Bm25Index.build(texts, IndexConfig())
    built.save(tmp_path)
    loaded = Bm25Index.load(tmp_path)
    other = "NFD" if form == "NFC" else "NFC"
    for index in (built, loaded):
        _, rows = index.search(unicodedata.normalize(other, "café résumé"), 3)
        assert rows.tolist() == [0]
        _, rows = index.search("financial", 3)
        assert rows.tolist() == [1]


def _brute_top(scores: np.ndarray, k: int) -> list[int]:
    """Rows with a positive score, by score descending then row ascending, first ``k``."""
    rows = sorted((r for r in range(len(scores)) if scores[r] > 0), key=lambda r: (-scores[r], r))
    return rows[:k]


def _fixed(scores: np.ndarray) -> Bm25Index:
    index = Bm25Index(Analyzer(), len(scores), {})
    index.scores = lambda query: scores  # type: ignore[method-assign]
    return index


def test_ties_at_the_cut_are_broken_by_row() -> None:
    """Of the rows tied at the k-th score the lowest make the cut (argpartition alone kept an
    arbitrary subset: rows [30, 31, 32, 0, 4])."""
    scores = np.array([1.0] * 30 + [2.0] * 3 + [1.0] * 30, dtype=np.float32)
    got, rows = _fixed(scores).search("x", 5)
    assert rows.tolist() == [30, 31, 32, 0, 1]
    assert got.tolist() == [2.0, 2.0, 2.0, 1.0, 1.0]
    assert rows.dtype == np.int64 and got.dtype == np.float32


@pytest.mark.parametrize("seed", range(5))
def test_search_is_the_exact_brute_force_order(seed: int) -> None:
    """Many ties, zeros and negative scores (robertson idf): exactly the brute-force order."""
    rng = np.random.default_rng(seed)
    n = 2000
    scores = rng.integers(-2, 6, size=n).astype(np.float32) / 2
    scores[rng.random(n) < 0.5] = 0
    index = _fixed(scores)
    positive = int((scores > 0).sum())
    for k in (1, 2, 7, 50, 333, positive - 1, positive, positive + 1, n, n + 5):
        got, rows = index.search("x", k)
        assert rows.tolist() == _brute_top(scores, k)
        np.testing.assert_array_equal(got, scores[rows])


def test_search_without_positive_scores_is_empty() -> None:
    for scores in (np.zeros(10, np.float32), np.full(4, -1.0, np.float32)):
        got, rows = _fixed(scores).search("x", 3)
        assert got.shape == rows.shape == (0,)
    got, rows = _fixed(np.ones(3, np.float32)).search("x", 0)
    assert got.shape == rows.shape == (0,)
