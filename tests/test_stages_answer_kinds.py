"""Answer kinds (``router.answer_kind``) and the extractive answer's shapes by kind
(``stages.generate.shapes``, ``ExtractiveGenerator``) on generated passages."""

from __future__ import annotations

import pytest
from fathom.core.base import Chunk, Hit
from fathom.router.answer_kind import KINDS, answer_kind, pages_named
from fathom.stages.generate.extractive import NO_ANSWER, ExtractiveGenerator
from fathom.stages.generate.shapes import (
    count_in,
    coverage,
    enumeration,
    list_items,
    number_in,
)
from fathom.tests.support.fake_reader import FakeReader


def hit(i: int, text: str, section: str = "", title: str = "Annual report") -> Hit:
    chunk = Chunk(
        chunk_id=f"c{i}", doc_id="d1", text=text, char_start=1000 * i,
        char_end=1000 * i + len(text), page_start=i + 1, page_end=i + 1, section=section,
        n_tokens=0, ordinal=i, title=title,
    )  # fmt: skip
    return Hit(chunk, score=1.0 / (i + 1), ranks={"hybrid": i + 1}, scores={"hybrid": 1.0})


@pytest.mark.parametrize(
    ("question", "kind", "field"),
    [
        ("What are the key findings?", "summary", ""),
        ("Summarize this report.", "summary", ""),
        ("What is this document about?", "summary", ""),
        ("What does the report conclude about the economy?", "summary", ""),
        ("What did the authors recommend?", "summary", ""),
        ("What did the police find at the scene?", "factoid", ""),
        ("Who are the authors?", "metadata", "authors"),
        ("Who wrote this report?", "metadata", "authors"),
        ("When was the report published?", "metadata", "date"),
        ("Which organisation published this report?", "metadata", "organisation"),
        ("What version of the standard is this?", "metadata", "version"),
        ("What is the title of this paper?", "metadata", "title"),
        ("List the steps to reset the device.", "list", ""),
        ("What are the three safety checks?", "list", ""),
        ("Which counties are mentioned in the document?", "list", ""),
        ("How many employees does the company have?", "count", ""),
        ("In Table 2, what is the revenue for 2019?", "table", ""),
        ("What percentage of adults own a smartphone?", "number", ""),
        ("How much did revenue grow in 2015?", "number", ""),
        ("Is the device waterproof?", "yes_no", ""),
        ("Which is larger, the north plant or the south plant?", "comparison", ""),
        ("What is the difference between a lease and a loan?", "comparison", ""),
        ("Why did the engine fail?", "explanation", ""),
        ("Where was Chopin born?", "factoid", ""),
    ],
)
def test_each_kind_is_recognised(question: str, kind: str, field: str) -> None:
    got = answer_kind(question)
    assert got.name == kind, (question, got)
    assert got.field == field
    assert got.name in KINDS
    assert got.to_dict()["name"] == kind


def test_visual_and_page_cues_are_reported() -> None:
    got = answer_kind("What is the word written in the green box on page 17?")
    assert got.visual and got.pages == (17,)
    assert not answer_kind("What is the capital of France?").visual
    assert pages_named("What models are introduced on pages 10 and 11?") == (10, 11)
    assert pages_named("Which figures appear on pages 3-5?") == (3, 4, 5)
    assert pages_named("What does the last slide say?") == (-1,)
    assert pages_named("What is on the 2nd page?") == (2,)


def test_numbers_are_read_as_written() -> None:
    assert number_in("Revenue grew 12.5% in 2019.", near="12.5%") == "12.5%"
    assert number_in("It cost $3,362 million.") == "$3,362 million"
    assert number_in("There were three plants.") == "3"
    assert number_in("no digits here") == ""
    text = "In 2018 sales were 40 units and in 2019 they were 55 units."
    assert number_in(text, near="55 units") == "55"


