"""`fathom eval` end to end on a generated question set, with the extractive generator.

Checks the rows against brute-force recomputation, `eval report` reproducing the summary, a
resumed run against an uninterrupted one, the generation cache, and Ray against local.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import string
import time
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner
from fathom.bench.support.docgen import make_qa_set
from fathom.core.base import Draft
from fathom.core.errors import ConfigError, FathomError
from fathom.evaluation.cache import CachingGenerator
from fathom.evaluation.runner import EvalSettings, run_eval
from fathom.evaluation.strategies import parse_strategies, parse_strategy
from fathom.learn.questions import load_questions, split_questions
from fathom.stages.generate.base import BaseGenerator

STRATEGIES = ["none", "fixed:1", "fixed:2", "gap", "threshold:p50"]
TIMING = {"stages_ms", "total_ms", "cached_generation"}


@pytest.fixture(scope="module")
def qa_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("eval-home")


@pytest.fixture(scope="module")
def qa_set(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return make_qa_set(tmp_path_factory.mktemp("qa"))


@pytest.fixture
def ecfg(qa_home: Path, monkeypatch: pytest.MonkeyPatch):
    """A config on the module's home (the collection is built once), extractive, no rerank."""
    from fathom.core.config import load_config

    monkeypatch.setenv("FATHOM_HOME", str(qa_home))
    cfg = load_config()
    cfg.generator.backend = "extractive"
    cfg.rerank.enabled = False
    return cfg


def settings(qa_set, out: Path, **kw) -> EvalSettings:
    docs, questions = qa_set
    base = dict(
        questions=str(questions),
        docs=str(docs),
        out=str(out),
        strategies=list(STRATEGIES),
        fit_size=20,
        bootstrap=300,
        slo_ms=5000.0,
        cache=False,
    )
    base.update(kw)
    return EvalSettings(**base)


def rows_of(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]


def untimed(rows: list[dict]) -> list[str]:
    """Rows without their timings, as sorted JSON strings."""
    return sorted(
        json.dumps({k: v for k, v in r.items() if k not in TIMING}, sort_keys=True) for r in rows
    )


def _norm(s: str) -> str:
    s = "".join(ch for ch in s.lower() if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def _strip_timing(summary: dict) -> dict:
    out = json.loads(json.dumps(summary))
    for s in out["strategies"].values():
        for key in ("latency_ms", "stages_ms", "slo_compliance", "cache_hits"):
            s.pop(key, None)
    out["run"].pop("created", None)
    return out


def test_eval_rows_match_brute_force_and_report_reproduces_summary(ecfg, qa_set, tmp_path):
    out = tmp_path / "run"
    summary = run_eval(ecfg, settings(qa_set, out))
    for name in ("run.json", "log.jsonl", "log.csv", "summary.json", "report.md", "pareto.png"):
        assert (out / name).is_file(), name
    run = json.loads((out / "run.json").read_text())
    rows = rows_of(out)
    n = run["n_questions"]
    assert len(rows) == n * len(STRATEGIES)
    assert n + run["n_fit_questions"] == 80 and run["n_fit_questions"] == 20
    assert not set(run["qids"]) & set(run["fit_qids"])  # gates never see evaluated questions
    assert 0 < run["fitted"]["threshold:p50"]["threshold"] < 1

    assert any(r["span"] is not None for r in rows)  # the reader gives spans here
    for r in rows:
        m = r["metrics"]
        golds = r["gold_answers"]
        if golds:
            # answer recall: a normalised gold answer inside the normalised context
            want = float(any(f" {_norm(g)} " in f" {_norm(r['context'])} " for g in golds))
            assert m["answer_recall"] == want, r["qid"]
        if r["gold_doc_ids"] and r["strategy"] != "none":
            gold = set(r["gold_doc_ids"])
            dcg = sum(
                1 / math.log2(i + 2) for i, d in enumerate(r["ranked_doc_ids"][:10]) if d in gold
            )
            idcg = sum(1 / math.log2(i + 2) for i in range(min(len(gold), 10)))
            assert m["ndcg@10"] == pytest.approx(dcg / idcg), r["qid"]
        if r["gold_doc_ids"]:
            # context nDCG@10: the context's documents, each once, in context order
            ctx = list(dict.fromkeys(r["context_doc_ids"]))[:10]
            gold = set(r["gold_doc_ids"])
            dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(ctx) if d in gold)
            idcg = sum(1 / math.log2(i + 2) for i in range(min(len(gold), 10)))
            assert m["context_ndcg@10"] == pytest.approx(dcg / idcg), r["qid"]
        if r["strategy"] == "none":
            assert r["k"] == 0 and r["context"] == "" and "probe" not in r["stages_ms"]
            assert r["tokens"]["context"] == 0
        else:
            assert "probe" in r["stages_ms"] and len(r["chunk_ids"]) == r["k"]
        assert r["total_ms"] == pytest.approx(sum(r["stages_ms"].values()), abs=0.01)
        # The extractive answerer states its own probability; a cascade over budgets reads it.
        if r["context"] and not r["abstained"]:
            assert 0.0 < r["answerer_confidence"] <= 1.0, r["qid"]
        # A span says whether it clears the reader's bar, and an unsure one's answer says so.
        if r["span"] is None:
            assert r["span_sure"] is None, r["qid"]
        else:
            assert r["answer"].startswith("Unsure: ") is (not r["span_sure"]), r["qid"]

    # The summary derives from the rows.
    by = {s: [r for r in rows if r["strategy"] == s] for s in STRATEGIES}
    for s in STRATEGIES:
        q = [r["metrics"]["quality"] for r in by[s]]
        assert summary["strategies"][s]["metrics"]["quality"]["mean"] == pytest.approx(
            sum(q) / len(q)
        )
        assert sum(summary["strategies"][s]["actions"].values()) == len(by[s])
    # Retrieval beats none on a question set about the documents.
    assert summary["strategies"]["fixed:2"]["metrics"]["quality"]["mean"] >= 0.6
    assert summary["strategies"]["none"]["metrics"]["quality"]["mean"] <= 0.2

    # `fathom eval report DIR` rebuilds summary.json byte for byte from run.json + log.jsonl.
    from fathom.cli import main

    before = (out / "summary.json").read_bytes()
    (out / "summary.json").unlink()
    (out / "report.md").unlink()
    result = CliRunner().invoke(main, ["eval", "report", str(out), "--json"])
    assert result.exit_code == 0, result.output
    assert (out / "summary.json").read_bytes() == before
    assert json.loads(result.stdout) == json.loads(before)
    assert (out / "report.md").is_file()


