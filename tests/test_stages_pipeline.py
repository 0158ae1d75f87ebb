"""``fathom ask`` end to end: citations to the right page, feedback, JSON schema, history."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from fathom import cli
from fathom.bench.support import docgen
from fathom.core.config import load_config
from fathom.index.targets import resolve_target
from fathom.router.depth import DepthPolicyBase
from fathom.stages.pipeline import Engine, ask
from fathom.tests.support.generate_support import PacedGenerator

REPO = Path(__file__).resolve().parent.parent

PUMP = """# Frequently asked questions

What is the Zorblax coolant pump impeller cast from? Which Zorblax coolant pump impeller fits the
model 7 pump? Both questions are answered further down in this manual.

# Parts

The impeller of the Zorblax coolant pump is cast from titanium.

# Shipping

Spare parts ship in wooden crates. Crates are stacked no more than three high.
"""


@pytest.fixture
def extractive_cfg(minilm):
    return load_config(overrides={"generator.backend": "extractive"})


def test_extractive_answer_cites_the_right_page(tmp_path: Path, extractive_cfg) -> None:
    pdf = docgen.make_sample_pdf(tmp_path / "sample.pdf")
    answer = ask(extractive_cfg, str(pdf), "What are documents split into?")
    assert "chunks that keep their page numbers" in answer.text
    assert answer.citations and answer.citations[0].pages == "2"
    assert answer.citations[0].path == str(pdf)
    # Every citation resolves to a source that was given to the generator.
    assert {c.chunk_id for c in answer.citations} <= {s.chunk_id for s in answer.sources}
    tr = answer.trace
    assert tr.backend == "extractive" and tr.decision is not None and tr.decision.k >= 1
    assert {"embed", "classify", "probe", "decide", "compress", "generate"} <= set(tr.stages_ms)


def test_second_ask_on_same_file_does_not_ingest_again(tmp_path: Path, extractive_cfg) -> None:
    pdf = docgen.make_sample_pdf(tmp_path / "sample.pdf")
    events: list[str] = []
    resolve_target(extractive_cfg, str(pdf), progress=lambda e, **kw: events.append(e))
    assert "embed_start" in events
    events.clear()
    resolve_target(extractive_cfg, str(pdf), progress=lambda e, **kw: events.append(e))
    assert events == []


def test_a_file_asked_from_a_new_place_is_found_there(tmp_path: Path, extractive_cfg) -> None:
    """The collection is keyed by content: a moved file reuses it (nothing embedded again),
    and its pages are then looked for where the file now is."""
    from fathom.index.collection import Collection

    (tmp_path / "a").mkdir()
    pdf = docgen.make_sample_pdf(tmp_path / "a" / "sample.pdf")
    name = resolve_target(extractive_cfg, str(pdf))
    moved = tmp_path / "b" / "report.pdf"
    moved.parent.mkdir()
    pdf.rename(moved)
    events: list[tuple[str, dict]] = []
    again = resolve_target(
        extractive_cfg, str(moved), progress=lambda e, **kw: events.append((e, kw))
    )
    assert again == name and ("embed_start", {"total": 0}) in events
    [(status, reason)] = [(kw["status"], kw["reason"]) for e, kw in events if e == "file"]
    assert status == "unchanged" and reason == f"moved from {pdf}"
    documents = Collection.open(extractive_cfg, name).manifest.documents
    assert [d.path for d in documents] == [str(moved)]


def test_feedback_deepens_when_the_answer_sits_deeper(tmp_path: Path, extractive_cfg) -> None:
    doc = tmp_path / "pump.md"
    doc.write_text(PUMP)
    name = resolve_target(extractive_cfg, str(doc))
    engine = Engine(extractive_cfg, name)
    question = "What is the Zorblax coolant pump impeller cast from?"
    probe = engine.retriever.probe(question, 5)
    ranks = [i for i, h in enumerate(probe.hits, start=1) if "titanium" in h.chunk.text]
    assert ranks and ranks[0] > 1, "precondition: the answer must not be the top chunk"
    answer = engine.ask(question, k=1, rerank=False)
    rounds = answer.trace.rounds
    assert rounds[0]["k"] == 1 and rounds[0]["abstained"] and rounds[0]["confidence"] < 0.45
    assert len(rounds) >= 2 and rounds[-1]["k"] > 1
    assert "titanium" in answer.text and answer.confidence["score"] >= 0.45
    assert "feedback deepened" in answer.trace.decision.reason
    engine.close()


def test_feedback_disabled_keeps_the_first_round(tmp_path: Path, minilm) -> None:
    cfg = load_config(overrides={"generator.backend": "extractive", "feedback.enabled": False})
    doc = tmp_path / "pump.md"
    doc.write_text(PUMP)
    answer = ask(
        cfg, str(doc), "What is the Zorblax coolant pump impeller cast from?", k=1, rerank=False
    )
    assert len(answer.trace.rounds) == 1 and "don't know" in answer.text


def test_ask_json_matches_the_documented_schema(tmp_path: Path, minilm) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((REPO / "docs" / "answer.schema.json").read_text())
    pdf = docgen.make_sample_pdf(tmp_path / "sample.pdf")
    res = CliRunner().invoke(
        cli.main,
        ["ask", str(pdf), "What are documents split into?", "--generator", "extractive", "--json"],
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    jsonschema.validate(data, schema)
    assert data["schema_version"] == 11
    assert data["trace"]["tokens"]["context_read"] >= data["trace"]["tokens"]["context"]
    assert data["citations"][0]["pages"] == "2"
    # The kind of answer wanted, and the short answer: the reader's span.
    assert data["kind"] == "factoid" and data["trace"]["answer_kind"]["name"] == "factoid"
    assert data["short_answer"] == "chunks" and data["abstained"] is False
    # A plain question, not a summary request: the reader's span, then the sentence it quotes.
    head, _, sentence = data["answer"].split(" [")[0].partition(" — ")
    assert head == "chunks" and sentence, data["answer"]
    # A script can show what was cited: each source carries the text the answer was made from.
    quoted = sentence.strip(' ".')
    assert any(quoted[:40] in c["text"] for c in data["citations"]), (quoted, data["citations"])
    assert all(0 < len(s["text"]) <= 2000 for s in data["sources"])
    assert data["trace"]["selection"] == "configured"
    # The schema is strict: an undocumented key fails validation.
    data["trace"]["surprise"] = 1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, schema)


def test_history_and_stats_record_every_ask(tmp_path: Path, minilm) -> None:
    pdf = docgen.make_sample_pdf(tmp_path / "sample.pdf")
    runner = CliRunner()
    for q in ("What are documents split into?", "What do readers need?"):
        res = runner.invoke(cli.main, ["ask", str(pdf), q, "--generator", "extractive", "--json"])
        assert res.exit_code == 0, res.output
    res = runner.invoke(cli.main, ["history", "--json"])
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    assert [r["question"] for r in rows] == [
        "What do readers need?",
        "What are documents split into?",
    ]
    assert all(r["backend"] == "extractive" and r["total_ms"] > 0 for r in rows)
    res = runner.invoke(cli.main, ["stats", "--slo-ms", "1000000", "--json"])
    stats = json.loads(res.stdout)
    assert stats["asks"] == 2 and stats["slo_compliance"] == 1.0
    assert stats["latency_ms"]["p50"] <= stats["latency_ms"]["p95"]
    res = runner.invoke(cli.main, ["stats", "--slo-ms", "0", "--json"])
    assert json.loads(res.stdout)["slo_compliance"] == 0.0


def test_missing_target_is_a_clear_error() -> None:
    res = CliRunner().invoke(cli.main, ["ask", "no-such-file.pdf", "anything?"])
    assert res.exit_code == 1 and "no such file, folder or collection" in res.stderr


@pytest.mark.slow
def test_llamacpp_answer_cites_real_sources(tmp_path: Path, minilm) -> None:
    cfg = load_config(
        overrides={
            "generator.backend": "llamacpp",
            "generator.max_tokens": 64,
            "generator.threads": 1,
        }
    )
    pdf = docgen.make_sample_pdf(tmp_path / "sample.pdf")
    answer = ask(cfg, str(pdf), "What are documents split into?", k=2)
    assert answer.text.strip()
    assert answer.trace.backend == "llamacpp" and "SmolLM2" in answer.trace.model
    assert answer.trace.tokens["prompt"] > answer.trace.tokens["context"] > 0
    assert answer.trace.tokens["completion"] > 0
    sources = {s.n for s in answer.sources}
    assert all(c.n in sources for c in answer.citations)
    assert all(c.pages in {"1", "2", "3"} for c in answer.sources)


def test_chat_answers_several_questions_in_one_session(tmp_path: Path, minilm) -> None:
    pdf = docgen.make_sample_pdf(tmp_path / "sample.pdf")
    res = CliRunner().invoke(
        cli.main,
        ["chat", str(pdf), "--generator", "extractive"],
        input="What are documents split into?\nWhat do readers need?\n\n",
        env={"COLUMNS": "200"},  # not a terminal: the answers come in panels, unwrapped here
    )
    assert res.exit_code == 0, res.output
    assert "chunks that keep their page numbers" in res.stdout
    assert "page citations" in res.stdout
    hist = CliRunner().invoke(cli.main, ["history", "--json"])
    assert len(hist.stdout.splitlines()) == 2


def test_whole_document_summary_covers_its_sections(tmp_path: Path, extractive_cfg) -> None:
    pdf = docgen.make_sample_pdf(tmp_path / "sample.pdf")
    answer = ask(extractive_cfg, str(pdf), "Summarize the key points of this document.")
    assert answer.trace.query_type == "summarization" and answer.trace.strategy["map_reduce"]
    assert "map" in answer.trace.stages_ms
    assert len({c.pages for c in answer.citations}) >= 2  # more than one page of the document
    assert len({c.section for c in answer.citations}) >= 3
    assert answer.confidence["score"] >= 0.45


def test_a_summary_request_is_summarised_not_answered_with_a_span(
    tmp_path: Path, extractive_cfg
) -> None:
    """Without a language model a summary request at a chosen depth gets the extractive summary
    (central sentences of its sources), never the reader's one span."""
    pdf = docgen.make_sample_pdf(tmp_path / "sample.pdf")
    answer = ask(extractive_cfg, str(pdf), "Summarize the key points of this document.", k=3)
    assert answer.trace.query_type == "summarization" and answer.trace.decision.k == 3
    assert answer.span is None and "span" not in answer.to_dict()
    assert len(answer.citations) >= 2


