"""The cascade: its ladder's rules, its first decision, its eval spec, and a real climb through
the Engine with the extractive answerer (context read counted once per source)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fathom.core.base import Chunk, DepthQuery, Hit, Probe
from fathom.core.config import load_config
from fathom.core.errors import ConfigError
from fathom.evaluation.strategies import make_policy, parse_strategy
from fathom.index.targets import resolve_target
from fathom.router.cascade import LADDER, Cascade, CascadeDepth
from fathom.router.registry import configured_policy
from fathom.stages.pipeline import Engine
from fathom.stages.records import Trace


def probe_of(n: int) -> Probe:
    hits = tuple(
        Hit(Chunk(f"c{i}", "d", f"text {i}", 0, 6, 1, 1, "", 2, i), 1.0 - i / 100) for i in range(n)
    )
    return Probe(query="q", hits=hits, timings_ms={})


def test_ladder_rules() -> None:
    assert Cascade((1, 2, 5)).ladder == (1, 2, 5)
    for bad in ((), (0, 2), (3, 2), (2, 2)):
        with pytest.raises(ConfigError):
            Cascade(bad)
    with pytest.raises(ConfigError):
        Cascade(threshold=0.0)


def test_the_first_decision_is_the_first_rung_and_the_probe_reaches_the_top() -> None:
    policy = CascadeDepth()
    assert policy.deepest_k == LADDER[-1] and not policy.prices_reading
    d = policy.decide(DepthQuery("q", probe_of(30), "factual"))
    assert d.k == LADDER[0] and d.policy == "cascade" and "climb" in d.reason
    assert policy.decide(DepthQuery("q", probe_of(0), "factual")).k == 0


def test_eval_spec_and_configured_policy() -> None:
    spec = parse_strategy("cascade@0.7")
    policy, k = make_policy(spec)
    assert k is None and policy.cascade.threshold == 0.7 and policy.name == "cascade@0.7"
    assert make_policy(parse_strategy("cascade"))[0].cascade == Cascade()
    with pytest.raises(ConfigError):
        parse_strategy("cascade@2")
    cfg = load_config(overrides={"retrieval.policy": "cascade"})
    assert isinstance(configured_policy(cfg)[0], CascadeDepth)


def test_context_read_counts_an_extending_round_once() -> None:
    tr = Trace(question="q", collection="c")
    tr.set_context(["a", "b"], 20)
    tr.set_context(["a", "b", "c"], 31)  # extends: only "c" is new
    assert tr.tokens["context"] == 31 and tr.tokens["context_read"] == 31
    tr.set_context(["x", "b", "c"], 30)  # does not extend: read again in full
    assert tr.tokens["context_read"] == 61


PARTS = """# Overview

The Quillon works manual covers the plant's pumps, valves and shipping rules in turn.

# Pumps

The impeller of the Quillon coolant pump is cast from titanium.

# Valves

Every Quillon relief valve opens at nine bar and closes again at seven bar.

# Shipping

