"""bench/metadata.py: the fields counted and the table written, on a generated PDF."""

from __future__ import annotations

from pathlib import Path

from fathom.bench.metadata import counts, markdown, read


def test_reads_counts_and_tabulates_a_folder_of_pdfs(tmp_path: Path) -> None:
    from fathom.ingestion.pdf import import_pymupdf

    pymupdf = import_pymupdf()
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_text((72, 100), "Harbour Tides and Turbines", fontsize=22, fontname="hebo")
    page.insert_text((72, 140), "Mara Lindqvist and Tomas Okafor", fontsize=11)
    page.insert_text((72, 180), "June 2021", fontsize=10)
    for i in range(12):
        page.insert_text((72, 240 + 20 * i), "Turbines run with the tide all day.", fontsize=10)
    doc.save(tmp_path / "paper.pdf")
    doc.close()
    rows = read(tmp_path)
    assert [r["file"] for r in rows] == ["paper.pdf"] and not rows[0]["error"]
    c = counts(rows)
    assert c["title"] == 1 and c["authors"] == 1 and c["none"] == 0
    md = markdown({"command": "python bench/metadata.py", "machine": {}, "counts": c, "rows": rows})
    assert "| title | 1 of 1 |" in md and "Mara Lindqvist, Tomas Okafor" in md