def test_resumed_run_gives_the_same_summary(ecfg, qa_set, tmp_path):
    full = tmp_path / "full"
    a = run_eval(ecfg, settings(qa_set, full))
    # An interrupted run: half the log, then a half-written line.
    cut = tmp_path / "cut"
    cut.mkdir()
    shutil.copy(full / "run.json", cut / "run.json")
    lines = (full / "log.jsonl").read_text().splitlines(keepends=True)
    half = len(lines) // 2
    (cut / "log.jsonl").write_text("".join(lines[:half]) + lines[half][: len(lines[half]) // 2])
    done = []
    b = run_eval(ecfg, settings(qa_set, cut), on_rows=lambda d, t: done.append((d, t)))
    assert done[0][0] < done[-1][0] == done[-1][1]
    assert len(rows_of(cut)) == len(lines)
    assert _strip_timing(a) == _strip_timing(b)
    # Per-query results agree apart from timings.
    assert untimed(rows_of(full)) == untimed(rows_of(cut))


def test_a_different_run_in_the_same_folder_is_refused(ecfg, qa_set, tmp_path):
    out = tmp_path / "run"
    run_eval(ecfg, settings(qa_set, out, strategies=["fixed:1"], limit=5))
    with pytest.raises(FathomError, match="different run"):
        run_eval(ecfg, settings(qa_set, out, strategies=["fixed:2"], limit=5))


def test_a_run_from_before_a_setting_existed_resumes_at_its_default(ecfg, qa_set, tmp_path):
    from fathom.evaluation.runner import same_config

    out = tmp_path / "run"
    run_eval(ecfg, settings(qa_set, out, strategies=["fixed:1"], limit=4))
    run = json.loads((out / "run.json").read_text())
    # As if the run were recorded before `embedder.precision` was added.
    del run["config"]["embedder"]["precision"]
    (out / "run.json").write_text(json.dumps(run))
    run_eval(ecfg, settings(qa_set, out, strategies=["fixed:1"], limit=4))  # resumes
    ecfg.embedder.precision = "int8"  # not the default: another run
    with pytest.raises(FathomError, match="differs in config"):
        run_eval(ecfg, settings(qa_set, out, strategies=["fixed:1"], limit=4))
    new = {"a": {"x": 1, "y": 2}}
    assert same_config({"a": {"x": 1, "y": 2}}, new)
    assert not same_config({"a": {"x": 1, "y": 3}}, new)
    assert not same_config({"a": {"x": 1, "y": 2, "z": 0}}, new)  # a setting went away


def test_generation_cache_replays_identical_prompts(ecfg, qa_set, tmp_path):
    """With a real model (SmolLM2 through llama.cpp, short answers): a strategy that sends
    fixed:2's prompt pays nothing, and a second run replays everything."""
    ecfg.generator.backend = "llamacpp"
    ecfg.generator.max_tokens = 12
    s = settings(qa_set, tmp_path / "a", strategies=["fixed:2", "gap:2-2"], limit=4, cache=True)
    run_eval(ecfg, s)
    rows = rows_of(tmp_path / "a")
    by_q: dict[str, dict[str, dict]] = {}
    for r in rows:
        by_q.setdefault(r["qid"], {})[r["strategy"]] = r
    for pair in by_q.values():  # gap:2-2 always picks 2: the same prompt as fixed:2
        assert pair["fixed:2"]["answer"] == pair["gap:2-2"]["answer"]
        assert [r["cached_generation"] for r in pair.values()].count(True) == 1
    s2 = settings(qa_set, tmp_path / "b", strategies=["fixed:2"], limit=4, cache=True)
    run_eval(ecfg, s2)
    assert all(r["cached_generation"] for r in rows_of(tmp_path / "b"))
    # Another generation setting is another key: nothing replays.
    ecfg.generator.max_tokens = 13
    run_eval(ecfg, settings(qa_set, tmp_path / "c", strategies=["fixed:2"], limit=4, cache=True))
    assert not any(r["cached_generation"] for r in rows_of(tmp_path / "c"))


def test_every_row_is_generated_from_an_empty_kv_cache(ecfg, qa_set, tmp_path, monkeypatch):
    """llama.cpp reuses the longest prefix a prompt shares with the last one; a sweep sends one
    question's budgets in a row, so without ``forget`` fixed:2 would be timed on a prompt whose
    system message and first source were already evaluated for fixed:1."""
    from fathom.stages.generate.llamacpp import LlamaCppGenerator

    cached: list[int] = []
    real = LlamaCppGenerator.generate

    def spy(self, question, hits, on_token=None):
        cached.append(self._llm.n_tokens if self._llm is not None else 0)
        return real(self, question, hits, on_token)

    monkeypatch.setattr(LlamaCppGenerator, "generate", spy)
    ecfg.generator.backend = "llamacpp"
    ecfg.generator.max_tokens = 6
    run_eval(ecfg, settings(qa_set, tmp_path / "kv", strategies=["fixed:1", "fixed:2"], limit=2))
    assert len(cached) >= 4 and cached == [0] * len(cached)


def test_extractive_answers_are_not_cached(ecfg, qa_set, tmp_path):
    run_eval(ecfg, settings(qa_set, tmp_path / "x", strategies=["fixed:1"], limit=3, cache=True))
    run_eval(ecfg, settings(qa_set, tmp_path / "y", strategies=["fixed:1"], limit=3, cache=True))
    assert not any(r["cached_generation"] for r in rows_of(tmp_path / "y"))


class _Counting(BaseGenerator):
    """A fake generator: "answer N" for the N-th generation of this instance."""

    name, model = "fake", "fake-1"
    context_window = 2048

    def __init__(self) -> None:
        self.calls = 0

    def count_tokens(self, texts):
        return [len(t.split()) for t in texts]

    def prompt_tokens(self, question, hits):
        return 10

    def generate(self, question, hits, on_token=None):
        self.calls += 1
        return Draft(f"answer {self.calls}", (), 10, 2, "fake", "fake-1", "stop", ms=40.0)


def test_caching_generator_counts_and_replays(tmp_path):
    counting = _Counting()
    gen = CachingGenerator(counting, tmp_path / "c.db", {"temperature": 0.0})
    first = gen.generate("q?", [])
    again = gen.generate("q?", [])
    other = gen.generate("another q?", [])
    assert (first.text, again.text, other.text) == ("answer 1", "answer 1", "answer 2")
    assert (gen.hits, gen.misses, counting.calls) == (1, 2, 2)
    assert 0 < gen.take_replayed_ms() <= 40.0 and gen.take_replayed_ms() == 0.0
    gen.close()
    # A different setting is a different key.
    gen2 = CachingGenerator(counting, tmp_path / "c.db", {"temperature": 0.7})
    assert gen2.generate("q?", []).text == "answer 3"
    gen2.close()


def test_closing_the_cache_closes_the_generator_it_wraps(tmp_path):
    """The eval worker closes its (caching) generator: the model or client inside is freed."""

    class Closing(_Counting):
        closed = 0

        def close(self):
            self.closed += 1

    inner = Closing()
    gen = CachingGenerator(inner, tmp_path / "c.db", {"temperature": 0.0})
    gen.generate("q?", [])
    gen.close()
    assert inner.closed == 1


def test_cache_keeps_only_generations_from_an_empty_kv_cache(tmp_path):
    """A feedback round reuses the previous round's prefix and is timed faster than the same
    prompt on its own: such a draft is not stored, so no later row replays its time."""

    class Forgetful(_Counting):
        keeps_prompt_cache = True  # like llama.cpp's KV cache
        forgot = 0

        def forget(self):
            self.forgot += 1

    inner = Forgetful()
    gen = CachingGenerator(inner, tmp_path / "c.db")
    gen.generate("warm?", [])  # nothing forgotten yet: the inner cache may be warm
    gen.forget()
    gen.generate("q1?", [])  # cold: stored
    gen.generate("q2?", [])  # the same answer's second round: warm, not stored
    gen.forget()
    assert gen.generate("q1?", []).text == "answer 2"  # replayed
    assert gen.generate("q2?", []).text == "answer 4"  # generated again
    gen.forget()
    assert gen.generate("warm?", []).text == "answer 5"
    assert (gen.hits, gen.misses, inner.forgot) == (1, 5, 3)
    gen.close()


def test_cache_never_stores_a_cut_answer_nor_replays_one_too_slow(tmp_path):
    class Budgeted(_Counting):
        supports_deadline = True

        def generate(self, question, hits, on_token=None, time_budget_ms=None):
            draft = super().generate(question, hits, on_token)
            if time_budget_ms is not None and time_budget_ms < draft.ms:
                return replace(draft, finish_reason="deadline", ms=time_budget_ms)
            return draft

    inner = Budgeted()
    gen = CachingGenerator(inner, tmp_path / "c.db")
    assert gen.generate("q?", [], time_budget_ms=10.0).finish_reason == "deadline"
    assert gen.generate("q?", []).text == "answer 2"  # the cut answer was not stored
    assert gen.generate("q?", []).text == "answer 2"  # the full one was: replayed
    # 40 ms does not fit a 30 ms budget: generated (and cut) anew, not replayed.
    assert gen.generate("q?", [], time_budget_ms=30.0).text == "answer 3"
    assert gen.generate("q?", [], time_budget_ms=50.0).text == "answer 2"
    assert (gen.hits, inner.calls) == (2, 3)
    gen.close()


def test_a_run_timed_before_cold_kv_rows_is_not_resumed(ecfg, qa_set, tmp_path):
    s = settings(qa_set, tmp_path / "old", strategies=["fixed:1"], limit=2)
    run_eval(ecfg, s)
    run = json.loads((tmp_path / "old" / "run.json").read_text())
    assert run["timing"] == 2
    del run["timing"]  # as a run recorded before timing format 2
    (tmp_path / "old" / "run.json").write_text(json.dumps(run))
    with pytest.raises(FathomError, match="differs in timing"):
        run_eval(ecfg, s)


def test_strategy_specs_parse_and_reject():
    specs = parse_strategies("none,fixed:3,gap,gap:2-6,threshold:p20,threshold:p80:8,strategy")
    assert [s.kind for s in specs] == [
        "none", "fixed", "gap", "gap", "threshold", "threshold", "strategy"
    ]  # fmt: skip
    assert (specs[3].k_min, specs[3].k_max) == (2, 6)
    assert (specs[5].percentile, specs[5].k) == (80.0, 8)
    assert specs[-1].feedback and not specs[1].feedback
    assert parse_strategy("fixed:2+fb").feedback
    for bad in ("fixed", "fixed:-1", "gap:5-2", "threshold:p120", "topk:3", "threshold:p50:0"):
        with pytest.raises(ConfigError):
            parse_strategy(bad)
    with pytest.raises(ConfigError, match="twice"):
        parse_strategies("fixed:1,fixed:1")


def test_split_is_disjoint_and_seeded(qa_set):
    qs = load_questions(qa_set[1])
    a_eval, a_fit = split_questions(qs, 30, 20, seed=1, need_fit=True)
    b_eval, b_fit = split_questions(qs, 30, 20, seed=1, need_fit=True)
    assert [q.qid for q in a_eval] == [q.qid for q in b_eval] and len(a_fit) == 20
    assert [q.qid for q in a_fit] == [q.qid for q in b_fit]
    assert not {q.qid for q in a_eval} & {q.qid for q in a_fit}
    c_eval, _ = split_questions(qs, 30, 20, seed=2, need_fit=True)
    assert [q.qid for q in c_eval] != [q.qid for q in a_eval]
    # Without room left, the fitting split comes off the top rather than overlapping.
    d_eval, d_fit = split_questions(qs, None, 20, seed=1, need_fit=True)
    assert len(d_eval) == len(qs) - 20 and not {q.qid for q in d_eval} & {q.qid for q in d_fit}


def test_beir_layout_and_unanswerable_flags(tmp_path):
    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "queries.jsonl").write_text(
        '{"_id": "q1", "text": "what is x"}\n{"_id": "q2", "text": "unjudged"}\n'
    )
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t0\n")
    qs = load_questions(beir)
    assert [(q.qid, q.doc_ids, q.qrels) for q in qs] == [("q1", ("d1",), {"d1": 2, "d2": 0})]
    squad2 = tmp_path / "q.jsonl"
    squad2.write_text(
        '{"qid": "a", "question": "x?", "answers": ["y"]}\n'
        '{"qid": "b", "question": "z?", "answers": [], "is_impossible": true}\n'
    )
    qs = load_questions(squad2)
    assert [q.unanswerable for q in qs] == [False, True]
    squad2.write_text('{"qid": "a", "question": "x?"}\n{"qid": "a", "question": "y?"}\n')
    with pytest.raises(FathomError, match="duplicate"):
        load_questions(squad2)


def test_a_lone_string_answer_or_doc_id_is_a_list_of_one(tmp_path):
    qfile = tmp_path / "q.jsonl"
    qfile.write_text(
        '{"qid": "a", "question": "x?", "answers": "Zebra", "doc_ids": "d1"}\n'
        '{"qid": null, "id": "b", "question": "y?", "answers": ["Yak"], "doc_ids": ["d2"]}\n'
    )
    qs = load_questions(qfile)
    assert [(q.qid, q.answers, q.doc_ids) for q in qs] == [
        ("a", ("Zebra",), ("d1",)),
        ("b", ("Yak",), ("d2",)),
    ]
    # A null qid with no other id is a missing qid, not the string "None".
    qfile.write_text('{"qid": null, "question": "x?"}\n')
    with pytest.raises(FathomError, match=r"q\.jsonl:1: needs a qid"):
        load_questions(qfile)
    for bad in ('{"k": 1}', "3", '["a", null]', '[["a"]]'):
        for key in ("answers", "doc_ids"):
            row = {"qid": "b", "question": "y?"}
            qfile.write_text(
                '{"qid": "a", "question": "x?"}\n' + json.dumps(row)[:-1] + f', "{key}": {bad}}}\n'
            )
            with pytest.raises(FathomError, match=rf"q\.jsonl:2: {key} must be a string or a list"):
                load_questions(qfile)


@pytest.mark.slow
def test_ray_executor_matches_local(ecfg, qa_set, tmp_path):
    pytest.importorskip("ray")
    local = tmp_path / "local"
    run_eval(ecfg, settings(qa_set, local, strategies=["none", "fixed:2", "gap"], limit=50))
    ray_out = tmp_path / "ray"
    run_eval(
        ecfg,
        settings(
            qa_set, ray_out, strategies=["none", "fixed:2", "gap"], limit=50, executor="ray",
            workers=2,
        ),
    )  # fmt: skip
    a, b = untimed(rows_of(local)), untimed(rows_of(ray_out))
    assert len(a) == 150 and a == b


@pytest.mark.slow
def test_ray_executor_finishes_on_the_actors_that_start(ecfg, qa_set, tmp_path):
    """One of the two CPUs is held by another actor for the whole run, so the second shard
    actor is never placed: the run finishes on the one that started (it waited for the other
    forever when shards were sent to actors before they started)."""
    ray = pytest.importorskip("ray")
    from fathom.evaluation.executors import ray_session

    kw = dict(strategies=["none", "fixed:2"], limit=12)
    run_eval(ecfg, settings(qa_set, tmp_path / "local", **kw))
    with ray_session(2, None):

        @ray.remote(num_cpus=1)
        class Holder:
            def ready(self) -> bool:
                return True

        holder = Holder.remote()
        ray.get(holder.ready.remote())  # placed: one CPU is taken for the run
        # Ray's resource view is refreshed asynchronously ("may be slightly out of date"):
        # wait for it to show the held CPU, up to a bound.
        deadline = time.monotonic() + 30
        while ray.available_resources().get("CPU", 0) != 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ray.available_resources().get("CPU", 0) == 1
        run_eval(ecfg, settings(qa_set, tmp_path / "ray", executor="ray", workers=2, **kw))
        ray.kill(holder)
    a, b = untimed(rows_of(tmp_path / "local")), untimed(rows_of(tmp_path / "ray"))
    assert len(a) == 24 and a == b


@pytest.mark.slow
def test_ray_ingest_embedding_matches_local(cfg, qa_set):
    pytest.importorskip("ray")
    import numpy as np
    from fathom.evaluation.executors import ray_session
    from fathom.index.collection import Collection
    from fathom.index.embed import make_embedder
    from fathom.index.ray_embed import RayEmbedder
    from fathom.index.targets import resolve_target

    texts = [json.loads(line)["text"] for line in qa_set[0].read_text().splitlines()]
    local = make_embedder(cfg.embedder)
    with ray_session(2, None):
        remote = RayEmbedder(local, cfg.embedder, actors=2)
        try:
            got = remote.embed(texts)
            assert remote.shards == 2
            assert np.allclose(got, local.embed(texts), atol=1e-5)
            name = resolve_target(cfg, str(qa_set[0]), embedder=remote)
            assert remote.shards > 2  # the ingest embedded on the actors
        finally:
            remote.close()
    coll = Collection.open(cfg, name)
    assert coll.check() == [] and len(coll) >= len(texts)
    coll.close()


@pytest.mark.slow
def test_worker_processes_match_one_process(ecfg, qa_set, tmp_path):
    kw = dict(strategies=["none", "fixed:2"], limit=12)
    run_eval(ecfg, settings(qa_set, tmp_path / "one", **kw))
    run_eval(ecfg, settings(qa_set, tmp_path / "two", workers=2, **kw))
    a, b = untimed(rows_of(tmp_path / "one")), untimed(rows_of(tmp_path / "two"))
    assert len(a) == 24 and a == b


def test_document_split_never_shares_a_document(qa_set):
    from fathom.learn.questions import split_by_document

    qs = load_questions(qa_set[1])
    train = split_by_document(qs, "train", seed=3)
    test = split_by_document(qs, "test", seed=3)
    assert len(train) + len(test) == len(qs) and train and test
    docs = lambda part: {d for q in part for d in q.doc_ids}  # noqa: E731
    assert not docs(train) & docs(test)
    # every question of a document lands on the same side
    assert {q.qid for q in train if q.doc_ids} == {
        q.qid for q in qs if q.doc_ids and q.doc_ids[0] in docs(train)
    }
    assert split_by_document(qs, "train", seed=4) != train
    with pytest.raises(ConfigError):
        split_by_document(qs, "validation", seed=3)


def test_an_empty_document_half_is_an_error(tmp_path):
    """A split that leaves no questions fails (exit 1) rather than reporting an empty table."""
    from fathom.cli import main
    from fathom.learn.questions import document_half

    qfile = tmp_path / "one.jsonl"
    qfile.write_text('{"qid": "a", "question": "x?", "answers": ["y"], "doc_ids": ["d1"]}\n')
    other = "test" if document_half("d1", 0) == "train" else "train"
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "d1.txt").write_text("y is the answer.")
    runs = {
        "eval": ["eval", "--strategies", "fixed:1", "--out", str(tmp_path / "e")],
        "sweep": ["policy", "sweep", "--budgets", "0,1", "--out", str(tmp_path / "s")],
    }
    for name, args in runs.items():
        args += ["--docs", str(docs), "--questions", str(qfile), "--split", other]
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 1, (name, result.output)
        assert f"no questions on the {other} half" in result.stderr, name
        assert "Traceback" not in result.output
        assert not (tmp_path / name[0]).exists()


