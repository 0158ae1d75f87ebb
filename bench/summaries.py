"""Key findings without a model, scored against the section a document's authors wrote to say
them: its abstract or executive summary, withheld.

For each shared PDF and DOCX with an "Abstract" or "Executive summary" section (FATHOM_DATA
``pdfs/*.pdf``, ``docx/*.docx``, and up to ``--mmlb`` MMLongBench-Doc PDFs whose first pages
have one), ingested into a collection under ``--work`` (kept, so a rerun ingests nothing):

* the withheld section is the chunks ``findings.section_kinds`` calls ``abstract`` or
  ``executive summary``, from its heading on; the candidate text is every other chunk, in
  document order (a document whose withheld text runs past ``MAX_REFERENCE_WORDS`` words —
  its abstract shares a section with the paper that follows — is left out);
* **Fathom**: the sentences ``findings.pick`` takes for "What are the key findings?" over the
  candidate chunks (the offline summary path's own picking);
* **LexRank** (sumy's ``LexRankSummarizer``, its English stemmer and stop words) over the same
  text, as many sentences as Fathom quoted for that document;
* **lead-3**: the first three sentences of the same text.

Sentences are split once, by Fathom's splitter (``chunking.sentences``), for all three. ROUGE-2
recall and F1 against the withheld section: tokens are lower-cased runs of ASCII letters and
digits (``[a-z0-9]+``), Porter-stemmed (NLTK's ``PorterStemmer``), bigram counts clipped as
ROUGE does; no stop words removed. Per-document numbers, and a bootstrap interval over
documents (``evaluation.metrics.bootstrap_ci``) of Fathom − LexRank and Fathom − lead-3.

Timing (``--runs``, default 5): on the ReAct paper and the shared PDFs and DOCX, one warm
``Engine`` per document, the summary answer's own time (compress + generate, from the trace)
for "What are the key findings?", against the previous offline path in the same process: every
section (the 12 largest) fitted by the compressor to its share of the budget, the result fitted
again, then the most central sentence per section (``previous_summary`` below reproduces it).
P50 of each and their ratio, per document and over all.

    python bench/summaries.py [--data DIR] [--work DIR] [--mmlb 15] [--runs 5]
        [--out docs/results/summaries]

Needs ``sumy`` (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import glob
import itertools
import re
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

from fathom.bench.common import REPO, command_line, data_dir, log, machine_info, write_json

QUESTION = "What are the key findings?"
MAX_REFERENCE_WORDS = 600  # a longer "abstract" ran on into the paper: not a summary to score
WITHHELD = ("abstract", "executive summary")
_TOKEN = re.compile(r"[a-z0-9]+")
_HEADING = re.compile(
    r"^\s*(?:abstract|executive summary)\b[\s.:—–-]*", re.IGNORECASE | re.MULTILINE
)
_OPENS = re.compile(r"^\s*(?:abstract|executive summary)\b[\s.:—–-]*", re.IGNORECASE)


# --- ROUGE-2 ------------------------------------------------------------------------------


def tokens(text: str, stem: bool = True) -> list[str]:
    """Lower-cased ``[a-z0-9]+`` runs of ``text``, Porter-stemmed unless ``stem=False``."""
    words = _TOKEN.findall(text.lower())
    if not stem:
        return words
    from nltk.stem.porter import PorterStemmer

    stemmer = PorterStemmer()
    return [stemmer.stem(w) for w in words]


def rouge2(candidate: str, reference: str, stem: bool = True) -> dict[str, float]:
    """ROUGE-2 ``{recall, precision, f1}`` of ``candidate`` against ``reference``: bigram
    counts, each overlap clipped to the smaller count."""
    c, r = (
        Counter(itertools.pairwise(t)) for t in (tokens(candidate, stem), tokens(reference, stem))
    )
    overlap = sum(min(n, c[g]) for g, n in r.items())
    recall = overlap / sum(r.values()) if r else 0.0
    precision = overlap / sum(c.values()) if c else 0.0
    f1 = 2 * recall * precision / (recall + precision) if recall + precision else 0.0
    return {"recall": recall, "precision": precision, "f1": f1}


# --- documents ----------------------------------------------------------------------------


def opens_with_summary(path: Path, pages: int = 3) -> bool:
    """Whether one of the first ``pages`` pages of a PDF has a line "Abstract" or "Executive
    summary" (cheap: read before ingesting)."""
    from fathom.ingestion.pdf import import_pymupdf

    fitz = import_pymupdf()
    with fitz.open(path) as doc:
        for page in list(doc)[:pages]:
            for line in page.get_text().splitlines():
                if _OPENS.match(line) and len(line.split()) <= 12:
                    return True
    return False


