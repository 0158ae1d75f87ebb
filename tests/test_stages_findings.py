"""Key findings and overviews without a model (stages/generate/findings.py, the extractive
summary path of stages/summary.py): section roles, the sentences never quoted, and answers that
quote 3–6 cited sentences in document order from the sections that state findings."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fathom.bench.support import docgen
from fathom.core.base import Chunk, Hit
from fathom.core.config import load_config
from fathom.stages.generate.findings import (
    asks_overview,
    pick,
    rejection,
    section_kind,
    section_kinds,
    section_role,
    topic_terms,
)
from fathom.stages.pipeline import ask

CITED = re.compile(r"(.+?)\s*\[(\d+)\]\s*")

SUMMARY = (
    "The harbour tide sensors cut flood warning delays from forty minutes to six minutes. "
    "Crews that used the new sensors missed far fewer storm surges than crews without them."
)
INTRO = (
    "Coastal towns have relied on hand-read tide gauges for more than a century. "
    "This report reviews a two-year trial of automatic tide sensors in nine harbours."
)
FINDINGS = (
    "Automatic sensors detected every storm surge above one metre during the trial period. "
    "False alarms fell by a third once the sensors were recalibrated every spring. "
    "Table 2: Surge detections by harbour and season. "
    "Harbours with two sensors recovered from a sensor failure within one hour."
)
CODE = "def alarm(level): return level > 1.0 and send_warning(level)"
CONCLUSIONS = (
    "Automatic tide sensors should replace hand-read gauges in every harbour of the region. "
    "The cost of the sensors is repaid within three winters by the floods they warn of."
)
REFERENCES = (
    "[1] Smith, J. and Brown, K. Tide gauges in practice. In Proceedings of the Coastal "
    "Engineering Conference, pp. 12-19, 2019.\n"
    "[2] Lee, A. Storm surge warnings for small harbours. Journal of Ocean Safety, vol. 4, "
    "2021.\n"
    "[3] Patel, R. et al., 2020. Sensor networks on exposed coasts. arXiv preprint."
)
THANKS = (
    "We thank the harbour masters of all nine towns for their patient help with the trial "
    "and the coastal fund for paying for the sensors."
)
PROMPTS = (
    "Question: Which harbour recorded the highest surge during the trial?\n"
    "Thought 1: I need to search the surge table for the highest reading of the trial.\n"
    "Act 1: Search[highest surge harbour]\n"
    "Obs 1: The northern harbour recorded a surge of two point four metres in March.\n"
    "You are in the middle of a room. Looking quickly around you, you see a cabinet 1.\n"
    "> go to cabinet 1"
)


def make_report(path: Path) -> Path:
    """A four-page report: an executive summary, an introduction, findings (with a caption and
    a line of code), conclusions, references, acknowledgements and an appendix of example
    prompts and trajectories."""
    pages = [
        [
            ("h1", "Executive summary"),
            ("p", SUMMARY),
            ("h1", "1 Introduction"),
            ("p", INTRO),
        ],
        [
            ("h1", "2 Findings"),
            ("p", FINDINGS),
            ("p", CODE),
            ("h1", "3 Conclusions"),
            ("p", CONCLUSIONS),
        ],
        [
            ("h1", "References"),
            ("p", REFERENCES),
            ("h1", "Acknowledgements"),
            ("p", THANKS),
        ],
        [
            ("h1", "Appendix A: Example prompts and trajectories"),
            ("p", PROMPTS),
        ],
    ]
    return docgen.make_pdf(path, pages, title="Harbour tide sensor trial")


def quotes(text: str) -> list[tuple[str, int]]:
    """The ``(sentence, source number)`` pairs of an answer that cites each sentence."""
    return [(s.strip(), int(n)) for s, n in CITED.findall(text)]


def where(sentence: str, parts: dict[str, str]) -> str:
    """Which part of the report a quoted sentence comes from."""
    flat = " ".join(sentence.split())
    found = [name for name, text in parts.items() if flat in " ".join(text.split())]
    assert found, f"quoted text is no sentence of the report: {sentence!r}"
    return found[0]


PARTS = {
    "summary": SUMMARY,
    "intro": INTRO,
    "findings": FINDINGS,
    "code": CODE,
    "conclusions": CONCLUSIONS,
    "references": REFERENCES,
    "thanks": THANKS,
    "prompts": PROMPTS,
}
ORDER = list(PARTS)


@pytest.fixture
def extractive_cfg(minilm):
    return load_config(overrides={"generator.backend": "extractive"})


def test_section_kinds_and_roles_from_titles_and_text() -> None:
    assert section_kind("Abstract") == "abstract"
    assert section_kind("Executive Summary") == "executive summary"
    assert section_kind("4.2 Key findings") == "key findings"
    assert section_kind("6 Conclusion and future work") == "conclusions"
    assert section_kind("Results and discussion") == "results"
    assert section_kind("1 Introduction") == "introduction"
    assert section_kind("3 Method") == "body"
    assert section_kind("References") == "references"
    assert section_kind("Acknowledgments") == "acknowledgements"
    assert section_kind("Appendix B: tables") == "appendix"
    assert section_kind("C.1 Hotpot QA trajectories") == "prompts"
    assert section_kind("B.2 Hyperparameters") == "appendix"
    assert section_kind("", "Abstract Large language models can reason.") == "abstract"
    refs = "\n".join(REFERENCES.splitlines() * 2)
    assert section_kind("", refs) == "references"
    assert [section_role(t) for t in ("Findings", "Background", "Bibliography")] == [
        "preferred",
        "neutral",
        "excluded",
    ]


def test_a_title_page_with_an_abstract_and_references_mid_section() -> None:
    """The abstract under a section titled with the paper's title is the abstract; a chunk
    that heads the references inside the conclusion's section is references, and every chunk
    after it is an appendix."""
    title_page = (
        "Tide Sensors for Small Harbours\n\nAda Lovelace, Alan Turing\n\nAbstract\n\n" + SUMMARY
    )
    hits = _hits(
        [
            ("Tide Sensors for Small Harbours", title_page),
            ("1 Introduction", INTRO),
            ("6 Conclusion", CONCLUSIONS),
            ("6 Conclusion", "We thank the crews.\n\n10 REFERENCES Smith, J. and Brown, K."),
            ("6 Conclusion", REFERENCES),
            ("B More analysis", FINDINGS),
        ]
    )
    kinds = section_kinds([h.chunk for h in hits])
    assert kinds == [
        "abstract", "introduction", "conclusions", "references", "references", "appendix",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("sentence", "why"),
    [
        ("Figure 3: Accuracy of the tide model across all nine harbours.", "caption"),
        ("Americans and Germans Differ in Their Views of Each Other and the World", "heading"),
        ("FOR RELEASE MARCH 9, 2020 Americans and Germans Differ in Their Views", "header"),
        ("Table 2: Surge detections by harbour and season.", "caption"),
        ("Thought 1: I need to search the surge table for the highest reading.", "prompt"),
        ("Act 2: Search[highest surge harbour] to find the reading.", "prompt"),
        ("Obs 3: The northern harbour recorded a surge of two metres.", "prompt"),
        ("You are in the middle of a room. Looking quickly around you.", "prompt"),
        ("> go to cabinet 1 and then open the drawer of the cabinet", "prompt"),
        ("Question: Which harbour recorded the highest surge in the trial?", "prompt"),
        ("So the answer is Bill Clinton, who was the president then.", "prompt"),
        ("def alarm(level): return level > 1.0 and send_warning(level)", "code"),
        ("In Proceedings of the Coastal Engineering Conference, pp. 12-19, 2019.", "reference"),
        ("Lee, A., Patel, R., Smith, J. Storm surge warnings for harbours.", "reference"),
        ("Page 3 of 12", "header"),
        ("Published as a conference paper at ICLR 2023 and reviewed.", "header"),
        ("https://github.com/example/tides", "url"),
        ("The sensors worked well.", "short"),
        ("and the sensors were recalibrated every spring by the crews.", "fragment"),
    ],
)
def test_sentences_a_summary_never_quotes(sentence: str, why: str) -> None:
    assert rejection(sentence) == why


def test_prose_findings_are_quotable() -> None:
    for sentence in (
        "Automatic sensors detected every storm surge above one metre during the trial.",
        "ReAct outperforms Act-only prompting on both HotpotQA and FEVER by a wide margin.",
        "False alarms fell by 34% (from 120 to 79) once the sensors were recalibrated.",
    ):
        assert rejection(sentence) is None, sentence


def test_questions_that_ask_for_an_overview_and_what_a_question_is_about() -> None:
    assert asks_overview("What is this document about?")
    assert asks_overview("What is this report about?")
    assert not asks_overview("What are the key findings?")
    assert topic_terms("What are the key findings?") == frozenset()
    assert topic_terms("What does the report conclude about tariffs?") == {"tariff"} or (
        topic_terms("What does the report conclude about tariffs?") == {"tariffs"}
    )


def _hits(sections: list[tuple[str, str]]) -> list[Hit]:
    out = []
    for i, (section, text) in enumerate(sections):
        chunk = Chunk(
            Chunk.make_id("report", i, i + 1), "report", text, i, i + 1, i + 1, i + 1,
            section, len(text.split()), i, title="Harbour tide sensor trial",
        )  # fmt: skip
        out.append(Hit(chunk=chunk, score=1.0))
    return out


def test_pick_takes_findings_in_document_order_and_never_the_excluded_parts() -> None:
    hits = _hits(
        [
            ("1 Introduction", INTRO),
            ("2 Findings", FINDINGS + "\n\n" + CODE),
            ("3 Conclusions", CONCLUSIONS),
            ("References", REFERENCES),
            ("Acknowledgements", THANKS),
            ("Appendix A: Example prompts", PROMPTS),
        ]
    )
    picks = pick("What are the key findings?", hits)
    assert 3 <= len(picks) <= 6
    assert [(p.n, p.pos) for p in picks] == sorted((p.n, p.pos) for p in picks)
    assert {p.kind for p in picks} <= {"introduction", "key findings", "conclusions"}
    assert any(p.kind == "key findings" for p in picks)
    assert any(p.kind == "conclusions" for p in picks)
    assert not any(p.text.startswith("Table 2") or "def alarm" in p.text for p in picks)


def test_a_question_about_something_prefers_the_sentences_about_it() -> None:
    hits = _hits([("2 Findings", FINDINGS), ("3 Conclusions", CONCLUSIONS)])
    picks = pick("What does the report conclude about false alarms?", hits)
    assert any("False alarms" in p.text for p in picks)
    best = max(picks, key=lambda p: p.score)
    assert "False alarms" in best.text


def test_key_findings_of_a_generated_report(tmp_path: Path, extractive_cfg) -> None:
    """The key-findings answer quotes 3–6 sentences, in document order, each cited, none from
    the references, acknowledgements, appendix prompts, captions or code."""
    pdf = make_report(tmp_path / "report.pdf")
    answer = ask(extractive_cfg, str(pdf), "What are the key findings?")
    assert answer.trace.strategy["map_reduce"]
    quoted = quotes(answer.text)
    assert 3 <= len(quoted) <= 6, answer.text
    assert CITED.sub("", answer.text).strip() == ""  # every sentence is cited
    assert all(1 <= n <= len(answer.used) for _, n in quoted)
    found = [where(s, PARTS) for s, _ in quoted]
    assert set(found) <= {"summary", "intro", "findings", "conclusions"}, found
    assert [ORDER.index(f) for f in found] == sorted(ORDER.index(f) for f in found)
    assert not any(s.startswith("Table 2") for s, _ in quoted)
    # each citation points at a source whose text holds the sentence, on the right page
    for sentence, n in quoted:
        assert sentence in " ".join(answer.used[n - 1].chunk.text.split())


def test_what_a_generated_report_is_about(tmp_path: Path, extractive_cfg) -> None:
    """An overview names the title and quotes 2–4 cited sentences, the summary among them."""
    pdf = make_report(tmp_path / "report.pdf")
    answer = ask(extractive_cfg, str(pdf), "What is this report about?")
    assert answer.text.startswith("Harbour tide sensor trial: ")
    quoted = quotes(answer.text.removeprefix("Harbour tide sensor trial: "))
    assert 2 <= len(quoted) <= 4, answer.text
    assert {where(s, PARTS) for s, _ in quoted} <= {"summary", "intro", "findings", "conclusions"}
    assert any(where(s, PARTS) == "summary" for s, _ in quoted)


@pytest.mark.data
def test_key_findings_of_the_react_paper(extractive_cfg, data_dir) -> None:
    """On the ReAct paper: 3–6 cited sentences in document order, none from its prompts,
    trajectories, appendix or references."""
    pdf = data_dir / "pdfs" / "react_arxiv2210.03629v2.pdf"
    answer = ask(extractive_cfg, str(pdf), "What are the key findings?")
    quoted = quotes(answer.text)
    assert 3 <= len(quoted) <= 6, answer.text
    assert all(1 <= n <= len(answer.used) for _, n in quoted)
    used = answer.used
    places = [(used[n - 1].chunk.char_start, s) for s, n in quoted]
    assert [p for p, _ in places] == sorted(p for p, _ in places)
    for sentence, _ in quoted:
        assert rejection(sentence) is None, sentence
        assert "You are in the middle of a room" not in sentence
        assert "So the answer is" not in sentence
    kinds = {section_kind(h.chunk.section, h.chunk.text) for h in used}
    assert not kinds & {"references", "appendix", "prompts", "examples", "acknowledgements"}
    assert max(h.chunk.page_end for h in used) <= 10  # the paper proper, not its appendix
