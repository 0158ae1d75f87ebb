"""bench/render_page.py, in its smoke form on the bundled guide: both sides measured on every
cited page, the passage located on each, a generated scan's pages shown from the OCR words kept
at ingest (OCR reading none of them again) and read again, and a results file that names no
path here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fathom.bench import render_page
from fathom.bench.common import REPO
from fathom.ingestion.ocr import ocr_problem


@pytest.mark.slow
def test_the_smoke_run_renders_every_cited_page_both_ways(tmp_path: Path) -> None:
    out = tmp_path / "render.json"
    assert render_page.main(["--smoke", "--warmup", "1", "--out", str(out)]) == 0
    results = json.loads(out.read_text())
    assert results["pdfs_used"] == ["fathom-user-guide.pdf"]
    assert results["chunks"] >= 10 and results["pages_rendered"] >= results["chunks"]
    assert results["located_share"] == 1.0  # every chunk of the guide found on its page
    for side in ("shown_ms", "plain_ms", "show_chunk_ms"):
        assert 0 < results[side]["p50"] <= results[side]["p95"] <= results[side]["p99"]
    assert results["pdfs"]["fathom-user-guide.pdf"]["pages_rendered"] == results["pages_rendered"]
    assert results["dpi"] == 120 and "machine" in results
    scan = results["scan"]
    if ocr_problem() is None:
        assert scan["pages_rendered"] == render_page.SCAN_ROUNDS * scan["chunks"] > 0
        assert scan["located_share"] == 1.0 and scan["pages_read_again_by_ocr"] == 0
        assert scan["read_again"]["located_share"] == 1.0
    else:
        assert scan is None
    assert results["command"] == "python bench/render_page.py --warmup 1 --smoke"
    text = out.read_text()
    assert str(tmp_path) not in text and str(REPO) not in text  # no path of this checkout
