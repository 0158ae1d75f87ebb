"""OCR quality and speed: born-digital PDFs rendered to image-only PDFs, read back by Fathom's OCR.

Every page of each PDF is rendered with PyMuPDF (``--render-dpi``, 200) and the images are
written as an image-only PDF, with no text layer. Both versions are then ingested into fresh
collections in the same run (the text-layer path is the baseline), and for each page:

- character error rate (CER), whitespace removed and NFKC-normalised, in two readings. In any
  reading order: each line of the original's text layer that Fathom keeps (running headers,
  footers and page numbers left out) is aligned with the stretch of the OCR'd page text it
  matches best, and the edits are summed over the lines and divided by their characters — so
  text read in another order (prompt boxes side by side, a figure's labels) or text the layer
  does not have (a screenshot's) is not counted as wrong. In Fathom's reading order: the
  Levenshtein distance between the OCR'd page text and the page's text as Fathom reads it from
  the text layer, divided by its length (and the same against PyMuPDF's raw text layer);
- word recall: the share of the reference page's words (``\\w+``, lower-cased, with
  multiplicity) found as words in the OCR'd page text;
- seconds: wall clock of rendering + OCR + layout per page (from the ingest's progress events),
  and the share of the ingest's total time that OCR took.

Pages whose text layer is itself garbled (a figure font without a Unicode mapping: most of its
long words have no vowel) are listed and left out of the overall CER and recall.

``fathom search`` (hybrid, the default) runs 20 questions written about these pages on both
collections; agreement is the share whose top hit is on the same document and first page.

``--sweep`` also reads a sample of pages with one setting changed at a time (resolution,
detector side limit, recognition batching, threads, line squeeze, space rebuilding, and
rapidocr's own pipeline at its defaults) and reports CER, recall and seconds per page. The
PP-OCRv4 rows need rapidocr-onnxruntime, which Fathom does not install (``pip install --no-deps
rapidocr-onnxruntime==1.4.4``: its declared dependency is the desktop OpenCV); without it they
are left out.

    python bench/ocr.py [--data DIR] [--out docs/results/ocr] [--sweep] [--note TEXT]
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
import unicodedata
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from fathom.bench.common import (
    REPO,
    Stopwatch,
    bench_config,
    data_dir,
    log,
    machine_info,
    print_table,
    temp_home,
    write_json,
)

PDFS = ("react_arxiv2210.03629v2.pdf", "covidqa_annotation_handbook.pdf")
SWEEP_PAGES = (
    ("react_arxiv2210.03629v2.pdf", (1, 3, 6, 10)),
    ("covidqa_annotation_handbook.pdf", (3, 9)),
)
# (question, document) — written about single pages of the two PDFs
QUESTIONS = [
    ("Which four benchmarks are used to evaluate ReAct?", PDFS[0]),
    ("How does ReAct augment the agent's action space with the space of language?", PDFS[0]),
    (
        "Which kinds of thoughts, such as decomposing questions, does ReAct use on HotpotQA?",
        PDFS[0],
    ),
    (
        "What EM and accuracy do the PaLM-540B prompting methods reach on HotpotQA and Fever?",
        PDFS[0],
    ),
    ("How does finetuning compare with prompting as model size grows on HotPotQA?", PDFS[0]),
    (
        "What success rate does ReAct best of 6 reach on ALFWorld pick tasks compared to BUTLER?",
        PDFS[0],
    ),
    (
        "Which method decomposes multi-step reasoning into three steps, each by a dedicated LM?",
        PDFS[0],
    ),
    ("Which paper introduced Lila, language-informed latent actions?", PDFS[0]),
    ("Which magazine was started first, Arthur's Magazine or First for Women?", PDFS[0]),
    ("Did Nikolaj Coster-Waldau work with the Fox Broadcasting Company?", PDFS[0]),
    ("a 3 ounce bottle of bright citrus deodorant for sensitive skin", PDFS[0]),
    ("Is the Bermuda Triangle a loosely-defined region in the Pacific Ocean?", PDFS[0]),
    ("What is the DeepAnnotation tool for?", PDFS[1]),
    ("How do the quality and quantity of labels affect the algorithm?", PDFS[1]),
    ("How do I create a project once I am logged in?", PDFS[1]),
    ("Which file format is accepted when adding documents for labelling?", PDFS[1]),
    ("How many standard questions should one block contain at most?", PDFS[1]),
    ("How do I export the labels from the tool?", PDFS[1]),
    ("What should annotators assigned to category U do?", PDFS[1]),
    ("How do I add a custom question by highlighting the answer passage?", PDFS[1]),
]
WORD = re.compile(r"\w+")
SPACE = re.compile(r"\s+")


# ---------------------------------------------------------------------------------------------
# metrics
# ---------------------------------------------------------------------------------------------


def levenshtein(a: str, b: str) -> int:
    """Edit distance, one row at a time in numpy (insertions by a running minimum)."""
    if not a or not b:
        return len(a) + len(b)
    xa = np.frombuffer(a.encode("utf-32-le"), dtype=np.uint32)
    xb = np.frombuffer(b.encode("utf-32-le"), dtype=np.uint32)
    cols = np.arange(len(xb) + 1, dtype=np.int64)
    prev = cols.copy()
    for i, ch in enumerate(xa, 1):
        row = np.empty_like(prev)
        row[0] = i
        row[1:] = np.minimum(prev[1:] + 1, prev[:-1] + (xb != ch))
        prev = np.minimum.accumulate(row - cols) + cols
    return int(prev[-1])


def best_match(unit: str, text: str) -> int:
    """Edits to turn ``unit`` into the substring of ``text`` it matches best (semi-global
    alignment: where in ``text`` it starts and ends is free)."""
    if not unit:
        return 0
    if not text:
        return len(unit)
    xa = np.frombuffer(unit.encode("utf-32-le"), dtype=np.uint32)
    xb = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    cols = np.arange(len(xb) + 1, dtype=np.int64)
    prev = np.zeros(len(xb) + 1, dtype=np.int64)  # any start in ``text`` costs nothing
    for i, ch in enumerate(xa, 1):
        row = np.empty_like(prev)
        row[0] = i
        row[1:] = np.minimum(prev[1:] + 1, prev[:-1] + (xb != ch))
        prev = np.minimum.accumulate(row - cols) + cols
    return int(prev.min())


def squash(text: str) -> str:
    return SPACE.sub("", unicodedata.normalize("NFKC", text))


def words(text: str) -> Counter[str]:
    return Counter(w.lower() for w in WORD.findall(unicodedata.normalize("NFKC", text)))


def layer_lines(ref: str, raw: str) -> list[str]:
    """The text layer's lines that Fathom keeps (running headers, footers and page numbers
    left out), whitespace removed: the units of the any-order CER. A line's end-of-line
    hyphen is dropped, as Fathom drops it when it joins the word."""
    kept = squash(ref)
    units = []
    for line in raw.splitlines():
        unit = squash(line).rstrip("-")
        if unit and unit in kept:
            units.append(unit)
    return units


def page_scores(ref: str, hyp: str, raw: str) -> dict[str, Any]:
    r, h = squash(ref), squash(hyp)
    ref_words, hyp_words = words(ref), words(hyp)
    found = sum(min(n, hyp_words[w]) for w, n in ref_words.items())
    raw_sq = squash(raw)
    units = layer_lines(ref, raw)
    unit_chars = sum(len(u) for u in units)
    matched = sum(best_match(u, h) for u in units)
    return {
        "ref_chars": len(r),
        "edits": levenshtein(r, h),
        "cer": levenshtein(r, h) / max(1, len(r)),
        "line_chars": unit_chars,
        "matched_edits": matched,
        "cer_any_order": matched / max(1, unit_chars),
        "cer_raw_layer": levenshtein(raw_sq, h) / max(1, len(raw_sq)),
        "ref_words": sum(ref_words.values()),
        "words_found": found,
        "word_recall": found / max(1, sum(ref_words.values())),
        "garbled_layer": garbled(raw),
    }


def garbled(raw: str) -> bool:
    """A text layer from a figure font without a Unicode mapping (shifted glyph codes): most
    of its letters come out upper-case (the rest of these pages: 2-20 %)."""
    letters = re.findall(r"[A-Za-z]", raw)
    return len(letters) >= 500 and sum(c.isupper() for c in letters) > 0.3 * len(letters)


# ---------------------------------------------------------------------------------------------
# the run
# ---------------------------------------------------------------------------------------------


def render_image_pdf(src: Path, dst: Path, dpi: int, limit: int = 0) -> int:
    """``src`` with each page replaced by its picture at ``dpi``: an image-only PDF (only the
    first ``limit`` pages when ``limit``)."""
    from fathom.ingestion.pdf import import_pymupdf

    pymupdf = import_pymupdf()
    out = pymupdf.open()
    with pymupdf.open(src) as doc:
        for page in doc:
            if limit and page.number >= limit:
                break
            pix = page.get_pixmap(dpi=dpi)
            new = out.new_page(width=page.rect.width, height=page.rect.height)
            new.insert_image(new.rect, pixmap=pix)
    out.save(dst, deflate=True)
    n = out.page_count
    out.close()
    return n


def raw_layer(src: Path) -> list[str]:
    from fathom.ingestion.pdf import import_pymupdf

    with import_pymupdf().open(src) as doc:
        return [page.get_text() for page in doc]


def page_texts(doc: Any) -> dict[int, str]:
    return {p.number: doc.text[p.start : p.end] for p in doc.pages}


def ingest_capturing(cfg: Any, paths: list[Path], name: str) -> tuple[Any, dict, dict, float]:
    """Ingest ``paths`` into ``name``; the report, the parsed documents by path, per-page OCR
    seconds by path, and the wall seconds. The documents are captured by wrapping
    ``fathom.ingestion.load_document`` (the function the ingest calls) for this run."""
    from fathom import ingestion
    from fathom.index.ingest import ingest_paths

    docs: dict[str, Any] = {}
    page_seconds: dict[str, list[float]] = {}
    page_cpu: dict[str, list[float]] = {}
    parse_seconds: dict[str, float] = {}
    real = ingestion.load_document

    def capture(path: Any, **kwargs: Any) -> Any:
        key = str(path)
        started = time.perf_counter()
        stamps = [started]
        cpu = [time.process_time()]
        inner = kwargs.get("on_page")

        def on_page(done: int, total: int) -> None:
            if done == 0:  # OCR starts: a page's time runs from here or the page before
                stamps[:], cpu[:] = [time.perf_counter()], [time.process_time()]
            else:
                stamps.append(time.perf_counter())
                cpu.append(time.process_time())
            if inner is not None:
                inner(done, total)

        kwargs["on_page"] = on_page
        doc = real(path, **kwargs)
        parse_seconds[key] = time.perf_counter() - started
        page_seconds[key] = list(np.diff(stamps))
        page_cpu[key] = list(np.diff(cpu))
        docs[key] = doc
        return doc

    ingestion.load_document = capture
    try:
        with Stopwatch() as sw:
            report = ingest_paths(cfg, [str(p) for p in paths], name)
    finally:
        ingestion.load_document = real
    times = {"pages": page_seconds, "cpu": page_cpu, "parse": parse_seconds}
    return report, docs, times, sw.seconds


def top_page(cfg: Any, collection: str, question: str) -> tuple[str, int, int] | None:
    """``fathom search``'s top hit: (the PDF it came from, its first and last page)."""
    from fathom import commands
    from fathom.index.collection import collections_root
    from fathom.index.manifest import read_manifest

    probe, _ = commands.search(cfg, collection, question)
    if not probe.hits:
        return None
    manifest = read_manifest(collections_root(cfg) / collection)
    paths = {d.doc_id: d.path for d in manifest.documents} if manifest else {}
    chunk = probe.hits[0].chunk
    source = Path(paths.get(chunk.doc_id, "?")).name.replace(".scan.pdf", ".pdf")
    return source, chunk.page_start, chunk.page_end


