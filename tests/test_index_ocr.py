"""Ingesting scans and the new formats: OCR pages counted in the manifest and the summary, an
OCR'd file not read again while unchanged, the per-file time limit, old manifests; every hostile
input one line, recorded as failed, the rest of the batch ingested."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from fathom import cli
from fathom.bench.support import docgen
from fathom.index.collection import Collection
from fathom.index.manifest import MANIFEST
from fathom.ingestion import ocr

GOOD = "Solar panels convert sunlight into electricity using photovoltaic cells."
needs_ocr = pytest.mark.skipif(ocr.ocr_problem() is not None, reason="OCR is not installed")


def ingest_json(folder: Path, *extra: str, name: str = "k") -> dict:
    result = CliRunner().invoke(
        cli.main, ["ingest", str(folder), "-c", name, "--embedder", "hashing:64", "--json", *extra]
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    d = tmp_path / "in"
    d.mkdir()
    (d / "good.txt").write_text(GOOD)
    return d


@needs_ocr
@pytest.mark.slow
def test_scans_and_new_formats_in_one_batch(
    folder: Path, cfg, monkeypatch: pytest.MonkeyPatch
) -> None:
    docgen.make_scanned_pdf(folder / "scan.pdf")
    docgen.make_text_png(folder / "note.png")
    docgen.make_html(folder / "moths.html")
    docgen.make_pptx(folder / "deck.pptx")
    docgen.make_epub(folder / "book.epub")
    report = ingest_json(folder)
    files = {Path(f["path"]).name: f for f in report["files"]}
    assert {n: f["status"] for n, f in files.items()} == dict.fromkeys(files, "ok")
    assert files["scan.pdf"]["pages"] == 2 and files["scan.pdf"]["ocr_pages"] == 2
    assert files["note.png"]["ocr_pages"] == 1 and files["deck.pptx"]["pages"] == 2
    assert report["ocr_pages"] == 3
    coll = Collection.open(cfg, "k")
    entries = {Path(d.path).name: d for d in coll.manifest.documents}
    assert entries["scan.pdf"].ocr_pages == 2 and entries["moths.html"].ocr_pages == 0
    assert coll.check() == []

    # unchanged (same sha256): not read again, so OCR does not run
    def no_ocr(*args: object, **kwargs: object) -> None:
        raise AssertionError("an unchanged file was read by OCR again")

    monkeypatch.setattr(ocr.OcrEngine, "read", no_ocr)
    again = ingest_json(folder)
    statuses = {Path(f["path"]).name: f["status"] for f in again["files"]}
    assert statuses["scan.pdf"] == statuses["note.png"] == "unchanged"
    assert not again["committed"]
    assert {Path(f["path"]).name: f for f in again["files"]}["scan.pdf"]["ocr_pages"] == 2
    assert again["ocr_pages"] == 0  # the run itself read nothing by OCR


@needs_ocr
@pytest.mark.slow
def test_summary_names_ocr_pages(folder: Path) -> None:
    docgen.make_text_png(folder / "note.png")
    result = CliRunner().invoke(
        cli.main, ["ingest", str(folder), "-c", "k", "--embedder", "hashing:64"]
    )
    assert result.exit_code == 0, result.output
    assert "· 1 page read by OCR ·" in " ".join(result.stdout.split())


@needs_ocr
def test_ocr_respects_the_file_time_limit(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docgen.make_scanned_pdf(folder / "scan.pdf")
    monkeypatch.setenv("FATHOM_INGEST__FILE_TIMEOUT_S", "0.2")
    monkeypatch.setenv("FATHOM_INGEST__OCR_PAGE_TIMEOUT_S", "0.1")
    report = ingest_json(folder)
    files = {Path(f["path"]).name: f for f in report["files"]}
    assert files["scan.pdf"]["status"] == "failed"
    reason = files["scan.pdf"]["reason"]
    assert "took longer than 0.4 s" in reason and "ingest.ocr_page_timeout_s" in reason
    assert files["good.txt"]["status"] == "ok"


def test_pages_to_read_by_ocr_extend_the_time_limit() -> None:
    import time

    from fathom.ingestion import time_limit

    with time_limit("scan.pdf", 0.2) as limit:
        limit.extend(0.6)  # as OCR does once it knows how many pages it will read
        time.sleep(0.4)  # past the first limit, within the extended one
    assert limit.extended == pytest.approx(0.6)


def test_manifest_without_ocr_pages_still_opens(folder: Path, cfg) -> None:
    """A collection written before OCR (no ``ocr_pages`` in its entries, which a manifest of
    format 1 held itself) opens and re-ingests."""
    ingest_json(folder)
    coll = Collection.open(cfg, "k")
    path = coll.directory / MANIFEST
    docs = coll.data_dir / "documents.jsonl"
    coll.close()
    data = json.loads(path.read_text())
    data["format_version"] = 1
    data["documents"] = [json.loads(line) for line in docs.read_text().splitlines()]
    docs.unlink()
    for doc in data["documents"]:
        doc.pop("ocr_pages")
    path.write_text(json.dumps(data))
    reopened = Collection.open(cfg, "k")
    assert [d.ocr_pages for d in reopened.manifest.documents] == [0]
    reopened.close()
    again = ingest_json(folder)
    assert [f["status"] for f in again["files"]] == ["unchanged"]


def _not_a_zip(name: str) -> Callable[[Path], Path]:
    def make(path: Path) -> Path:
        path = path.with_name(name)
        path.write_bytes(b"definitely not a zip archive")
        return path

    return make


HOSTILE = [
    ("noise.png", docgen.make_noise_png, "no readable text", True),
    ("empty.png", docgen.make_empty_file, "empty file", False),
    ("bomb.png", docgen.make_bomb_png, "decompression bomb", False),
    ("cut.tiff", docgen.make_truncated_tiff, "truncated or corrupt", False),
    ("app.html", docgen.make_script_html, "no readable text", False),
    ("fake.pptx", _not_a_zip("fake.pptx"), "not a pptx", False),
    ("part.pptx", docgen.make_pptx_without, "cannot be read", False),
    ("fake.epub", _not_a_zip("fake.epub"), "not an epub", False),
    ("part.epub", docgen.make_epub_without, "a part is missing", False),
    ("drm.epub", docgen.make_drm_epub, "drm-protected", False),
]


@pytest.mark.parametrize(("name", "make", "needle", "uses_ocr"), HOSTILE)
def test_hostile_input_is_one_failed_line(
    folder: Path, cfg, name: str, make, needle: str, uses_ocr: bool
) -> None:
    if uses_ocr and ocr.ocr_problem() is not None:
        pytest.skip("OCR is not installed")
    bad = make(folder / name)
    report = ingest_json(folder)
    by_name = {Path(f["path"]).name: f for f in report["files"]}
    assert by_name["good.txt"]["status"] == "ok"
    failed = by_name[bad.name]
    assert failed["status"] == "failed"
    assert str(bad) in failed["reason"] and needle in failed["reason"].lower(), failed["reason"]
    assert "\n" not in failed["reason"]
    coll = Collection.open(cfg, "k")
    entries = {Path(d.path).name: d for d in coll.manifest.documents}
    assert entries[bad.name].status == "failed" and entries[bad.name].error
    assert coll.check() == [] and coll.manifest.counts()["documents"] == 1
    coll.close()
