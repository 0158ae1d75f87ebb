"""The feedback loop's rules: how deep the next round goes, when a round is wanted, and each way
``FeedbackLoop.run`` stops (confident, no deeper, no sources, max rounds, deadline, same
sources), with the attempts made in order of depth."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fathom.core.config import FeedbackConfig
from fathom.feedback.loop import FeedbackLoop, LoopResult


@dataclass(frozen=True)
class Conf:
    score: float


def make_loop(**kw: Any) -> FeedbackLoop:
    settings = {"enabled": True, "threshold": 0.5, "max_rounds": 2, "growth": 2.0} | kw
    return FeedbackLoop(**settings)


class Attempts:
    """A stand-in for the engine's ``attempt(k, escalated)``: the confidence at each depth
    comes from ``scores`` (``default`` elsewhere); every call is recorded in ``calls``."""

    def __init__(
        self, scores: dict[int, float] | None = None, default: float = 0.1, used: bool = True
    ) -> None:
        self.scores = scores or {}
        self.default = default
        self.used = used
        self.calls: list[tuple[int, bool]] = []

    def __call__(self, k: int, escalated: bool) -> tuple[list[Any], Any, Any]:
        self.calls.append((k, escalated))
        used = [f"source {i}" for i in range(k)] if self.used else []
        return used, f"draft at k = {k}", Conf(self.scores.get(k, self.default))


def run(
    loop: FeedbackLoop,
    k: int,
    attempt: Attempts,
    *,
    deepest: int = 40,
    k_min: int = 1,
    k_max: int = 20,
    fits: bool = True,
    **kw: Any,
) -> LoopResult:
    return loop.run(
        k,
        attempt,
        deepest=deepest,
        k_min=k_min,
        k_max=k_max,
        round_fits=lambda a, b: fits,
        **kw,
    )


# ---------------------------------------------------------------------------------------------
# next_depth and wants_deeper
# ---------------------------------------------------------------------------------------------


def test_next_depth_multiplies_k_by_the_growth_rounded_up() -> None:
    """The next depth is ``ceil(k · growth)``: k = 4 doubles to 8, k = 3 at growth 1.5 is 5."""
    assert make_loop(growth=2.0).next_depth(4, k_min=1, deepest=40) == 8
    assert make_loop(growth=1.5).next_depth(3, k_min=1, deepest=40) == 5
    assert make_loop(growth=3.0).next_depth(5, k_min=1, deepest=40) == 15


def test_next_depth_is_always_at_least_one_deeper() -> None:
    """A growth too small to move k (1.0, 1.1 at k = 2) still goes one deeper."""
    assert make_loop(growth=1.0).next_depth(4, k_min=1, deepest=40) == 5
    assert make_loop(growth=1.1).next_depth(2, k_min=1, deepest=40) == 3


def test_next_depth_from_no_retrieval_grows_from_one() -> None:
    """From k = 0 the growth applies to 1: k = 0 at growth 2 goes to 2, not to 0 or 1."""
    assert make_loop(growth=2.0).next_depth(0, k_min=0, deepest=40) == 2
    assert make_loop(growth=3.0).next_depth(0, k_min=0, deepest=40) == 3


def test_next_depth_is_at_least_the_strategys_k_min() -> None:
    """A deeper round never goes below the strategy's minimum depth."""
    assert make_loop(growth=2.0).next_depth(1, k_min=6, deepest=40) == 6
    assert make_loop(growth=2.0).next_depth(0, k_min=5, deepest=40) == 5


def test_next_depth_is_clamped_at_the_deepest_allowed_k() -> None:
    """The next depth never passes the candidates there are, however the growth or k_min
    would reach past them; at the deepest k it stays there."""
    loop = make_loop(growth=2.0)
    assert loop.next_depth(8, k_min=1, deepest=10) == 10
    assert loop.next_depth(9, k_min=1, deepest=10) == 10
    assert loop.next_depth(10, k_min=1, deepest=10) == 10
    assert loop.next_depth(1, k_min=12, deepest=10) == 10
    assert loop.next_depth(5, k_min=1, deepest=10) == 10  # exactly 2 · 5