def sweep(
    scans: dict[str, Path], refs: dict[str, dict[int, str]], raws: dict[str, list[str]]
) -> list[dict[str, Any]]:
    """One setting changed at a time on the sample pages: CER, recall, seconds per page."""
    from fathom.ingestion.ocr import OcrEngine
    from fathom.ingestion.pdf import import_pymupdf

    pymupdf = import_pymupdf()
    variants: list[tuple[str, dict[str, Any], int]] = [
        ("Fathom's settings", {}, 200),
        ("render 150 dpi", {}, 150),
        ("render 300 dpi", {}, 300),
        ("detector side 736", {"det_side": 736}, 200),
        ("detector side 1600", {"det_side": 1600}, 200),
        ("batch 2,048 columns", {"batch_columns": 2048}, 200),
        ("batch 8,192 columns", {"batch_columns": 8192}, 200),
        ("1 thread", {"threads": 1}, 200),
        ("lines not squeezed (1.0)", {"squeeze": 1.0}, 200),
        ("no space rebuilding", {"rebuild_spaces": False}, 200),
        ("PP-OCRv4 recogniser", {"rec_model": "v4"}, 200),
        (
            "PP-OCRv4 recogniser, no space rebuilding",
            {"rec_model": "v4", "rebuild_spaces": False},
            200,
        ),
        ("rapidocr 3.10 pipeline, its defaults (PP-OCRv6)", {"rapidocr": "rapidocr"}, 200),
        (
            "rapidocr-onnxruntime 1.4, its defaults (PP-OCRv4)",
            {"rapidocr": "rapidocr_onnxruntime"},
            200,
        ),
    ]
    rows = []
    renders: dict[int, list[tuple[Any, str]]] = {}
    for label, kwargs, dpi in variants:
        if dpi not in renders:
            renders[dpi] = []
            for name, numbers in SWEEP_PAGES:
                with pymupdf.open(scans[name]) as doc:
                    for n in numbers:
                        pix = doc[n - 1].get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY)
                        gray = np.frombuffer(pix.samples, np.uint8).reshape(pix.height, pix.stride)
                        ref, raw = refs[name][n], raws[name][n - 1]
                        renders[dpi].append((gray[:, : pix.width].copy(), ref, raw))
        if kwargs.get("rapidocr"):
            reader = _rapidocr_reader(kwargs["rapidocr"])
            if reader is None:
                continue
        else:
            if kwargs.get("rec_model") == "v4":
                kwargs = {**kwargs, "rec_model": _v4_recogniser()}
                if kwargs["rec_model"] is None:
                    continue
            reader = _laid_out(OcrEngine(**kwargs).read, dpi)
        reader(np.full((64, 256), 255, np.uint8))  # models loaded before the clock starts
        edits = plain = chars = plain_chars = found = total = 0
        wall = cpu = 0.0
        for gray, ref, raw in renders[dpi]:
            with Stopwatch() as sw:
                text = reader(gray)
            s = page_scores(ref, text, raw)
            edits, chars = edits + s["matched_edits"], chars + s["line_chars"]
            plain += s["edits"]
            plain_chars += s["ref_chars"]
            found, total = found + s["words_found"], total + s["ref_words"]
            wall, cpu = wall + sw.seconds, cpu + sw.cpu
        n = len(renders[dpi])
        rows.append(
            {
                "variant": label,
                "cer_any_order": edits / chars,
                "cer": plain / plain_chars,
                "word_recall": found / total,
                "s_per_page": wall / n,
                "cpu_s_per_page": cpu / n,
            }
        )
        log(
            f"sweep {label}: CER {edits / chars:.2%}, recall {found / total:.2%}, "
            f"{wall / n:.2f} s/page"
        )
    return rows