def test_citations_after_the_full_stop_belong_to_the_sentence_before() -> None:
    from fathom.feedback.confidence import answer_sentences

    got = answer_sentences("Tea is green. [1] Coffee is brewed [2]. Both are drinks. [1][2]")
    assert got == [
        ("Tea is green.", (1,)),
        ("Coffee is brewed.", (2,)),
        ("Both are drinks.", (1, 2)),
    ]


def test_configured_budget_caps_the_context(tmp_path: Path, minilm) -> None:
    doc = tmp_path / "pump.md"
    doc.write_text(
        PUMP + "\n\n".join(f"# Part {i}\n\n" + PUMP.split("# Parts")[1] for i in range(8))
    )
    question = "What is the Zorblax coolant pump impeller cast from?"
    sizes = {}
    for budget in (0, 60):
        cfg = load_config(
            overrides={"generator.backend": "extractive", "compress.budget_tokens": budget}
        )
        answer = ask(cfg, str(doc), question, k=8, rerank=False)
        sizes[budget] = answer.trace.tokens["context"]
    assert 0 < sizes[60] <= 60 < sizes[0]


def test_passes_count_depths_not_generations() -> None:
    """History, `stats` and the report count feedback passes: in portfolio select mode one pass
    is every member's answer plus the selection, all at the same k."""
    from fathom.stages.records import Trace

    def rounds(*ks: int) -> list[dict]:
        return [{"k": k} for k in ks]

    assert Trace("q?", "c", rounds=rounds(3)).passes == 1
    # Plain feedback: one generation a pass.
    assert Trace("q?", "c", rounds=rounds(3, 6, 12)).passes == 3
    # Select: two members and the selection.
    assert Trace("q?", "c", rounds=rounds(2, 2, 2)).passes == 1
    assert Trace("q?", "c", rounds=rounds(2, 2, 2, 4, 4, 4)).passes == 2