def test_a_count_is_never_a_year_an_amount_or_a_share() -> None:
    assert count_in("The survey asked 1,502 adults in 2019.", near="1,502") == "1,502"
    assert count_in("There were three plants.") == "3"
    assert count_in("Distilling Knowledge from Reader to Retriever, 2022.") == ""
    assert count_in("It cost $3 million.") == "" and count_in("About 12% agreed.") == ""


def test_a_count_question_does_not_take_a_sure_year_for_its_count() -> None:
    # the reader is sure of "2022", a year: it does not say how many, so the answer neither
    # gives it as the count nor as the short answer
    text = "The team studied the tasks in 2022 and reported its results in a later paper."
    gen = ExtractiveGenerator(reader=FakeReader(["2022"]))
    draft = gen.generate("How many tasks did the team study?", [hit(0, text)])
    assert draft.short != "2022" and not draft.text.startswith("2022")
    sure = ExtractiveGenerator(reader=FakeReader(["five"]))
    text = "The team studied five tasks in 2022."
    assert sure.generate("How many tasks did the team study?", [hit(0, text)]).short == "5"


def test_a_yes_no_question_has_yes_or_no_as_its_short_answer() -> None:
    from fathom.router.answer_kind import answer_kind

    assert answer_kind("Does CFC exposure cause skin burns? Answer 'yes' or 'no'.").name == "yes_no"
    assert answer_kind("Is the north plant larger or the south plant?").name != "yes_no"
    text = "Exposure to CFC refrigerant can cause frostbite-like skin burns."
    gen = ExtractiveGenerator(reader=FakeReader(["can cause frostbite-like skin burns"]))
    q = "Does CFC exposure cause skin burns? Directly answer 'yes' or 'no'."
    assert gen.generate(q, [hit(0, text)]).short == "Yes"
    text = "The handheld unit is not waterproof and must be kept dry."
    gen = ExtractiveGenerator(reader=FakeReader(["not waterproof"]))
    assert gen.generate("Is the handheld unit waterproof?", [hit(0, text)]).short == "No"


def test_an_acronym_is_expanded_as_the_source_spells_it() -> None:
    from fathom.stages.generate.shapes import asked_acronym

    assert asked_acronym("What is NARL stand for in this document?") == "NARL"
    assert asked_acronym("What is the full form of IoT?") == "IoT"
    assert asked_acronym("Who runs the radar station?") == ""
    text = (
        "The MST Radar facility at NARL near Tirupati is run by the National Atmospheric "
        "Research Laboratory (NARL), an autonomous society. New Approaches to Radar Lidar."
    )
    draft = _answerer().generate("What does NARL stand for?", [hit(0, FILLER), hit(1, text)])
    assert draft.short == "National Atmospheric Research Laboratory"
    assert draft.citations == (2,) and not draft.abstained
    iot = "Sensors on the Internet of Things (IoT) report every minute."
    assert _answerer().generate("What is IoT short for?", [hit(0, iot)]).short == (
        "Internet of Things"
    )
    # nothing spells it out: not answered by an expansion
    draft = _answerer().generate("What does QZX stand for?", [hit(0, text)])
    assert draft.short != "National Atmospheric Research Laboratory"


def test_enumeration_in_a_sentence() -> None:
    got = enumeration("The plants are located in Mumbai, Pune and Delhi.")
    assert got == ["Mumbai", "Pune", "Delhi"]
    assert enumeration("The committee met twice during the year to review the accounts.") == []


BULLETS = (
    "Safety checks\n\nBefore each flight the crew performs these safety checks:\n"
    "- Fuel level check\n- Tyre pressure check\n- Brake test\n- Fuel level check\n\n"
    "The checks take ten minutes."
)
TABLE = (
    "Regional offices\n\nThe company runs the following regional offices.\n"
    "Office | City | Staff\nNorth office | Leeds | 120\nSouth office | Bristol | 85\n"
    "West office | Cardiff | 40"
)
FILLER = "The weather in the region was mild for most of the year, with little rain."