def _v4_recogniser() -> Path | None:
    """rapidocr-onnxruntime 1.4's PP-OCRv4 recognition model, when that package is installed."""
    import importlib.util

    spec = importlib.util.find_spec("rapidocr_onnxruntime")
    if spec is None or not spec.submodule_search_locations:
        log("sweep: rapidocr-onnxruntime is not installed; its PP-OCRv4 rows are left out")
        return None
    folder = Path(next(iter(spec.submodule_search_locations)))
    return folder / "models" / "ch_PP-OCRv4_rec_infer.onnx"


def _laid_out(read: Any, dpi: int) -> Any:
    """``read`` followed by Fathom's page layout: the text a page becomes when ingested."""
    from fathom.ingestion.clean import assemble
    from fathom.ingestion.ocr import layout_page
    from fathom.ingestion.pdf_layout import mark_size_headings, page_blocks

    def run(gray: Any) -> str:
        page = layout_page(1, read(gray), gray.shape[1], gray.shape[0], 72.0 / dpi)
        mark_size_headings([page])
        return assemble(page_blocks(page)).text

    return run


def _rapidocr_reader(package: str) -> Any:
    """A whole rapidocr pipeline at its defaults (its own detection side limits, angle
    classifier and recognition batches), lines in its order; None when not installed."""
    try:
        if package == "rapidocr":
            from rapidocr import RapidOCR

            engine = RapidOCR(params={"Global.log_level": "critical"})
        else:
            from rapidocr_onnxruntime import RapidOCR

            engine = RapidOCR()
    except ImportError:
        log(f"sweep: {package} is not installed; its row is left out")
        return None

    def read(gray: Any) -> str:
        result = engine(np.repeat(gray[:, :, None], 3, axis=2))
        if package == "rapidocr":
            return "\n".join(result.txts or ())
        lines = result[0] or []
        return "\n".join(line[1] for line in lines)

    return read


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", help="data folder (default: $FATHOM_DATA)")
    ap.add_argument("--out", default=str(REPO / "docs" / "results" / "ocr"))
    ap.add_argument("--render-dpi", type=int, default=200)
    ap.add_argument("--sweep", action="store_true", help="also measure each setting's effect")
    ap.add_argument("--max-pages", type=int, default=0, help="a quick check: first N pages")
    ap.add_argument("--note", default="", help="how the run was made (e.g. the machine's load)")
    args = ap.parse_args()
    data = data_dir(args.data)
    sources = {name: data / "pdfs" / name for name in PDFS}
    info = machine_info()
    result: dict[str, Any] = {
        "command": "python bench/ocr.py" + (" --sweep" if args.sweep else ""),
        "render_dpi": args.render_dpi,
        "machine": info,
        "note": args.note,
    }
    with tempfile.TemporaryDirectory(prefix="fathom-bench-ocr-") as tmp, temp_home("ocr") as home:
        scans = {}
        for name, src in sources.items():
            scans[name] = Path(tmp) / name.replace(".pdf", ".scan.pdf")
            pages = render_image_pdf(src, scans[name], args.render_dpi, args.max_pages)
            log(f"rendered {name}: {pages} pages at {args.render_dpi} dpi, no text layer")
        cfg = bench_config(home)
        log("ingesting the originals (text layer)")
        _, text_docs, _, text_s = ingest_capturing(cfg, list(sources.values()), "text")
        log("ingesting the image-only copies (OCR)")
        ocr_report, ocr_docs, ocr_times, ocr_s = ingest_capturing(cfg, list(scans.values()), "ocr")
        pages_rows = []
        refs: dict[str, dict[int, str]] = {}
        raws: dict[str, list[str]] = {}
        for name, src in sources.items():
            ref_doc, hyp_doc = text_docs[str(src)], ocr_docs[str(scans[name])]
            refs[name] = page_texts(ref_doc)
            hyps, raws[name] = page_texts(hyp_doc), raw_layer(src)
            secs = ocr_times["pages"][str(scans[name])]
            cpus = ocr_times["cpu"][str(scans[name])]
            for number, ref in refs[name].items():
                if number > len(secs):
                    continue  # --max-pages
                row = {
                    "document": name,
                    "page": number,
                    "seconds": secs[number - 1],
                    "cpu_seconds": cpus[number - 1],
                }
                row.update(page_scores(ref, hyps.get(number, ""), raws[name][number - 1]))
                pages_rows.append(row)
        counted = [r for r in pages_rows if not r["garbled_layer"]]
        n_pages = len(pages_rows)
        ocr_parse = sum(ocr_times["parse"].values())
        result["pages"] = pages_rows
        result["overall"] = {
            "pages": n_pages,
            "pages_counted": len(counted),
            "garbled_layer_pages": [
                f"{r['document']} p{r['page']}" for r in pages_rows if r["garbled_layer"]
            ],
            "cer": sum(r["edits"] for r in counted) / sum(r["ref_chars"] for r in counted),
            "cer_any_order": sum(r["matched_edits"] for r in counted)
            / sum(r["line_chars"] for r in counted),
            "worst_page_cer_any_order": max(r["cer_any_order"] for r in counted),
            "cer_raw_layer_mean": float(np.mean([r["cer_raw_layer"] for r in counted])),
            "word_recall": sum(r["words_found"] for r in counted)
            / sum(r["ref_words"] for r in counted),
            "worst_page_cer": max(counted, key=lambda r: r["cer"])["cer"],
            "ocr_s_per_page": ocr_parse / n_pages,
            "ocr_cpu_s_per_page": sum(r["cpu_seconds"] for r in pages_rows) / n_pages,
            "ocr_pages_read": ocr_report.to_dict()["ocr_pages"],
            "ingest_s_ocr": ocr_s,
            "ingest_s_text": text_s,
            "text_layer_s_per_page": text_s / n_pages,
            "ocr_share_of_ingest": ocr_parse / ocr_s,
            "ocr_vs_text_ingest": ocr_s / text_s,
        }
        agree = []
        for question, doc in QUESTIONS:
            a, b = top_page(cfg, "text", question), top_page(cfg, "ocr", question)
            same = a is not None and b is not None and a[:2] == b[:2]
            overlap = a is not None and b is not None and a[0] == b[0]
            overlap = overlap and a[1] <= b[2] and b[1] <= a[2]
            agree.append(
                {
                    "question": question,
                    "document": doc,
                    "text_layer": a,
                    "ocr": b,
                    "same": same,
                    "overlap": overlap,
                }
            )
        result["search"] = {
            "questions": agree,
            "same_top_page": sum(r["same"] for r in agree),
            "overlapping_top_pages": sum(r["overlap"] for r in agree),
        }
        if args.sweep:
            result["sweep"] = sweep(scans, refs, raws)
    report(result, Path(args.out))


