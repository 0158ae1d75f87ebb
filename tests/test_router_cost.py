"""The price of a context token (router/cost.py, stages/pricing.py) and the forest's priced choice:
a slower backend never reads more, an API's trade is in money, the extractive answerer's stays
in tokens at the shipped λ."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
from fathom.bench.support import docgen
from fathom.core.config import load_config
from fathom.core.errors import ConfigError
from fathom.index.targets import resolve_target
from fathom.router.cost import ReadingCost, trade_line
from fathom.stages.generate import SPEED_FILE
from fathom.stages.generate.base import BaseGenerator
from fathom.stages.pipeline import Engine
from fathom.stages.pricing import reading_cost
from fathom.tests.support.generate_support import PacedGenerator

SCHEMA = Path(__file__).resolve().parents[1] / "docs" / "answer.schema.json"


def test_token_pricing_at_quality_is_the_policy_s_own_lambda() -> None:
    """The extractive answerer's price: λ per 1000 tokens for quality, 4× when balanced, 10×
    for fast (the shipped forest: a point of recall is worth 1,000 / 250 / 100 tokens)."""
    assert ReadingCost("quality").weight(0.01) == pytest.approx(0.01 / 1000)
    assert ReadingCost().weight(0.01) == pytest.approx(0.04 / 1000)
    assert ReadingCost("fast").weight(0.01) == pytest.approx(0.1 / 1000)
    assert ReadingCost("quality").worth_text(0.01) == "1,000 tokens of context"
    assert ReadingCost().worth_text(0.01) == "250 tokens of context"


def test_seconds_and_cents_are_priced_by_what_a_point_is_worth() -> None:
    """One point (0.01) of P(enough) is worth 1 s when balanced: at 5 ms per token, 200 tokens
    cost exactly that point."""
    s = ReadingCost.seconds("balanced", 5.0, "measured")
    assert s.unit == "s" and s.per_token == pytest.approx(0.005)
    assert 200 * s.weight(0.01) == pytest.approx(0.01)
    assert ReadingCost.seconds("quality", 5.0, "m").weight(0.01) < s.weight(0.01)
    assert ReadingCost.seconds("fast", 5.0, "m").weight(0.01) > s.weight(0.01)
    c = ReadingCost.money("balanced", 2.5, "USD", "price table")
    assert c.unit == "cents" and c.per_token == pytest.approx(2.5e-4)  # 2.5 USD / M = 2.5e-4 ¢
    assert c.format(0.03) == "0.03 ¢ (USD)"
    with pytest.raises(ConfigError, match=r"retrieval\.prefer"):
        ReadingCost("cheap")


def test_the_trade_line_compares_with_the_deepest_budget() -> None:
    cost = ReadingCost.seconds("balanced", 6.0, "6 ms per prompt token for m, measured here")
    line = trade_line(cost, 0.01, (1, 3, 20), [0.8, 0.93, 0.95], [200, 600, 4000], 1)
    assert line.startswith("k = 3: about 3.6 s of reading, P(enough) 0.93; k = 20 would add 20 s")
    assert "for +0.02" in line and "prefer = balanced" in line and "worth 1 s" in line
    deepest = trade_line(cost, 0.01, (1, 3, 20), [0.8, 0.93, 0.95], [200, 600, 4000], 2)
    assert "k = 3 would save 20 s for -0.02" in deepest


class _Stub(BaseGenerator):
    name = "stub"

    def __init__(self, model: str, language_model: bool = True, measures: bool = False) -> None:
        super().__init__(load_config().generator)
        self.model = model
        self.language_model = language_model  # type: ignore[misc]
        self.measures, self.measured, self.forgotten = measures, 0, 0

    def measure_prefill(self, question, hits):
        if not self.measures:
            return None
        self.measured += 1
        self._record_speed(4.0)
        return 40.0

    def forget(self) -> None:
        self.forgotten += 1


def test_reading_cost_follows_the_backend() -> None:
    """Extractive → tokens; a model in the price table → cents; a measured speed → seconds; a
    speed measurable now → measured once (and the prompt cache dropped); else tokens."""
    cfg = load_config(overrides={"retrieval.prefer": "fast"})
    hits = [object()]
    assert reading_cost(cfg, _Stub("x", language_model=False), "q", hits)[0].unit == "tokens"
    money, _ = reading_cost(cfg, _Stub("gpt-4o-mini"), "q", hits)
    assert (money.unit, money.prefer, money.currency) == ("cents", "fast", "USD")
    assert money.per_token == pytest.approx(0.15 / 1e6 * 100)
    known = _Stub("local")
    known.prefill_ms_per_token = 7.0
    assert reading_cost(cfg, known, "q", hits)[0].per_token == pytest.approx(0.007)
    fresh = _Stub("local", measures=True)
    first, measured = reading_cost(cfg, fresh, "q", hits)
    assert first.unit == "s" and measured and "measured now" in first.basis
    assert (fresh.measured, fresh.forgotten) == (1, 1)
    again, measured = reading_cost(cfg, fresh, "q", hits)
    assert not measured and "measured on this machine" in again.basis
    assert fresh.measured == 1  # once: then known
    unknown, _ = reading_cost(cfg, _Stub("local"), "q", hits)
    assert unknown.unit == "tokens" and "not measured yet" in unknown.basis


@pytest.fixture
def qa_collection(tmp_path: Path, minilm):
    docs, questions = docgen.make_qa_set(tmp_path / "qa", n_docs=26)
    cfg = load_config(overrides={"generator.backend": "extractive", "feedback.enabled": False})
    target = resolve_target(cfg, str(docs))
    asked = [json.loads(line)["question"] for line in questions.read_text().splitlines()]
    return cfg, target, asked[::4][:12]


def test_a_ten_times_slower_backend_never_reads_more(qa_collection) -> None:
    """The shipped forest, the same questions, two stand-in backends whose reading differs ten
    times per prompt token: the slow one gets a smaller or equal k on every question (and a
    smaller one on some: the price is not ignored), and the report's trade is in seconds."""
    cfg, target, questions = qa_collection
    ks: dict[float, list[int]] = {}
    for read_ms in (0.5, 5.0):
        gen = PacedGenerator(read_ms=read_ms)
        engine = Engine(cfg, target, generator=gen)
        answers = [engine.ask(q) for q in questions]
        engine.close()
        ks[read_ms] = [a.trace.decision.k for a in answers]
        for a in answers:
            cost = a.trace.decision.cost
            assert cost["unit"] == "s" and cost["per_token"] == pytest.approx(read_ms / 1000)
            assert re.match(
                r"k = \d+: about [\d.]+ s of reading, P\(enough\) [01]\.\d\d", cost["trade"]
            )
            assert "worth 1 s" in cost["trade"]
            jsonschema.validate(a.to_dict(), json.loads(SCHEMA.read_text()))
    fast, slow = ks[0.5], ks[5.0]
    assert all(s <= f for s, f in zip(slow, fast, strict=True)), (slow, fast)
    assert sum(slow) < sum(fast), (slow, fast)


