"""Rendering a cited page with its passage highlighted (``fathom ask --show``, ``fathom show``,
the MCP ``show`` tool), against rendering the same page with nothing located or painted, in
the same run.

The PDFs (``--pdf NAME``, repeatable, in ``$FATHOM_DATA/pdfs``; default: every PDF there;
without the data folder, or with ``--smoke``, the bundled ``examples/fathom-user-guide.pdf``)
are ingested once into a throwaway collection (the hashing embedder: a page's rendering does
not depend on the vectors). Every chunk then counts as cited, and each page it is on is
rendered twice, one right after the other (in alternating order): the contender,
``ingestion.page_image.render_page`` — the page drawn at 120 dpi, the chunk's words located in
its text layer, painted and encoded as PNG, what ``--show`` does per page — and the baseline,
the same page drawn and encoded as PNG, the cost of any page preview. Reported: each side's
per-page latency P50/P95/P99 and their ratio, the share of pages on which the passage was
located, and ``index.grounding.show_chunk``'s time per chunk (its pages, the chunk lookup and
the file check). With OCR installed, the two pages of a generated scan (no text layer) are
shown too, as a user gets them: the scan ingested with OCR, which keeps the words it read, and
each of its chunks shown by ``show_chunk`` (one page each: a chunk of OCR text stays on its
page) from those words, ``SCAN_ROUNDS`` times; and, as the fallback for a collection without
them or a changed file, each page read again by OCR (its cache cleared).

    python bench/render_page.py [--data DIR] [--pdf NAME ...] [--warmup 5] [--out FILE]
    python bench/render_page.py --smoke   # the bundled guide: does it run?

Writes ``docs/results/grounding/render.json`` (``--smoke``:
``bench/results/render_page_smoke.json``). The JSON names no path of this machine: PDFs by
file name, the data folder as ``FATHOM_DATA=…``.
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from pathlib import Path
from typing import Any

from fathom.bench.common import (
    REPO,
    bench_config,
    data_dir,
    default_out,
    log,
    percentiles,
    print_table,
    ratio,
    temp_home,
    write_json,
)

COLLECTION = "bench-render"
SCAN_COLLECTION = "bench-render-scan"
SCAN_ROUNDS = 25  # each of the scan's chunks shown this many times (its first not counted)
REOCR_ROUNDS = 3  # each of its pages read again by OCR this many times
GUIDE = REPO / "examples" / "fathom-user-guide.pdf"


def pdfs(args: argparse.Namespace) -> list[Path]:
    """The PDFs to render: ``--pdf`` names in the data folder's ``pdfs/``, or all of them; the
    bundled guide with ``--smoke`` or when there is no data folder."""
    if args.smoke:
        return [GUIDE]
    try:
        folder = data_dir(args.data) / "pdfs"
    except SystemExit:
        log("no data folder: rendering the bundled user guide")
        return [GUIDE]
    found = [folder / n for n in args.pdf] if args.pdf else sorted(folder.glob("*.pdf"))
    missing = [p.name for p in found if not p.is_file()]
    if missing or not found:
        raise SystemExit(f"no such PDF in {folder.name}/: {', '.join(missing) or '*.pdf'}")
    return found


def baseline(path: Path, number: int) -> bytes:
    """Page ``number`` drawn and encoded exactly as ``render_page`` does, nothing located."""
    import numpy as np
    from fathom.ingestion.page_image import DPI, PNG_LEVEL
    from fathom.ingestion.pdf import import_pymupdf
    from PIL import Image

    pymupdf = import_pymupdf()
    with pymupdf.open(str(path)) as doc:
        page = doc.load_page(number - 1)
        zoom = DPI / 72.0
        pix = page.get_pixmap(matrix=pymupdf.Matrix(zoom, zoom), alpha=False)
        rgb = np.frombuffer(pix.samples, dtype=np.uint8).reshape(pix.height, pix.stride)
        rgb = rgb[:, : pix.width * 3].reshape(pix.height, pix.width, 3).copy()
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, format="PNG", compress_level=PNG_LEVEL)
    return buf.getvalue()


def measure_pdfs(cfg: Any, files: list[Path], warmup: int) -> dict[str, Any]:
    """Every (chunk, page) of ``files`` rendered by both sides; every chunk by ``show_chunk``."""
    from fathom.index.collection import Collection
    from fathom.index.grounding import find_chunk, show_chunk
    from fathom.index.ingest import ingest_paths
    from fathom.ingestion.page_image import render_page

    ingest_paths(cfg, files, COLLECTION)
    coll = Collection.open(cfg, COLLECTION)
    chunks = coll.store.all()
    jobs = []
    for chunk in chunks:
        _, _, entry = find_chunk(coll, chunk.chunk_id)
        for number in range(chunk.page_start, chunk.page_end + 1):
            jobs.append((chunk, Path(entry.path), number))
    log(f"{len(chunks)} chunks of {len(files)} PDF(s): {len(jobs)} pages to render, each twice")
    for chunk, path, number in jobs[:warmup]:  # imports, font caches
        render_page(path, "pdf", number, chunk.text)
        baseline(path, number)
    shown, plain, located, per_file = [], [], 0, {}
    for i, (chunk, path, number) in enumerate(jobs):
        order = ("shown", "plain") if i % 2 == 0 else ("plain", "shown")
        for side in order:
            t = time.perf_counter()
            if side == "shown":
                image = render_page(path, "pdf", number, chunk.text)
                shown.append((time.perf_counter() - t) * 1000)
            else:
                baseline(path, number)
                plain.append((time.perf_counter() - t) * 1000)
        located += image.located != "not found"
        per_file.setdefault(path.name, []).append(shown[-1])
    whole = []
    for chunk in chunks:
        t = time.perf_counter()
        show_chunk(coll, chunk.chunk_id)
        whole.append((time.perf_counter() - t) * 1000)
    coll.close()
    return {
        "pdfs": {
            name: {"pages_rendered": len(ms), "shown_ms": percentiles(ms)}
            for name, ms in per_file.items()
        },
        "chunks": len(chunks),
        "pages_rendered": len(jobs),
        "located_share": located / max(1, len(jobs)),
        "shown_ms": percentiles(shown),
        "plain_ms": percentiles(plain),
        "show_chunk_ms": percentiles(whole),
    }


def measure_scan(cfg: Any, home: Path) -> dict[str, Any] | None:
    """The two pages of a generated scan shown from the words OCR read at ingest, and read
    again by OCR (the fallback); None without OCR."""
    from fathom.bench.support import docgen
    from fathom.index.collection import Collection
    from fathom.index.grounding import show_chunk
    from fathom.index.ingest import ingest_paths
    from fathom.ingestion import page_image
    from fathom.ingestion.ocr import ocr_problem

    problem = ocr_problem()
    if problem is not None:
        log(f"no OCR here ({problem}): scanned pages not measured")
        return None
    folder = home / "scan"
    folder.mkdir()
    scan = docgen.make_scanned_pdf(folder / "scan.pdf")
    ingest_paths(cfg, [folder], SCAN_COLLECTION)
    coll = Collection.open(cfg, SCAN_COLLECTION)
    chunks = coll.store.all()
    page_image._OCR_CACHE.clear()
    kept, located = [], 0
    for round_ in range(SCAN_ROUNDS + 1):
        for chunk in chunks:
            t = time.perf_counter()
            [shown] = show_chunk(coll, chunk.chunk_id)
            if round_:  # the first round reads the file's checksum, once per process
                kept.append((time.perf_counter() - t) * 1000)
                located += shown.image is not None and shown.image.located == "OCR"
    read_again = len(page_image._OCR_CACHE)  # pages OCR read while they were shown: none
    coll.close()

    passages = ["Harbour pilots guide large vessels", "The spring tide at Kestrel Point"]
    page_image.render_page(scan, "pdf", 1, passages[0], read_by_ocr=True)  # loads OCR
    fallback, found = [], 0
    for _ in range(REOCR_ROUNDS):
        for number, passage in enumerate(passages, start=1):
            page_image._OCR_CACHE.clear()
            t = time.perf_counter()
            image = page_image.render_page(scan, "pdf", number, passage, read_by_ocr=True)
            fallback.append((time.perf_counter() - t) * 1000)
            found += image.located == "OCR"
    return {
        "chunks": len(chunks),
        "pages_rendered": len(kept),
        "located_share": located / max(1, len(kept)),
        "pages_read_again_by_ocr": read_again,
        "shown_ms": percentiles(kept),
        "read_again": {
            "pages_rendered": len(fallback),
            "located_share": found / len(fallback),
            "shown_ms": percentiles(fallback),
        },
    }


def command(args: argparse.Namespace) -> str:
    """The command line that made the results, the data folder by name only."""
    parts = ["python bench/render_page.py", *(f"--pdf {n}" for n in args.pdf)]
    parts += [f"--warmup {args.warmup}"] + (["--smoke"] if args.smoke else [])
    return ("" if args.smoke else "FATHOM_DATA=… ") + " ".join(parts)


def report(results: dict[str, Any]) -> None:
    s, p = results["shown_ms"], results["plain_ms"]
    rows = [
        ["rendered + located + highlighted (--show)", s["p50"], s["p95"], s["p99"]],
        ["rendered only (baseline)", p["p50"], p["p95"], p["p99"]],
        ["ratio", *(ratio(s[k], p[k]) for k in ("p50", "p95", "p99"))],
    ]
    c = results["show_chunk_ms"]
    rows.append(["show_chunk, per chunk (all its pages)", c["p50"], c["p95"], c["p99"]])
    if results.get("scan"):
        o = results["scan"]["shown_ms"]
        rows.append(["scanned page, OCR words kept at ingest", o["p50"], o["p95"], o["p99"]])
        o = results["scan"]["read_again"]["shown_ms"]
        rows.append(["scanned page, read again by OCR (fallback)", o["p50"], o["p95"], o["p99"]])
    print_table(
        f"a cited page as a PNG: {results['pages_rendered']} pages of {results['chunks']} "
        f"chunks, passage located on {results['located_share']:.1%} (ms)",
        ["", "P50", "P95", "P99"],
        rows,
        digits=1,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=None)
    ap.add_argument("--pdf", action="append", default=[], help="a PDF in DATA/pdfs (repeatable)")
    ap.add_argument("--warmup", type=int, default=5, help="pages rendered first, not counted")
    ap.add_argument("--smoke", action="store_true", help="the bundled guide: does it run?")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    out = args.out or (
        default_out("render_page_smoke")
        if args.smoke
        else REPO / "docs" / "results" / "grounding" / "render.json"
    )
    files = pdfs(args)
    with temp_home("render") as home:
        cfg = bench_config(home, {"embedder.name": "hashing:64"})
        results: dict[str, Any] = {"pdfs_used": [p.name for p in files]}
        results |= measure_pdfs(cfg, files, args.warmup)
        results["scan"] = measure_scan(cfg, home)
    from fathom.ingestion.page_image import DPI

    results["dpi"] = DPI
    results["command"] = command(args)
    report(results)
    write_json(out, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
