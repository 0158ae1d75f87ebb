"""Counting a document's own parts: figures and tables by their captions, appendices by their
headings, pages from the collection's record, within the pages a question names; a narrower
count question is left to the reader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fathom.stages.structure import asked_part

BODY = (
    "Harbour turbines were tested through the winter season at four coastal sites and the "
    "results were compared against the operators' own logs for the same months."
)


@pytest.mark.parametrize(
    ("question", "part"),
    [
        ("How many figures are in this paper?", "figure"),
        ("How many figures are there in total in the article?", "figure"),
        ("how many tables are included in the document?", "table"),
        ("How many appendices appear in the document?", "appendix"),
        ("How many chapters are in this report?", "chapter"),
        ("How many slides does the deck have?", "page"),
        ("How many figures are in this paper from Page 3 to Page 10?", "figure"),
        ("How many figures of trains appear in the document?", ""),
        ("How many tables include F1 as a metric?", ""),
        ("How many pages contain tables?", ""),
        ("How many turbines were tested?", ""),
    ],
)
def test_a_plain_count_of_parts_is_recognised(question: str, part: str) -> None:
    assert asked_part(question) == part


def _report(path: Path) -> Path:
    """Four pages: figures 1–2 and table 1 captioned on pages 1–2, figure 3 and a mention of
    figure 1 on page 3, appendices A and B headed on page 4."""
    from fathom.ingestion.pdf import import_pymupdf

    pymupdf = import_pymupdf()
    doc = pymupdf.open()
    pages = [
        ["Figure 1: Turbine output by site.", "Table 1: Sites and their depths."],
        ["Figure 2: Output against tidal range."],
        ["Figure 3: Maintenance hours per month.", "As Figure 1 shows, output varied."],
        ["Appendix A Site surveys", "Appendix B Operator logs"],
    ]
    for lines in pages:
        page = doc.new_page(width=595, height=842)
        y = 100
        for line in lines:
            page.insert_text((72, y), line, fontsize=10)
            page.insert_text((72, y + 20), BODY[:90], fontsize=10)
            page.insert_text((72, y + 34), BODY[90:], fontsize=10)
            y += 90
    doc.save(path)
    doc.close()
    return path


def _ask(pdf: Path, question: str) -> dict:
    from click.testing import CliRunner
    from fathom import cli

    res = CliRunner().invoke(
        cli.main, ["ask", str(pdf), question, "--generator", "extractive", "--json"]
    )
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_figures_tables_appendices_and_pages_are_counted(tmp_path, minilm) -> None:
    pdf = _report(tmp_path / "report.pdf")
    data = _ask(pdf, "How many figures are in this report?")
    assert data["short_answer"] == "3" and data["kind"] == "count"
    assert data["answer"].startswith("3 figures — counted by their captions: Figure 1 (p. 1)")
    assert data["citations"] and not data["abstained"]
    assert any("document's own parts" in n for n in data["trace"]["notices"])
    assert _ask(pdf, "How many tables are included in the document?")["short_answer"] == "1"
    assert _ask(pdf, "How many appendices does the report have?")["short_answer"] == "2"
    assert _ask(pdf, "How many pages does the document have?")["short_answer"] == "4"
    ranged = _ask(pdf, "How many figures are in this report from page 2 to page 3?")
    assert ranged["short_answer"] == "2" and "on pages 2–3" in ranged["answer"]
    # no chapter is headed: it says so, and counts nothing else in its place
    none = _ask(pdf, "How many chapters are in this report?")
    assert none["abstained"] is True and none["short_answer"] is None
    assert 'no "Chapter N" heading' in none["answer"] and none["citations"] == []
    assert none["related"] and "3 —" not in none["answer"]
    # a narrower question is not a count of parts
    narrower = _ask(pdf, "How many figures show maintenance hours?")
    assert "counted by their captions" not in narrower["answer"]
