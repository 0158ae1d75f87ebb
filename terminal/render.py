"""What the command line prints while it works and when it answers: progress on stderr, and on
stdout the ingest summary, search hits and the answer with its report, as text or ``--json``.

The progress displays and the rich helpers here serve every command; ``fathom.terminal.tables``
draws the rest (evaluations, policies, portfolios, history, collections, configuration). Only click
and the standard library (and ``fathom.core``) are imported at the top; rich loads inside the
functions that draw, so importing this module stays cheap. Results arrive as the objects the
commands produce (reports, answers, plain dicts); nothing here computes them.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import click

# ---------------------------------------------------------------------------------------------
# rich helpers
# ---------------------------------------------------------------------------------------------


def stderr_console():
    from rich.console import Console

    return Console(stderr=True)


def plain(text: str | None):
    """Text from a document, path, server or model, made safe for rich: escape sequences and
    control characters removed, and never parsed as rich markup (``[/x]`` would raise)."""
    from fathom.core.text import safe_terminal_text
    from rich.text import Text

    return Text(safe_terminal_text(text or ""))


def identifier_column(table: Any, header: str, values: list[str], **kw: Any) -> None:
    """A column of identifiers a user types back (collection names, members, strategies):
    never cut with an ellipsis. It keeps its full width while the terminal allows, squeezing
    the other columns instead, and folds onto the next line only when nothing else can give."""
    width = max([len(header), *(len(v) for v in values)])
    table.add_column(header, overflow="fold", min_width=width, **kw)


def print_json(obj: Any) -> None:
    click.echo(json.dumps(obj, ensure_ascii=False, indent=None))


# ---------------------------------------------------------------------------------------------
# progress
# ---------------------------------------------------------------------------------------------


class IngestProgress:
    """Rich progress on stderr: files (pages, chunks) and embedding (chunks/s, ETA)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.progress = None
        self.files_task = None
        self.embed_task = None
        self.ocr_task = None
        self.pages = 0
        self.chunks = 0
        self.problems: list[str] = []

    def __enter__(self) -> IngestProgress:
        if self.enabled:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TaskProgressColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self.progress = Progress(
                # Descriptions name files: shown as they are, never parsed as rich markup.
                TextColumn("{task.description}", markup=False),
                BarColumn(),
                MofNCompleteColumn(),
                TaskProgressColumn(),
                TextColumn("{task.fields[rate]}"),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=stderr_console(),
                transient=False,
            )
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()

    def __call__(self, event: str, **info: Any) -> None:
        p = self.progress
        if event == "file" and info.get("status") == "failed":
            self.problems.append(info.get("reason", ""))
        if p is None:
            return
        if event == "waiting":
            p.console.print(f"waiting for another ingest of {info['collection']!r} to finish…")
        elif event == "discovered":
            self.files_task = p.add_task("files", total=info["files"], rate="")
        elif event == "file" and self.files_task is not None:
            self.pages += int(info.get("pages") or 0)
            self.chunks += int(info.get("chunks") or 0)
            if info.get("status") in ("ok", "unchanged", "failed"):
                p.advance(self.files_task)
            p.update(
                self.files_task,
                description=f"files · {self.pages} pages · {self.chunks} chunks",
            )
        elif event == "ocr_page":
            from fathom.core.text import safe_terminal_text

            # OCR is the slow part of reading a scan: its pages and pages/s while it runs
            label = safe_terminal_text(f"OCR {Path(info['path']).name}")
            if self.ocr_task is None:
                self.ocr_task = p.add_task(label, total=info["total"], rate="")
            p.update(
                self.ocr_task,
                description=label,
                completed=info["done"],
                total=info["total"],
                rate=f"{info['rate']:.2f} pages/s",
            )
        elif event == "embed_start" and info["total"]:  # nothing new: no bar
            self.embed_task = p.add_task("embedding", total=info["total"], rate="")
        elif event == "embedded" and self.embed_task is not None:
            p.update(self.embed_task, completed=info["done"])
            task = p.tasks[self.embed_task]
            if task.speed:
                p.update(self.embed_task, rate=f"{task.speed:,.0f} chunks/s")
        elif event == "exporting":
            p.console.print(f"exporting {info['model']} to ONNX for fast queries (once)…")
        elif event == "warning":
            p.console.print("[yellow]warning[/yellow]", plain(info["message"]))
        elif event == "writing":
            p.console.print(f"writing index ({info['chunks']} chunks)…")