def test_a_round_is_wanted_below_the_threshold_only() -> None:
    """Confidence below ``threshold`` wants a deeper round; at or above it the answer stands."""
    loop = make_loop(threshold=0.5)
    args = {"rounds": 0, "k": 4, "deepest": 40, "k_max": 20, "used": ["s"]}
    assert loop.wants_deeper(0.49, **args)
    assert not loop.wants_deeper(0.5, **args)
    assert not loop.wants_deeper(0.9, **args)


def test_a_disabled_loop_never_wants_a_round() -> None:
    """With ``enabled`` off even a confidence of 0 keeps the first answer."""
    loop = make_loop(enabled=False)
    assert not loop.wants_deeper(0.0, rounds=0, k=4, deepest=40, k_max=20, used=["s"])


def test_no_round_is_wanted_after_max_rounds() -> None:
    """At most ``max_rounds`` rounds: the last one allowed is wanted, the next is not."""
    loop = make_loop(max_rounds=2)
    assert loop.wants_deeper(0.1, rounds=1, k=4, deepest=40, k_max=20, used=["s"])
    assert not loop.wants_deeper(0.1, rounds=2, k=4, deepest=40, k_max=20, used=["s"])


def test_no_round_is_wanted_at_the_deepest_k_or_twice_k_max() -> None:
    """No deeper round from the last candidate, nor from twice the strategy's k_max."""
    loop = make_loop()
    used = ["s"]
    assert loop.wants_deeper(0.1, rounds=0, k=9, deepest=10, k_max=20, used=used)
    assert not loop.wants_deeper(0.1, rounds=0, k=10, deepest=10, k_max=20, used=used)
    assert loop.wants_deeper(0.1, rounds=0, k=7, deepest=40, k_max=4, used=used)
    assert not loop.wants_deeper(0.1, rounds=0, k=8, deepest=40, k_max=4, used=used)


def test_no_round_is_wanted_when_no_retrieved_source_reached_the_generator() -> None:
    """Sources retrieved (k > 0) but none used: a deeper k cannot change that. Without
    retrieval (k = 0) nothing was to be used, so a round is still wanted."""
    loop = make_loop()
    assert not loop.wants_deeper(0.1, rounds=0, k=4, deepest=40, k_max=20, used=[])
    assert loop.wants_deeper(0.1, rounds=0, k=0, deepest=40, k_max=20, used=[])


def test_from_config_reads_the_feedback_section_and_its_override() -> None:
    """``from_config`` takes every rule from ``[feedback]``; ``enabled`` overrides when given."""
    fb = FeedbackConfig(enabled=False, threshold=0.3, max_rounds=4, growth=1.5)
    assert FeedbackLoop.from_config(fb) == FeedbackLoop(False, 0.3, 4, 1.5)
    assert FeedbackLoop.from_config(fb, enabled=True) == FeedbackLoop(True, 0.3, 4, 1.5)
    on = FeedbackConfig(enabled=True)
    assert FeedbackLoop.from_config(on, enabled=False).enabled is False


def test_reason_names_the_new_depth_and_the_threshold() -> None:
    """The decision's reason keeps the policy's and adds the depth feedback chose."""
    text = make_loop(threshold=0.45).reason("strategy default", 8)
    assert text == "strategy default; feedback deepened to k = 8 (confidence was below 0.45)"


# ---------------------------------------------------------------------------------------------
# run: the attempts and each way the loop stops
# ---------------------------------------------------------------------------------------------


def test_a_confident_first_answer_stands() -> None:
    """A first answer at or above the threshold is kept: one attempt, no round, no stop."""
    attempt = Attempts(default=0.9)
    result = run(make_loop(), 4, attempt)
    assert attempt.calls == [(4, False)]
    assert (result.k, result.rounds, result.stopped, result.stopped_at) == (4, 0, "", 0)
    assert result.draft == "draft at k = 4" and result.conf == Conf(0.9)
    assert result.used == [f"source {i}" for i in range(4)]


def test_rounds_deepen_in_order_until_confident() -> None:
    """Each round is attempted deeper than the last (escalated), and the loop stops at the
    first confident answer, which is the one returned."""
    attempt = Attempts(scores={2: 0.1, 4: 0.2, 8: 0.8})
    result = run(make_loop(max_rounds=5), 2, attempt)
    assert attempt.calls == [(2, False), (4, True), (8, True)]
    assert (result.k, result.rounds, result.stopped) == (8, 2, "")
    assert result.draft == "draft at k = 8" and result.conf == Conf(0.8)
    assert len(result.used) == 8


