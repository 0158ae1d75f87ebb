"""`fathom ask` on a scanned PDF: the extractive answer cites the page the scan shows it on, and
its source says the text was read by OCR."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from fathom import cli
from fathom.bench.support import docgen
from fathom.ingestion import ocr


@pytest.mark.slow
@pytest.mark.skipif(ocr.ocr_problem() is not None, reason="OCR is not installed")
def test_ask_a_scanned_pdf_cites_the_right_page(tmp_path: Path, minilm) -> None:
    pdf = docgen.make_scanned_pdf(tmp_path / "scanned.pdf")
    res = CliRunner().invoke(
        cli.main,
        [
            "ask",
            str(pdf),
            "How high does the spring tide rise at Kestrel Point?",
            "--generator",
            "extractive",
            "--json",
        ],
        env={"FATHOM_HOME": str(tmp_path / "home")},
    )
    assert res.exit_code == 0, res.output
    answer = json.loads(res.stdout)
    assert "four metres" in answer["answer"].lower()
    cited = answer["citations"]
    assert cited and cited[0]["pages"] == "2"
    assert cited[0]["section"] == "Tide Tables (OCR)"  # the source says OCR read it