@pytest.mark.slow
def test_a_deadline_cuts_the_answer_and_stops_feedback(tmp_path: Path, minilm) -> None:
    """generator.deadline_ms (`ask --deadline-ms`): the ask's stages before generation already
    take longer than 1 ms, so llama.cpp stops after its first token, the report says the answer
    was cut, and no feedback round starts past the deadline."""
    pdf = docgen.make_sample_pdf(tmp_path / "sample.pdf")
    args = ["ask", str(pdf), "What are documents split into?", "--generator", "llamacpp",
            "--k", "1", "--json"]  # fmt: skip
    env = {"FATHOM_GENERATOR__MAX_TOKENS": "48", "FATHOM_GENERATOR__THREADS": "1"}
    res = CliRunner().invoke(cli.main, [*args, "--deadline-ms", "1"], env=env)
    assert res.exit_code == 0, res.output
    tr = json.loads(res.stdout)["trace"]
    assert tr["tokens"]["completion"] == 1 and len(tr["rounds"]) == 1
    assert any(n.startswith("answer cut at the 1 ms deadline") for n in tr["notices"])
    free = CliRunner().invoke(cli.main, args, env=env)
    tr = json.loads(free.stdout)["trace"]
    assert tr["tokens"]["completion"] > 1
    assert not any(n.startswith("answer cut") for n in tr["notices"])


def test_a_deadline_the_backend_cannot_hold_is_reported(tmp_path: Path, extractive_cfg) -> None:
    extractive_cfg.generator.deadline_ms = 1.0
    pdf = docgen.make_sample_pdf(tmp_path / "sample.pdf")
    answer = ask(extractive_cfg, str(pdf), "What are documents split into?")
    assert "chunks that keep their page numbers" in answer.text  # answered in full
    assert any("held by the in-process backends" in n for n in answer.trace.notices)


def test_sources_that_cannot_be_read_in_time_are_left_out(tmp_path: Path, extractive_cfg) -> None:
    """With a deadline, a generator that says reading the prompt would take longer than the
    time left answers without the sources (and the report says why)."""
    extractive_cfg.generator.deadline_ms = 60_000.0
    pdf = docgen.make_sample_pdf(tmp_path / "sample.pdf")
    engine = Engine(extractive_cfg, resolve_target(extractive_cfg, str(pdf)))
    question = "What are documents split into?"
    engine.generator.expected_prefill_ms = lambda n_tokens: 1.0  # fits: sources kept
    answer = engine.ask(question, k=2, rerank=False)
    assert answer.sources and not any("sources left out" in n for n in answer.trace.notices)
    engine.generator.expected_prefill_ms = lambda n_tokens: 120_000.0  # cannot fit
    answer = engine.ask(question, k=2, rerank=False)
    assert not answer.sources and answer.trace.tokens["context"] == 0
    assert any("sources left out" in n for n in answer.trace.notices)
    engine.close()


