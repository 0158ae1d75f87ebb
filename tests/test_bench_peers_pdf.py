"""bench/peers_pdf.py's pure parts on generated data: a page Document's page number, context
token budgets matched in both directions, the evidence-page hit, the paired comparison with its
bootstrap intervals, and the tables. Needs neither the peers (llama-index, txtai) nor the
shared data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fathom.bench import peers_pdf as pp
from fathom.bench.support.peers_pdf_match import (
    by_type,
    holds_page,
    page_numbers,
    paired,
    take_until,
    take_within,
    tokens_of,
)
from fathom.bench.support.peers_pdf_report import markdown
from fathom.bench.support.peers_pdf_systems import collections_by_file
from hypothesis import given
from hypothesis import strategies as st


class WordCounter:
    """Tokens as words: enough to check that the bench counts what it is given."""

    def count(self, texts: list[str]) -> list[int]:
        return [len(t.split()) for t in texts]


def test_page_numbers_follow_the_readers_order_not_labels() -> None:
    assert page_numbers(["uuid-b", "uuid-a", "uuid-c"]) == {"uuid-b": 1, "uuid-a": 2, "uuid-c": 3}
    assert page_numbers([]) == {}


def test_take_until_includes_the_crossing_chunk() -> None:
    ranked = [[[1], 100], [[2], 100], [[3], 100], [[4], 100]]
    assert take_until(ranked, 150) == ranked[:2]  # 100 < 150, then 200 ≥ 150: stop
    assert take_until(ranked, 200) == ranked[:2]
    assert take_until(ranked, 201) == ranked[:3]
    assert take_until(ranked, 0) == []
    assert take_until(ranked, 10_000) == ranked  # runs out: everything it has


def test_take_within_never_exceeds_and_stops_at_the_first_too_long() -> None:
    ranked = [[[1], 100], [[2], 300], [[3], 10]]
    assert take_within(ranked, 99) == []
    assert take_within(ranked, 100) == ranked[:1]
    assert take_within(ranked, 399) == ranked[:1]  # the 10-token chunk after is not taken
    assert take_within(ranked, 410) == ranked


@given(
    st.lists(st.integers(min_value=1, max_value=500), max_size=30),
    st.integers(min_value=0, max_value=5000),
)
def test_the_budgets_hold_in_both_directions(sizes: list[int], budget: int) -> None:
    ranked = [[[i + 1], n] for i, n in enumerate(sizes)]
    over = take_until(ranked, budget)
    under = take_within(ranked, budget)
    assert over == ranked[: len(over)] and under == ranked[: len(under)]
    assert tokens_of(under) <= budget
    assert tokens_of(over) >= budget or over == ranked
    assert len(under) <= len(over) or tokens_of(over) == budget


def test_holds_page_intersects_a_chunks_pages_with_the_evidence() -> None:
    context = [[[3, 4], 50], [[9], 20]]
    assert holds_page(context, [4])
    assert holds_page(context, [1, 9])
    assert not holds_page(context, [5, 8])
    assert not holds_page([], [1])
    assert not holds_page(context, [])
    assert not holds_page([[[4], 0]], [4])  # an empty page's chunk has no text to hold it


def test_paired_bootstrap_on_a_tiny_fake() -> None:
    docs = ["a", "a", "b", "b", "c", "c"]
    ahead = paired([1, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0], docs, n_boot=200)
    assert ahead["difference"]["mean"] == 1.0 and ahead["difference"]["lo"] == 1.0
    assert ahead["difference_documents"]["clusters"] == 3
    assert ahead["ahead"] and ahead["ahead_questions"]
    assert ahead["win_tie_loss"]["win"] == 1.0
    docs = ["a", "a", "a", "b", "b", "c"]  # per document: +1, −1, 0
    mixed = paired([1, 0, 1, 0, 1, 0], [0, 1, 0, 1, 1, 0], docs, n_boot=200)
    d = mixed["difference_documents"]
    assert d["mean"] == pytest.approx(0.0)
    assert d["lo"] < 0 < d["hi"]
    assert not mixed["ahead"]
    assert mixed["fathom"] == {"n": 3, "total": 6, "share": 0.5}


def test_by_type_splits_shares_by_document_type() -> None:
    out = by_type([1, 0, 1], ["paper", "paper", "slides"])
    assert out == {
        "paper": {"n": 1, "total": 2, "share": 0.5},
        "slides": {"n": 1, "total": 1, "share": 1.0},
    }


def test_ask_context_reads_pages_and_counts_tokens() -> None:
    answer = {"sources": [{"pages": "3-5", "text": "one two three"}, {"pages": "7", "text": "x"}]}
    assert pp.ask_context(answer, WordCounter()) == [[[3, 4, 5], 3], [[7], 1]]
    assert pp.ask_context({"sources": []}, WordCounter()) == []


def fake_rows() -> tuple[list[dict], dict, dict]:
    """Four questions over two documents: Fathom's ask context is 150 tokens; the peers' chunks
    are 100 tokens each, Fathom search's 60."""
    questions = [
        {"qid": f"q{i}", "doc_id": f"d{i % 2}", "doc_type": "paper", "evidence_pages": [i + 1]}
        for i in range(4)
    ]
    asks = {q["qid"]: [[[q["evidence_pages"][0]], 150]] for q in questions}
    ranked = {
        "fathom": {q["qid"]: [[[q["evidence_pages"][0]], 60]] * 12 for q in questions},
        "llamaindex": {q["qid"]: [[[99], 100], [[98], 100], [[1], 100]] for q in questions[:3]}
        | {"q3": [[[4], 0], [[1], 0]]},  # q3's PDF: no text for LlamaIndex
        "txtai": {q["qid"]: [[[1], 100]] * 5 for q in questions},
    }
    return questions, asks, ranked