def summary_rows(result: dict[str, Any]) -> list[list[str]]:
    o, search = result["overall"], result["search"]
    n = len(search["questions"])
    return [
        [
            f"CER, whitespace ignored, any reading order ({o['pages_counted']} pages)",
            f"{o['cer_any_order']:.2%} (worst page {o['worst_page_cer_any_order']:.2%})",
        ],
        [
            "CER, whitespace ignored, in Fathom's reading order",
            f"{o['cer']:.2%} (worst page {o['worst_page_cer']:.2%})",
        ],
        ["word recall", f"{o['word_recall']:.1%}"],
        [
            "OCR seconds per page (render, OCR, layout): wall / CPU",
            f"{o['ocr_s_per_page']:.2f} / {o['ocr_cpu_s_per_page']:.2f}",
        ],
        ["text-layer ingest seconds per page (wall)", f"{o['text_layer_s_per_page']:.2f}"],
        ["OCR share of the OCR ingest's time", f"{o['ocr_share_of_ingest']:.0%}"],
        [
            "`fathom search` top hit: same first page / overlapping pages",
            f"{search['same_top_page']}/{n} / {search['overlapping_top_pages']}/{n}",
        ],
    ]


def sweep_rows(result: dict[str, Any]) -> list[list[str]]:
    return [
        [
            r["variant"],
            f"{r['cer_any_order']:.2%}",
            f"{r['cer']:.2%}",
            f"{r['word_recall']:.1%}",
            f"{r['s_per_page']:.2f}",
            f"{r['cpu_s_per_page']:.2f}",
        ]
        for r in result.get("sweep", [])
    ]