def test_only_the_sources_that_can_be_read_in_time_are_kept(tmp_path: Path, extractive_cfg) -> None:
    """The sources are cut to the best-first prefix the generator can read before the
    deadline, not left out all at once."""
    extractive_cfg.generator.deadline_ms = 60_000.0
    pdf = docgen.make_sample_pdf(tmp_path / "sample.pdf")
    engine = Engine(extractive_cfg, resolve_target(extractive_cfg, str(pdf)))
    question = "What are documents split into?"
    full = engine.ask(question, k=3, rerank=False)
    assert len(full.used) == 3
    two = engine.generator.prompt_tokens(question, list(full.used[:2]))
    engine.generator.expected_prefill_ms = lambda n: 1.0 if n <= two else 120_000.0
    answer = engine.ask(question, k=3, rerank=False)
    assert [h.chunk.chunk_id for h in answer.used] == [h.chunk.chunk_id for h in full.used[:2]]
    assert any(n.startswith("sources left out (1 of 3):") for n in answer.trace.notices)
    engine.close()


def test_a_generator_without_a_speed_measure_is_measured_before_the_deadline_cuts(
    tmp_path: Path, extractive_cfg
) -> None:
    """The first prompt on a machine has no measure of reading speed: the engine has the
    generator measure itself once (on the prompt's shared start), then cuts the sources by it,
    and the report says so. Without the measure every source would be sent."""
    extractive_cfg.generator.deadline_ms = 60_000.0
    extractive_cfg.feedback.enabled = False  # one pass: the sources are the cut's, not deeper
    pdf = docgen.make_sample_pdf(tmp_path / "sample.pdf")
    gen = PacedGenerator()
    engine = Engine(extractive_cfg, resolve_target(extractive_cfg, str(pdf)), generator=gen)
    question = "What are documents split into?"
    full = engine.ask(question, k=3, rerank=False)
    assert len(full.used) == 3
    two = gen.prompt_tokens(question, list(full.used[:2]))
    rate: list[float] = []  # unmeasured until measure_prefill runs
    measured: list[tuple[str, int]] = []

    def expected(n: int) -> float | None:
        if not rate:
            return None
        return 1.0 if n <= two else 120_000.0

    def measure(q: str, hits: list) -> float:
        measured.append((q, len(hits)))
        rate.append(1.0)
        return 5.0

    gen.expected_prefill_ms, gen.measure_prefill = expected, measure
    answer = engine.ask(question, k=3, rerank=False)
    assert measured == [(question, 3)]
    assert [h.chunk.chunk_id for h in answer.used] == [h.chunk.chunk_id for h in full.used[:2]]
    assert any(n.startswith("measured the generator's prompt speed") for n in answer.trace.notices)
    engine.ask(question, k=3, rerank=False)
    assert len(measured) == 1  # measured once, then known
    engine.close()


def test_a_summary_shares_the_deadline_between_its_sections_and_the_answer(
    tmp_path: Path, extractive_cfg
) -> None:
    """Map-reduce under a deadline: section i is held to the end of the (i+1)-th of n+1 equal
    windows of the time left, the final answer to the deadline; sections whose sources cannot
    be read in their window are not summarised, and the report says so."""
    extractive_cfg.generator.deadline_ms = 60_000.0
    pdf = docgen.make_sample_pdf(tmp_path / "sample.pdf")
    gen = PacedGenerator()
    engine = Engine(extractive_cfg, resolve_target(extractive_cfg, str(pdf)), generator=gen)
    question = "Summarize the key points of this document."
    answer = engine.ask(question)
    assert answer.trace.strategy["map_reduce"]
    *maps, final = gen.calls
    n = len(maps)
    assert n >= 3 and all(c["sources"] > 0 for c in gen.calls)
    step = 60_000.0 / (n + 1)
    for i, call in enumerate(maps):
        assert (i + 1) * step * 0.95 < call["time_budget_ms"] <= (i + 1) * step
    assert final["question"] == question and final["time_budget_ms"] > n * step * 0.95
    assert not any("not summarised" in note for note in answer.trace.notices)

    gen.calls.clear()
    gen.read_ms = 1_000.0  # no section's sources can be read in its window
    answer = engine.ask(question)
    assert [c["question"] for c in gen.calls] == [question] and gen.calls[0]["sources"] == 0
    assert any(f"{n} of {n} sections not summarised" in note for note in answer.trace.notices)
    engine.close()


@pytest.mark.slow
def test_a_summary_past_its_deadline_with_llamacpp(tmp_path: Path, minilm) -> None:
    """A whole-document summary with llama.cpp and a deadline already past: no section is
    summarised, the answer is cut after its first token, and the report says both."""
    pdf = docgen.make_sample_pdf(tmp_path / "sample.pdf")
    args = ["ask", str(pdf), "Summarize the key points of this document.", "--generator",
            "llamacpp", "--json", "--deadline-ms", "1"]  # fmt: skip
    env = {"FATHOM_GENERATOR__MAX_TOKENS": "48", "FATHOM_GENERATOR__THREADS": "1"}
    res = CliRunner().invoke(cli.main, args, env=env)
    assert res.exit_code == 0, res.output
    tr = json.loads(res.stdout)["trace"]
    assert tr["strategy"]["map_reduce"] and tr["tokens"]["completion"] == 1
    assert any("sections not summarised" in n for n in tr["notices"])
    assert any(n.startswith("answer cut at the 1 ms deadline") for n in tr["notices"])


