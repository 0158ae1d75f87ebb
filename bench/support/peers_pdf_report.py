"""results.md of bench/peers_pdf.py: its tables from the results it writes to results.json."""

from __future__ import annotations

from typing import Any

from fathom.bench.common import format_ci

# Every context in the tables, in order, with its label.
CONTEXTS = {
    "fathom-ask": "Fathom ask (reranked, its depth)",
    "fathom@10": "Fathom search, k = 10",
    "llamaindex@2": "LlamaIndex, top 2",
    "txtai@3": "txtai, limit 3",
    "llamaindex@ask-tokens": "LlamaIndex at Fathom ask's tokens",
    "txtai@ask-tokens": "txtai at Fathom ask's tokens",
    "fathom@llamaindex-tokens": "Fathom search within LlamaIndex top 2's tokens",
    "fathom@txtai-tokens": "Fathom search within txtai limit 3's tokens",
}
SYSTEM_LABELS = {"fathom": "Fathom", "llamaindex": "LlamaIndex", "txtai": "txtai"}


def _pct(s: dict[str, Any] | None) -> str:
    if not s or s.get("share") is None:
        return "–"
    return f"{s['share']:.1%} ({s['n']}/{s['total']})"


def _tokens(x: float | None) -> str:
    return "–" if x is None else f"{x:,.0f}"


def table(columns: list[str], rows: list[list[str]], left: int = 1) -> list[str]:
    """A Markdown table: the first ``left`` columns aligned left, the rest right."""
    align = ["---"] * left + ["---:"] * (len(columns) - left)
    out = ["| " + " | ".join(columns) + " |", "| " + " | ".join(align) + " |"]
    return out + ["| " + " | ".join(row) + " |" for row in rows]


def comparisons_table(results: dict[str, Any]) -> list[str]:
    rows = []
    for name, c in results["comparisons"].items():
        wtl = c.get("win_tie_loss") or {}
        w = " / ".join(f"{wtl.get(k, 0):.0%}" for k in ("win", "tie", "loss")) if wtl else "–"
        rows.append(
            [
                name,
                c["matched"],
                _pct(c["fathom"]),
                _pct(c["peer"]),
                _tokens(c["fathom_mean_tokens"]),
                _tokens(c["peer_mean_tokens"]),
                format_ci(c["difference_documents"], signed=True),
                format_ci(c["difference"], signed=True),
                w,
                "**true**" if c["ahead"] else "false",
                _read_text(c.get("peer_read_text")),
            ]
        )
    columns = ["comparison", "tokens matched", "Fathom", "peer", "Fathom tokens"]
    columns += ["peer tokens", "Δ by document", "Δ by question", "win / tie / loss"]
    columns += ["Fathom ahead (lower bound > 0)", "only PDFs the peer read text of: Δ by document"]
    return table(columns, rows, left=2)


def _read_text(c: dict[str, Any] | None) -> str:
    if not c:
        return "–"
    n = c["fathom"]["total"]
    return f"{format_ci(c['difference_documents'], signed=True)} ({n} questions)"


def no_text_line(results: dict[str, Any]) -> str:
    """Which systems read no text of some questions' PDFs (pages without a text layer)."""
    parts = [
        f"{SYSTEM_LABELS.get(s, s)} {v['questions']} ({v['documents']} documents)"
        for s, v in results.get("no_text", {}).items()
    ]
    return (
        "Answerable questions whose PDF the system read no text of (slides saved as images: "
        "Fathom reads such pages by OCR, LlamaIndex's default reader does not): "
        + ", ".join(parts)
        + ". Such a question's context holds no evidence page (a chunk without text holds "
        "nothing)."
    )


def contexts_table(results: dict[str, Any]) -> list[str]:
    rows = [
        [label, _pct(c["evidence"]), _tokens(c["mean_tokens"]), f"{c['mean_chunks']:.1f}"]
        for label, c in ((v, results["contexts"].get(k)) for k, v in CONTEXTS.items())
        if c
    ]
    return table(["context", "holds an evidence page", "mean tokens", "mean chunks"], rows)