def test_contexts_match_tokens_both_ways() -> None:
    questions, asks, ranked = fake_rows()
    rows = pp.score_rows(questions, asks, ranked)
    tokens = rows[0]["tokens"]
    assert tokens["fathom-ask"] == 150
    assert tokens["llamaindex@ask-tokens"] == 200  # 100 < 150, then 200: never fewer
    assert tokens["llamaindex@2"] == 200
    assert tokens["fathom@llamaindex-tokens"] == 180  # 3 × 60 ≤ 200 < 4 × 60: never more
    assert tokens["fathom@txtai-tokens"] == 300
    assert tokens["fathom@10"] == 600
    assert rows[0]["hit"]["fathom-ask"] == 1.0
    assert rows[0]["hit"]["llamaindex@2"] == 0.0  # pages 99 and 98
    assert rows[0]["hit"]["txtai@3"] == 1.0  # q0's evidence is page 1
    assert rows[1]["hit"]["txtai@3"] == 0.0


def test_summary_and_markdown_on_a_fake_run() -> None:
    questions, asks, ranked = fake_rows()
    summary = pp.summarise(pp.score_rows(questions, asks, ranked))
    c = summary["comparisons"]["Fathom ask vs LlamaIndex"]
    assert c["fathom"]["share"] == 1.0 and c["peer"]["share"] == 0.0
    assert c["fathom_mean_tokens"] == 150
    assert c["peer_mean_tokens"] == 150  # 200 on q0–q2, nothing to read on q3
    assert summary["contexts"]["txtai@3"]["evidence"]["n"] == 1
    assert summary["no_text"]["llamaindex"] == {"questions": 1, "documents": 1, "doc_ids": ["d1"]}
    assert summary["no_text"]["fathom"] == {"questions": 0, "documents": 0, "doc_ids": []}
    assert c["peer_read_text"]["fathom"]["total"] == 3
    assert summary["comparisons"]["Fathom ask vs txtai"]["peer_read_text"]["fathom"]["total"] == 4
    process = {"wall_s": 1.0, "cpu_s": 1.0, "peak_rss_mb": 100.0}
    ingest = {"documents": 2, "chunks": 9, "read_s": 1.0, "build_s": 2.0, "kept": 0}
    results = {
        "machine": {"cpu": "CPU", "cpus": 2, "memory_gb": 8, "threads": 2},
        "command": pp.rerun_command(["--mmlb-work", "/somewhere/default", "--note", "x"]),
        "note": "How the run went.",
        "split": "test",
        "seed": 0,
        "questions": 4,
        "documents": 2,
        "textractor": pp.TEXTRACTOR_NOTE,
        "ingest": {s: ingest | {"process": process} for s in pp.SYSTEMS},
        "versions": {"txtai": "9"},
        "total_s": 60.0,
        **summary,
    }
    md = markdown(results)
    assert "--mmlb-work WORK/default`" in md and "/somewhere" not in md
    assert "How the run went." in md
    assert "| Fathom ask vs LlamaIndex | peer at Fathom's tokens | 100.0% (4/4) | 0.0% (0/4)" in md
    assert "**true**" in md
    assert "LlamaIndex 1 (1 documents)" in md


def test_the_mmlongbench_collections_are_found_by_file_name(tmp_path: Path) -> None:
    for name, path, status in (
        ("auto-1", "/data/a.pdf", "ok"),
        ("auto-2", "/elsewhere/b.pdf", "ok"),
        ("auto-3", "/data/c.pdf", "failed"),
    ):
        folder = tmp_path / "collections" / name
        folder.mkdir(parents=True)
        manifest = {"name": name, "documents": [{"path": path, "status": status}]}
        (folder / "manifest.json").write_text(json.dumps(manifest))
    assert collections_by_file(tmp_path) == {"a.pdf": "auto-1", "b.pdf": "auto-2"}