def test_the_latency_report_never_cuts_a_number(tmp_path: Path, minilm) -> None:
    """On a narrow terminal the per-stage latencies wrap onto lines instead of being cut to
    "1085…" in a table too wide for it; a wide terminal keeps the table."""
    import re

    pdf = docgen.make_sample_pdf(tmp_path / "sample.pdf")
    args = ["ask", str(pdf), "What are documents split into?", "--generator", "extractive"]
    for columns in ("60", "200"):
        res = CliRunner().invoke(cli.main, args, env={"COLUMNS": columns})
        assert res.exit_code == 0, res.output
        latency = res.stdout[res.stdout.index("Latency (ms)") : res.stdout.index("Tokens")]
        assert "…" not in latency
        numbers = re.findall(r"\d+\.\d", latency)
        assert len(numbers) >= 5  # every stage and the total, in full
        assert ("┏" in latency) == (columns == "200")  # the table only where it fits


def test_a_summary_counts_the_time_spent_gathering_its_sections(
    tmp_path: Path, extractive_cfg, monkeypatch
) -> None:
    """The time the map step spends loading and grouping the collection's chunks comes out of
    the sections' windows: the deadline is counted from before it, not after."""
    extractive_cfg.generator.deadline_ms = 60_000.0
    pdf = docgen.make_sample_pdf(tmp_path / "sample.pdf")
    gen = PacedGenerator()
    engine = Engine(extractive_cfg, resolve_target(extractive_cfg, str(pdf)), generator=gen)
    store = engine.collection.store
    load = store.all

    def slow_all():
        time.sleep(1.0)
        return load()

    monkeypatch.setattr(store, "all", slow_all)
    engine.ask("Summarize the key points of this document.")
    *maps, _final = gen.calls
    assert maps[0]["time_budget_ms"] <= (60_000.0 - 1_000.0) / (len(maps) + 1)
    engine.close()


def test_cut_section_summaries_give_way_to_the_sections_text(
    tmp_path: Path, extractive_cfg
) -> None:
    """A section summary the deadline cuts to a fragment is not passed on as a source: its
    section's own text is, and the report counts the cut summaries."""
    extractive_cfg.generator.deadline_ms = 60_000.0
    pdf = docgen.make_sample_pdf(tmp_path / "sample.pdf")
    gen = PacedGenerator(write_ms=10_000.0)  # 8 words take 80 s: every window cuts them short
    engine = Engine(extractive_cfg, resolve_target(extractive_cfg, str(pdf)), generator=gen)
    answer = engine.ask("Summarize the key points of this document.")
    n = len(gen.calls) - 1
    assert any(f"of {n} section summaries cut at the" in note for note in answer.trace.notices)
    assert answer.used and not any(h.chunk.text.startswith("word") for h in answer.used)
    engine.close()


def test_replayed_answers_use_up_a_summarys_deadline(tmp_path: Path, extractive_cfg) -> None:
    """An evaluation's cache replays a section summary at once, but the run counts the time
    the summary took: the later windows are that much shorter, as they would be live."""
    from fathom.evaluation.cache import CachingGenerator

    budgets: list[float | None] = []

    class Spy(CachingGenerator):
        def generate(self, question, hits, on_token=None, time_budget_ms=None):
            budgets.append(time_budget_ms)
            return super().generate(question, hits, on_token, time_budget_ms)

    pdf = docgen.make_sample_pdf(tmp_path / "sample.pdf")
    gen = Spy(PacedGenerator(write_ms=1_000.0), tmp_path / "cache.db")  # each answer: 8 s
    engine = Engine(extractive_cfg, resolve_target(extractive_cfg, str(pdf)), generator=gen)
    question = "Summarize the key points of this document."
    engine.ask(question)  # no deadline: every draft generated and stored
    n = len(budgets) - 1
    budgets.clear()
    deadline = 200_000.0
    engine.cfg.generator.deadline_ms = deadline
    engine.ask(question)
    assert gen.hits == n + 1  # all replayed
    step = deadline / (n + 1)
    for i, budget in enumerate(budgets[:-1]):
        assert budget <= (i + 1) * step - 8_000.0 * i + 1.0
    assert budgets[-1] <= deadline - 8_000.0 * n + 1.0
    engine.close()


def test_a_file_with_nothing_to_index_is_an_error_every_time(
    tmp_path: Path, extractive_cfg
) -> None:
    """The empty collection the first attempt leaves must not answer "I don't know" later."""
    from fathom.core.errors import FathomError

    empty = tmp_path / "empty.txt"
    empty.write_text("   \n")
    for _ in range(2):
        with pytest.raises(FathomError, match="nothing could be indexed"):
            resolve_target(extractive_cfg, str(empty))


