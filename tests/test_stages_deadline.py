"""The answer deadline's arithmetic (``AnswerClock``): the time generation must end by, the
time budget a generate call gets, equal windows, whether a feedback round fits, which sources
can be read in time, and that none of it applies without a deadline or a measured speed.

The clock is a stand-in (``perf_counter`` set by the test), so nothing here depends on timing.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from fathom.bench.support.hits import make_hit
from fathom.core.base import Draft, Hit
from fathom.core.config import GeneratorConfig
from fathom.stages import deadline
from fathom.stages.deadline import AnswerClock
from fathom.stages.generate.base import BaseGenerator
from fathom.stages.records import Trace


class FakeClock:
    """``time`` for the deadline module: ``perf_counter()`` returns ``t`` (seconds)."""

    def __init__(self, t: float = 100.0) -> None:
        self.t = t

    def perf_counter(self) -> float:
        return self.t


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(deadline, "time", fake)
    return fake


class Reader(BaseGenerator):
    """A stand-in generator that reads ``ms_per_token`` per prompt token (None: unknown), with
    prompts of ``base + per_source`` tokens per source; ``measured`` is the speed a
    ``measure_prefill`` finds (None: it cannot measure)."""

    name = "reader"

    def __init__(
        self,
        ms_per_token: float | None = None,
        *,
        measured: float | None = None,
        supports_deadline: bool = True,
        base: int = 0,
        per_source: int = 100,
    ) -> None:
        super().__init__(GeneratorConfig())
        self.ms_per_token = ms_per_token
        self.measured = measured
        self.supports_deadline = supports_deadline  # type: ignore[misc]
        self.base, self.per_source = base, per_source
        self.replayed = 0.0
        self.measured_with: list[tuple[str, int]] = []

    @property
    def replayed_ms(self) -> float:
        return self.replayed

    def prompt_tokens(self, question: str, hits: list[Hit]) -> int:
        return self.base + self.per_source * len(hits)

    def expected_prefill_ms(self, prompt_tokens: int) -> float | None:
        return None if self.ms_per_token is None else prompt_tokens * self.ms_per_token

    def measure_prefill(self, question: str, hits: list[Hit]) -> float | None:
        self.measured_with.append((question, len(hits)))
        if self.measured is None:
            return None
        self.ms_per_token = self.measured
        return self.measured * self.prompt_tokens(question, hits[:1])


def answer_clock(deadline_ms: float, gen: BaseGenerator | None = None) -> AnswerClock:
    c = AnswerClock(GeneratorConfig(deadline_ms=deadline_ms))
    if gen is not None:
        c.begin(gen)
    return c


def trace_at(total_ms: float = 0.0, rounds: list[tuple[int, float]] = ()) -> Trace:
    """A trace whose stages took ``total_ms``, with feedback rounds of (k, generate ms)."""
    t = Trace(question="q", collection="c")
    if total_ms:
        t.add_ms("retrieve", total_ms)
    t.rounds = [{"k": k, "generate_ms": ms} for k, ms in rounds]
    return t


def hits(n: int) -> list[Hit]:
    return [make_hit(i + 1, f"source text {i + 1}") for i in range(n)]


# ---------------------------------------------------------------------------------------------
# Without a deadline
# ---------------------------------------------------------------------------------------------


def test_without_a_deadline_nothing_is_held(clock: FakeClock) -> None:
    """``deadline_ms = 0``: no end time, no time budget, all windows open, every round fits,
    every source is read."""
    c = answer_clock(0, Reader(ms_per_token=1000.0))
    t = trace_at(5000.0, rounds=[(4, 10_000.0)])
    assert not c.held
    assert c.until(t) is None
    assert c.time_budget(t) == {}
    assert c.windows(None, 3, 4) == [None, None, None]
    assert c.round_fits(t, 4, 8)
    kept = hits(5)
    assert c.fit_in_time("q", kept, c.until(t), t) == kept
    assert t.notices == []


def test_the_deadline_is_read_from_the_settings_as_each_answer_runs() -> None:
    """The clock reads ``deadline_ms`` from its settings when asked, not when it was made."""
    settings = SimpleNamespace(deadline_ms=0.0)
    c = AnswerClock(settings)
    assert not c.held
    settings.deadline_ms = 1500.0
    assert c.held and c.deadline_ms == 1500.0


# ---------------------------------------------------------------------------------------------
# until, the reserve, now and the time budget
# ---------------------------------------------------------------------------------------------


def test_until_is_the_deadline_less_the_time_taken_and_the_reserve(clock: FakeClock) -> None:
    """Generation must end ``deadline − stages timed so far − reserve for scoring`` from now."""
    c = answer_clock(1000)
    assert c.reserve_ms == 25.0  # before any answer was scored
    assert c.until(trace_at(200.0)) == pytest.approx(100.0 + (1000 - 200 - 25) / 1000)


def test_the_reserve_is_the_longest_recent_scoring(clock: FakeClock) -> None:
    """The time kept back is the most any of the last 64 scorings took."""
    c = answer_clock(1000)
    c.scored(40.0)
    assert c.reserve_ms == 40.0
    c.scored(10.0)
    assert c.reserve_ms == 40.0
    for _ in range(64):
        c.scored(5.0)
    assert c.reserve_ms == 5.0
    assert c.until(trace_at(0.0)) == pytest.approx(100.0 + (1000 - 5) / 1000)


def test_time_budget_is_the_time_left_before_the_end(clock: FakeClock) -> None:
    """A generate call gets the milliseconds between now and ``until``; none when it has
    passed already (never a negative budget)."""
    c = answer_clock(1000, Reader())
    t = trace_at(300.0)
    assert c.time_budget(t) == {"time_budget_ms": pytest.approx(1000 - 300 - 25)}
    assert c.time_budget(t, until=100.25) == {"time_budget_ms": pytest.approx(250.0)}
    assert c.time_budget(t, until=99.0) == {"time_budget_ms": 0.0}
    assert c.time_budget(trace_at(2000.0)) == {"time_budget_ms": 0.0}


def test_a_backend_that_cannot_stop_gets_no_time_budget_and_the_report_says_so(
    clock: FakeClock,
) -> None:
    """A generator without ``supports_deadline`` answers in full; the notice names it."""
    c = answer_clock(1500, Reader(supports_deadline=False))
    t = trace_at(100.0)
    assert c.time_budget(t) == {}
    assert len(t.notices) == 1
    assert "generator.deadline_ms = 1500" in t.notices[0]
    assert "reader answered in full" in t.notices[0]


def test_replayed_generation_time_counts_on_the_clock(clock: FakeClock) -> None:
    """Time an evaluation cache replayed since the answer began is added to ``now``, so the
    time budget shrinks by it; replay before the answer began does not count."""
    gen = Reader()
    gen.replayed = 500.0
    c = answer_clock(1000, gen)
    assert c.now() == pytest.approx(100.0)
    gen.replayed = 800.0  # 300 ms replayed during this answer
    assert c.now() == pytest.approx(100.3)
    assert c.time_budget(trace_at(0.0)) == {"time_budget_ms": pytest.approx(1000 - 25 - 300)}


# ---------------------------------------------------------------------------------------------
# Windows
# ---------------------------------------------------------------------------------------------


def test_windows_split_the_time_left_into_equal_parts(clock: FakeClock) -> None:
    """The first n of ``parts`` equal windows end one step apart from now."""
    c = answer_clock(1000)
    clock.t = 10.0
    assert c.windows(14.0, 2, 4) == pytest.approx([11.0, 12.0])
    assert c.windows(14.0, 4, 4) == pytest.approx([11.0, 12.0, 13.0, 14.0])
    assert c.windows(13.0, 3, 3) == pytest.approx([11.0, 12.0, 13.0])


def test_windows_with_no_parts_end_at_the_deadline(clock: FakeClock) -> None:
    """``parts = 0`` counts as one window: the whole time left."""
    clock.t = 10.0
    assert answer_clock(1000).windows(12.0, 1, 0) == pytest.approx([12.0])


# ---------------------------------------------------------------------------------------------
# round_fits
# ---------------------------------------------------------------------------------------------


def test_a_round_is_expected_to_take_the_last_pass_scaled_by_depth() -> None:
    """The next round at ``new_k`` is expected to take the rounds at the last depth (one pass)
    times ``new_k / k``, plus the reserve: here (300 + 200) · 8 / 4 + 25 = 1025 ms, so it fits
    exactly when 975 ms have been spent of 2000, and not a millisecond later."""
    c = answer_clock(2000)
    rounds = [(2, 100.0), (4, 300.0), (4, 200.0)]
    assert c.round_fits(trace_at(975.0, rounds), 4, 8)
    assert not c.round_fits(trace_at(976.0, rounds), 4, 8)


def test_a_round_after_no_retrieval_scales_from_one() -> None:
    """From k = 0 the last pass scales by ``new_k / 1``: 100 ms · 2 + 25 = 225 ms."""
    c = answer_clock(1000)
    assert c.round_fits(trace_at(775.0, [(0, 100.0)]), 0, 2)
    assert not c.round_fits(trace_at(776.0, [(0, 100.0)]), 0, 2)


def test_a_round_with_no_generation_timed_needs_only_the_reserve() -> None:
    """No round timed yet: the round is expected to need the reserve only."""
    c = answer_clock(1000)
    assert c.round_fits(trace_at(975.0), 4, 8)
    assert not c.round_fits(trace_at(976.0), 4, 8)


# ---------------------------------------------------------------------------------------------
# Which sources can be read in time
# ---------------------------------------------------------------------------------------------


def test_sources_are_kept_while_they_can_be_read_in_time(clock: FakeClock) -> None:
    """The longest best-first prefix whose prompt reads before ``until``: at 1 ms per token
    and 100 tokens per source, 1000 ms read 10 of 15 sources."""
    clock.t = 0.0
    c = answer_clock(5000, Reader(ms_per_token=1.0))
    kept = hits(15)
    t = trace_at()
    assert c.fit_in_time("q", kept, 1.0, t) == kept[:10]
    assert c.fit_in_time("q", kept, 0.9999, t) == kept[:9]
    assert c.fit_in_time("q", kept[:7], 1.0, t) == kept[:7]
    assert c.fit_in_time("q", kept, 1.4, t) == kept[:14]
    assert c.fit_in_time("q", kept, 0.1, t) == kept[:1]
    assert c.fit_in_time("q", kept, 0.05, t) == []
    assert t.notices == []  # fit_in_time itself says nothing


def test_the_time_already_spent_counts_against_reading(clock: FakeClock) -> None:
    """Reading must end by ``until`` from now: later, fewer sources fit."""
    c = answer_clock(5000, Reader(ms_per_token=1.0))
    clock.t = 0.5
    assert len(c.fit_in_time("q", hits(15), 1.0, trace_at())) == 5


def test_without_a_known_speed_every_source_is_kept(clock: FakeClock) -> None:
    """A generator that cannot tell its prompt speed (nor measure it) reads everything."""
    clock.t = 0.0
    gen = Reader(ms_per_token=None, measured=None)
    c = answer_clock(5000, gen)
    kept = hits(15)
    t = trace_at()
    assert c.fit_in_time("q", kept, 0.001, t) == kept
    assert gen.measured_with == [("q", 15)]
    assert t.notices == []


def test_an_unmeasured_speed_is_measured_once_first(clock: FakeClock) -> None:
    """A generator that can measure itself but has not is measured, once, and the report
    says so; the measured speed then decides."""
    clock.t = 0.0
    gen = Reader(ms_per_token=None, measured=2.0)
    c = answer_clock(5000, gen)
    kept = hits(15)
    t = trace_at()
    assert c.fit_in_time("q", kept, 1.0, t) == kept[:5]  # 2 ms · 100 tokens per source
    assert c.fit_in_time("q", kept, 1.0, t) == kept[:5]
    assert gen.measured_with == [("q", 15)]
    assert len(t.notices) == 1
    assert t.notices[0].startswith("measured the generator's prompt speed")
    assert "2.00 ms per token" in t.notices[0]


def test_a_prompt_the_generator_cannot_estimate_counts_as_readable(clock: FakeClock) -> None:
    """A generator that knows its speed but gives no estimate for a prompt (None) is not held
    to the deadline for it: every source is kept."""

    class NoEstimate(Reader):
        def expected_prefill_ms(self, prompt_tokens: int) -> float | None:
            return 1.0 if prompt_tokens <= 1 else None

    clock.t = 0.0
    kept = hits(15)
    assert answer_clock(5000, NoEstimate()).fit_in_time("q", kept, 0.001, trace_at()) == kept


def test_a_zero_speed_keeps_every_source(clock: FakeClock) -> None:
    """A speed of 0 ms per token is a measure, not "unknown": nothing to read in time, all
    kept, and no measuring."""
    clock.t = 0.0
    gen = Reader(ms_per_token=0.0, measured=5.0)
    kept = hits(15)
    assert answer_clock(5000, gen).fit_in_time("q", kept, 0.001, trace_at()) == kept
    assert gen.measured_with == []


def test_no_end_or_no_sources_keeps_what_there_is(clock: FakeClock) -> None:
    """No ``until`` (no deadline) or nothing to read: returned as given."""
    c = answer_clock(5000, Reader(ms_per_token=1000.0))
    kept = hits(3)
    assert c.fit_in_time("q", kept, None, trace_at()) == kept
    assert c.fit_in_time("q", [], 0.0, trace_at()) == []


def test_readable_says_how_many_sources_it_left_out(clock: FakeClock) -> None:
    """Some left out: the notice counts them; all left out: it says so without a count;
    none left out: no notice."""
    clock.t = 0.0
    c = answer_clock(5000, Reader(ms_per_token=1.0))
    kept = hits(15)

    t = trace_at()
    assert c.readable("q", kept, 1.0, t) == kept[:10]
    assert t.notices == [
        "sources left out (5 of 15): reading them would pass the 5000 ms deadline "
        "(generator.deadline_ms)"
    ]

    t = trace_at()
    assert c.readable("q", kept, 0.05, t) == []
    assert t.notices == [
        "sources left out: reading them would pass the 5000 ms deadline (generator.deadline_ms)"
    ]

    t = trace_at()
    assert c.readable("q", kept[:3], 1.0, t) == kept[:3]
    assert t.notices == []


# ---------------------------------------------------------------------------------------------
# note_cut
# ---------------------------------------------------------------------------------------------


def draft(finish_reason: str, completion_tokens: int = 37) -> Draft:
    return Draft(
        text="Paris.",
        citations=(),
        prompt_tokens=100,
        completion_tokens=completion_tokens,
        backend="reader",
        model="m",
        finish_reason=finish_reason,
    )


def test_an_answer_cut_by_the_deadline_is_noted() -> None:
    """Finish reason "deadline": the report says where the answer was cut; otherwise nothing."""
    c = answer_clock(1200)
    t = trace_at()
    c.note_cut(draft("stop"), t)
    assert t.notices == []
    c.note_cut(draft("deadline", 37), t)
    assert t.notices == [
        "answer cut at the 1200 ms deadline (generator.deadline_ms) after 37 tokens"
    ]