def test_a_list_in_bullets_is_collected_and_deduplicated() -> None:
    hits = [hit(0, FILLER), hit(1, BULLETS, section="Safety checks")]
    items = list_items("What safety checks does the crew perform?", hits)
    assert [i.text for i in items] == ["Fuel level check", "Tyre pressure check", "Brake test"]
    assert all(i.n == 2 for i in items)


def test_a_list_in_a_table_is_its_first_column() -> None:
    hits = [hit(0, TABLE, section="Regional offices"), hit(1, FILLER)]
    items = list_items("Which regional offices does the company run?", hits)
    assert [i.text for i in items][-3:] == ["North office", "South office", "West office"]


def test_coverage_of_the_question_words() -> None:
    hits = [hit(0, BULLETS), hit(1, TABLE)]
    assert coverage("What safety checks does the crew perform?", hits) > 0.7
    assert coverage("What did the treaty of Westphalia settle in 1648?", hits) < 0.3


def _answerer() -> ExtractiveGenerator:
    # the shipped scorer and reader: what ``ask --generator extractive`` runs
    return ExtractiveGenerator()


def test_extractive_list_answer_gives_items_each_cited() -> None:
    hits = [hit(0, FILLER), hit(1, BULLETS, section="Safety checks")]
    draft = _answerer().generate("List the safety checks the crew performs.", hits)
    assert draft.short == ("Fuel level check", "Tyre pressure check", "Brake test")
    assert draft.text.count("[2]") == 3 and draft.citations == (2,)
    assert not draft.abstained


def test_extractive_count_answer_counts_what_it_cites() -> None:
    hits = [hit(0, FILLER), hit(1, BULLETS, section="Safety checks")]
    draft = _answerer().generate("How many safety checks does the crew perform?", hits)
    assert draft.short == "3"
    assert draft.text.startswith("3 — counted") and "Brake test [2]" in draft.text


def test_extractive_abstains_on_a_question_the_sources_do_not_hold() -> None:
    hits = [hit(0, BULLETS), hit(1, TABLE), hit(2, FILLER)]
    draft = _answerer().generate("Who signed the treaty of Westphalia in 1648?", hits)
    assert draft.abstained and draft.text == NO_ANSWER
    assert draft.related == (1, 2, 3) and draft.citations == ()


def test_extractive_number_answer_has_the_number_as_short_answer() -> None:
    text = (
        "Financial results\n\nIn 2019 the company's revenue grew by 12.5 percent to 3.4 "
        "billion dollars, driven by strong sales in Europe."
    )
    draft = _answerer().generate(
        "By what percentage did the company's revenue grow in 2019?", [hit(0, text)]
    )
    assert not draft.abstained
    assert draft.short is not None and "12.5" in draft.short


FINANCE = (
    "Consolidated balance sheets\n\nThe table gives the balances at the end of each fiscal year.\n"
    "Item | January 28, 2023 | January 29, 2022\n"
    "Goodwill | 1,383 | 1,384\n"
    "Total assets | 15,803 | 17,504\n"
    "Inventories | 5,140 | 5,965"
)


def test_a_table_cell_is_looked_up_by_row_and_column() -> None:
    hits = [hit(0, FILLER), hit(1, FINANCE, section="Balance sheets")]
    from fathom.stages.generate.shapes import table_cell

    cell = table_cell("In the table, what is the goodwill at January 28, 2023?", hits)
    assert cell is not None and cell.value == "1,383" and cell.n == 2
    assert cell.row == "Goodwill" and cell.column == "January 28, 2023"
    other = table_cell("What were total assets on January 29, 2022?", hits)
    assert other is not None and other.value == "17,504"
    assert table_cell("What were the inventories?", hits) is None  # no column named


def test_extractive_table_answer_gives_the_cell_with_its_labels() -> None:
    hits = [hit(0, FILLER), hit(1, FINANCE, section="Balance sheets")]
    draft = _answerer().generate(
        "According to the table, what were inventories at January 28, 2023?", hits
    )
    assert draft.short == "5,140"
    assert draft.text.startswith("5,140 (Inventories, January 28, 2023)") and draft.citations == (
        2,
    )


