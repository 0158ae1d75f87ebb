"""How much document metadata Fathom reads from real PDFs: for every PDF of a folder (by default
MMLongBench-Doc's, ``FATHOM_DATA/mmlongbench_doc/documents``), the document as ingest loads it
(``ingestion.load_document``, OCR never, so a scanned page costs nothing) and the title, authors,
organisation, date and version it carries (``Document.meta``, docs/metadata.md): how many
documents have each field, and each document's values, for a reader to check. Writes
``--out``/results.json and results.md.

    python bench/metadata.py [--data DIR] [--folder DIR] [--out DIR]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from fathom.bench.common import command_line, data_dir, log, machine_info, write_results

FIELDS = ("title", "authors", "organisation", "date", "version")


def read(folder: Path) -> list[dict[str, Any]]:
    """Each PDF's metadata as ingest reads it (OCR never), in file-name order."""
    from fathom.ingestion import load_document
    from fathom.ingestion.ocr import OcrSettings
    from fathom.ingestion.options import LoadOptions

    rows = []
    for path in sorted(folder.glob("*.pdf")):
        t = time.perf_counter()
        try:
            meta = load_document(path, LoadOptions(ocr=OcrSettings(mode="never"))).meta.to_dict()
            error = ""
        except Exception as exc:  # a file that fails to load is counted, not fatal
            # the file by its name alone: the results say nothing of this machine's folders
            meta, error = {}, f"{type(exc).__name__}: {exc}".replace(str(path), path.name)
        rows.append({"file": path.name, "meta": meta, "error": error, "s": time.perf_counter() - t})
        log(f"{path.name}: {meta.get('title', '')[:60]!r}")
    return rows


def counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    """How many documents carry each field, how many loaded carry none, and how many did not
    load (a PDF without a text layer, with OCR never)."""
    loaded = [r for r in rows if not r["error"]]
    out = {f: sum(bool(r["meta"].get(f)) for r in loaded) for f in FIELDS}
    out["none"] = sum(not any(r["meta"].get(f) for f in FIELDS) for r in loaded)
    out["not loaded"] = len(rows) - len(loaded)
    return out


def markdown(results: dict[str, Any]) -> str:
    m, n = results["machine"], len(results["rows"])
    lines = [
        "# Document metadata read from real PDFs",
        "",
        f"Command: `FATHOM_DATA=… {results['command']}`. Machine: {m.get('cpu')}, "
        f"{m.get('cpus')} cores, {m.get('memory_gb')} GiB. {n} PDFs, each loaded as ingest "
        "loads it (OCR never).",
        "",
        "| field | documents with one |",
        "| --- | ---: |",
        *(f"| {f} | {c} of {n} |" for f, c in results["counts"].items()),
        "",
        "| file | title | authors | organisation | date | version |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in results["rows"]:
        meta = r["meta"]
        cells = [
            str(meta.get("title", ""))[:80],
            ", ".join(meta.get("authors", []))[:80],
            str(meta.get("organisation", ""))[:60],
            str(meta.get("date", "")),
            str(meta.get("version", "")),
        ]
        cells = [c.replace("|", "/") for c in cells]
        lines.append(f"| {r['file']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=None, help="the data folder (default: FATHOM_DATA)")
    ap.add_argument("--folder", default=None, help="the PDFs (default: MMLongBench-Doc's)")
    ap.add_argument("--out", default="docs/results/metadata")
    args = ap.parse_args(argv)
    folder = (
        Path(args.folder) if args.folder else data_dir(args.data) / "mmlongbench_doc" / "documents"
    )
    rows = read(folder)
    results = {
        "command": command_line(argv),
        "machine": machine_info(),
        "counts": counts(rows),
        "rows": rows,
    }
    out = Path(args.out)
    write_results(out, results, markdown(results))
    log(f"wrote {out / 'results.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
