"""The forest depth policy: oracle labels, numpy inference equal to scikit-learn's, persistence
without pickle, determinism, schema checks, and sweep → train → eval end to end."""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from fathom.bench.support.docgen import make_qa_set
from fathom.core.base import DepthQuery
from fathom.core.errors import FathomError
from fathom.learn.forest import fit_forest, forest_from_sklearn
from fathom.router.features import FEATURE_NAMES, READING_NAMES
from fathom.router.forest import ForestPolicy, oracle_labels

BUDGETS = (0, 1, 2, 4)


def test_oracle_label_is_the_smallest_sufficient_budget() -> None:
    q = np.array([[0, 1, 1, 1], [0, 0, 0, 1], [0, 0, 0, 0], [0.5, 0.9, 1.0, 1.0]])
    assert oracle_labels(q).tolist() == [1, 3, 0, 2]
    assert oracle_labels(q, epsilon=0.15).tolist() == [1, 3, 0, 1]
    lat = np.array([[1, 9, 9, 9], [1, 2, 3, 4], [1, 1, 1, 1], [1, 2, 9, 9]], dtype=float)
    # Within the SLO when possible: question 0's k = 1 is too slow and nothing as good is fast
    # enough, so the best stays; question 3 takes the fastest good-enough budget.
    assert oracle_labels(q, lat, epsilon=0.15, slo_ms=5).tolist() == [1, 3, 0, 1]
    # SLO first: question 0's only fast budget is 0; question 1's budgets 0-3 are all fast.
    assert oracle_labels(q, lat, epsilon=0.15, slo_ms=5, strict_slo=True).tolist() == [0, 3, 0, 1]
    # Nothing meets the SLO: the fastest budget, whatever its quality.
    slow = np.array([[9, 8, 7, 6]], dtype=float)
    assert oracle_labels(q[:1], slow, slo_ms=5, strict_slo=True).tolist() == [3]
    assert oracle_labels(q[:1], slow, slo_ms=5).tolist() == [1]


def _data(n: int = 300, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, len(FEATURE_NAMES))).astype(np.float32)
    y = (x[:, 0] > 0).astype(int) + (x[:, 1] > 0.5).astype(int) * 2  # classes 0..3
    return x, y


def test_numpy_inference_equals_sklearn_and_round_trips(tmp_path) -> None:
    from sklearn.ensemble import RandomForestClassifier

    x, y = _data()
    model = RandomForestClassifier(n_estimators=20, max_depth=6, random_state=3).fit(x, y)
    policy = forest_from_sklearn(model, BUDGETS, FEATURE_NAMES)
    # One column per budget plus "none suffices" (no such label here: always 0).
    expected = np.hstack([model.predict_proba(x), np.zeros((len(x), 1))])
    np.testing.assert_allclose(policy.predict_proba(x), expected, atol=1e-6)
    one = np.array([policy.predict_one(row.tolist()) for row in x[:40]])
    np.testing.assert_allclose(one, expected[:40], atol=1e-6)
    path = policy.save(tmp_path / "p.npz")
    again = ForestPolicy.load(path)
    np.testing.assert_allclose(again.predict_proba(x), expected, atol=1e-6)
    # Only arrays and JSON on disk: np.load without pickle reads every array.
    with np.load(path, allow_pickle=False) as data:
        assert len(data.files) == 5 * 20
    assert json.loads(path.with_suffix(".json").read_text())["kind"] == "forest"


def test_confidence_picks_the_smallest_budget_reaching_it() -> None:
    x, y = _data()
    policy = fit_forest(x, y, BUDGETS, FEATURE_NAMES, n_trees=5, max_depth=3)
    proba = np.array([[0.2, 0.3, 0.4, 0.1, 0.0]])
    assert policy.choose(proba, 0.5).tolist() == [1]
    assert policy.choose(proba, 0.9).tolist() == [2]
    assert policy.choose(proba, 0.95).tolist() == [3]
    # No budget reaches the confidence (the rest is "none suffices"): the deepest, not skip.
    assert policy.choose(np.array([[0.0, 0.5, 0.1, 0.1, 0.3]]), 0.9).tolist() == [3]