def test_asking_with_another_embedder_works_and_keeps_the_default_collection(
    tmp_path: Path, extractive_cfg
) -> None:
    """`ask FILE --embedder X`: its own collection (the default embedder's is not taken over),
    the query-type classifier embeds the question with the embedder it was trained on, and the
    shipped depth policy (trained on MiniLM's scores) gives way to the strategy, said in the
    report. An ask with the default embedder afterwards still works."""
    pdf = docgen.make_sample_pdf(tmp_path / "sample.pdf")
    question = "What are documents split into?"
    hashed = load_config(
        overrides={"generator.backend": "extractive", "embedder.name": "hashing:384"}
    )
    other = ask(hashed, str(pdf), question)
    assert other.trace.embedder.startswith("hashing:384")
    assert other.trace.query_type and other.trace.decision.policy == "strategy"
    assert any(n.startswith("depth policy: the shipped one") for n in other.trace.notices)
    default = ask(extractive_cfg, str(pdf), question)
    assert "all-MiniLM-L6-v2" in default.trace.embedder
    assert "chunks that keep their page numbers" in default.text


def test_a_budget_no_source_fits_is_said_and_not_deepened(tmp_path: Path, extractive_cfg) -> None:
    """Going deeper cannot help when the context budget holds no source at all: one round,
    and the report says why the answer has no sources."""
    pdf = docgen.make_sample_pdf(tmp_path / "sample.pdf")
    engine = Engine(extractive_cfg, resolve_target(extractive_cfg, str(pdf)))
    answer = engine.ask("What are documents split into?", k=2, budget_tokens=10)
    assert not answer.sources and answer.trace.tokens["context"] == 0
    assert len(answer.trace.rounds) == 1
    assert any(n.startswith("no source fits the 10-token") for n in answer.trace.notices)
    engine.close()


def test_a_one_section_summary_keeps_each_prompt_within_the_context_window(
    tmp_path: Path, extractive_cfg
) -> None:
    """Map-reduce reads up to three times a section's share, but never more than the section
    prompt's room: a document of one long section must not overflow the model's context."""
    import random

    rng = random.Random(0)
    vocab = [f"{a}{b}" for a in ("ka", "lo", "mi", "nu", "pe", "ro") for b in ("ba", "de", "fi")]
    paragraphs = [
        ". ".join(" ".join(rng.choice(vocab) for _ in range(12)) for _ in range(4)) + "."
        for _ in range(150)
    ]
    doc = tmp_path / "long.txt"
    doc.write_text("\n\n".join(paragraphs))
    gen = PacedGenerator()
    gen.context_window = 2048
    prompts: list[int] = []
    generate = gen.generate

    def recording(question, hits, **kw):
        prompts.append(gen.prompt_tokens(question, hits))
        return generate(question, hits, **kw)

    gen.generate = recording
    engine = Engine(extractive_cfg, resolve_target(extractive_cfg, str(doc)), generator=gen)
    answer = engine.ask("Summarize the key points of this document.")
    assert answer.trace.strategy["map_reduce"] and len(prompts) >= 2
    room = gen.context_window - extractive_cfg.generator.max_tokens
    assert max(prompts) <= room, prompts
    engine.close()


def test_candidates_beyond_the_reranked_head_rank_after_it(tmp_path: Path, extractive_cfg) -> None:
    """With k over rerank.candidates, the hits never reranked keep their order behind the
    reranked ones: their fused scores (on another scale than a cross-encoder's negative logits)
    must not put them first in the compressor's order."""
    from fathom.stages.rerank import _reordered

    class NegativeLogits:  # like ms-marco cross-encoders: most passages score below zero
        name = "cross-encoder:stub"

        def rerank(self, question, hits):
            return _reordered(hits, [-8.0 - i for i in range(len(hits))])

    extractive_cfg.rerank.candidates = 2
    extractive_cfg.feedback.enabled = False
    pdf = docgen.make_sample_pdf(tmp_path / "sample.pdf")
    engine = Engine(extractive_cfg, resolve_target(extractive_cfg, str(pdf)))
    engine.parts.use_reranker(NegativeLogits())
    answer = engine.ask("What do chunks keep?", k=4, rerank=True)
    assert answer.trace.reranker == "cross-encoder:stub" and len(answer.used) >= 3
    assert answer.used[0].ranks.get("rerank") == 1  # the reranker's best leads
    tail = [h for h in answer.used if "rerank" not in h.ranks]
    assert tail and all(h.score < -9.0 for h in tail)
    engine.close()


def test_the_embedding_fallback_reranks_only_its_head(tmp_path: Path, extractive_cfg) -> None:
    """Without a cross-encoder, the embedding reranker reads rerank.embedding_candidates hits
    (it embeds each one's sentences); the rest follow in their fused order."""
    from fathom.stages.rerank import EmbeddingReranker

    seen: list[int] = []

    class Recording(EmbeddingReranker):
        def rerank(self, query, hits):
            seen.append(len(hits))
            return super().rerank(query, hits)

    extractive_cfg.rerank.candidates = 20
    extractive_cfg.rerank.embedding_candidates = 3
    extractive_cfg.feedback.enabled = False
    pdf = docgen.make_sample_pdf(tmp_path / "sample.pdf")
    engine = Engine(extractive_cfg, resolve_target(extractive_cfg, str(pdf)))
    engine.parts.use_reranker(Recording(engine.parts.sentence_vectors))
    answer = engine.ask("What do chunks keep?", k=6, rerank=True)
    assert seen == [3]
    assert sum("rerank" in h.ranks for h in answer.used) <= 3
    # the answerer read the sentence vectors the reranker made
    assert len(engine.parts.sentence_vectors) > 0
    engine.close()


