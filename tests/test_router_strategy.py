"""Retrieval strategies per query type and the question-dependent adjustments."""

from __future__ import annotations

import dataclasses
import typing

import pytest
from fathom.core.base import QueryType
from fathom.core.errors import ConfigError
from fathom.router.strategy import STRATEGIES, Strategy, strategy_for, targets_whole_document


def test_every_query_type_has_a_strategy() -> None:
    assert set(STRATEGIES) == set(typing.get_args(QueryType))
    for qtype, s in STRATEGIES.items():
        assert s.query_type == qtype
        assert s.k_min <= s.k_default <= s.k_max and s.budget_tokens > 0


def test_defaults() -> None:
    f, s, r, m = (STRATEGIES[t] for t in ("factual", "summarization", "reasoning", "multi_hop"))
    assert (f.k_default, f.k_min, f.k_max, f.budget_tokens, f.rerank) == (4, 1, 8, 1000, True)
    assert (s.k_default, s.k_min, s.k_max, s.budget_tokens) == (12, 8, 20, 3000)
    assert not s.map_reduce  # only switched on per question
    assert (r.k_default, r.k_min, r.k_max, r.budget_tokens) == (6, 3, 12, 2000)
    assert (m.k_default, m.k_min, m.k_max, m.budget_tokens) == (8, 4, 16, 2500)
    assert m.iterative and m.max_hops == 2
    assert not (f.iterative or s.iterative or r.iterative)


@pytest.mark.parametrize(
    "question",
    [
        "Summarize the document.",
        "Summarise this report",
        "What are the key findings?",
        "What are the key findings of the paper?",
        "What is this paper about?",
        "Give me an overview of the annual report.",
        "Give a one-paragraph summary of the merger agreement.",
        "Walk me through the main sections of the safety manual.",
        "Provide a section-by-section summary of the bylaws.",
        "Could you sum up the policy on remote work?",
        "TL;DR?",
    ],
)
def test_map_reduce_for_whole_document_summaries(question: str) -> None:
    assert targets_whole_document(question)
    s = strategy_for("summarization", question)
    assert s.map_reduce and "map-reduce" in s.describe()


@pytest.mark.parametrize(
    "question",
    [
        "Summarize section 3.",
        "summarize chapter 2",
        "Summarize the methodology section.",
        "Give me a short overview of the troubleshooting chapter.",
        "Summarize what the guideline says about hypertension in older adults.",
        "What are the key takeaways on inflation from the report?",
        "Sum up the findings on patient adherence.",
        "Give an overview of the risk factors disclosed in the 10-K.",
        "Summarize the results shown in Table 3.",
        "What does the executive summary say?",
    ],
)
def test_no_map_reduce_for_scoped_summaries(question: str) -> None:
    assert not targets_whole_document(question)
    s = strategy_for("summarization", question)
    assert not s.map_reduce and s == STRATEGIES["summarization"]


def test_other_types_ignore_summary_wording() -> None:
    for qtype in ("factual", "reasoning"):
        assert strategy_for(qtype, "Summarize the document.") is STRATEGIES[qtype]


def test_longer_chains_get_a_third_hop() -> None:
    short = strategy_for("multi_hop", "Where was the founder of Acme born?")
    assert short.max_hops == 2
    long = strategy_for(
        "multi_hop",
        "What was the closing price of the company that bought the startup founded by the "
        "report's author?",
    )
    assert long.max_hops == 3 and long.iterative and "3 hops" in long.describe()


def test_strategy_is_frozen_validated_and_serialisable() -> None:
    s = STRATEGIES["factual"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.k_default = 9  # type: ignore[misc]
    assert s.clamp(0) == 1 and s.clamp(50) == 8 and s.clamp(5) == 5
    assert s.to_dict()["query_type"] == "factual"
    assert s.describe().startswith("factual: k 4 in [1, 8], budget 1000 tokens")
    with pytest.raises(ConfigError, match="k_min"):
        Strategy("factual", 10, 1, 8, 1000)
    with pytest.raises(ConfigError, match="iterative"):
        Strategy("multi_hop", 8, 4, 16, 2500, max_hops=2)
    with pytest.raises(ConfigError, match="no strategy"):
        strategy_for("comparison", "Which is bigger?")  # type: ignore[arg-type]