def documents(data: Path, mmlb: int, max_pages: int) -> list[Path]:
    """The shared PDFs and DOCX, then up to ``mmlb`` MMLongBench-Doc PDFs of at most
    ``max_pages`` pages that open with an abstract or executive summary (sorted by name)."""
    from fathom.ingestion.pdf import import_pymupdf

    out = sorted(Path(p) for p in glob.glob(str(data / "pdfs" / "*.pdf")))
    out += sorted(Path(p) for p in glob.glob(str(data / "docx" / "*.docx")))
    fitz = import_pymupdf()
    taken = 0
    for p in sorted(glob.glob(str(data / "mmlongbench_doc" / "documents" / "*.pdf"))):
        if taken >= mmlb:
            break
        try:
            with fitz.open(p) as doc:
                if doc.page_count > max_pages:
                    continue
            if opens_with_summary(Path(p)):
                out.append(Path(p))
                taken += 1
        except Exception as e:  # a broken file is skipped, and said
            log(f"{Path(p).name}: skipped ({e})")
    return out


def withheld_text(text: str) -> str:
    """The withheld section's text from its "Abstract" or "Executive summary" heading on (a
    title page's title, authors and affiliations before it are not the summary)."""
    heading = _HEADING.search(text)
    return text[heading.end() :] if heading else text


def split(text: str) -> list[str]:
    """``text``'s sentences, by Fathom's splitter, whitespace collapsed."""
    from fathom.chunking.sentences import split_sentences

    out = []
    for a, b in split_sentences(text):
        s = " ".join(text[a:b].split())
        if s:
            out.append(s)
    return out


def lexrank(sentences: list[str], n: int) -> list[str]:
    """sumy's LexRank over ``sentences`` (one paragraph), its ``n`` best, in document order."""
    from sumy.models.dom import ObjectDocumentModel, Paragraph, Sentence
    from sumy.nlp.stemmers import Stemmer
    from sumy.summarizers.lex_rank import LexRankSummarizer
    from sumy.utils import get_stop_words

    class Words:  # sumy's tokenizer protocol, without NLTK's punkt data
        language = "english"

        @staticmethod
        def to_words(sentence: str) -> list[str]:
            return re.findall(r"\w+", sentence)

    doc = ObjectDocumentModel([Paragraph([Sentence(s, Words()) for s in sentences])])
    summarizer = LexRankSummarizer(Stemmer("english"))
    summarizer.stop_words = get_stop_words("english")
    return [str(s) for s in summarizer(doc, n)]


# --- quality ------------------------------------------------------------------------------


def score_document(engine: Any, path: Path) -> dict[str, Any] | None:
    """The three summaries of one document with its abstract or executive summary withheld,
    and their ROUGE-2 against it; None when the document has no such section."""
    from fathom.core.base import Hit
    from fathom.stages.generate.findings import pick, section_kinds

    chunks = engine.collection.store.all()
    kinds = section_kinds(chunks)
    withheld = [c for c, k in zip(chunks, kinds, strict=True) if k in WITHHELD]
    if not withheld or len(withheld) > 0.4 * len(chunks):
        return None  # none, or a document without headings after its abstract
    reference = withheld_text("\n\n".join(c.text for c in withheld))
    if len(reference.split()) > MAX_REFERENCE_WORDS:
        log(f"{path.name}: skipped, its abstract runs on into the paper (no heading after it)")
        return None
    rest = [(c, k) for c, k in zip(chunks, kinds, strict=True) if k not in WITHHELD]
    hits = [Hit(chunk=c, score=1.0) for c, _ in rest]
    t = time.perf_counter()
    picks = pick(QUESTION, hits, kinds=[k for _, k in rest])
    pick_ms = (time.perf_counter() - t) * 1000
    fathom = [p.text for p in picks]
    sentences = split("\n\n".join(c.text for c, _ in rest))
    n = max(1, len(fathom))
    systems = {"fathom": fathom, "lexrank": lexrank(sentences, n), "lead3": sentences[:3]}
    row: dict[str, Any] = {
        "document": path.name,
        "withheld_kind": sorted({k for k in kinds if k in WITHHELD}),
        "reference_words": len(reference.split()),
        "candidate_sentences": len(sentences),
        "fathom_pick_ms": round(pick_ms, 1),
    }
    for name, summary in systems.items():
        text = " ".join(summary)
        row[name] = {
            "sentences": len(summary),
            "words": len(text.split()),
            "rouge2": {k: round(v, 4) for k, v in rouge2(text, reference).items()},
        }
    row["fathom"]["quoted"] = fathom
    return row


