"""`ask` and `eval` through a retriever portfolio: the router picks members, `fuse` ranks their
results together, `select` answers from each and keeps one (or lets the model merge them)."""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import replace
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner
from fathom.bench.support.docgen import make_qa_set
from fathom.cli import main
from fathom.core.config import load_config
from fathom.learn.questions import load_questions
from fathom.stages.pipeline import Engine
from fathom.tests.support.generate_support import FakeOllama, PacedGenerator

SCHEMA = json.loads((Path(__file__).parents[1] / "docs" / "answer.schema.json").read_text())


@pytest.fixture(scope="module")
def shared_home(tmp_path_factory: pytest.TempPathFactory, minilm):
    """One collection and portfolio for the module: (home, portfolio info, questions file)."""
    tmp = tmp_path_factory.mktemp("pf")
    home = tmp / "home"
    docs, qfile = make_qa_set(tmp / "qa", n_docs=12)
    out = home / "portfolios" / "qa.json"
    args = ["portfolio", "build", "--docs", str(docs), "--questions", str(qfile), "--size", "3",
            "--top-n", "3", "--split", "all", "--out", str(out)]  # fmt: skip
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FATHOM_HOME", str(home))
        r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    return home, json.loads(out.read_text()), docs, qfile


@pytest.fixture
def built(shared_home, monkeypatch):
    home, info, docs, qfile = shared_home
    monkeypatch.setenv("FATHOM_HOME", str(home))
    return CliRunner(), info, docs, qfile


def _ask(runner, info, question: str, *extra: str) -> dict:
    r = runner.invoke(main, ["ask", info["collection"], question, "--json", "--portfolio", "qa",
                             *extra])  # fmt: skip
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    jsonschema.validate(out, SCHEMA)
    return out


def test_ask_fuse_runs_the_routers_members(built) -> None:
    runner, info, _docs, qfile = built
    q = next(q for q in load_questions(qfile) if q.answers)
    out = _ask(runner, info, q.question, "--generator", "extractive", "--k", "4")
    pf = out["trace"]["portfolio"]
    assert pf["name"] == "qa" and pf["mode"] == "fuse"
    assert len(pf["members"]) == 2 and set(pf["members"]) <= set(info["members"])
    assert "portfolio" in out["trace"]["stages_ms"]
    assert out["sources"] and q.answers[0] in out["answer"]
    # The router's choice is the one its model makes for this question's inputs.
    one = _ask(runner, info, q.question, "--generator", "extractive", "--portfolio-ell", "1")
    assert one["trace"]["portfolio"]["members"] == pf["members"][:1]


def test_ask_select_keeps_the_best_supported_member_answer(built) -> None:
    runner, info, _docs, qfile = built
    q = next(q for q in load_questions(qfile) if q.answers)
    out = _ask(runner, info, q.question, "--generator", "extractive", "--k", "3",
               "--portfolio-mode", "select", "--portfolio-ell", "3")  # fmt: skip
    assert out["trace"]["portfolio"]["mode"] == "select"
    assert len(out["trace"]["rounds"]) == 3  # one answer per member
    assert any("portfolio select: kept the answer from" in n for n in out["trace"]["notices"])
    assert q.answers[0] in out["answer"]


def test_select_deepens_every_member_when_confidence_is_low(built, monkeypatch) -> None:
    """The feedback loop holds in select mode too: a question the documents do not answer gets
    each member answering again from deeper in its own results."""
    runner, info, _docs, _qfile = built
    question = "What is the airspeed velocity of an unladen swallow?"
    args = ("--generator", "extractive", "--k", "1", "--portfolio-mode", "select")
    monkeypatch.setenv("FATHOM_FEEDBACK__ENABLED", "false")
    once = _ask(runner, info, question, *args)
    assert len(once["trace"]["rounds"]) == 2  # one answer per member, no second round
    monkeypatch.setenv("FATHOM_FEEDBACK__ENABLED", "true")
    out = _ask(runner, info, question, *args)
    rounds = out["trace"]["rounds"]
    assert len(rounds) > 2 and len(rounds) % 2 == 0  # whole rounds of both members
    assert [r["k"] for r in rounds][:2] == [1, 1] and rounds[-1]["k"] > 1
    assert "feedback deepened to k = " in out["trace"]["decision"]["reason"]