def test_feedback_stops_when_deeper_retrieval_gives_the_same_sources(
    tmp_path: Path, extractive_cfg
) -> None:
    """A budget full of better sources makes a deeper k change nothing the generator reads:
    feedback stops instead of regenerating the same prompt, and says why."""
    from dataclasses import replace

    pdf = docgen.make_sample_pdf(tmp_path / "sample.pdf")
    engine = Engine(extractive_cfg, resolve_target(extractive_cfg, str(pdf)))
    one = engine.ask("What do chunks keep?", k=1, rerank=False)
    assert len(one.trace.rounds) == 1
    size = one.trace.tokens["context"]
    score = engine.parts.scorer.score
    engine.parts.scorer.score = lambda *a: replace(score(*a), score=0.1)  # unsure: feedback goes on
    answer = engine.ask("What do chunks keep?", k=1, rerank=False, budget_tokens=size + 5)
    assert [r["sources"] for r in answer.trace.rounds] == [1]
    assert any(n.startswith("feedback stopped at k = 1") for n in answer.trace.notices)
    engine.close()


def test_the_probe_goes_as_deep_as_the_policys_deepest_budget(
    tmp_path: Path, extractive_cfg
) -> None:
    """A depth policy whose budgets reach past 20 sees a probe that deep (its features were
    computed on one when it was trained), so it can choose its deepest budget."""
    from fathom.core.base import Decision

    docs = tmp_path / "docs.jsonl"
    docs.write_text(
        "\n".join(
            json.dumps(
                {"doc_id": f"d{i}", "text": f"Town{i} has a volcano surveyed in {1900 + i}."}
            )
            for i in range(60)
        )
    )

    class Deep(DepthPolicyBase):
        budgets = (0, 5, 40)
        deepest_k = 40  # the probe must go this deep for it

        def __init__(self) -> None:
            self.seen: list[int] = []

        def decide(self, query):
            self.seen.append(len(query.probe.hits))
            return Decision(k=min(40, len(query.probe.hits)), policy="deep", reason="deepest")

    engine = Engine(extractive_cfg, resolve_target(extractive_cfg, str(docs)))
    policy = Deep()
    answer = engine.ask("Who surveyed the volcano near Town7?", policy=policy, rerank=False)
    assert policy.seen == [40] and answer.trace.decision.k == 40
    engine.close()


def test_a_long_chain_gets_its_third_hop_with_new_bridges(
    tmp_path: Path, extractive_cfg, monkeypatch
) -> None:
    """max_hops = 3 means up to three retrievals; the third follows bridges the second did
    not already ask about (it used to stop after one extra hop whatever max_hops said)."""
    import fathom.router.strategy as strategy_module
    from fathom.router.strategy import STRATEGIES

    names = ["Alice Moreau", "Chen Wei", "Elena Petrova", "Omar Haddad", "Ines Duarte"]
    places = ["Lake Varna", "Mount Ostra", "Port Kessel", "Cape Lindo", "Glen Arrow"]
    rows = [
        {
            "doc_id": f"d{i}",
            "text": f"{names[i % 5]} founded Institute{i} near {places[i % 5]}. "
            f"The Institute{i} studies the volcano Vulcan{i} with {names[(i + 1) % 5]}.",
        }
        for i in range(30)
    ]
    docs = tmp_path / "docs.jsonl"
    docs.write_text("\n".join(json.dumps(r) for r in rows))
    engine = Engine(extractive_cfg, resolve_target(extractive_cfg, str(docs)))
    long_chain = dataclasses.replace(STRATEGIES["multi_hop"], max_hops=3)
    monkeypatch.setattr(strategy_module, "strategy_for", lambda qtype, question: long_chain)
    prepared = engine.prepare("Who worked with the founder of the institute studying Vulcan7?")
    assert len(prepared.hops) == 2 and prepared.hops[0] != prepared.hops[1]
    first, second = (h.split("?", 1)[1].split() for h in prepared.hops)
    assert not set(second) & set(first)  # the third hop asks about new bridges
    engine.close()