class EvalProgress:
    """Questions done / total with ETA on stderr."""

    def __init__(self, console) -> None:
        self.console = console
        self.progress = None
        self.task = None
        self.started: float | None = None
        self.first_done = 0
        self.last = 0.0

    def __enter__(self) -> EvalProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()

    def __call__(self, done: int, total: int) -> None:
        if not self.console.is_terminal:  # a log file: one plain line every 30 s
            now = time.monotonic()
            if self.started is None:
                self.started, self.first_done, self.last = now, done, now
            elif now - self.last >= 30 or done == total:
                self.last = now
                rate = (done - self.first_done) / max(now - self.started, 1e-9)
                eta = f", ETA {(total - done) / rate:.0f} s" if rate > 0 else ""
                self.console.print(f"questions {done}/{total}{eta}", highlight=False)
            return
        if self.progress is None:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self.progress = Progress(
                TextColumn("questions"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=self.console,
            )
            self.progress.start()
            self.task = self.progress.add_task("questions", total=total, completed=done)
        self.progress.update(self.task, completed=done)


class AnswerStream:
    """Streams answer tokens to stdout as they arrive (plain text, not JSON)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.started = False

    def __call__(self, token: str) -> None:
        if not self.enabled:
            return
        from fathom.core.text import safe_terminal_text

        if not self.started:
            sys.stdout.write("\n")
            self.started = True
        sys.stdout.write(safe_terminal_text(token))
        sys.stdout.flush()


def ask_events(console, followup: bool = True):
    """The Engine's events while it answers: a rewritten follow-up (``Answer.followup``: as
    asked, as answered, how) on stdout as soon as it is known, before the answer streams
    (``followup`` False: not at all, for --json); a low-confidence answer retried deeper."""

    def on_event(event: str, **info: Any) -> None:
        follow = info.get("followup") or {}
        if event == "followup" and followup and follow["method"] != "unchanged":
            from rich.console import Console

            Console().print(
                f"[bold]Follow-up[/bold] {plain(follow['asked'])} → asked as "
                f"{plain(follow['question'])} ({follow['method']}"
                + (f", subject {plain(follow['subject'])}" if follow["subject"] else "")
                + ")",
                highlight=False,
            )
        elif event == "escalate":
            console.print(
                f"[yellow]low confidence ({info['confidence']:.2f}) → retrieving deeper "
                f"(k = {info['k']}) and regenerating[/yellow]"
            )

    return on_event


# ---------------------------------------------------------------------------------------------
# ingest, search
# ---------------------------------------------------------------------------------------------


def render_ingest(report, as_json: bool = False) -> None:
    if as_json:
        print_json(report.to_dict())
        return
    from rich.console import Console

    out = Console()
    err = stderr_console()
    for f in report.files:
        if f.status == "failed":
            err.print("[red]failed[/red] ", plain(f.reason), highlight=False)
        elif f.status == "skipped":
            err.print("[yellow]skipped[/yellow]", plain(f"{f.path}: {f.reason}"), highlight=False)
    c = report.to_dict()["counts"]
    ocr = report.ocr_pages
    ocr_note = f"{ocr} page{'' if ocr == 1 else 's'} read by OCR · " if ocr else ""
    verb = "committed" if report.committed else "nothing to change"
    out.print(
        f"collection [bold]{report.collection}[/bold] (generation {report.generation}, {verb}): "
        f"{c['ok']} ingested, {c['unchanged']} unchanged, {c['failed']} failed, "
        f"{c['skipped']} skipped, {c['removed']} removed · "
        f"{report.embedded_chunks} chunks embedded, {report.total_chunks} in the collection · "
        f"{ocr_note}{report.seconds.get('total', 0):.1f} s",
        highlight=False,
    )


class WatchDisplay:
    """``ingest --watch``: one line on stdout per batch (or its JSON), waits and failures on
    stderr."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json

    def __call__(self, event: str, **info: Any) -> None:
        err = stderr_console()
        if event == "watching":
            err.print(plain(f"watching {', '.join(info['paths'])} for changes — Ctrl-C stops"))
        elif event == "waiting":
            files = info["files"]
            err.print(plain(f"waiting for {len(files)} file(s) still being written: {files[0]}…"))
        elif event == "batch":
            self.batch(info["batch"])

    def batch(self, batch) -> None:
        if self.as_json:
            print_json(batch.to_dict())
            return
        from fathom.core.text import safe_terminal_text

        report = batch.report
        for f in report.files:
            if f.status == "failed":
                stderr_console().print("[red]failed[/red] ", plain(f.reason), highlight=False)
        verb = "committed" if report.committed else "nothing to change"
        # One line, never wrapped: a log of the batches reads one per line.
        click.echo(
            f"{time.strftime('%H:%M:%S')} collection {safe_terminal_text(report.collection)} "
            f"(generation {report.generation}, {verb}): {batch.added} added, {batch.changed} "
            f"changed, {batch.removed} removed, {report.count('failed')} failed · "
            f"{report.embedded_chunks} chunks embedded, {report.total_chunks} in the collection"
            f" · {batch.seconds:.1f} s"
        )