def test_rounds_stop_after_max_rounds() -> None:
    """A never-confident answer gets ``max_rounds`` rounds and keeps the last one."""
    attempt = Attempts(default=0.1)
    result = run(make_loop(max_rounds=2, growth=2.0), 1, attempt)
    assert attempt.calls == [(1, False), (2, True), (4, True)]
    assert (result.k, result.rounds, result.stopped) == (4, 2, "")
    assert result.draft == "draft at k = 4"


def test_rounds_stop_when_no_deeper_k_exists() -> None:
    """The last round is clamped to the deepest candidate, and none goes past it."""
    attempt = Attempts(default=0.1)
    result = run(make_loop(max_rounds=10, growth=2.0), 3, attempt, deepest=10)
    assert attempt.calls == [(3, False), (6, True), (10, True)]
    assert (result.k, result.rounds, result.stopped) == (10, 2, "")


def test_rounds_stop_at_twice_k_max() -> None:
    """Once k reaches twice the strategy's k_max no further round runs."""
    attempt = Attempts(default=0.1)
    result = run(make_loop(max_rounds=10, growth=2.0), 2, attempt, k_max=4, deepest=40)
    assert attempt.calls == [(2, False), (4, True), (8, True)]
    assert result.k == 8 and result.rounds == 2


def test_no_round_goes_past_twice_k_max() -> None:
    """A round is never deeper than twice the strategy's k_max, even when the growth from a
    k below it would reach past it."""
    attempt = Attempts(default=0.1)
    result = run(make_loop(max_rounds=10, growth=2.0), 5, attempt, k_max=4, deepest=40)
    assert max(k for k, _ in attempt.calls) <= 8
    assert result.k <= 8


def test_no_round_when_no_source_reached_the_generator() -> None:
    """Sources retrieved but none used: the first answer stands, however low its score."""
    attempt = Attempts(default=0.0, used=False)
    result = run(make_loop(), 4, attempt)
    assert attempt.calls == [(4, False)]
    assert (result.k, result.rounds, result.stopped) == (4, 0, "")


def test_a_round_that_would_pass_the_deadline_does_not_run() -> None:
    """``round_fits`` is asked with the current and the next depth; when the round would not
    fit, the loop stops with "deadline", the depth it would have used, and the last answer."""
    attempt = Attempts(default=0.1)
    asked: list[tuple[int, int]] = []
    escalated: list[tuple[float, int]] = []

    def fits(k: int, new_k: int) -> bool:
        asked.append((k, new_k))
        return new_k <= 4

    result = make_loop(max_rounds=5).run(
        2,
        attempt,
        deepest=40,
        k_min=1,
        k_max=20,
        round_fits=fits,
        on_escalate=lambda score, k: escalated.append((score, k)),
    )
    assert asked == [(2, 4), (4, 8)]
    assert attempt.calls == [(2, False), (4, True)]
    assert (result.k, result.rounds, result.stopped, result.stopped_at) == (4, 1, "deadline", 8)
    assert result.draft == "draft at k = 4"
    assert escalated == [(0.1, 4)]  # the round that did not run was never announced


def test_a_round_that_gives_the_same_sources_does_not_run() -> None:
    """When the deeper k gives the generator the same sources, the loop stops with
    "same sources" at that depth, keeps the current answer and announces no round."""
    attempt = Attempts(default=0.1)
    asked: list[tuple[int, int]] = []
    escalated: list[tuple[float, int]] = []

    def same(k: int, new_k: int) -> bool:
        asked.append((k, new_k))
        return k >= 4

    result = run(
        make_loop(max_rounds=5),
        2,
        attempt,
        same_sources=same,
        on_escalate=lambda score, k: escalated.append((score, k)),
    )
    assert asked == [(2, 4), (4, 8)]
    assert attempt.calls == [(2, False), (4, True)]
    assert (result.k, result.rounds, result.stopped, result.stopped_at) == (
        4,
        1,
        "same sources",
        8,
    )
    assert escalated == [(0.1, 4)]