def test_an_out_that_is_a_file_is_one_clear_error(qa_set, tmp_path):
    from fathom.cli import main

    docs, questions = qa_set
    taken = tmp_path / "taken"
    taken.write_text("not a folder")
    common = ["--docs", str(docs), "--questions", str(questions), "--out", str(taken)]
    for args in (["eval", "--strategies", "fixed:1", *common], ["policy", "sweep", *common]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 1, (args[0], result.output)
        assert f"{taken}: exists and is not a folder" in result.stderr
        assert "Traceback" not in result.output and len(result.stderr.splitlines()) == 1
    assert taken.read_text() == "not a folder"


def test_a_missing_policy_file_fails_before_run_json(ecfg, qa_set, tmp_path, monkeypatch):
    """A mistyped policy path must not leave a run.json behind that refuses the corrected run."""
    from fathom.cli import main

    monkeypatch.setenv("FATHOM_GENERATOR__BACKEND", "extractive")
    monkeypatch.setenv("FATHOM_RERANK__ENABLED", "false")
    docs, questions = qa_set
    out = tmp_path / "r"
    common = ["eval", "--docs", str(docs), "--questions", str(questions), "--limit", "2"]
    bad = CliRunner().invoke(
        main,
        [*common, "--strategies", f"fixed:1,forest:{tmp_path / 'nope' / 'p'}", "--out", str(out)],
    )
    assert bad.exit_code == 1, bad.output
    assert "nope" in bad.stderr and "Traceback" not in bad.output
    assert not (out / "run.json").exists()
    good = CliRunner().invoke(main, [*common, "--strategies", "fixed:1", "--out", str(out)])
    assert good.exit_code == 0, good.output
    assert len(rows_of(out)) == 2


def test_recall_judge_scores_the_context(ecfg, qa_set, tmp_path):
    run_eval(
        ecfg, settings(qa_set, tmp_path / "r", strategies=["fixed:1"], limit=10, judge="recall")
    )
    rows = rows_of(tmp_path / "r")
    assert rows and all(
        r["metrics"]["quality"] == r["metrics"]["answer_recall"] for r in rows if r["gold_answers"]
    )


def test_eval_and_sweep_take_an_answer_deadline(ecfg, qa_set, tmp_path, monkeypatch):
    """`--deadline-ms` sets generator.deadline_ms for every row, and the run records it (a
    resume must match it)."""
    from fathom.cli import main

    docs, questions = qa_set
    monkeypatch.setenv("FATHOM_GENERATOR__BACKEND", "extractive")
    monkeypatch.setenv("FATHOM_RERANK__ENABLED", "false")
    common = ["--docs", str(docs), "--questions", str(questions), "--limit", "2",
              "--deadline-ms", "5000"]  # fmt: skip
    runs = {
        "eval": ["eval", *common, "--strategies", "fixed:1", "--out", str(tmp_path / "e")],
        "sweep": ["policy", "sweep", *common, "--budgets", "0,1", "--out", str(tmp_path / "s")],
    }
    for name, args in runs.items():
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, (name, result.output)
    for folder in ("e", "s"):
        run = json.loads((tmp_path / folder / "run.json").read_text())
        assert run["config"]["generator"]["deadline_ms"] == 5000.0
        rows = rows_of(tmp_path / folder)
        assert rows and all(r["total_ms"] >= 0 for r in rows)


# --- rows scored from what the strategy used ----------------------------------------------------


def _hit(doc: str, n: int = 0):
    from types import SimpleNamespace as NS

    return NS(chunk=NS(source_id=doc, title=None, doc_id=doc, chunk_id=f"{doc}#{n}"))


def _answer(text: str, used: list, abstained: bool = False):
    from types import SimpleNamespace as NS

    k = len(used)
    trace = NS(
        decision=NS(k=k, policy="p", reason=""),
        tokens={"context": 10 * k, "prompt": 1, "completion": 1},
        cost=0.0,
        stages_ms={},
        total_ms=1.0,
        query_type="factual",
    )
    return NS(trace=trace, used=used, text=text, confidence={"abstained": abstained})


def test_qrels_judge_scores_the_documents_in_the_context():
    """Under --judge qrels the quality is the nDCG@10 of the strategy's own context, not of the
    probe ranking every strategy shares; an empty context scores 0."""
    from types import SimpleNamespace as NS

    from fathom.evaluation.worker import _row
    from fathom.learn.questions import Question

    probe = [_hit(d) for d in ["x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "g1", "g2"]]
    prepared = NS(probe=NS(hits=probe))
    q = Question("q1", "?", ("ans",), ("g1", "g2"), {"g1": 2, "g2": 1})

    def quality(name: str, used: list) -> dict:
        r = _row(q, parse_strategy(name), _answer("ans", used), "", prepared, {}, "qrels")
        return r["metrics"]

    shared = quality("fixed:10", probe)["ndcg@10"]
    assert 0 < shared < 1
    assert quality("fixed:1", probe[:1])["quality"] == 0.0  # only x1 in the context
    assert quality("fixed:10", probe)["quality"] == pytest.approx(shared)
    # A gate that skipped retrieval, and no retrieval at all: nothing relevant was read.
    assert quality("threshold:p50", [])["quality"] == 0.0
    assert quality("none", [])["quality"] == 0.0
    # Documents count once, in the order of their first chunk: g1, g1, g2 reads as g1, g2.
    best = quality("fixed:3", [_hit("g1", 0), _hit("g1", 1), _hit("g2", 0)])
    assert best["quality"] == pytest.approx(1.0)
    worse = quality("fixed:3", [_hit("g2", 0), _hit("g1", 0), _hit("g1", 1)])
    assert 0 < worse["quality"] < 1
    # The probe's ranking metrics stay a property of the index.
    assert best["ndcg@10"] == pytest.approx(shared) and best["mrr"] == pytest.approx(1 / 9)


@pytest.mark.parametrize(
    ("text", "scorer_said", "abstains"),
    [
        ("There is no information in the provided sources about this.", False, True),
        ("I am unable to answer that from the sources.", False, True),
        ("The question is unanswerable from the given text.", False, True),
        ("This is not found in the provided context.", False, True),
        ("The report gives no information about side effects, but the dose is 5 mg.", True, False),
        ("Paris.", True, False),
    ],
)
def test_unanswerable_rows_read_the_abstention_from_the_answer(text, scorer_said, abstains):
    """EM / F1 / contains on unanswerable questions follow judges.is_abstention on the answer
    text, not the feedback scorer's narrower patterns."""
    from types import SimpleNamespace as NS

    from fathom.evaluation.worker import _row
    from fathom.learn.questions import Question

    q = Question("u1", "?", (), (), None, unanswerable=True)
    r = _row(
        q,
        parse_strategy("fixed:1"),
        _answer(text, [_hit("d")], abstained=scorer_said),
        "[1] d",
        NS(probe=NS(hits=[_hit("d")])),
        {},
        "contains",
    )
    want = 1.0 if abstains else 0.0
    m = r["metrics"]
    assert (m["em"], m["f1"], m["contains"], m["quality"]) == (want, want, want, want)
    assert r["abstained"] is abstains


def _first_doc_split(questions, half, seed):
    """The split before multi-document questions were grouped: by the first gold document."""
    from fathom.learn.questions import document_half

    return [
        q for q in questions if document_half(q.doc_ids[0] if q.doc_ids else q.qid, seed) == half
    ]


def test_single_document_questions_split_as_before(qa_set):
    from fathom.learn.questions import split_by_document

    qs = load_questions(qa_set[1])
    assert all(len(q.doc_ids) <= 1 for q in qs)
    for seed in range(5):
        for half in ("train", "test"):
            assert split_by_document(qs, half, seed) == _first_doc_split(qs, half, seed)


def test_questions_sharing_any_document_stay_on_one_half():
    """A multi-hop question's second document must not reach the other half."""
    from fathom.learn.questions import Question, split_by_document

    qs = [
        Question("a", "?", ("x",), ("A", "B")),
        Question("b", "?", ("x",), ("B", "C")),  # joins a through B
        Question("c", "?", ("x",), ("C",)),  # joins b through C
        Question("d", "?", ("x",), ("D", "E")),
        Question("e", "?", ("x",), ("E",)),
        Question("f", "?", ("x",), ("F",)),
        Question("u", "?", (), (), unanswerable=True),
    ]
    groups = [{"a", "b", "c"}, {"d", "e"}, {"f"}, {"u"}]
    for seed in range(20):
        train = split_by_document(qs, "train", seed)
        test = split_by_document(qs, "test", seed)
        assert sorted(q.qid for q in train + test) == sorted(q.qid for q in qs)
        docs = lambda part: {d for q in part for d in q.doc_ids}  # noqa: E731
        assert not docs(train) & docs(test), seed
        ids = {q.qid for q in train}
        assert all(g <= ids or not g & ids for g in groups), seed
        # The same halves whatever the order of the questions.
        assert {q.qid for q in split_by_document(qs[::-1], "train", seed)} == ids


def test_a_documents_half_is_the_half_of_its_questions():
    """``half_documents`` puts a document where ``split_by_document`` puts its questions (a
    multi-hop group together); a document no question names goes by its own id."""
    from fathom.learn.questions import Question, document_half, half_documents, split_by_document

    qs = [
        Question("a", "?", ("x",), ("A", "B")),
        Question("b", "?", ("x",), ("B", "C")),
        Question("c", "?", ("x",), ("D",)),
    ]
    every = ["A", "B", "C", "D", "Lone"]
    for seed in range(20):
        halves = {h: half_documents(qs, every, h, seed) for h in ("train", "test")}
        assert halves["train"] | halves["test"] == set(every)
        assert not halves["train"] & halves["test"]
        for h in ("train", "test"):
            named = {d for q in split_by_document(qs, h, seed) for d in q.doc_ids}
            assert named == halves[h] - {"Lone"}
        assert ("Lone" in halves["train"]) == (document_half("Lone", seed) == "train")
    with pytest.raises(ConfigError):
        half_documents(qs, every, "all", 0)


def test_an_answer_cut_to_nothing_is_not_an_abstention() -> None:
    """Under a deadline an empty answer said nothing: it earns no abstention credit on an
    unanswerable question, while a real abstention, cut or not, still does."""
    from types import SimpleNamespace

    from fathom.evaluation.worker import eval_abstained
    from fathom.feedback import judges as M

    def answer(text: str, cut: bool) -> SimpleNamespace:
        notices = ["answer cut at the 500 ms deadline (generator.deadline_ms)"] if cut else []
        return SimpleNamespace(text=text, trace=SimpleNamespace(notices=notices))

    assert not eval_abstained(answer("", cut=True))
    assert M.exact_match("", [], abstained=eval_abstained(answer("", cut=True))) == 0.0
    assert eval_abstained(answer("", cut=False))  # documented: an empty answer abstains
    assert eval_abstained(answer("I don't know — the sources do not answer this.", cut=True))
