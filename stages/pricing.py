"""What a context token costs the generator that will answer, for the depth decision.

``reading_cost`` turns the answering backend into a ``router.cost.ReadingCost``: cents for a
model in the price table (an API), seconds for a language model whose prompt speed is measured
on this machine (llama.cpp, Ollama), and context tokens for the extractive answerer and for a
backend whose speed is unknown. llama.cpp that has never run here measures its speed first, on
the instructions and the first source (about a second with a small model, once per machine:
the measure is kept in FATHOM_HOME).
"""

from __future__ import annotations

from typing import Any

from fathom.core.base import Hit
from fathom.core.config import Config
from fathom.router.cost import ReadingCost


def reading_cost(cfg: Config, gen: Any, question: str, hits: list[Hit]) -> tuple[ReadingCost, bool]:
    """The price of a context token for ``gen`` at ``retrieval.prefer``, and whether the
    prompt speed was measured for it just now; ``question`` and ``hits`` are what a backend
    that can measure its prompt speed measures it on."""
    prefer = cfg.retrieval.prefer
    if not gen.language_model:
        basis = f"the {gen.name} answerer reads at no cost: priced in context tokens"
        return ReadingCost(prefer, basis=basis), False
    entry = cfg.prices.models.get(gen.model)
    if entry and entry[0] > 0:
        currency = cfg.prices.currency
        basis = f"{entry[0]:g} {currency} per million input tokens for {gen.model} (prices.models)"
        return ReadingCost.money(prefer, float(entry[0]), currency, basis), False
    ms = gen.expected_prefill_ms(1000)
    measured_now = False
    if ms is None and hits:
        measured_now = gen.measure_prefill(question, hits[:1]) is not None
        if measured_now:
            gen.forget()  # the answer's prompt is timed (and cached) from a cold start
            ms = gen.expected_prefill_ms(1000)
    if ms is None:
        basis = f"{gen.name}'s prompt speed is not measured yet: priced in context tokens"
        return ReadingCost(prefer, basis=basis), False
    when = "measured now" if measured_now else "measured on this machine"
    basis = f"{ms / 1000:.2g} ms per prompt token for {gen.model}, {when}"
    return ReadingCost.seconds(prefer, ms / 1000.0, basis), measured_now