def test_cost_rule_buys_depth_only_where_it_pays() -> None:
    x, y = _data()
    policy = fit_forest(
        x, y, BUDGETS, FEATURE_NAMES, n_trees=3, cost=0.1, budget_tokens=(0, 100, 200, 400)
    )
    # P(enough by b) = 0.6, 0.9, 0.95 at 100, 200, 400 tokens: utilities 0.59, 0.88, 0.91.
    proba = np.array([[0.0, 0.6, 0.3, 0.05, 0.05]])
    assert policy.choose(proba).tolist() == [3]
    assert policy.choose(proba, cost=0.5).tolist() == [2]  # 0.55, 0.80, 0.75
    assert policy.choose(proba, cost=4.0).tolist() == [1]  # 0.20, 0.10, −0.65
    # A question that looks hopeless at every depth gets no context rather than 400 tokens.
    assert policy.choose(np.array([[0.0, 0.0, 0.01, 0.01, 0.98]]), cost=0.5).tolist() == [0]
    # An explicit confidence overrides the stored rule.
    assert policy.choose(proba, confidence=0.5).tolist() == [1]
    no_costs = fit_forest(x, y, BUDGETS, FEATURE_NAMES, n_trees=3)
    with pytest.raises(FathomError, match="token costs"):
        no_costs.choose(proba, cost=0.1)


def test_a_multi_hop_question_pays_its_share_of_the_price_where_the_forest_says(tmp_path) -> None:
    from fathom.router.cost import ReadingCost
    from fathom.router.features import QUERY_TYPES, typed_multi_hop

    x, y = _data()
    policy = fit_forest(
        x, y, BUDGETS, FEATURE_NAMES, n_trees=3, cost=0.4, budget_tokens=(0, 100, 200, 400),
        meta={"multi_hop_price": {"quality": 0.5}},
    )  # fmt: skip
    policy = ForestPolicy.load(policy.save(tmp_path / "p.npz"))  # the share is kept on disk
    # The router's type probabilities decide which rows are multi-hop.
    rows = np.zeros((2, len(FEATURE_NAMES)), dtype=np.float32)
    for r, kind in enumerate(("factual", "multi_hop")):
        rows[r, FEATURE_NAMES.index(f"p_{kind}")] = 0.7
        rows[r, FEATURE_NAMES.index(f"p_{QUERY_TYPES[2]}")] = 0.3
    multi_hop = typed_multi_hop(rows, FEATURE_NAMES)
    assert multi_hop.tolist() == [False, True]
    # P(enough by b) = 0.6, 0.9, 0.95 at 100, 200, 400 tokens; at quality (λ = 0.4 per 1000
    # tokens) the utilities are 0.56, 0.82, 0.79: k = 2; at half the price 0.58, 0.86, 0.87:
    # the multi-hop row reads k = 4.
    proba = np.array([[0.0, 0.6, 0.3, 0.05, 0.05]] * 2)
    quality = ReadingCost("quality")
    weight = quality.weight(0.4) * 1000
    assert policy.multi_hop_price("quality") == 0.5 and policy.multi_hop_price("balanced") == 1.0
    assert policy.price_shares(rows, "quality").tolist() == [1.0, 0.5]
    # The option's form: PREFER=SHARE, a preference, a share above 0.
    from fathom.learn.train_policy import parse_shares

    assert parse_shares(["quality=0.5"]) == {"quality": 0.5} and parse_shares([]) is None
    for bad in ("quality", "quality=half", "best=0.5", "quality=0"):
        with pytest.raises(FathomError):
            parse_shares([bad])
    plain = policy.choose(proba, reading=quality)
    priced = policy.choose(proba, reading=quality, inputs=rows)
    assert plain[0] == priced[0]  # a single-hop question pays the whole price
    cum = np.cumsum(proba[0, :4])
    tokens = np.array([0, 100, 200, 400])
    assert plain[1] == int(np.argmax(cum - weight / 1000 * tokens))
    assert priced[1] == int(np.argmax(cum - 0.5 * weight / 1000 * tokens))
    assert priced[1] > plain[1]
    # What the report says one point of answer recall is worth doubles for such a question.
    assert quality.worth_text(0.4) == "25 tokens of context"
    assert quality.worth_text(0.4, share=0.5) == "50 tokens of context"
    assert ReadingCost.seconds("quality", 5.0, "").worth_text(0.4, share=0.5) == "10 s"
    # Another preference keeps the whole price for both.
    balanced = ReadingCost("balanced")
    assert (
        policy.choose(proba, reading=balanced, inputs=rows).tolist()
        == policy.choose(proba, reading=balanced).tolist()
    )