def test_an_api_backend_s_trade_is_in_money(qa_collection) -> None:
    """A model in the price table is priced by its input price, whatever its speed; the
    report's trade line says cents of the configured currency."""
    cfg, target, questions = qa_collection
    gen = PacedGenerator(read_ms=5.0)
    gen.model = "gpt-4o"  # in the default price table: 2.50 USD per million input tokens
    engine = Engine(cfg, target, generator=gen)
    answer = engine.ask(questions[0])
    engine.close()
    cost = answer.trace.decision.cost
    assert cost["unit"] == "cents" and cost["currency"] == "USD"
    assert cost["per_token"] == pytest.approx(2.5e-4)
    assert " ¢ (USD) of reading" in cost["trade"] and "2.5 USD per million" in cost["basis"]


def test_the_extractive_answerer_keeps_token_pricing(qa_collection) -> None:
    cfg, target, questions = qa_collection
    engine = Engine(cfg, target)
    answer = engine.ask(questions[0])
    engine.close()
    d = answer.trace.decision
    assert d.cost["unit"] == "tokens" and "λ = 0.04" in d.reason  # balanced: 4 × its 0.01
    assert "tokens of reading" in d.cost["trade"]


def test_policy_show_explains_the_preference_and_the_cost_model() -> None:
    """`fathom policy show` says, for the shipped forest, what one point of recall is worth at
    each preference in each unit, in words and in --json."""
    from click.testing import CliRunner
    from fathom import cli

    res = CliRunner().invoke(cli.main, ["policy", "show"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    words = " ".join(res.stdout.split())
    assert "Depth and cost" in words and "--prefer" in words
    assert "balanced 1 s / 0.02 ¢ / 250 tokens" in words
    res = CliRunner().invoke(cli.main, ["policy", "show", "--json"])
    shown = json.loads(res.stdout)
    assert shown["pricing"]["fast"]["local model (seconds of reading)"] == "0.25 s"
    assert shown["pricing"]["quality"]["extractive or unmeasured (context tokens)"] == (
        "1,000 tokens of context"
    )


def test_the_user_guide_with_smollm2_reads_a_few_chunks_when_balanced(tmp_path: Path, minilm):
    """The bundled user guide (15 chunks), a question one page answers, the packaged SmolLM2
    through llama.cpp: priced in its measured seconds, `balanced` reads at most 5 chunks (it
    took all 15 when tokens were priced alike for every reader); `quality` may read more, never
    fewer. The first ask on a machine measures the prompt speed, and the report says so."""
    from fathom.tests.support.generate_support import smollm2_path

    assert smollm2_path().is_file()
    guide = Path(__file__).resolve().parents[1] / "examples" / "fathom-user-guide.pdf"
    question = "Which Python version does Fathom need?"
    cfg = load_config(
        overrides={
            "generator.backend": "llamacpp",
            "generator.max_tokens": 16,
            "generator.threads": 1,
            "feedback.enabled": False,
        }
    )
    # The test session shares one models folder: start from no measured speed, as a new
    # machine does.
    (cfg.models_path() / SPEED_FILE).unlink(missing_ok=True)
    engine = Engine(cfg, resolve_target(cfg, str(guide)))
    ks = {}
    for prefer in ("balanced", "quality"):
        cfg.retrieval.prefer = prefer  # read at every ask
        answer = engine.ask(question)
        d = answer.trace.decision
        assert d.cost["unit"] == "s" and d.cost["prefer"] == prefer, d.cost
        ks[prefer] = d.k
        if prefer == "balanced":  # the first llama.cpp answer in this FATHOM_HOME
            assert "measure" in answer.trace.stages_ms
            assert any("measured the generator's prompt speed" in n for n in answer.trace.notices)
        else:
            assert "measure" not in answer.trace.stages_ms  # kept from the first
    engine.close()
    assert ks["balanced"] <= 5 and ks["quality"] >= ks["balanced"], ks


def test_probe_sums_add_the_first_chunks_of_each_question() -> None:
    from fathom.router.cost import probe_sums

    sums, counts = probe_sums([[100, 50, 25], [10]], (0, 1, 2, 5))
    assert sums.tolist() == [[0, 100, 150, 175], [0, 10, 10, 10]]
    # A probe that found fewer chunks than a budget reads what it found.
    assert counts.tolist() == [[0, 1, 2, 3], [0, 1, 1, 1]]


def test_context_tokens_are_fitted_on_what_the_sweep_measured() -> None:
    import numpy as np
    from fathom.router.cost import ContextTokens, probe_sums

    rng = np.random.default_rng(0)
    probes = [rng.integers(20, 300, size=20).tolist() for _ in range(50)]
    sums, counts = probe_sums(probes, (0, 1, 3, 8, 20))
    measured = 1.4 * sums + 25 * counts + rng.normal(0, 5, size=sums.shape) * (counts > 0)
    model = ContextTokens.fit(sums, counts, measured)
    assert model.scale == pytest.approx(1.4, abs=0.01)
    assert model.per_source == pytest.approx(25, abs=2)
    assert ContextTokens.from_dict(model.to_dict()) == model
    assert ContextTokens.from_dict(None) is None
    # One question: its own chunks, at each budget; none read, nothing paid.
    assert model.for_probe([100, 200], (0, 1, 3)) == pytest.approx(
        [0, model.scale * 100 + model.per_source, model.scale * 300 + 2 * model.per_source]
    )
    # Chunks all of a size: the columns are collinear, and no coefficient goes below zero.
    same = probe_sums([[100] * 20] * 10, (0, 1, 3, 8, 20))
    flat = ContextTokens.fit(*same, 130 * same[1] + rng.normal(0, 1, size=same[1].shape))
    assert min(flat.scale, flat.per_source) >= 0
    assert flat.for_probe([100] * 3, (3,))[0] == pytest.approx(390, rel=0.02)
    with pytest.raises(ConfigError, match="nothing to fit"):
        ContextTokens.fit(sums[:, :1], counts[:, :1], measured[:, :1])