def types_table(results: dict[str, Any]) -> list[str]:
    keys = [k for k in CONTEXTS if k in results["contexts"]]
    types = sorted({t for k in keys for t in results["contexts"][k]["by_doc_type"]})
    rows = []
    for t in types:
        cells = [t]
        for k in keys:
            s = results["contexts"][k]["by_doc_type"].get(t)
            cells.append(f"{s['n']}/{s['total']}" if s else "–")
        rows.append(cells)
    return table(["document type", *(f"`{k}`" for k in keys)], rows)


def ingest_lines(results: dict[str, Any]) -> list[str]:
    rows = []
    for system, s in results["ingest"].items():
        p = s["process"]
        rows.append(
            [
                SYSTEM_LABELS.get(system, system),
                str(s["documents"]),
                f"{s['chunks']:,}",
                f"{s['read_s']:.1f}",
                f"{s['build_s']:.1f}",
                f"{s['read_s'] + s['build_s']:.1f}",
                f"{p['wall_s']:.1f}",
                f"{p['peak_rss_mb']:.0f}",
                str(s["kept"]),
            ]
        )
    columns = ["system", "documents", "chunks", "read PDF s", "build index s", "ingest s"]
    columns += ["child process wall s (this run)", "peak RSS MB"]
    return table([*columns, "indexes kept from before"], rows)


def header(results: dict[str, Any]) -> list[str]:
    m = results["machine"]
    return [
        "# Fathom against LlamaIndex and txtai on MMLongBench-Doc's PDFs",
        "",
        f"Command: `{results['command']}` ({results['total_s'] / 60:.0f} min). Split: "
        f"`{results['split']}` half of the documents (seed {results['seed']}, as "
        f"bench/mmlongbench.py selects it): {results['questions']} answerable text-only "
        f"questions over {results['documents']} documents. Machine: {m.get('cpu')}, "
        f"{m.get('cpus')} cores, {m.get('memory_gb')} GiB, {m.get('threads')} threads for every "
        "system.",
        "",
        *([results["note"], ""] if results.get("note") else []),
        "Versions: " + ", ".join(f"{k} {v}" for k, v in results["versions"].items()) + ".",
        "",
        "A context holds an evidence page when one of its chunks comes from one of the "
        "question's evidence pages. Tokens are MiniLM tokens of the chunks' texts (means over "
        "the questions). Fathom ask's context is every source its answerer was given in the "
        "MMLongBench run; Fathom search is the same collections' hybrid retrieval without "
        "reranking. A peer matched to Fathom ask's tokens takes its ranked chunks until they "
        "reach Fathom's tokens for that question (the crossing chunk included, so it never gets "
        "fewer); Fathom search matched to a peer's default context takes its ranked chunks "
        "while they stay within the peer's tokens (it never gets more).",
        "",
        "txtai: " + results["textractor"] + " Textractor's backend on this machine: "
        f"{results['ingest'].get('txtai', {}).get('textractor_backend') or 'none installed'}.",
        "",
    ]


def markdown(results: dict[str, Any]) -> str:
    """results.md: the comparisons, each context's share, by document type, ingest."""
    lines = header(results)
    lines += [
        "## Fathom against each peer at equal context tokens",
        "",
        "Δ is Fathom − peer in the share of questions whose context holds an evidence page, "
        "with a bootstrap 95 % interval over documents (resampled with their questions) and "
        "over questions; Fathom is ahead when the lower bound over documents is above zero.",
        "",
        *comparisons_table(results),
        "",
        "## Every context",
        "",
        *contexts_table(results),
        "",
        no_text_line(results),
        "",
        "## By document type",
        "",
        "Questions whose context holds an evidence page, of the answerable questions of each type.",
        "",
        *types_table(results),
        "",
        "## Ingest",
        "",
        "Wall seconds summed over the documents, each system's model loaded before timing. "
        "Read: PDF to text (Fathom: parsing and chunking; txtai: LlamaIndex's reader, run "
        "again for it). Build: splitting, embedding, indexing, saving.",
        "",
        *ingest_lines(results),
        "",
    ]
    return "\n".join(lines)
