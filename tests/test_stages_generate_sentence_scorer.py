"""The extractive answerer's learned sentence scorer: features, the shipped model, training."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest
from fathom.bench.support.hits import make_hit
from fathom.core.words import answer_terms
from fathom.stages.generate import sentence_scorer as S
from fathom.stages.generate.extractive import candidates


def _x(question: str, texts: list[str], cos=None):
    hits = [make_hit(i, t) for i, t in enumerate(texts, 1)]
    cands = candidates(hits)
    x, own = S.features(question, answer_terms(question), cands, cos)
    return cands, x, own


def col(name: str) -> int:
    return S.FEATURES.index(name)


def test_overlap_and_answer_type_cues() -> None:
    cands, x, own = _x(
        "When was the Eiffel Tower completed?",
        [
            "Visitors climb the Eiffel Tower by the stairs.",
            "The Eiffel Tower was completed in March 1889. It was the tallest tower.",
        ],
    )
    assert [c.text for c in cands][1].startswith("The Eiffel Tower was completed")
    assert own[1] == pytest.approx(1.0) and own[0] < 1.0
    assert x[1, col("own_rel")] == 0.0 and x[0, col("own_rel")] < 0
    assert x[1, col("when_date")] == 1.0 and x[0, col("when_date")] == 0.0
    assert x[1, col("first_source")] == 0.0 and x[0, col("first_source")] == 1.0
    # the sentence after the answer borrows its terms and has it as a neighbour
    assert x[2, col("neighbour")] == pytest.approx(own[1])
    assert x[2, col("borrowed")] > 0
    # no vectors: the dense columns are zero
    assert not x[:, [col(f) for f in S.DENSE_FEATURES]].any()


def test_question_kinds() -> None:
    assert S.asks("How many people live in Paris?") == {"how_many"}
    assert S.asks("Who built it, and when?") == {"who", "when"}
    assert S.asks("In what city was she born?") == {"where"}
    assert S.asks("Why did the engine fail?") == {"why"}
    _, x, _ = _x("How many workers built it?", ["It took 300 workers to build it.", "It is red."])
    assert x[0, col("how_many_number")] == 1.0 and x[1, col("how_many_number")] == 0.0


def test_dense_columns_carry_the_cosines() -> None:
    cos = np.array([0.2, 0.7])
    cands, x, _ = _x("Where is the tower?", ["The tower is in Paris. It is tall."], cos)
    assert len(cands) == 2  # one chunk, two sentences: neighbours
    assert np.allclose(x[:, col("cos")], cos)
    assert np.allclose(x[:, col("cos_rel")], cos - 0.7)
    assert x[0, col("neighbour_cos")] == pytest.approx(0.7)


def _scorer() -> S.SentenceScorer:
    n_lex = len(S.LEXICAL_FEATURES)
    models = {
        "lexical": S.LinearModel(
            tuple(range(n_lex)), np.zeros(n_lex), np.ones(n_lex), np.eye(n_lex)[0]
        ),
        "dense": S.LinearModel(
            tuple(range(len(S.FEATURES))),
            np.zeros(len(S.FEATURES)),
            np.ones(len(S.FEATURES)),
            np.eye(len(S.FEATURES))[col("cos")],
        ),
    }
    support = {
        "lexical": np.array([0.0, 1.0, 0.0, 0.0, -1.0]),
        "dense": np.array([-1.0, 0, 2.0, 0, -1.0]),
    }
    return S.SentenceScorer(
        models, support, keep_ratio=0.5, min_own=0.1, min_confidence=0.3, meta={"kind": "t"}
    )


def test_saved_as_arrays_and_json_without_pickle(tmp_path) -> None:
    path = tmp_path / "scorer.json"
    _scorer().save(path)
    meta = json.loads(path.read_text())
    assert meta["features"] == list(S.FEATURES) and meta["schema_version"] == S.SCHEMA_VERSION
    with zipfile.ZipFile(path.with_suffix(".npz")) as z:
        assert all(n.endswith(".npy") for n in z.namelist())
    loaded = S.SentenceScorer.load(path)  # np.load(allow_pickle=False)
    x = np.random.default_rng(0).normal(size=(5, len(S.FEATURES)))
    for name in ("lexical", "dense"):
        assert np.allclose(loaded.models[name].scores(x), _scorer().models[name].scores(x))
    assert loaded.keep_ratio == 0.5 and loaded.min_own == 0.1 and loaded.min_confidence == 0.3
    s, share, name = loaded.rank(x, dense=True)
    assert name == "dense" and share.sum() == pytest.approx(1.0)
    assert np.argmax(s) == np.argmax(x[:, col("cos")])
    sure = loaded.confidence("dense", 0.0, 1.0, 0.0, 0.0)
    assert 0 < loaded.confidence("dense", 0.0, 1.0, 0.0, 0.9) < sure < 1  # unmatched lowers it


def test_a_scorer_for_other_features_is_refused(tmp_path) -> None:
    path = tmp_path / "scorer.json"
    _scorer().save(path)
    meta = json.loads(path.read_text())
    meta["features"] = meta["features"][:-1]
    path.write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="does not match"):
        S.SentenceScorer.load(path)


def test_the_shipped_scorer_loads_and_records_its_training() -> None:
    scorer = S.shipped_scorer()
    assert scorer is not None, "stages/generate/data/extractive_scorer.{json,npz} missing"
    trained = scorer.meta["trained_on"]
    assert trained["split"] == "train"
    assert all(s.startswith("$FATHOM_DATA/") for s in trained["sets"])
    assert 0 < scorer.keep_ratio <= 1 and 0 <= scorer.min_own < 1
    assert 0 <= scorer.min_confidence < 1
    assert trained["calibrated_on"] == ["$FATHOM_DATA/squad_v2.0_dev"]


def test_unmatched_is_the_share_of_the_question_no_candidate_mentions() -> None:
    hits = [make_hit(1, "The tower is in Paris. It is tall.")]
    cands = candidates(hits)
    q = "Where is the tower?"
    assert S.unmatched(answer_terms(q), cands, q) == 0.0
    q = "Who painted the tower?"
    share = S.unmatched(answer_terms(q), cands, q)
    assert 0.4 < share < 1.0  # "painted" is nowhere, and a term found nowhere weighs most
    q = "Who painted the bridge?"
    assert S.unmatched(answer_terms(q), cands, q) == pytest.approx(1.0)
