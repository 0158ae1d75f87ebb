"""The query-type classifier: shipped policy on held-out questions, rules, training, load checks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from fathom.core.errors import IndexMismatchError
from fathom.index.embed import MINILM_ID, HashingEmbedder
from fathom.learn.train_classifier import load_examples, stratified_folds, train
from fathom.router.classify import (
    CLASSES,
    DEFAULT_DATA,
    DEFAULT_POLICY,
    RULE_FEATURES,
    QueryClassifier,
    asks_for_summary,
    chosen_type,
    rule_features,
    rule_label,
)
from fathom.tests.support.plain_questions import PLAIN_QUESTIONS

REPO = Path(__file__).resolve().parent.parent

# Written for this test only: none of these is in router/data/query_types.jsonl (checked below).
HELD_OUT: dict[str, list[str]] = {
    "factual": [
        "What year was the hospital's cardiology wing opened?",
        "How many days of annual leave do new employees get?",
        "Who is the landlord named in the lease?",
        "What is the maximum daily dose of ibuprofen stated in the leaflet?",
        "Which port does the metrics exporter listen on?",
        "When did the second phase of construction begin?",
        "What was the total operating expense in Q4?",
        "Where is the arbitration to be held under the agreement?",
        "What oil viscosity is recommended for the generator?",
        "Which database engine does the service use?",
        "How many participants dropped out of the study?",
        "Who discovered penicillin?",
        "What is the minimum order quantity in the supply contract?",
        "what's the max retries setting",
        "What accuracy did the baseline model reach on the test set?",
    ],
    "summarization": [
        "Summarize the key points of the employee code of conduct.",
        "Can you give me an overview of this contract?",
        "What is this report about?",
        "Give me a summary of the results section.",
        "What are the main conclusions of the white paper?",
        "Briefly summarise the safety instructions in the manual.",
        "What were the key takeaways from the annual shareholder letter?",
        "Provide an overview of the study's design and main results.",
        "Sum up the board's strategy discussion in a paragraph.",
        "Outline the main arguments of the opinion piece.",
        "What are the highlights of the product roadmap?",
        "Give a brief overview of the chapter on colonial trade.",
        "Describe the main topics covered in the training materials.",
        "TL;DR: what does the audit report say?",
        "Recap the main findings of the customer satisfaction survey.",
    ],
    "reasoning": [
        "Why did the company's cash reserves fall despite record sales?",
        "How does the replication protocol guarantee consistency?",
        "What would happen if the primary database went offline during a write?",
        "Explain why the trial was stopped early.",
        "How might rising rates affect the housing market described in the report?",
        "Why is the arbitration clause a problem for consumers?",
        "Is the proposed dosage safe for elderly patients given their kidney function?",
        "Compare the two insurance plans and say which is better for a family of four.",
        "What are the implications of the new data-retention rule for our backups?",
        "How would switching to a monthly billing cycle change customer churn?",
        "Why do the authors think their model generalises poorly?",
        "What explains the difference in outcomes between the two hospitals?",
        "Explain how the cooling system prevents overheating under load.",
        "Should the city build the bypass, given the traffic study's findings?",
        "Why would the parser reject a file with a byte-order mark?",
    ],
    "multi_hop": [
        "Where was the chief executive of the company that built the bridge educated?",
        "What is the population of the country where the drug was first approved?",
        "Which university employs the author of the cited meta-analysis?",
        "In what year was the company that acquired the plant's operator founded?",
        "Who chaired the committee that drafted the regulation referenced in section 5?",
        "What is the license of the library that the plotting module imports?",
        "Which city is the headquarters of the bank that underwrote the bond issue?",
        "What language is spoken in the region where the fossil was found?",
        "How old was the composer when the opera commissioned by the duke premiered?",
        "Did the law firm that represented the buyer also advise the seller?",
        "Which of the two reactors, the one at Dunmore or the one commissioned in 1979, "
        "produced more power?",
        "What is the mother tongue of the novelist whose book the film adapted?",
        "Who owns the shipping company that carried the damaged cargo?",
        "What operating system runs on the server that hosts the database the app uses?",
        "The scientist who led the 2015 expedition later worked for which agency?",
    ],
}


def _held_out() -> tuple[list[str], list[str]]:
    questions = [q for t in CLASSES for q in HELD_OUT[t]]
    labels = [t for t in CLASSES for _ in HELD_OUT[t]]
    return questions, labels


# ---------------------------------------------------------------------------------------------
# The labelled data and the shipped policy
# ---------------------------------------------------------------------------------------------


def test_training_data_is_balanced_and_distinct_from_held_out() -> None:
    questions, labels = load_examples(DEFAULT_DATA)
    assert len(questions) >= 240
    counts = {t: labels.count(t) for t in CLASSES}
    assert min(counts.values()) >= 55, counts
    lowered = [q.strip().lower() for q in questions]
    assert len(set(lowered)) == len(lowered), "duplicate questions in the training file"
    held = {q.strip().lower() for q in _held_out()[0]}
    assert len(held) >= 40 and not held & set(lowered)


def test_shipped_policy_metadata_matches_the_data() -> None:
    import hashlib

    policy = json.loads(DEFAULT_POLICY.read_text())
    assert policy["embedder_id"] == MINILM_ID
    assert policy["classes"] == list(CLASSES)
    assert policy["feature_names"][384:] == [f"rule:{r}" for r in RULE_FEATURES]
    meta = policy["training"]
    assert meta["data_sha256"] == hashlib.sha256(DEFAULT_DATA.read_bytes()).hexdigest(), (
        "router/data changed since the policy was trained — run "
        "python -m fathom.learn.train_classifier"
    )
    assert meta["cv_accuracy"] >= 0.8
    assert np.asarray(meta["cv_confusion"]).sum() == meta["n_examples"]
    assert {"seed", "fathom_version", "l2"} <= set(meta)


def test_shipped_policy_on_held_out_questions(minilm) -> None:
    questions, labels = _held_out()
    clf = QueryClassifier(minilm)
    embeddings = minilm.embed(questions)
    results = clf.classify_batch(questions, embeddings)
    predicted = [label for label, _ in results]
    accuracy = float(np.mean([p == t for p, t in zip(predicted, labels, strict=True)]))
    confusion = np.zeros((4, 4), dtype=int)
    for p, t in zip(predicted, labels, strict=True):
        confusion[CLASSES.index(t), CLASSES.index(p)] += 1
    print(f"held-out accuracy {accuracy:.3f} on {len(questions)} questions")
    print("confusion (rows true, columns predicted):", CLASSES, confusion.tolist(), sep="\n")
    assert accuracy >= 0.8, (accuracy, confusion.tolist())
    # The single-question path agrees with the batch path, embedding or not.
    label, probs = clf.classify(questions[0], embedding=embeddings[0])
    assert label == predicted[0] and clf.classify(questions[0])[0] == label
    assert set(probs) == set(CLASSES) and abs(sum(probs.values()) - 1.0) < 1e-9
    assert max(probs, key=probs.get) == label  # a factual question: its most probable type


def test_a_question_that_asks_for_no_summary_is_answered_not_summarised(minilm) -> None:
    clf = QueryClassifier(minilm)
    embeddings = minilm.embed(list(PLAIN_QUESTIONS))
    for question, vec, (label, probs) in zip(
        PLAIN_QUESTIONS,
        embeddings,
        clf.classify_batch(list(PLAIN_QUESTIONS), embeddings),
        strict=True,
    ):
        assert max(probs, key=probs.get) == "summarization", (question, probs)
        assert label != "summarization", question
        # the next most probable type, and the probabilities left as the model gave them
        runner_up = sorted((p, c) for c, p in probs.items() if c != "summarization")[-1][1]
        assert label == runner_up
        one, one_probs = clf.classify(question, embedding=vec)
        assert one == label and one_probs == pytest.approx(probs, abs=1e-9)
    # Asked for in so many words, a summary stays one.
    for question in ("Summarize the findings on pertussis.", "What are the key findings?"):
        assert clf.classify(question)[0] == "summarization"


def test_chosen_type_takes_a_summary_only_when_asked_for() -> None:
    probs = np.array([0.2, 0.5, 0.1, 0.2])  # CLASSES order: summarization most probable
    assert chosen_type(CLASSES, probs, "What are stators attached to?") == "factual"
    assert chosen_type(CLASSES, probs, "Give me an overview of the stators.") == "summarization"
    assert chosen_type(CLASSES, np.array([0.1, 0.5, 0.1, 0.3]), "Who built it?") == "multi_hop"
    assert chosen_type(CLASSES, np.array([0.7, 0.1, 0.1, 0.1]), "Summarize it.") == "factual"
    assert asks_for_summary("tl;dr of the postmortem?") and not asks_for_summary("Who won?")
    # What a whole text discusses is a summary request too; what a part of it says is not.
    assert asks_for_summary("What is discussed in this publication?")
    assert asks_for_summary("What does the paper discuss?")
    assert not asks_for_summary("What is discussed in chapter 3 about the pumps?")
    assert not asks_for_summary("What does the valve discuss?")


# ---------------------------------------------------------------------------------------------
# Rules
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("Summarize the report.", "summarization"),
        ("Give me an overview of chapter 4.", "summarization"),
        ("What are the key findings?", "summarization"),
        ("What is this document about?", "summarization"),
        ("Why did the turbine trip?", "reasoning"),
        ("How does the scheduler pick the next job?", "reasoning"),
        ("Explain the purpose of the escrow account.", "reasoning"),
        ("What would happen if the backup failed?", "reasoning"),
        ("Where was the founder of Acme born?", "multi_hop"),
        ("What is the capital of the country where the drone was built?", "multi_hop"),
        ("Who is the CEO of the company that acquired the startup?", "multi_hop"),
        ("Jansen's supervisor's office is in which building?", "multi_hop"),
        ("When was the contract signed?", "factual"),
        ("How many staff work at the plant?", "factual"),
        ("Who wrote the preface?", "factual"),
        ("What is the boiling point of ethanol?", "factual"),
    ],
)
def test_rules_alone_handle_obvious_cues(question: str, expected: str) -> None:
    assert rule_label(question) == expected


def test_rule_features_are_bounded_and_named() -> None:
    for question in ("", "Why?", "x " * 200, "Kessler's boss's boss's dog's name?"):
        values = rule_features(question)
        assert len(values) == len(RULE_FEATURES)
        assert all(0.0 <= v <= 1.0 for v in values)
    contraction = dict(zip(RULE_FEATURES, rule_features("What's the port?"), strict=True))
    assert contraction["possessives"] == 0.0  # "what's" is not a possessive link


# ---------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------


def _train_small(tmp_path: Path, name: str, seed: int = 0) -> dict:
    return train(
        DEFAULT_DATA,
        HashingEmbedder(64),
        seed,
        l2=0.03,
        folds=3,
        iterations=200,
        out_path=tmp_path / name,
    )


def test_training_is_deterministic_for_a_seed(tmp_path: Path) -> None:
    a = _train_small(tmp_path, "a.json")
    b = _train_small(tmp_path, "b.json")
    assert a["weights"] == b["weights"] and a["bias"] == b["bias"]
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    assert a["embedder_id"] == "hashing:64" and a["embedding_dim"] == 64
    meta = a["training"]
    assert meta["seed"] == 0 and meta["folds"] == 3
    assert np.asarray(meta["cv_confusion"]).shape == (4, 4)
    # Another seed shuffles the folds, so the cross-validation differs but the final fit
    # (on all the data, fixed l2) does not.
    c = _train_small(tmp_path, "c.json", seed=1)
    assert c["weights"] == a["weights"]


def test_trained_policy_round_trips_through_the_classifier(tmp_path: Path) -> None:
    policy = _train_small(tmp_path, "p.json")
    emb = HashingEmbedder(64)
    clf = QueryClassifier(emb, tmp_path / "p.json")
    questions, _ = load_examples(DEFAULT_DATA)
    x = np.hstack([emb.embed(questions[:10]), [rule_features(q) for q in questions[:10]]])
    logits = x @ np.asarray(policy["weights"]) + np.asarray(policy["bias"])
    expected = [CLASSES[i] for i in logits.argmax(axis=1)]
    assert [label for label, _ in clf.classify_batch(questions[:10])] == expected


def test_stratified_folds_keep_class_balance() -> None:
    y = np.repeat(np.arange(4), [10, 11, 12, 13])
    folds = stratified_folds(y, 5, seed=3)
    for f in range(5):
        per_class = np.bincount(y[folds == f], minlength=4)
        assert per_class.min() >= 2 and per_class.max() <= 3
    assert np.array_equal(folds, stratified_folds(y, 5, seed=3))


# ---------------------------------------------------------------------------------------------
# Loading, mismatches and the light query path
# ---------------------------------------------------------------------------------------------


def test_constructor_is_cheap_and_loads_on_first_use(tmp_path: Path) -> None:
    clf = QueryClassifier(HashingEmbedder(64), tmp_path / "missing.json")  # no I/O yet
    with pytest.raises(IndexMismatchError, match="train_classifier"):
        clf.classify("When was it signed?")


def test_embedder_mismatch_is_refused() -> None:
    clf = QueryClassifier(HashingEmbedder(64))  # the shipped policy is for MiniLM
    with pytest.raises(IndexMismatchError, match=r"all-MiniLM-L6-v2.*hashing:64"):
        clf.classify("When was the contract signed?")
    with pytest.raises(IndexMismatchError, match="hashing:384"):
        QueryClassifier(embedder_id="hashing:384").load()


def test_wrong_dimension_or_stale_rules_are_refused(tmp_path: Path) -> None:
    clf = QueryClassifier(embedder_id=MINILM_ID)
    with pytest.raises(IndexMismatchError, match="384-dimensional"):
        clf.classify("Why?", embedding=np.zeros(64, dtype=np.float32))
    stale = json.loads(DEFAULT_POLICY.read_text())
    stale["feature_names"][-1] = "rule:retired_cue"
    (tmp_path / "stale.json").write_text(json.dumps(stale))
    with pytest.raises(IndexMismatchError, match="rule features"):
        QueryClassifier(policy_path=tmp_path / "stale.json").load()


def test_classifying_a_precomputed_embedding_imports_no_torch(minilm, tmp_path: Path) -> None:
    question = "What are the key findings of the audit?"
    np.save(tmp_path / "q.npy", minilm.embed([question])[0], allow_pickle=False)
    script = f"""
import sys, time
import numpy as np
from fathom.router.classify import QueryClassifier
clf = QueryClassifier(embedder_id={MINILM_ID!r})
vec = np.load({str(tmp_path / "q.npy")!r}, allow_pickle=False)
label, probs = clf.classify({question!r}, embedding=vec)
start = time.perf_counter()
for _ in range(200):
    clf.classify({question!r}, embedding=vec)
per_call_ms = (time.perf_counter() - start) / 200 * 1000
heavy = sorted(m for m in ("torch", "sentence_transformers", "sklearn", "transformers")
               if m in sys.modules)
print(label, heavy, f"{{per_call_ms:.3f}}")
"""
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split(maxsplit=1)
    assert out[0] == "summarization"
    assert out[1].startswith("[]"), out  # no heavy import on the query path
    print("classify with a precomputed embedding:", out[1].split()[-1], "ms per call")