@pytest.mark.slow
def test_ask_select_with_a_language_model_picks_or_merges(built, monkeypatch) -> None:
    runner, info, _docs, qfile = built
    monkeypatch.setenv("FATHOM_GENERATOR__MAX_TOKENS", "40")
    q = next(q for q in load_questions(qfile) if q.answers)
    out = _ask(runner, info, q.question, "--generator", "llamacpp", "--k", "2",
               "--portfolio-mode", "select")  # fmt: skip
    tr = out["trace"]
    assert len(tr["rounds"]) == 3  # two member answers, then the selection
    assert any("chose among the answers of" in n for n in tr["notices"])
    n_sources = len(out["sources"])
    assert 1 <= n_sources <= 4  # the union of the two members' top 2
    assert all(1 <= c["n"] <= n_sources for c in out["citations"])


def _paced_select(info, qfile, gen: PacedGenerator, **overrides):
    """Ask the first answerable question at k = 2 in select mode under a 60 s deadline, with
    ``gen`` answering; no feedback rounds."""
    cfg = load_config(
        overrides={
            "retrieval.portfolio": "qa",
            "retrieval.portfolio_mode": "select",
            "generator.deadline_ms": 60_000.0,
            "feedback.enabled": False,
            **overrides,
        }
    )
    engine = Engine(cfg, info["collection"], generator=gen)
    q = next(q for q in load_questions(qfile) if q.answers)
    try:
        return engine.ask(q.question, k=2)
    finally:
        engine.close()


def test_select_members_and_the_selection_share_the_deadline(built) -> None:
    """Under a deadline, member i must answer by the end of the (i+1)-th of n+1 equal windows
    of the time left, and the selection by the deadline."""
    _runner, info, _docs, qfile = built
    gen = PacedGenerator()
    t0 = time.perf_counter()
    _paced_select(info, qfile, gen)
    spent = (time.perf_counter() - t0) * 1000  # bounds the time before any call, however slow
    first, second, selection = gen.calls
    step = 60_000.0 / 3
    assert (60_000.0 - spent) / 3 - spent <= first["time_budget_ms"] <= step
    assert 2 * (60_000.0 - spent) / 3 - spent <= second["time_budget_ms"] <= 2 * step
    assert spent < 10_000  # else the bounds above say little
    assert selection["time_budget_ms"] > second["time_budget_ms"]
    assert "Candidate answers" in selection["question"]


def test_one_member_without_a_selection_gets_the_whole_deadline(built) -> None:
    _runner, info, _docs, qfile = built
    gen = PacedGenerator()
    _paced_select(info, qfile, gen, **{"retrieval.portfolio_ell": 1})
    (only,) = gen.calls
    assert only["time_budget_ms"] > 0.95 * 60_000.0


def test_a_members_cut_answer_is_reported_as_the_members(built) -> None:
    """A member answer the deadline cut is named in the report; the final answer, which the
    selection wrote in full, is not reported as cut."""
    _runner, info, _docs, qfile = built
    # 8 words take 48 s: the members' windows end at 20 and 40 s, the selection's at 60 s.
    answer = _paced_select(info, qfile, PacedGenerator(write_ms=6_000.0))
    notices = answer.trace.notices
    assert not any(n.startswith("answer cut at") for n in notices)
    for name in answer.trace.portfolio["members"]:
        assert any(n.startswith(f"member {name}: answer cut at") for n in notices), notices


def test_a_select_pass_is_priced_whole_before_a_feedback_round(built) -> None:
    """Under a deadline a feedback round in select mode starts only if every member's answer
    and the selection, at the deeper k, are expected to fit: the last pass's time, not the
    selection's alone."""
    _runner, info, _docs, _qfile = built
    question = "What is the airspeed velocity of an unladen swallow?"
    overrides = {"retrieval.portfolio": "qa", "retrieval.portfolio_mode": "select"}
    # Each answer says it took 20 s: a pass of two members and the selection takes 60 s.
    gen = PacedGenerator(write_ms=2_500.0)
    free = Engine(load_config(overrides=overrides), info["collection"], generator=gen)
    assert len(free.ask(question, k=1).trace.rounds) > 3  # low confidence: a deeper pass
    free.close()
    # 100 s: the selection's 20 s at twice the depth would fit again; the whole pass's would not.
    overrides["generator.deadline_ms"] = 100_000.0
    engine = Engine(load_config(overrides=overrides), info["collection"], generator=gen)
    answer = engine.ask(question, k=1)
    assert len(answer.trace.rounds) == 3
    engine.close()