def render_hits(
    collection: str,
    query: str,
    probe,
    *,
    mode: str,
    k: int,
    as_json: bool = False,
    docs: dict | None = None,
) -> None:
    """The search table (or JSON): ``probe``'s hits for ``query`` in ``collection`` (in the
    documents ``docs`` describes, when ``--doc`` selected some)."""
    if as_json:
        out = {
            "collection": collection,
            "query": query,
            "mode": mode,
            "k": k,
            "timings_ms": {k: round(v, 3) for k, v in probe.timings_ms.items()},
            "hits": [h.to_dict() for h in probe.hits],
        }
        print_json(out if docs is None else {**out, "docs": docs})
        return
    from rich.console import Console
    from rich.table import Table

    title = f"{collection}: {query}" + (f" ({docs_note(docs)})" if docs else "")
    table = Table(title=plain(title), show_lines=True)
    for col in ("#", "score", "document", "pages", "section", "text"):
        table.add_column(col, overflow="fold")
    for i, hit in enumerate(probe.hits, start=1):
        c = hit.chunk
        text = c.text if len(c.text) <= 300 else c.text[:300] + "…"
        table.add_row(
            str(i),
            f"{hit.score:.4f}",
            plain(c.title or c.doc_id),
            c.pages,
            plain(c.section),
            plain(text),
        )
    Console().print(table)


# ---------------------------------------------------------------------------------------------
# ask
# ---------------------------------------------------------------------------------------------


def answer_title(answer: Any) -> tuple[str, str]:
    """The answer panel's title and border style: the rounds it took, and a yellow border and
    ``unsure`` when its span is under the reader's bar."""
    unsure = bool(answer.span) and not answer.span.get("sure", True)
    label = "Answer, unsure" if unsure else "Answer"
    passes = answer.trace.passes
    title = label if passes <= 1 else f"{label} (after {passes} rounds)"
    return title, "yellow" if unsure else "none"