Spare parts ship in wooden crates stacked no more than three high.
"""


@pytest.fixture
def engine(tmp_path: Path, minilm):
    cfg = load_config(overrides={"generator.backend": "extractive"})
    doc = tmp_path / "parts.md"
    doc.write_text(PARTS)
    eng = Engine(cfg, resolve_target(cfg, str(doc)))
    yield eng
    eng.close()


def test_a_sure_answer_stays_at_the_first_rung(engine) -> None:
    answer = engine.ask(
        "What is the Quillon coolant pump impeller cast from?", policy=CascadeDepth()
    )
    assert "titanium" in answer.text
    assert [r["k"] for r in answer.trace.rounds] == [1]
    assert answer.trace.tokens["context_read"] == answer.trace.tokens["context"]


def test_an_unsure_answer_climbs_and_reads_each_source_once(engine) -> None:
    # A threshold no answer reaches: the climb goes to the ladder's top (the chunks there are).
    policy = CascadeDepth(Cascade((1, 2, 3), threshold=1.0))
    answer = engine.ask("At what pressure does the Quillon relief valve open?", policy=policy)
    tr = answer.trace
    assert [r["k"] for r in tr.rounds] == [1, 2, 3] and tr.decision.k == 3
    assert "climbed to k = 3" in tr.decision.reason
    # Each rung's sources extend the last (same order, kept whole): read once each. A prompt
    # per round is still charged in full.
    assert tr.tokens["context_read"] == pytest.approx(tr.tokens["context"], abs=3)
    assert tr.tokens["prompt"] > tr.tokens["context_read"]


class KeepsTwo:
    """A compressor that keeps the first two candidates at any depth; called deeper without a
    lead it lists them in the other order (as MMR over more candidates may)."""

    def fit(self, question, hits, budget, lead=()):
        kept = list(hits[:2])
        if lead:
            return sorted(kept, key=lambda h: list(lead).index(h.chunk.chunk_id))
        return kept if len(hits) <= 2 else kept[::-1]


def test_a_rung_that_would_reread_what_was_read_does_not_run(engine) -> None:
    # The next rung reads the last rung's sources first: the same two sources make the same
    # prompt, whatever order compression without that lead would give them.
    engine.parts._compressor = KeepsTwo()
    policy = CascadeDepth(Cascade((2, 3), threshold=1.0))
    answer = engine.ask("At what pressure does the Quillon relief valve open?", policy=policy)
    tr = answer.trace
    assert [r["k"] for r in tr.rounds] == [2] and tr.decision.k == 2
    assert any("same sources" in n for n in tr.notices)


def test_the_report_says_what_the_rounds_read() -> None:
    from fathom.terminal.render import read_note

    assert read_note({"context_read": 1240}, 3) == " · read 1,240 over 3 rounds"
    assert read_note({"context_read": 400}, 1) == ""  # one round: the context says it


def test_on_a_sweep_the_climb_ends_at_the_first_sure_rung() -> None:
    import numpy as np

    budgets = (0, 1, 2, 3, 5)
    conf = np.array(
        [
            [np.nan, 0.9, 0.9, 0.9, 0.9],  # sure at once
            [np.nan, 0.1, 0.2, 0.7, 0.9],  # sure at k = 3
            [np.nan, 0.1, 0.1, 0.1, 0.1],  # never: the top rung
            [np.nan, np.nan, np.nan, 0.9, 0.9],  # nothing stated below 3
        ]
    )
    idx = Cascade((1, 2, 3, 5), threshold=0.5).choose(budgets, conf)
    assert [budgets[i] for i in idx] == [1, 3, 5, 3]
    # A rung the sweep did not measure is an error, not a silent skip.
    with pytest.raises(ConfigError):
        Cascade((1, 4)).choose(budgets, conf)


def test_a_sweep_row_gives_the_confidence_a_climb_reads() -> None:
    import math

    from fathom.learn.sweep import _stated

    assert _stated({"answerer_confidence": 0.8, "confidence": 1.0, "abstained": False}) == 0.8
    assert _stated({"answerer_confidence": 0.8, "abstained": True}) == 0.0
    # A model that states none: the feedback scorer's support, as the climb reads it.
    assert _stated({"answerer_confidence": None, "confidence": 0.4, "abstained": False}) == 0.4
    # A sweep made before rows carried it: unknown, never "sure".
    assert math.isnan(_stated({"confidence": 1.0, "abstained": False}))


def test_the_bench_counts_the_generations_a_climb_ran() -> None:
    import numpy as np
    from fathom.bench.policy_tradeoffs import _rounds

    budgets = (0, 1, 2, 3, 5)
    assert _rounds(Cascade((1, 2, 3, 5)), budgets, np.array([1, 3, 4])) == (1 + 3 + 4) / 3
