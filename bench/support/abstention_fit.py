"""Fitting the extractive answerer's two abstention thresholds (``MIN_COVERAGE``,
``MIN_COVERAGE_UNSURE``: ``stages.generate.kinds.not_answered``) from what its rule reads.

``record`` asks a question in-process, as ``ask`` does (default configuration, extractive
answerer, the depth the shipped policy picks), with the coverage rule switched off and the
feedback loop made to deepen as far as it can, and keeps for every round (every depth the
loop visits) what the rule reads — the share of the question's own weighted words the sources
hold (``shapes.coverage``), whether the reader's span is sure and its margin, the answer kind
and whether it asks what only a picture shows — and what the answer is without the rule:
whether it abstains anyway, its F1, and the feedback scorer's support, which decides whether
the loop goes deeper. ``outcome`` then replays the loop for any pair of thresholds: a round
the rule stops abstains (support 0, so the loop deepens while it may), else it answers as
recorded; the first round whose support clears the feedback threshold, or the last round
there is, gives the answer. ``grid_search`` picks the pair that abstains on the most
unanswerable questions while abstaining on at most ``max_answerable`` of the answerable ones.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

# The thresholds as shipped when this fit was written (the rule's own constants are read at
# run time by ``shipped_pair``).
COVERAGE_GRID = tuple(round(0.05 * i, 2) for i in range(0, 19))  # 0.00 … 0.90
UNSURE_GRID = tuple(round(0.05 * i, 2) for i in range(0, 21))  # 0.00 … 1.00
MAX_ANSWERABLE = 0.10


def rule_module() -> Any:
    """The module that holds the rule's thresholds (``stages.generate.kinds``; before it,
    ``stages.generate.extractive``)."""
    from fathom.stages.generate import extractive

    try:
        from fathom.stages.generate import kinds
    except ImportError:
        return extractive
    return kinds if hasattr(kinds, "MIN_COVERAGE") else extractive


def shipped_pair() -> tuple[float, float]:
    """``(MIN_COVERAGE, MIN_COVERAGE_UNSURE)`` as this tree's extractive answerer has them."""
    rule = rule_module()
    return float(rule.MIN_COVERAGE), float(rule.MIN_COVERAGE_UNSURE)


# ---------------------------------------------------------------------------------------------
# Recording the features, in-process
# ---------------------------------------------------------------------------------------------


@contextlib.contextmanager
def rule_off() -> Iterator[None]:
    """The coverage rule switched off (both thresholds 0) for the ``with`` block; the rule's
    picture test (no sure span, a question about what only a picture shows) stays."""
    rule = rule_module()
    saved = rule.MIN_COVERAGE, rule.MIN_COVERAGE_UNSURE
    rule.MIN_COVERAGE, rule.MIN_COVERAGE_UNSURE = 0.0, 0.0
    try:
        yield
    finally:
        rule.MIN_COVERAGE, rule.MIN_COVERAGE_UNSURE = saved


class Recorder:
    """Wraps an engine's extractive generator and the rule: each ``generate`` call appends one
    round's features and its draft's outcome to ``rounds``. ``restore()`` undoes it."""

    def __init__(self, generator: Any) -> None:
        self.generator = generator
        self.rounds: list[dict[str, Any]] = []
        self._generate = generator.generate
        generator.generate = self.generate
        self.rule = rule_module()
        if hasattr(self.rule, "not_answered"):  # the rule as a function of its module
            self._rule = self.rule.not_answered
            self.rule.not_answered = self.not_answered
        else:  # the rule as the generator's method
            self._rule = generator._not_answered
            generator._not_answered = self.not_answered

    def restore(self) -> None:
        self.generator.__dict__.pop("generate", None)
        self.generator.__dict__.pop("_not_answered", None)
        if hasattr(self.rule, "not_answered"):
            self.rule.not_answered = self._rule

    def not_answered(self, question: str, kind: Any, span: Any, hits: list[Any], *a, **kw) -> bool:
        from fathom.stages.generate.shapes import coverage

        if hits:
            reader = kw.get("reader", a[0] if a else None)
            if reader is None:
                reader = self.generator._reader() is not None
            self.rounds[-1].update(
                checked=True,
                coverage=round(float(coverage(question, hits)), 6),
                sure=bool(span is not None and span.sure),
                margin=None if span is None else round(float(span.margin), 4),
                kind=kind.name,
                visual=bool(kind.visual),
                reader=bool(reader),
            )
        return self._rule(question, kind, span, hits, *a, **kw)

    def generate(self, question: str, hits: list[Any], *args: Any, **kwargs: Any) -> Any:
        from fathom.feedback.judges import is_abstention

        self.rounds.append({"checked": False, "k": len(hits)})
        draft = self._generate(question, hits, *args, **kwargs)
        span = draft.span
        self.rounds[-1].update(
            abstained=bool(draft.abstained or is_abstention(draft.text)),
            short=span["text"] if span else draft.text,
        )
        return draft


def record(engine: Any, question: str, golds: Sequence[str]) -> list[dict[str, Any]]:
    """Every round of ``question`` on ``engine`` with the rule off and the loop deepening as
    far as it may: the rule's features, and the answer's abstention, F1 against ``golds`` and
    support without the rule. ``engine``'s generator must be the extractive answerer, and its
    ``cfg.feedback.threshold`` above 1 (``forced_engine``)."""
    from fathom.feedback.judges import f1

    recorder = Recorder(engine.parts.generator)
    try:
        with rule_off():
            answer = engine.ask(question)
    finally:
        recorder.restore()
    rounds = answer.trace.rounds
    out = []
    generated = iter(recorder.rounds)
    for r in rounds:
        # a summary or a metadata answer is no generate call: the rule never reads it
        g = next(generated, None) if len(recorder.rounds) == len(rounds) else None
        g = dict(g) if g is not None else {"checked": False, "abstained": bool(r["abstained"])}
        if "short" not in g:
            g["short"] = r["answer"]
        g["support"] = float(r["confidence"])
        g["f1"] = round(float(f1(g.pop("short"), list(golds), abstained=g["abstained"])), 4)
        g["k"] = r["k"]
        out.append(g)
    return out