def _answerer_note(answer: Any) -> str:
    """The answerer's own probability, when it states one: of its span over no answer (the
    reader's) or that its quote holds the answer (the sentence scorer's)."""
    conf = answer.confidence
    if conf.get("answerer") is None or conf.get("abstained"):
        return ""
    span = answer.span
    if span and span.get("sure", True):
        return f" · span {conf['answerer']:.0%} over no answer"
    quote = f" · quote {conf['answerer']:.0%} likely to answer"
    if span:  # under the reader's bar: the answer's confidence is its quotes'
        return f" · span {span['probability']:.0%} over no answer, unsure{quote}"
    return quote


def render_answer(answer, streamed: bool = False, as_json: bool = False, shown=None) -> None:
    """The answer panel (unless it was streamed and is final), its sources, the decision,
    confidence, portfolio, latency, tokens and notices (a follow-up's rewrite came earlier:
    ``ask_events``); with ``--json``, one object (with ``shown``, what ``--show`` wrote)."""
    if as_json:
        out = answer.to_dict()
        print_json(out if shown is None else {**out, "shown": [s.to_dict() for s in shown]})
        return
    from rich.console import Console
    from rich.panel import Panel

    out = Console()
    tr = answer.trace
    if streamed:
        out.print()
    final_differs = tr.passes > 1
    if not streamed or final_differs:
        title, style = answer_title(answer)
        out.print(Panel(plain(answer.text), title=title, expand=False, border_style=style))
    if answer.sources:
        out.print(sources_table(answer))
    if answer.related:
        out.print(related_table(answer))
    d, conf = tr.decision, answer.confidence
    print_decision(out, answer)
    if d is not None and d.cost:
        out.print(f"[bold]Trade[/bold] {plain(d.cost['trade'])}", highlight=False)
    if tr.docs:
        out.print("[bold]Documents[/bold]", plain(docs_note(tr.docs)), highlight=False)
    out.print(
        f"[bold]Confidence[/bold] {conf['score']:.2f}"
        + (" (abstained)" if conf.get("abstained") else "")
        + _answerer_note(answer)
        + f" · {tr.passes} round(s) · backend {tr.backend}"
        + (f" ({tr.selection})" if tr.selection and tr.selection != "configured" else "")
        + f" · model {tr.model} · reranker {tr.reranker} · embedder {tr.embedder}",
        highlight=False,
    )
    if tr.portfolio:
        pf = tr.portfolio
        out.print(
            f"[bold]Portfolio[/bold] {pf['name']} · {pf['mode']} · router chose "
            f"{', '.join(pf['members'])}",
            highlight=False,
        )
    print_latency(out, tr)
    tok = tr.tokens
    cost = f"{tr.cost:.6f} {tr.currency}" if tr.cost else f"0 {tr.currency} (local model)"
    out.print(
        f"[bold]Tokens[/bold] embedding {tok['embedding']} · context {tok['context']}"
        + budget_note(tr.budget)
        + read_note(tok, tr.passes)
        + f" · prompt {tok['prompt']} · completion {tok['completion']} · [bold]cost[/bold] {cost}",
        highlight=False,
    )
    for notice in tr.notices:
        out.print("[yellow]note[/yellow]", plain(notice), highlight=False)


def print_decision(out: Any, answer: Any) -> None:
    """The report's Decision line (the query type, the depth policy and why this k) and Kind
    line (the kind of answer wanted and what the answer gave)."""
    tr = answer.trace
    d = tr.decision
    out.print(
        f"[bold]Decision[/bold] {tr.query_type.replace('_', '-')} question · policy "
        f"{d.policy if d else '-'} · k = {d.k if d else 0} · {d.reason if d else ''}",
        highlight=False,
    )
    if tr.answer_kind:
        out.print(f"[bold]Kind[/bold] {plain(kind_note(answer))}", highlight=False)