SWEEP_HEADER = ["variant", "CER any order", "CER", "word recall", "s/page", "CPU s/page"]
PAGE_HEADER = ["document", "page", "CER any order", "CER", "CER vs raw layer", "word recall", "s"]


def page_rows(result: dict[str, Any]) -> list[list[str]]:
    return [
        [
            r["document"],
            f"{r['page']}{' (garbled layer)' if r['garbled_layer'] else ''}",
            f"{r['cer_any_order']:.2%}",
            f"{r['cer']:.2%}",
            f"{r['cer_raw_layer']:.2%}",
            f"{r['word_recall']:.1%}",
            f"{r['seconds']:.1f}",
        ]
        for r in result["pages"]
    ]


def report(result: dict[str, Any], out: Path) -> None:
    print_table("OCR per page", PAGE_HEADER, page_rows(result))
    print_table("OCR overall", ["what", "result"], summary_rows(result))
    if "sweep" in result:
        print_table("settings, one at a time (sample pages)", SWEEP_HEADER, sweep_rows(result))
    write_json(out / "ocr.json", result)
    write_markdown(result, out / "ocr.md")


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def write_markdown(result: dict[str, Any], path: Path) -> None:
    o, m = result["overall"], result["machine"]
    lines = [
        "# OCR: image-only copies of two PDFs read back by Fathom",
        "",
        f"Command: `{result['command']}`, data from `--data` or `FATHOM_DATA`: "
        "`pdfs/react_arxiv2210.03629v2.pdf` (31 pages) and "
        "`pdfs/covidqa_annotation_handbook.pdf` (13 pages).",
        "",
        f"Machine: {m.get('cpus')} cores ({m.get('cpu')}), {m.get('memory_gb')} GiB of memory, "
        f"shared: load average {_load(m.get('loadavg_start'))} at the start and "
        f"{_load(m.get('loadavg_end'))} at the end"
        + (f"; {result['note']}" if result.get("note") else "")
        + ". Wall seconds depend on that load; CPU seconds much less.",
        "",
        f"Every page rendered at {result['render_dpi']} dpi (PyMuPDF) into image-only PDFs, "
        "ingested with the default configuration beside the originals; the method is in "
        "`bench/ocr.py`'s docstring.",
        "",
        *_md_table(["what", "result"], summary_rows(result)),
        "",
    ]
    if o["garbled_layer_pages"]:
        lines += [
            "Left out of CER and recall: "
            + ", ".join(o["garbled_layer_pages"])
            + " (their text layer is garbled, a figure font without a Unicode mapping: there "
            "the reference is wrong, not the OCR).",
            "",
        ]
    if "sweep" in result:
        pages = "; ".join(f"{n} p. {', '.join(map(str, p))}" for n, p in SWEEP_PAGES)
        lines += [
            "## Settings, one at a time",
            "",
            f"Sample pages: {pages}; each row changes one setting from Fathom's.",
            "",
            *_md_table(SWEEP_HEADER, sweep_rows(result)),
            "",
        ]
    lines += ["## Per page", "", *_md_table(PAGE_HEADER, page_rows(result)), "", "## Search", ""]
    rows = []
    for q in result["search"]["questions"]:
        a, b = q["text_layer"], q["ocr"]
        rows.append(
            [
                q["question"],
                f"{a[0][:12]} p{a[1]}-{a[2]}" if a else "-",
                f"{b[0][:12]} p{b[1]}-{b[2]}" if b else "-",
                "yes" if q["same"] else ("overlap" if q["overlap"] else "no"),
            ]
        )
    lines += _md_table(["question", "original", "OCR", "same first page"], rows)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    log(f"wrote {path}")


def _load(value: Any) -> str:
    return "?" if not value else f"{value[0]:.1f}"


if __name__ == "__main__":
    main()
