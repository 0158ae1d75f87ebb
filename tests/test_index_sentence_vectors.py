"""SentenceVectors: the Engine's remembered sentence vectors, shared by reranker and answerer."""

from __future__ import annotations

import numpy as np
from fathom.index.embed import HashingEmbedder, SentenceVectors, sentence_key


class Counting(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__(64)
        self.embedded: list[str] = []
        self.queries = 0

    def embed(self, texts, batch_size=None):
        self.embedded += list(texts)
        return super().embed(texts)

    def embed_query(self, text):
        self.queries += 1
        return super().embed_query(text)


def test_each_sentence_is_embedded_once_and_vectors_equal_the_model() -> None:
    inner = Counting()
    vectors = SentenceVectors(inner)
    first = vectors.embed(["The tower is tall.", "It is in Paris.", "The tower is tall."])
    assert inner.embedded == ["The tower is tall.", "It is in Paris."]  # one batch, no repeat
    again = vectors.embed(["It is in Paris.", "New one."])
    assert inner.embedded[-1:] == ["New one."]
    assert np.allclose(first[1], again[0])
    assert np.allclose(
        first,
        HashingEmbedder(64).embed(["The tower is tall.", "It is in Paris.", "The tower is tall."]),
    )
    assert vectors.dim == 64 and vectors.id == inner.id and len(vectors) == 3


def test_lookup_never_embeds_and_keys_ignore_spacing_and_ellipses() -> None:
    inner = Counting()
    vectors = SentenceVectors(inner)
    assert vectors.lookup(["The tower is tall."]) is None
    assert inner.embedded == []
    vectors.embed(["The  tower\nis tall. …"])
    assert sentence_key("The  tower\nis tall. …") == "The tower is tall."
    got = vectors.lookup(["The tower is tall."])
    assert got is not None and got.shape == (1, 64)
    assert vectors.lookup(["The tower is tall.", "Other."]) is None  # one is not remembered
    assert len(inner.embedded) == 1


def test_bounded_least_recently_used_first() -> None:
    vectors = SentenceVectors(Counting(), capacity=2)
    vectors.embed(["a one", "b two"])
    vectors.embed(["a one"])  # touched: "b two" is now the oldest
    vectors.embed(["c three"])
    assert vectors.lookup(["a one", "c three"]) is not None
    assert vectors.lookup(["b two"]) is None
    assert len(vectors) == 2


def test_the_question_vector_is_remembered_for_recent_questions() -> None:
    inner = Counting()
    vectors = SentenceVectors(inner, queries=2)
    q1 = vectors.embed_query("when was it built?")
    vectors.embed_query("when was it built?")
    assert inner.queries == 1
    vectors.embed_query("b?")
    vectors.embed_query("c?")  # pushes the first out
    assert np.allclose(vectors.embed_query("when was it built?"), q1)
    assert inner.queries == 4


def test_clear_forgets_everything() -> None:
    inner = Counting()
    vectors = SentenceVectors(inner)
    vectors.embed(["a one"])
    vectors.embed_query("q?")
    vectors.clear()
    assert len(vectors) == 0 and vectors.lookup(["a one"]) is None
    vectors.embed_query("q?")
    assert inner.queries == 2