def kind_note(answer: Any) -> str:
    """The kind of answer the question wants and what the answer gave: "list · 4 items",
    "count · 3", "metadata (authors) · from the document's properties", "number · 12.5 %"."""
    kind = answer.trace.answer_kind
    name = kind.get("name", "").replace("yes_no", "yes/no")
    label = f"{name} ({kind['field']})" if kind.get("field") else name
    parts = [label]
    if kind.get("cue"):
        parts.append(f"cue “{kind['cue']}”")
    short = answer.short
    if answer.abstained:
        parts.append("the sources read do not answer")
    elif isinstance(short, tuple):
        parts.append(f"{len(short)} item{'s' if len(short) != 1 else ''}")
    elif short:
        parts.append(f"short answer “{short if len(short) <= 60 else short[:59] + '…'}”")
    if kind.get("visual"):
        parts.append("asks about what a picture, a colour or the layout shows")
    return " · ".join(parts)


def related_table(answer: Any) -> Any:
    """The passages closest to a question the sources did not answer: where to look."""
    from rich.table import Table

    table = Table(title="Related (closest passages; they do not answer it)", title_justify="left")
    for col in ("#", "document", "pages", "section"):
        table.add_column(col, overflow="fold")
    for c in answer.related:
        table.add_row(str(c.n), plain(c.title or c.doc_id), c.pages, plain(c.section or ""))
    return table


def docs_note(docs: dict) -> str:
    """What a --doc filter kept (its ``to_dict``), in words: "restricted to 2 of 32 documents:
    Warsaw, Kenya"; past five titles, how many more."""
    titles = [d["title"] or d["path"] for d in docs["documents"]]
    n, of = len(titles), docs["collection_documents"]
    shown = ", ".join(titles[:5]) + (f" and {n - 5} more" if n > 5 else "")
    return f"restricted to {n} of {of} document{'s' if of != 1 else ''}: {shown}"


def read_note(tokens: dict, passes: int) -> str:
    """What the rounds read in all, when there was more than one (" · read 1,240 over 3
    rounds"); a round that extends the last one's sources counts only the new ones."""
    read = tokens.get("context_read", 0)
    if passes < 2 or not read:
        return ""
    return f" · read {read:,} over {passes} rounds"


def budget_note(budget: dict) -> str:
    """The Tokens line's note on the context budget and what set it, like " (budget 1,000: the
    query type's)"."""
    if not budget or not budget.get("tokens"):
        return ""
    source = {
        "query type": "the query type's",
        "depth": "the context window's room; the chosen depth sets what is read",
        "explicit": "--budget-tokens",
    }.get(budget.get("source", ""), budget.get("source", ""))
    return f" (budget {budget['tokens']:,}: {source})"


def sources_table(answer):
    from rich.table import Table

    table = Table(title="Sources", title_justify="left")
    for col in ("n", "document", "pages", "section", "score", "cited"):
        table.add_column(col, overflow="fold")
    cited = {c.n for c in answer.citations}
    for c in answer.sources:
        table.add_row(
            str(c.n),
            plain(c.title or c.path),
            c.pages,
            plain(c.section),
            f"{c.score:.4f}",
            "✓" if c.n in cited else "",
        )
    return table


def print_latency(out, tr) -> None:
    from rich.table import Table

    cells = [
        *((stage, f"{v:.1f}") for stage, v in tr.stages_ms.items()),
        ("total", f"{tr.total_ms:.1f}"),
    ]
    # One column per stage while it fits the terminal; else one wrapped line, so no number is
    # ever cut short.
    if sum(max(len(a), len(b)) + 3 for a, b in cells) + 1 <= out.width:
        lat = Table(title="Latency (ms)", title_justify="left")
        for stage, _ in cells:
            lat.add_column(stage, justify="right", no_wrap=True)
        lat.add_row(*(v for _, v in cells))
        out.print(lat)
    else:
        out.print(
            "[bold]Latency (ms)[/bold] " + " · ".join(f"{a} {b}" for a, b in cells),
            highlight=False,
        )


# ---------------------------------------------------------------------------------------------
# show: cited sources where they stand
# ---------------------------------------------------------------------------------------------