def test_most_likely_rule_takes_the_likeliest_label_and_skips_when_none_suffices(
    tmp_path,
) -> None:
    from fathom.evaluation.strategies import make_policy, parse_strategy

    x, y = _data()
    policy = fit_forest(x, y, BUDGETS, FEATURE_NAMES, n_trees=5, most_likely=True)
    proba = np.array([[0.2, 0.3, 0.4, 0.1, 0.0], [0.1, 0.1, 0.1, 0.2, 0.5]])
    # Label 2 is likeliest although P(enough by 1) = 0.5; "none suffices" → skip (budget 0).
    assert policy.choose(proba).tolist() == [2, 0]
    assert policy.choose(proba, confidence=0.5).tolist() == [1, 3]  # an explicit rule wins
    assert policy.rule == "most likely label"
    loaded = ForestPolicy.load(policy.save(tmp_path / "ml"))
    assert loaded.most_likely and loaded.choose(proba).tolist() == [2, 0]
    assert not ForestPolicy.load(
        fit_forest(x, y, BUDGETS, FEATURE_NAMES, n_trees=2).save(tmp_path / "c")
    ).most_likely
    # In eval: `forest:PATH@likely` turns it on; `@0.5` on a most-likely forest turns it off.
    spec = parse_strategy(f"forest:{tmp_path / 'c.npz'}@likely")
    assert spec.most_likely and make_policy(spec)[0].most_likely
    assert not make_policy(parse_strategy(f"forest:{tmp_path / 'ml.npz'}@0.5"))[0].most_likely


def test_training_is_deterministic_for_a_seed(tmp_path) -> None:
    x, y = _data()
    a = fit_forest(x, y, BUDGETS, FEATURE_NAMES, n_trees=10, seed=7).save(tmp_path / "a")
    b = fit_forest(x, y, BUDGETS, FEATURE_NAMES, n_trees=10, seed=7).save(tmp_path / "b")
    c = fit_forest(x, y, BUDGETS, FEATURE_NAMES, n_trees=10, seed=8).save(tmp_path / "c")
    with np.load(a) as da, np.load(b) as db, np.load(c) as dc:
        assert all(np.array_equal(da[k], db[k]) for k in da.files)
        assert not all(
            da[k].shape == dc[k].shape and np.array_equal(da[k], dc[k]) for k in da.files
        )


def test_another_feature_schema_or_embedder_is_refused(tmp_path) -> None:
    x, y = _data()
    path = fit_forest(
        x, y, BUDGETS, FEATURE_NAMES, n_trees=3, meta={"embedder": "minilm-abc"}
    ).save(tmp_path / "p")
    meta = json.loads(path.with_suffix(".json").read_text())
    with pytest.raises(FathomError, match="embedder"):
        ForestPolicy.load(path, expect_embedder="other-model")
    meta["feature_names"] = meta["feature_names"][:-1]
    path.with_suffix(".json").write_text(json.dumps(meta))
    with pytest.raises(FathomError, match="feature schema"):
        ForestPolicy.load(path)