class _CountingOllama(FakeOllama):
    """The loopback Ollama, counting how many chat requests it holds at once."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.in_flight = 0
        self.most = 0
        self._count = threading.Lock()

    def reply(self, body):
        with self._count:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
        try:
            time.sleep(0.3)  # long enough for a concurrent request to arrive
            return super().reply(body)
        finally:
            with self._count:
                self.in_flight -= 1


@pytest.mark.slow
def test_select_asks_a_server_for_the_members_answers_at_once(built, monkeypatch) -> None:
    runner, info, _docs, qfile = built
    q = next(q for q in load_questions(qfile) if q.answers)
    with _CountingOllama(models=["x"]) as fake:
        monkeypatch.setenv("FATHOM_GENERATOR__OLLAMA_HOST", fake.host)
        monkeypatch.setenv("FATHOM_GENERATOR__MODEL", "x")
        monkeypatch.setenv("FATHOM_GENERATOR__MAX_TOKENS", "24")
        out = _ask(runner, info, q.question, "--generator", "ollama", "--k", "2",
                   "--portfolio-mode", "select")  # fmt: skip
    assert len(fake.received) == 3  # two members, then the selection
    assert fake.most == 2  # the members' requests overlapped
    selector = fake.received[-1]["messages"][-1]["content"]
    assert "(A) " in selector and "(B) " in selector and "pick one candidate" in selector
    assert len(out["trace"]["rounds"]) == 3


def test_portfolio_errors_are_clear(built, tmp_path: Path) -> None:
    runner, info, _docs, _qfile = built
    r = runner.invoke(main, ["ask", info["collection"], "Who?", "--portfolio", "nope"])
    assert r.exit_code != 0 and "no such file" in r.output
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**info, "collection": "somewhere-else"}))
    r = runner.invoke(main, ["ask", info["collection"], "Who?", "--portfolio", str(other),
                             "--generator", "extractive"])  # fmt: skip
    assert r.exit_code != 0 and "somewhere-else" in r.output
    r = runner.invoke(main, ["ask", info["collection"], "Who?", "--portfolio", "qa",
                             "--portfolio-ell", "4", "--generator", "extractive"])  # fmt: skip
    assert r.exit_code != 0 and "portfolio_ell" in r.output


def test_eval_through_a_portfolio(built, tmp_path: Path) -> None:
    runner, info, _docs, qfile = built
    out = tmp_path / "run"
    r = runner.invoke(main, ["eval", "-c", info["collection"], "--questions", str(qfile),
                             "--strategies", "fixed:2", "--generator", "extractive", "--limit",
                             "4", "--portfolio", "qa", "--out", str(out), "--json"])  # fmt: skip
    assert r.exit_code == 0, r.output
    rows = [json.loads(x) for x in (out / "log.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and all("portfolio" in r["stages_ms"] for r in rows)
    run = json.loads((out / "run.json").read_text())
    assert run["config"]["retrieval"]["portfolio"] == "qa"


def test_select_renumbers_multi_number_citations_of_member_answers(built) -> None:
    """A member's "[1, 9]" (source 9 does not exist) reaches the selection renumbered to the
    union's sources, with the missing number dropped, not left as the member wrote it."""
    _runner, info, _docs, qfile = built

    class Citing(PacedGenerator):
        def generate(self, question, hits, on_token=None, time_budget_ms=None):
            draft = super().generate(question, hits, on_token, time_budget_ms)
            if "Candidate answers" in question:
                return draft
            return replace(draft, text="Alpha beta [1, 9].", citations=(1,))

    gen = Citing()
    _paced_select(info, qfile, gen)
    selection = gen.calls[-1]["question"]
    lines = [ln for ln in selection.splitlines() if ln.startswith("(A)") or ln.startswith("(B)")]
    assert len(lines) == 2
    assert all(re.fullmatch(r"\([AB]\) Alpha beta \[\d\]\.", ln) for ln in lines), lines


def test_the_selection_prompt_leaves_room_for_the_candidates(built) -> None:
    """The selection reads the candidates as well as the sources: long member answers take
    their share of the context window, so the selection's prompt still fits it."""
    _runner, info, _docs, qfile = built

    class Wordy(PacedGenerator):
        context_window = 900

        def __init__(self) -> None:
            super().__init__()
            self.prompts: list[int] = []

        def generate(self, question, hits, on_token=None, time_budget_ms=None):
            self.prompts.append(self.prompt_tokens(question, hits))
            draft = super().generate(question, hits, on_token, time_budget_ms)
            if "Candidate answers" in question:
                return draft
            return replace(draft, text=" ".join(["long"] * 330) + " [1].")

    gen = Wordy()
    _paced_select(info, qfile, gen, **{"generator.max_tokens": 64})
    assert "Candidate answers" in gen.calls[-1]["question"]
    assert gen.prompts[-1] <= gen.context_window - 64, gen.prompts