def test_answering_from_a_collection_never_loads_nltk(tmp_path: Path, extractive_cfg) -> None:
    """Chunks carry their sentence spans, so compression, reranking and the extractive answer
    never run the splitter at query time (NLTK's import alone costs seconds)."""
    import subprocess
    import sys

    pdf = docgen.make_sample_pdf(tmp_path / "sample.pdf")
    name = resolve_target(extractive_cfg, str(pdf))
    code = (
        "import sys\n"
        "from fathom.core.config import load_config\n"
        "from fathom.stages.pipeline import Engine\n"
        "cfg = load_config(overrides={'generator.backend': 'extractive'})\n"
        f"engine = Engine(cfg, {name!r})\n"
        "for rerank in (False, True):\n"
        "    a = engine.ask('What are documents split into?', rerank=rerank)\n"
        "    assert 'chunks that keep their page numbers' in a.text, a.text\n"
        "print('nltk' in sys.modules, 'fathom.chunking.punkt' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "False"]


def test_a_store_written_without_sentence_spans_answers_the_same(
    tmp_path: Path, extractive_cfg
) -> None:
    """Rows of an older chunk store lack ``sentences``; they open, are split when read, and
    give the same answer and sources as rows that carry them."""
    import numpy as np
    from fathom.chunking.sentences import split_sentences
    from fathom.index.collection import Collection

    pdf = docgen.make_sample_pdf(tmp_path / "sample.pdf")
    name = resolve_target(extractive_cfg, str(pdf))
    questions = ["What are documents split into?", "How are answers cited?"]
    engine = Engine(extractive_cfg, name)
    chunks = engine.collection.store.all()
    assert all(c.sentences == tuple(split_sentences(c.text)) for c in chunks)
    before = [engine.ask(q).to_dict() for q in questions]
    directory = engine.collection.data_dir  # the current generation's files
    engine.close()

    lines = []
    for c in chunks:
        row = c.to_dict()
        del row["sentences"]
        lines.append(json.dumps(row, ensure_ascii=False).encode("utf-8") + b"\n")
    (directory / "chunks.jsonl").write_bytes(b"".join(lines))
    offsets = np.cumsum([0, *map(len, lines)]).astype(np.int64)
    np.save(directory / "chunks.offsets.npy", offsets, allow_pickle=False)

    assert all(c.sentences is None for c in Collection.open(extractive_cfg, name).store.all())
    engine = Engine(extractive_cfg, name)
    after = [engine.ask(q).to_dict() for q in questions]
    engine.close()
    for a, b in zip(before, after, strict=True):
        assert a["answer"] == b["answer"] and a["sources"] == b["sources"]


def test_an_engine_closes_the_generator_it_made_and_not_one_it_was_given(
    tmp_path: Path, extractive_cfg
) -> None:
    from fathom.stages.generate.extractive import ExtractiveGenerator

    class Closing(ExtractiveGenerator):
        closed = 0

        def close(self) -> None:
            self.closed += 1

    pdf = docgen.make_sample_pdf(tmp_path / "sample.pdf")
    name = resolve_target(extractive_cfg, str(pdf))
    given = Closing(extractive_cfg.generator)
    engine = Engine(extractive_cfg, name, generator=given)
    engine.ask("What are documents split into?")
    engine.close()
    assert given.closed == 0  # its owner closes it

    engine = Engine(extractive_cfg, name)
    made = Closing(extractive_cfg.generator)
    engine.parts.replace_generator(made)  # as if make_generator had made it
    engine.close()
    assert made.closed == 1


@pytest.mark.data
def test_a_prose_docx_summary_quotes_its_points_not_a_heading(extractive_cfg, data_dir) -> None:
    """ "What is this document about?" of a short DOCX of prose paragraphs, each under a label
    ("Paragraph 1:"): the summary quotes sentences of both paragraphs, never the labels or the
    table rows between them."""
    docx = data_dir / "docx" / "haystack_sample_docx_3.docx"
    answer = ask(extractive_cfg, str(docx), "What is this document about?")
    assert answer.trace.strategy["map_reduce"]
    assert "Paragraph" not in answer.text and "|" not in answer.text
    assert answer.text.count("[1]") >= 2
    assert "Artificial intelligence" in answer.text  # the lead of the first paragraph
    assert "workforce" in answer.text or "new roles" in answer.text  # the second's point


def test_a_chosen_depth_reads_its_chunks_whole_and_the_strategy_s_its_type_budget(
    tmp_path: Path, minilm
) -> None:
    """Depth and budget are one decision: a k that a policy or the caller chose means that
    many chunks, so twelve long chunks are not condensed into a factual question's
    1,000-token budget; when the query type's strategy chooses the depth, its budget applies.
    The trace says which."""
    from fathom.router.strategy import STRATEGIES

    sections = []
    for i in range(16):
        facts = " ".join(
            f"Valve {i}-{j} of the Zorblax line {i} is rated for {10 * i + j} bar and inspected "
            f"every {j + 2} weeks by the crew of station {i}."
            for j in range(6)
        )
        sections.append(f"# Line {i}\n\n{facts}")
    doc = tmp_path / "valves.md"
    doc.write_text("\n\n".join(sections))
    question = "What pressure is valve 3-2 of the Zorblax line 3 rated for?"
    cfg = load_config(overrides={"generator.backend": "extractive", "feedback.enabled": False})
    engine = Engine(cfg, resolve_target(cfg, str(doc)))
    factual = STRATEGIES["factual"].budget_tokens
    deep = engine.ask(question, k=12)
    assert deep.trace.query_type == "factual"
    assert deep.trace.budget["source"] == "depth" and deep.trace.budget["tokens"] > factual
    assert deep.trace.tokens["context"] > factual  # twelve chunks, not condensed to 1,000
    assert len(deep.sources) == 12
    cfg.retrieval.policy = "strategy"
    chosen = Engine(cfg, resolve_target(cfg, str(doc)))
    by_type = chosen.ask(question)
    assert by_type.trace.budget == {"tokens": factual, "source": "query type"}
    assert by_type.trace.tokens["context"] <= factual
    explicit = engine.ask(question, k=12, budget_tokens=300)
    assert explicit.trace.budget == {"tokens": 300, "source": "explicit"}
    assert explicit.trace.tokens["context"] <= 300
    engine.close()
    chosen.close()