def test_each_round_is_announced_before_it_runs() -> None:
    """``on_escalate`` gets the confidence that called for the round and its depth, before
    the round's attempt."""
    events: list[tuple[str, float | int]] = []
    scores = {1: 0.1, 2: 0.3, 4: 0.9}

    def attempt(k: int, escalated: bool):
        events.append(("attempt", k))
        return ["s"], None, Conf(scores[k])

    make_loop(max_rounds=5).run(
        1,
        attempt,
        deepest=40,
        k_min=1,
        k_max=20,
        round_fits=lambda a, b: True,
        on_escalate=lambda score, k: events.append(("escalate", score)) or None,
    )
    assert events == [
        ("attempt", 1),
        ("escalate", 0.1),
        ("attempt", 2),
        ("escalate", 0.3),
        ("attempt", 4),
    ]


def test_the_loops_own_time_is_charged_before_each_round_and_at_a_same_sources_stop() -> None:
    """``charge`` gets the decision's time once per round run and once at a stop for the
    same sources (a stop for the deadline charges nothing: no round follows)."""
    charged: list[float] = []
    attempt = Attempts(default=0.1)
    run(make_loop(max_rounds=2), 1, attempt, charge=charged.append)
    assert len(charged) == 2 and all(ms >= 0 for ms in charged)

    charged.clear()
    run(make_loop(), 1, Attempts(), same_sources=lambda a, b: True, charge=charged.append)
    assert len(charged) == 1

    charged.clear()
    run(make_loop(), 1, Attempts(), fits=False, charge=charged.append)
    assert charged == []


def test_a_confident_first_answer_asks_nothing_of_the_deadline() -> None:
    """No round wanted: neither ``round_fits`` nor ``same_sources`` is consulted."""
    asked: list[str] = []
    make_loop().run(
        4,
        Attempts(default=0.9),
        deepest=40,
        k_min=1,
        k_max=20,
        round_fits=lambda a, b: asked.append("fits") or True,
        same_sources=lambda a, b: asked.append("same") or False,
    )
    assert asked == []


# -- the cascade's climb -------------------------------------------------------------------------


@dataclass(frozen=True)
class StatedConf:
    score: float
    abstained: bool = False


@dataclass(frozen=True)
class StatedDraft:
    confidence: float | None


def test_a_climb_goes_up_its_ladder_until_confident() -> None:
    from fathom.feedback.loop import answer_confidence

    loop = FeedbackLoop.climbing((1, 2, 5, 12), threshold=0.5)
    assert loop.next_depth(1, k_min=1, deepest=40) == 2
    assert loop.next_depth(2, k_min=1, deepest=40) == 5
    assert loop.next_depth(5, k_min=1, deepest=3) == 3  # never past the candidates

    def attempt(k: int, escalated: bool):
        # The support score says "sure" at every depth; the answerer's own probability only
        # from k = 5: the climb must read the latter.
        return [f"s{i}" for i in range(k)], StatedDraft(0.9 if k >= 5 else 0.2), StatedConf(1.0)

    result = loop.run(
        1,
        attempt,
        deepest=40,
        k_min=1,
        k_max=20,
        round_fits=lambda a, b: True,
        score=answer_confidence,
    )
    assert (result.k, result.rounds) == (5, 2)
    assert "climbed to k = 5" in loop.reason("cascade", result.k)


def test_a_climb_stops_at_the_top_of_its_ladder_however_unsure() -> None:
    from fathom.feedback.loop import answer_confidence

    loop = FeedbackLoop.climbing((1, 3, 8), threshold=0.9)
    calls: list[int] = []

    def attempt(k: int, escalated: bool):
        calls.append(k)
        return [f"s{i}" for i in range(k)], StatedDraft(0.1), StatedConf(0.1)

    result = loop.run(
        1,
        attempt,
        deepest=40,
        k_min=1,
        k_max=2,
        round_fits=lambda a, b: True,
        score=answer_confidence,
    )
    # k_max (the query type's) does not bound a climb: its ladder does.
    assert calls == [1, 3, 8] and result.k == 8


def test_answer_confidence_reads_the_answerer_then_the_support() -> None:
    from fathom.feedback.loop import answer_confidence

    assert answer_confidence(StatedDraft(0.8), StatedConf(0.3)) == 0.8
    assert answer_confidence(StatedDraft(None), StatedConf(0.3)) == 0.3  # a model states none
    assert answer_confidence(StatedDraft(0.8), StatedConf(0.3, abstained=True)) == 0.0