def forced_engine(cfg: Any, collection: Any) -> Any:
    """An engine whose feedback loop deepens every answer as far as it may (a support score is
    at most 1), so ``record`` sees every depth the loop could visit."""
    from fathom.stages.pipeline import Engine

    cfg.feedback.threshold = 1.01  # past the config's bound on purpose: never satisfied
    return Engine(cfg, collection)


# ---------------------------------------------------------------------------------------------
# Replaying the rule for a pair of thresholds
# ---------------------------------------------------------------------------------------------


def fires(r: dict[str, Any], min_coverage: float, min_unsure: float) -> bool:
    """Whether the rule, at these thresholds, abstains on round ``r``
    (``ExtractiveGenerator._not_answered``)."""
    if not r.get("checked") or r.get("kind") == "summary":
        return False
    held = r["coverage"]
    if held < min_coverage:
        return True
    if not r.get("reader"):
        return False
    return not r["sure"] and (held < min_unsure or bool(r.get("visual")))


def outcome(
    rounds: Sequence[dict[str, Any]],
    min_coverage: float,
    min_unsure: float,
    feedback_threshold: float,
    unanswerable: bool,
) -> tuple[bool, float]:
    """``(abstained, F1)`` of a question whose recorded ``rounds`` are replayed with these
    thresholds and the feedback loop's ``feedback_threshold``."""
    for i, r in enumerate(rounds):
        stopped = fires(r, min_coverage, min_unsure)
        abstained = stopped or bool(r["abstained"])
        support = 0.0 if stopped else float(r["support"])
        if i == len(rounds) - 1 or support >= feedback_threshold:
            if stopped:
                return True, 1.0 if unanswerable else 0.0
            return abstained, float(r["f1"])
    return False, 0.0  # no round: nothing was generated


@dataclass(frozen=True, slots=True)
class Point:
    """The pooled rates of one threshold pair."""

    min_coverage: float
    min_unsure: float
    unanswerable_abstained: float
    answerable_abstained: float
    answerable_f1: float

    def to_dict(self) -> dict[str, float]:
        return {
            "min_coverage": self.min_coverage,
            "min_coverage_unsure": self.min_unsure,
            "unanswerable_abstained": round(self.unanswerable_abstained, 4),
            "answerable_abstained": round(self.answerable_abstained, 4),
            "answerable_f1": round(self.answerable_f1, 4),
        }


def evaluate(
    rows: Sequence[dict[str, Any]], min_coverage: float, min_unsure: float, threshold: float
) -> Point:
    """The pooled rates of ``rows`` (``{"unanswerable", "rounds"}``) at one threshold pair."""
    n_un = n_an = ab_un = ab_an = 0
    f1_an = 0.0
    for row in rows:
        un = bool(row["unanswerable"])
        abstained, f1 = outcome(row["rounds"], min_coverage, min_unsure, threshold, un)
        if un:
            n_un += 1
            ab_un += abstained
        else:
            n_an += 1
            ab_an += abstained
            f1_an += f1
    return Point(
        min_coverage,
        min_unsure,
        ab_un / n_un if n_un else float("nan"),
        ab_an / n_an if n_an else float("nan"),
        f1_an / n_an if n_an else float("nan"),
    )


def grid_search(
    rows: Sequence[dict[str, Any]],
    threshold: float,
    coverages: Iterable[float] = COVERAGE_GRID,
    unsures: Iterable[float] = UNSURE_GRID,
    max_answerable: float = MAX_ANSWERABLE,
) -> tuple[Point | None, list[Point]]:
    """``(chosen, every point)``: the pair with the most unanswerable questions abstained on
    among those abstaining on at most ``max_answerable`` of the answerable ones (ties: fewer
    answerable abstentions, then the higher answerable F1, then the smaller thresholds);
    None when no pair meets the bound."""
    unsures = tuple(unsures)
    points = [evaluate(rows, c, u, threshold) for c in coverages for u in unsures]
    allowed = [p for p in points if p.answerable_abstained <= max_answerable + 1e-12]
    if not allowed:
        return None, points
    chosen = max(
        allowed,
        key=lambda p: (
            p.unanswerable_abstained,
            -p.answerable_abstained,
            p.answerable_f1,
            -p.min_coverage,
            -p.min_unsure,
        ),
    )
    return chosen, points


def frontier(points: Sequence[Point], max_answerable: float = MAX_ANSWERABLE) -> list[Point]:
    """For each ``MIN_COVERAGE``, the ``MIN_COVERAGE_UNSURE`` that abstains on the most
    unanswerable questions within the bound (the curve the report shows)."""
    best: dict[float, Point] = {}
    for p in points:
        if p.answerable_abstained > max_answerable + 1e-12:
            continue
        b = best.get(p.min_coverage)
        if b is None or (p.unanswerable_abstained, -p.answerable_abstained) > (
            b.unanswerable_abstained,
            -b.answerable_abstained,
        ):
            best[p.min_coverage] = p
    return [best[c] for c in sorted(best)]