def test_sweep_train_and_evaluate_the_forest(tmp_path, monkeypatch) -> None:
    from fathom.cli import main

    monkeypatch.setenv("FATHOM_RERANK__ENABLED", "false")
    monkeypatch.setenv("FATHOM_DATA", str(tmp_path))  # the data folder: recorded relative to it
    docs, questions = make_qa_set(tmp_path / "qa", n_docs=26)
    runner = CliRunner()
    common = ["--docs", str(docs), "--questions", str(questions), "--generator", "extractive"]
    r = runner.invoke(
        main,
        ["policy", "sweep", *common, "--budgets", "0,1,2,4", "--split", "all", "--out", "sweep"],
    )
    assert r.exit_code == 0, r.output
    assert "answer recall at the deepest budget" in r.stderr
    r = runner.invoke(
        main, ["policy", "train", "--sweep", "sweep", "--trees", "10", "--out", "forest.npz"]
    )
    assert r.exit_code == 0, r.output
    r = runner.invoke(main, ["policy", "show", "forest.npz", "--json"])
    meta = json.loads(r.stdout)
    assert meta["budgets"] == [0, 1, 2, 4] and meta["training_data"]["n_questions"] >= 70
    assert meta["training_data"]["questions"] == f"$FATHOM_DATA/qa/{questions.name}"
    # The sweep logged the reader's readings too: the forest learns from both.
    assert set(meta["feature_importances"]) == set(FEATURE_NAMES + READING_NAMES)
    # The sweep logged each question's probed chunks: the forest prices depth with them.
    fit = meta["context_tokens_fit"]
    assert min(meta["context_tokens"].values()) >= 0 < max(meta["context_tokens"].values())
    assert fit["mean_abs_error"] < 0.2 * fit["mean_tokens"], fit
    # Several sweeps train one policy (the question sets are concatenated).
    r = runner.invoke(
        main,
        ["policy", "train", "--sweep", "sweep", "--sweep", "sweep", "--trees", "3",
         "--quality", "answer_recall", "--multi-hop-price", "quality=0.5", "--out", "two.npz"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    two = json.loads(Path("two.json").read_text())
    assert two["multi_hop_price"] == {"quality": 0.5} and "multi_hop_price" not in meta
    assert two["training_data"]["n_questions"] == 2 * meta["training_data"]["n_questions"]
    assert two["judge"] == "recall"
    r = runner.invoke(
        main,
        ["eval", *common, "--strategies", "none,fixed:4,forest:forest.npz", "--out", "ev",
         "--bootstrap", "200", "--json"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout)
    forest = summary["strategies"]["forest:forest.npz"]
    # Trained on these very questions (a smoke test of the loop, not a held-out result): the
    # policy answers about as well as k = 4 with fewer tokens.
    assert (
        forest["metrics"]["quality"]["mean"]
        >= summary["strategies"]["fixed:4"]["metrics"]["quality"]["mean"] - 0.1
    )
    assert (
        forest["tokens"]["context"]["mean"]
        < summary["strategies"]["fixed:4"]["tokens"]["context"]["mean"]
    )
    rows = [json.loads(line) for line in Path("ev/log.jsonl").read_text().splitlines()]
    reasons = [r["decision_reason"] for r in rows if r["strategy"].startswith("forest")]
    assert all("runner-up" in x for x in reasons)
    # `ask --policy` uses it; the report says what it chose, the runner-up and the drivers.
    r = runner.invoke(
        main,
        ["ask", str(docs), "In which town did Aldo Daliason have a workshop?", "--generator",
         "extractive", "--policy", "forest.npz", "--json"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    decision = json.loads(r.stdout)["trace"]["decision"]
    assert decision["policy"] == "forest" and "runner-up" in decision["reason"]
    assert set(decision["scores"]) >= {"p_k0", "p_k4", "decide_ms"}


def test_questions_no_budget_answers_get_their_own_class() -> None:
    from fathom.learn.train_policy import train_forest
    from fathom.router.sweep import Sweep

    rng = np.random.default_rng(0)
    n = 40
    quality = np.zeros((n, len(BUDGETS)), dtype=np.float32)
    quality[:30, 2:] = 1.0  # answerable from k = 2 on
    sweep = Sweep(
        run={"judge": "recall"},
        budgets=BUDGETS,
        qids=[str(i) for i in range(n)],
        query_types=["factual"] * n,
        features=rng.normal(size=(n, len(FEATURE_NAMES))).astype(np.float32),
        quality=quality,
        tokens=np.tile(np.array([0, 100, 200, 400], dtype=np.float32), (n, 1)),
        latency=np.ones((n, len(BUDGETS)), dtype=np.float32),
    )
    policy = train_forest(sweep, n_trees=3, cost=0.05)
    assert policy.meta["training_data"]["n_questions"] == 40
    assert policy.meta["training_data"]["n_none_suffices"] == 10
    assert policy.meta["label_counts"] == {"0": 0, "1": 0, "2": 30, "4": 0, "none suffices": 10}
    assert policy.budget_tokens == (0.0, 100.0, 200.0, 400.0) and policy.cost == 0.05
    # The oracle spends nothing on the unanswerable ones.
    assert policy.meta["oracle"]["mean_tokens"] == pytest.approx(30 * 200 / 40)


def test_explanations_add_up_to_the_prediction() -> None:
    x, y = _data()
    policy = fit_forest(x, y, BUDGETS, FEATURE_NAMES, n_trees=8, max_depth=5)
    row = x[7].tolist()
    proba = policy.predict_one(row)
    for i in range(len(BUDGETS)):
        parts = policy.explain(row, i, n=len(FEATURE_NAMES))
        prior = float(np.mean([t.value[0][: i + 1].sum() for t in policy.trees]))
        assert prior + sum(c for _, _, c in parts) == pytest.approx(sum(proba[: i + 1]), abs=1e-5)
    # P(enough by budget 1) = P(label ≤ 1) depends on feature 1 alone: it drives that choice.
    for row in x[:20].tolist():
        assert policy.explain(row, 1, n=1)[0][0] == FEATURE_NAMES[1]


def _set_sweep(name: str, n: int, answer_at: int, doc_split: str | None = None) -> Any:
    """A sweep of ``n`` questions from document set ``name``, answered from budget index
    ``answer_at`` on."""
    from fathom.router.sweep import Sweep

    rng = np.random.default_rng(zlib.crc32(name.encode()))  # each set its own features
    quality = np.zeros((n, len(BUDGETS)), dtype=np.float32)
    quality[:, answer_at:] = 1.0
    return Sweep(
        run={"judge": "recall", "questions": name, "doc_split": doc_split},
        budgets=BUDGETS,
        qids=[f"{name}{i}" for i in range(n)],
        query_types=["factual"] * n,
        features=rng.normal(size=(n, len(FEATURE_NAMES))).astype(np.float32),
        quality=quality,
        tokens=np.tile(np.array([0, 100, 200, 400], dtype=np.float32), (n, 1)),
        latency=np.ones((n, len(BUDGETS)), dtype=np.float32),
        sets=[name] * n,
        groups=[f"{name}{i}" for i in range(n)],
    )


def test_combined_sweeps_keep_each_sweeps_document_split() -> None:
    """Training halves beside a set used whole (``--split all``, recorded as None): the
    combined record, which a trained policy's metadata copies, names each sweep's split."""
    from fathom.learn.sweep import combine_sweeps

    halves = [_set_sweep("a", 4, 1, "train"), _set_sweep("b", 4, 1, "train")]
    assert combine_sweeps(halves).run["doc_split"] == "train"
    mixed = combine_sweeps([*halves, _set_sweep("whole", 4, 1)])
    assert mixed.run["doc_split"] == ["train", "train", None]
    assert mixed.run["questions"] == ["a", "b", "whole"]


def test_balanced_sets_weigh_each_document_set_the_same() -> None:
    from fathom.learn.sweep import combine_sweeps
    from fathom.learn.train_policy import set_weights, train_forest

    sweep = _set_sweep
    # A big set answered at k = 1 and a small one answered only at k = 4.
    both = combine_sweeps([sweep("big", 90, 1), sweep("small", 10, 3)])
    w = set_weights(both)
    assert w[:90].sum() == pytest.approx(w[90:].sum()) and w.mean() == pytest.approx(1.0)
    assert set_weights(sweep("one", 5, 1)) is None
    plain = train_forest(both, n_trees=20, cost=0.01, seed=0)
    balanced = train_forest(both, n_trees=20, cost=0.01, seed=0, balance_sets=True)
    assert balanced.meta["balance_sets"] and "balance_sets" not in plain.meta
    # Weighted, the small set's label (k = 4) carries half the mass instead of a tenth.
    share = lambda p: float(p.predict_proba(both.features)[:, 3].mean())  # noqa: E731
    assert share(balanced) > share(plain) + 0.1


def test_each_question_is_priced_with_its_own_chunks(tmp_path) -> None:
    """With a fitted ContextTokens, the cost rule prices a question's depth by its own probed
    chunks: the same P(enough) buys more depth where chunks are short; the decision's reason
    and trade line state the question's tokens, not the training mean."""
    import dataclasses

    from fathom.bench.support.hits import make_hit
    from fathom.core.base import Probe
    from fathom.router.cost import ContextTokens

    x, y = _data()
    model = ContextTokens(scale=1.0, per_source=0.0)
    policy = fit_forest(
        x, y, BUDGETS, FEATURE_NAMES, n_trees=3, cost=0.1, budget_tokens=(0, 100, 200, 400),
        context_tokens=model,
    )  # fmt: skip
    proba = np.array([[0.0, 0.6, 0.3, 0.05, 0.05]] * 2)
    # Row 0: long chunks (800 tokens each); row 1: short ones (25 each). Utilities at λ = 0.5:
    # 0.2, 0.1, −0.65 and 0.59, 0.88, 0.90; priced at the means both get 0.55, 0.80, 0.75.
    own = np.array([[0, 800, 1600, 3200], [0, 25, 50, 100]], dtype=float)
    assert policy.choose(proba, cost=0.5, tokens=own).tolist() == [1, 3]
    assert policy.choose(proba, cost=0.5).tolist() == [2, 2]  # the means price both alike
    again = ForestPolicy.load(policy.save(tmp_path / "p.npz"))
    assert again.context_tokens == model

    def probe(words: int) -> Probe:
        hits = tuple(
            dataclasses.replace(make_hit(i + 1, " ".join(["w"] * words)), score=1 / (i + 1))
            for i in range(4)
        )
        return Probe(query="q", hits=hits, timings_ms={})

    short, long = (policy.decide(DepthQuery("q", probe(w), "factual")) for w in (5, 500))
    for d, words in ((short, 5), (long, 500)):
        k_tokens = model.for_probe([words] * 4, BUDGETS)[BUDGETS.index(d.k)]
        assert f"~{k_tokens:.0f} tokens" in d.reason, d.reason
        assert f"about {k_tokens:,.0f} tokens of reading" in d.cost["trade"]
    assert short.k >= long.k