def compare(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Means and bootstrap intervals over documents of each system's ROUGE-2, and of
    Fathom − LexRank and Fathom − lead-3."""
    from fathom.evaluation.metrics import bootstrap_ci

    out: dict[str, Any] = {"documents": len(rows)}
    for metric in ("recall", "f1"):
        for name in ("fathom", "lexrank", "lead3"):
            out[f"{name}_{metric}"] = bootstrap_ci([r[name]["rouge2"][metric] for r in rows])
        for base in ("lexrank", "lead3"):
            diff = [r["fathom"]["rouge2"][metric] - r[base]["rouge2"][metric] for r in rows]
            out[f"fathom_minus_{base}_{metric}"] = bootstrap_ci(diff)
    return out


# --- speed --------------------------------------------------------------------------------


def previous_summary(engine: Any, question: str, budget: int) -> tuple[Any, float]:
    """The previous offline summary path, reproduced: every section (the 12 largest) fitted by
    the compressor to its share of the budget, the sections fitted again, then the most
    central sentence of each (at least three in all), cited. ``(draft, compress + generate
    ms)``."""
    from fathom.core.base import Hit
    from fathom.stages.generate.candidates import candidates, central
    from fathom.stages.summary import MAX_SECTIONS, merged

    gen, compressor = engine.parts.generator, engine.parts.compressor
    pairs = list(enumerate(engine.collection.store.all()))
    t = time.perf_counter()
    by_section: dict[tuple[str, str], list[tuple[int, Any]]] = {}
    for row, c in pairs:
        by_section.setdefault((c.doc_id, c.section), []).append((row, c))
    groups = list(by_section.values())
    if len(groups) > MAX_SECTIONS:
        keep = sorted(range(len(groups)), key=lambda i: -sum(c.n_tokens for _, c in groups[i]))
        groups = [groups[i] for i in sorted(keep[:MAX_SECTIONS])]
    per_section = max(64, budget // max(1, len(groups)))
    section_hits = []
    for group in groups:
        hits = [Hit(chunk=c, score=1.0, row=row) for row, c in group]
        head = group[0][1]
        kept = compressor.fit(f"main points of {head.section or head.title}", hits, per_section)
        if kept:
            section_hits.append(Hit(chunk=merged(kept), score=1.0))
    kept = compressor.fit(question, section_hits, budget)
    cands = [c for c in candidates(kept) if c.quotable]
    quota = max(1, -(-3 // max(1, len(kept))))
    taken: Counter[int] = Counter()
    picked: list[Any] = []
    for c in central(cands, len(cands)):
        union = [p for p in picked if c.terms | p.terms]
        if taken[c.n] >= quota or any(
            len(c.terms & p.terms) / len(c.terms | p.terms) >= 0.5 for p in union
        ):
            continue
        taken[c.n] += 1
        picked.append(c)
    quoted = [(c.n, c.text) for c in sorted(picked, key=lambda c: (c.n, c.pos))]
    draft = gen._quote(question, kept, quoted, None, t)
    return draft, (time.perf_counter() - t) * 1000


def time_document(engine: Any, runs: int) -> dict[str, Any]:
    """P50 over ``runs`` of the summary answer's own time (compress + generate) now and by
    the previous path, interleaved run by run."""
    from fathom.stages.prepare import prepare

    now, before = [], []
    answer = None
    budget = None
    for _ in range(runs):
        answer = engine.ask(QUESTION)
        ms = answer.trace.stages_ms
        now.append(ms.get("compress", 0.0) + ms.get("generate", 0.0))
        budget = budget or _budget(engine, prepare)
        _, old_ms = previous_summary(engine, QUESTION, budget)
        before.append(old_ms)
    p_now, p_before = statistics.median(now), statistics.median(before)
    return {
        "runs": runs,
        "p50_ms": round(p_now, 1),
        "previous_p50_ms": round(p_before, 1),
        "ratio": round(p_now / p_before, 3) if p_before else None,
        "answer": answer.text if answer is not None else "",
    }


def _budget(engine: Any, prepare: Any) -> int:
    """The context budget the engine gives a summary question (its strategy's)."""
    from fathom.router.strategy import STRATEGIES

    return STRATEGIES["summarization"].budget_tokens


# --- main ---------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=None)
    ap.add_argument("--work", default=str(REPO.parent / "summaries-work"))
    ap.add_argument("--mmlb", type=int, default=15, help="MMLongBench-Doc PDFs, at most")
    ap.add_argument("--max-pages", type=int, default=40, help="skip longer MMLongBench PDFs")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", default=str(REPO / "docs" / "results" / "summaries"))
    args = ap.parse_args()

    import os

    data = data_dir(args.data)
    work = Path(args.work).resolve()
    os.environ["FATHOM_HOME"] = str(work / "home")
    from fathom.core.config import load_config
    from fathom.index.targets import resolve_target
    from fathom.stages.pipeline import Engine

    cfg = load_config(overrides={"generator.backend": "extractive"})
    paths = documents(data, args.mmlb, args.max_pages)
    rows, timing = [], []
    for path in paths:
        t = time.perf_counter()
        engine = Engine(cfg, resolve_target(cfg, str(path)))
        log(f"{path.name}: ready in {time.perf_counter() - t:.0f} s")
        row = score_document(engine, path)
        if row is not None:
            rows.append(row)
            log(
                f"{path.name}: R2 recall fathom {row['fathom']['rouge2']['recall']:.3f} "
                f"lexrank {row['lexrank']['rouge2']['recall']:.3f} "
                f"lead3 {row['lead3']['rouge2']['recall']:.3f}"
            )
        if path.parent.name in ("pdfs", "docx") and args.runs > 0:
            timed = {"document": path.name, **time_document(engine, args.runs)}
            timing.append(timed)
            log(f"{path.name}: {timed['p50_ms']} ms, previous {timed['previous_p50_ms']} ms")
        engine.close()
    speed = {
        "p50_ms": round(statistics.median(t["p50_ms"] for t in timing), 1) if timing else None,
        "previous_p50_ms": (
            round(statistics.median(t["previous_p50_ms"] for t in timing), 1) if timing else None
        ),
    }
    if timing and speed["previous_p50_ms"]:
        speed["ratio"] = round(speed["p50_ms"] / speed["previous_p50_ms"], 3)
    result = {
        "question": QUESTION,
        "rouge": "ROUGE-2, tokens [a-z0-9]+ lower-cased, Porter-stemmed, bigram counts clipped",
        "quality": compare(rows) if rows else {},
        "per_document": rows,
        "speed": {"over_documents": speed, "per_document": timing},
        "machine": machine_info(),
        "command": command_line(),
    }
    out = Path(args.out)
    write_json(out / "results.json", result)
    (out / "results.md").write_text(markdown(result), encoding="utf-8")
    log(f"wrote {out / 'results.md'}")


def markdown(result: dict[str, Any]) -> str:
    """results.md: the comparison, per-document numbers and the timing."""
    from fathom.bench.common import format_ci

    m = result["machine"]
    q = result["quality"]
    lines = [
        "# Key findings against the withheld abstract (ROUGE-2)",
        "",
        f"Command: `{result['command']}` (FATHOM_DATA: the shared data folder)",
        f"Machine: {m.get('cpus')} cores, {m.get('memory_gb')} GB, {m.get('cpu')}",
        f"Tokenisation: {result['rouge']}.",
        "",
        f"Documents with an abstract or executive summary: {q.get('documents', 0)}",
        "",
        "| | ROUGE-2 recall | ROUGE-2 F1 |",
        "|---|---|---|",
    ]
    for name, label in (("fathom", "Fathom"), ("lexrank", "LexRank (sumy)"), ("lead3", "lead-3")):
        lines.append(
            f"| {label} | {format_ci(q.get(f'{name}_recall'))} | {format_ci(q.get(f'{name}_f1'))} |"
        )
    for base, label in (("lexrank", "LexRank"), ("lead3", "lead-3")):
        lines.append(
            f"| Fathom − {label} | {format_ci(q.get(f'fathom_minus_{base}_recall'), signed=True)} "
            f"| {format_ci(q.get(f'fathom_minus_{base}_f1'), signed=True)} |"
        )
    lines += [
        "",
        "Intervals: 95% bootstrap over documents.",
        "",
        "| document | withheld | ref words | Fathom R / F1 (sentences) | LexRank R / F1 "
        "| lead-3 R / F1 |",
        "|---|---|---|---|---|---|",
    ]
    for r in result["per_document"]:
        cells = [
            f"{r[s]['rouge2']['recall']:.3f} / {r[s]['rouge2']['f1']:.3f}"
            for s in ("fathom", "lexrank", "lead3")
        ]
        cells[0] += f" ({r['fathom']['sentences']})"
        lines.append(
            f"| {r['document']} | {', '.join(r['withheld_kind'])} | {r['reference_words']} | "
            + " | ".join(cells)
            + " |"
        )
    sp = result["speed"]
    lines += [
        "",
        "## Speed: a summary answer's own time (compress + generate), warm engine",
        "",
        "| document | P50 ms | previous path P50 ms | ratio |",
        "|---|---|---|---|",
    ]
    for t in sp["per_document"]:
        lines.append(f"| {t['document']} | {t['p50_ms']} | {t['previous_p50_ms']} | {t['ratio']} |")
    o = sp["over_documents"]
    lines.append(
        f"| median over documents | {o.get('p50_ms')} | {o.get('previous_p50_ms')} | "
        f"{o.get('ratio')} |"
    )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
