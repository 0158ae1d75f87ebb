"""SupportScorer: verbatim quotes count as fully supported without an embedding call;
paraphrases are embedded once and scored against their cited source."""

from __future__ import annotations

from fathom.bench.support.hits import make_hit
from fathom.core.base import Draft
from fathom.feedback.confidence import SupportScorer


class CountingEmbedder:
    def __init__(self, inner) -> None:
        self.inner, self.calls, self.texts = inner, 0, 0

    def embed(self, texts):
        self.calls += 1
        self.texts += len(texts)
        return self.inner.embed(texts)

    def embed_query(self, text):
        return self.inner.embed_query(text)


def draft(text: str, cites: tuple[int, ...]) -> Draft:
    return Draft(text, cites, 10, 5, "test", "test")


def test_quotes_skip_embedding_and_paraphrases_are_embedded_once(minilm) -> None:
    hits = [
        make_hit(1, "The bridge opened in 1932. It carries eight lanes of traffic."),
        make_hit(2, "Tolls were removed in 1968 after the debt was repaid."),
    ]
    vecs = minilm.embed([h.chunk.text for h in hits])
    emb = CountingEmbedder(minilm)
    scorer = SupportScorer(emb)
    quoted = scorer.score(draft("It carries eight lanes of traffic. [1]", (1,)), hits, vecs)
    assert emb.calls == 0
    assert quoted.sentences[0]["support"] == 1.0 and quoted.sentences[0]["best_source"] == 1
    para = draft("Its tolls ended in 1968 once the debt had been paid off. [2]", (2,))
    conf = scorer.score(para, hits, vecs)
    assert emb.calls == 1 and emb.texts == 1
    assert 0.3 < conf.sentences[0]["support"] < 1.0 and conf.sentences[0]["best_source"] == 2
    scorer.score(para, hits, vecs)  # the same sentence again: cached
    assert emb.calls == 1
    wrong = scorer.score(draft("Bananas are rich in potassium. [1]", (1,)), hits, vecs)
    assert wrong.sentences[0]["support"] < conf.sentences[0]["support"]
    # Too short to count as a quote, or inside a longer word: scored, not taken on trust.
    calls = emb.calls
    short = scorer.score(draft("It opened in 1932. [1]", (1,)), hits, vecs)
    assert emb.calls == calls + 1 and short.sentences[0]["support"] < 1.0


def test_quote_needs_word_boundaries_and_enough_words() -> None:
    from fathom.feedback.confidence import _quotes

    chunk = "The restarted engine carried eight lanes of traffic across the bay."
    assert _quotes("engine carried eight lanes of traffic", chunk)
    assert not _quotes("started engine carried eight lanes of traffic", chunk)  # in "restarted"
    assert not _quotes("eight lanes", chunk)


def test_citing_only_missing_sources_earns_no_support() -> None:
    from fathom.bench.support.hits import eiffel_hits

    hits = eiffel_hits()  # the answer is in source 3 of 3
    scorer = SupportScorer(None)

    def support(text: str) -> tuple[float, int]:
        (sentence,) = scorer.score(draft(text, ()), hits).sentences
        return sentence["support"], sentence["best_source"]

    assert support("The Eiffel Tower is in Paris [9].") == (0.0, 0)
    assert support("The Eiffel Tower is in Paris [0, 7-9].") == (0.0, 0)
    wrong, _ = support("The Eiffel Tower is in Paris [1].")
    assert 0.0 < wrong < 1.0
    # Uncited: scored against every source; a real source among missing ones is scored alone.
    assert support("The Eiffel Tower is in Paris.") == (1.0, 3)
    assert support("The Eiffel Tower is in Paris [9, 3].") == (1.0, 3)
    assert support("The Eiffel Tower is in Paris [9, 1].") == (wrong, 1)