def _paper(path) -> object:
    """A two-page paper whose first page has a title block: title, authors, date."""
    from fathom.ingestion.pdf import import_pymupdf

    pymupdf = import_pymupdf()
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_text((72, 100), "Tidal Energy in Small Harbours", fontsize=22, fontname="hebo")
    page.insert_text((72, 140), "Mara Lindqvist, Tomas Okafor and Ines Duarte", fontsize=11)
    page.insert_text((72, 160), "Coastal Power Institute", fontsize=9)
    page.insert_text((72, 180), "June 2021", fontsize=10)
    body = "Small harbours can host tidal turbines that run for most of the day."
    for i in range(10):
        page.insert_text((72, 240 + 20 * i), body, fontsize=10)
    page = doc.new_page(width=595, height=842)
    said = "The turbines produced 40 kilowatts each."
    for i in range(10):
        page.insert_text((72, 100 + 20 * i), said, fontsize=10)
    doc.save(path)
    doc.close()
    return path


def test_metadata_questions_are_answered_from_the_title_block(tmp_path, minilm) -> None:
    import json

    from click.testing import CliRunner
    from fathom import cli

    pdf = _paper(tmp_path / "paper.pdf")
    res = CliRunner().invoke(
        cli.main, ["ask", str(pdf), "Who are the authors?", "--generator", "extractive", "--json"]
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["kind"] == "metadata" and data["trace"]["answer_kind"]["field"] == "authors"
    assert data["short_answer"] == ["Mara Lindqvist", "Tomas Okafor", "Ines Duarte"]
    assert data["citations"][0]["pages"] == "1" and "title page" in data["answer"]
    # A page past the end of the document: it does not say.
    res = CliRunner().invoke(
        cli.main,
        ["ask", str(pdf), "What does the chart on page 40 show?", "--generator", "extractive",
         "--json"],
    )  # fmt: skip
    data = json.loads(res.stdout)
    assert data["abstained"] is True and "it has 2 pages" in data["answer"]
    assert data["citations"] == [] and len(data["related"]) >= 1


def test_a_collection_indexed_before_metadata_says_how_to_read_it(tmp_path, minilm) -> None:
    import json
    import os
    from pathlib import Path

    from click.testing import CliRunner
    from fathom import cli

    pdf = _paper(tmp_path / "paper.pdf")
    args = ["ask", str(pdf), "Who are the authors?", "--generator", "extractive", "--json"]
    assert CliRunner().invoke(cli.main, args).exit_code == 0
    # what a manifest written before Fathom read metadata holds: no metadata at all
    (manifest,) = Path(os.environ["FATHOM_HOME"]).glob("collections/*/manifest.json")
    record = json.loads(manifest.read_text())
    # a manifest of format 1, which held every document's entry itself
    entries = manifest.parent / f"gen-{record['generation']:06d}" / "documents.jsonl"
    record["format_version"] = 1
    record["documents"] = [json.loads(line) for line in entries.read_text().splitlines()]
    entries.unlink()
    for doc in record["documents"]:
        doc["meta"] = {}
    manifest.write_text(json.dumps(record))
    data = json.loads(CliRunner().invoke(cli.main, args).stdout)
    assert data["short_answer"] != ["Mara Lindqvist", "Tomas Okafor", "Ines Duarte"]
    assert any("fathom ingest --rebuild" in n for n in data["trace"]["notices"])


def test_a_language_model_is_told_the_form_of_the_answer() -> None:
    from fathom.stages.generate.prompt import build_messages, kind_instruction

    hits = [hit(0, BULLETS)]
    user = build_messages("List the safety checks the crew performs.", hits)[1]["content"]
    assert "one item per line" in user and user.rstrip().endswith("Answer with citations:")
    assert "the number first" in kind_instruction("How many safety checks are there?")
    assert "authors" in kind_instruction("Who wrote this report?")
    assert kind_instruction("Where was Chopin born?") == ""  # a factoid: the system message
