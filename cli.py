"""Fathom command line: parse, call one function per command, render.

Only click and the standard library are imported at the top, so ``--help`` is instant; every
heavy library loads inside the command that needs it. stdout carries results; progress, warnings
and logs go to stderr. Exit codes: 0 ok, 1 an expected failure (FathomError), 2 bad usage.
"""

from __future__ import annotations

if __name__ == "__main__" and not __package__:
    # `python cli.py …` from a checkout: register this folder as the package `fathom` (whatever
    # is installed) and run the same program as the installed `fathom` command.
    import importlib.util as _util
    import sys as _sys
    from pathlib import Path as _Path

    _root = _Path(__file__).resolve().parent
    _spec = _util.spec_from_file_location(
        "fathom", _root / "__init__.py", submodule_search_locations=[str(_root)]
    )
    assert _spec is not None and _spec.loader is not None
    _package = _util.module_from_spec(_spec)
    _sys.modules["fathom"] = _package
    _spec.loader.exec_module(_package)
    from fathom.cli import main as _main

    _sys.exit(_main())

import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

import click
from fathom import __version__


class FathomGroup(click.Group):
    """Turns a FathomError into one clear line on stderr and exit code 1."""

    def invoke(self, ctx: click.Context) -> Any:
        from fathom.core.errors import FathomError

        try:
            return super().invoke(ctx)
        except FathomError as exc:
            from fathom.core.text import safe_terminal_text

            # Messages carry paths and server replies: no escape sequences reach the terminal.
            raise click.ClickException(safe_terminal_text(str(exc))) from None


def _config(ctx: click.Context, **overrides: Any):
    from fathom.core.config import load_config

    return load_config(ctx.obj.get("config_path"), overrides=overrides)


def _stderr_console():
    from rich.console import Console

    return Console(stderr=True)


def _plain(text: str | None):
    """Text from a document, path, server or model, made safe for rich: escape sequences and
    control characters removed, and never parsed as rich markup (``[/x]`` would raise)."""
    from fathom.core.text import safe_terminal_text
    from rich.text import Text

    return Text(safe_terminal_text(text or ""))


def _print_json(obj: Any) -> None:
    click.echo(json.dumps(obj, ensure_ascii=False, indent=None))


class IntList(click.ParamType):
    """Comma-separated integers (``0,1,2``), each at least ``low``; anything else is a usage
    error (exit 2)."""

    name = "N,N,..."

    def __init__(self, low: int | None = None) -> None:
        self.low = low

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None):
        if isinstance(value, list):
            return value
        out: list[int] = []
        for item in str(value).split(","):
            if not item.strip():
                continue
            try:
                number = int(item)
            except ValueError:
                self.fail(f"{item.strip()!r} in {value!r} is not an integer", param, ctx)
            if self.low is not None and number < self.low:
                self.fail(f"{number} in {value!r} is below {self.low}", param, ctx)
            out.append(number)
        if not out:
            self.fail(f"{value!r}: give at least one integer", param, ctx)
        return out


@click.group(cls=FathomGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="fathom.toml to read (default: ./fathom.toml when present).",
)
@click.version_option(__version__, prog_name="fathom")
@click.pass_context
def main(ctx: click.Context, config_path: str | None) -> None:
    """Fathom: local-first document question answering that decides how deep to retrieve."""
    ctx.ensure_object(dict)
    ctx.obj["config_path"] = config_path


# ---------------------------------------------------------------------------------------------
# ingest
# ---------------------------------------------------------------------------------------------


class _IngestProgress:
    """Rich progress on stderr: files (pages, chunks) and embedding (chunks/s, ETA)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.progress = None
        self.files_task = None
        self.embed_task = None
        self.pages = 0
        self.chunks = 0
        self.problems: list[str] = []

    def __enter__(self) -> _IngestProgress:
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
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TaskProgressColumn(),
                TextColumn("{task.fields[rate]}"),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=_stderr_console(),
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
        elif event == "embed_start":
            self.embed_task = p.add_task("embedding", total=info["total"], rate="")
        elif event == "embedded" and self.embed_task is not None:
            p.update(self.embed_task, completed=info["done"])
            task = p.tasks[self.embed_task]
            if task.speed:
                p.update(self.embed_task, rate=f"{task.speed:,.0f} chunks/s")
        elif event == "exporting":
            p.console.print(f"exporting {info['model']} to ONNX for fast queries (once)…")
        elif event == "warning":
            p.console.print("[yellow]warning[/yellow]", _plain(info["message"]))
        elif event == "writing":
            p.console.print(f"writing index ({info['chunks']} chunks)…")


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--collection", "-c", default=None, help="Collection name (default: from content).")
@click.option("--rebuild", is_flag=True, help="Re-parse and re-embed everything.")
@click.option("--strict", is_flag=True, help="Exit 1 when any file failed.")
@click.option("--embedder", default=None, help="Embedding model name or path.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option(
    "--password",
    default=None,
    envvar="FATHOM_PDF_PASSWORD",
    help="Password for encrypted PDFs (or set FATHOM_PDF_PASSWORD).",
)
@click.pass_context
def ingest(
    ctx: click.Context,
    paths: tuple[Path, ...],
    collection: str | None,
    rebuild: bool,
    strict: bool,
    embedder: str | None,
    as_json: bool,
    password: str | None,
) -> None:
    """Ingest PDF, DOCX, TXT and MD files (or folders, or docs.jsonl) into a collection."""
    from fathom.index.collection import collection_for, ingest_paths
    from fathom.index.embed import embedder_id_for

    cfg = _config(ctx, **{"embedder.name": embedder, "ingest.strict": strict or None})
    # The collection `ask FILE` would use for these files with this embedder.
    name = collection or collection_for(paths, embedder=embedder_id_for(cfg.embedder))
    with _IngestProgress(enabled=not as_json) as prog:
        report = ingest_paths(
            cfg, list(paths), name, rebuild=rebuild, progress=prog, password=password
        )
    if as_json:
        _print_json(report.to_dict())
    else:
        _render_ingest(report)
    if cfg.ingest.strict and report.count("failed"):
        sys.exit(1)


def _render_ingest(report) -> None:
    from rich.console import Console

    out = Console()
    err = _stderr_console()
    for f in report.files:
        if f.status == "failed":
            err.print("[red]failed[/red] ", _plain(f.reason), highlight=False)
        elif f.status == "skipped":
            err.print("[yellow]skipped[/yellow]", _plain(f"{f.path}: {f.reason}"), highlight=False)
    c = report.to_dict()["counts"]
    verb = "committed" if report.committed else "nothing to change"
    out.print(
        f"collection [bold]{report.collection}[/bold] (generation {report.generation}, {verb}): "
        f"{c['ok']} ingested, {c['unchanged']} unchanged, {c['failed']} failed, "
        f"{c['skipped']} skipped, {c['removed']} removed · "
        f"{report.embedded_chunks} chunks embedded, {report.total_chunks} in the collection · "
        f"{report.seconds.get('total', 0):.1f} s",
        highlight=False,
    )


# ---------------------------------------------------------------------------------------------
# search
# ---------------------------------------------------------------------------------------------


@main.command()
@click.argument("collection")
@click.argument("query")
@click.option("-k", "k", type=click.IntRange(1, 1000), default=None, help="Number of hits.")
@click.option("--mode", type=click.Choice(["dense", "bm25", "hybrid"]), default=None)
@click.option("--json", "as_json", is_flag=True, help="Print hits as JSON.")
@click.pass_context
def search(
    ctx: click.Context, collection: str, query: str, k: int | None, mode: str | None, as_json: bool
) -> None:
    """Search COLLECTION for QUERY and print the best chunks."""
    from fathom.index.retrieve import open_retriever

    cfg = _config(ctx, **{"retrieval.k": k, "retrieval.mode": mode})
    retriever = open_retriever(cfg, collection)
    probe = retriever.probe(query, cfg.retrieval.k)
    if as_json:
        _print_json(
            {
                "collection": collection,
                "query": query,
                "mode": retriever.mode,
                "k": cfg.retrieval.k,
                "timings_ms": {k: round(v, 3) for k, v in probe.timings_ms.items()},
                "hits": [h.to_dict() for h in probe.hits],
            }
        )
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=_plain(f"{collection}: {query}"), show_lines=True)
    for col in ("#", "score", "document", "pages", "section", "text"):
        table.add_column(col, overflow="fold")
    for i, hit in enumerate(probe.hits, start=1):
        c = hit.chunk
        text = c.text if len(c.text) <= 300 else c.text[:300] + "…"
        table.add_row(
            str(i),
            f"{hit.score:.4f}",
            _plain(c.title or c.doc_id),
            c.pages,
            _plain(c.section),
            _plain(text),
        )
    Console().print(table)


# ---------------------------------------------------------------------------------------------
# ask / chat / history / stats
# ---------------------------------------------------------------------------------------------


def _ask_overrides(
    generator,
    model,
    embedder,
    budget_tokens,
    policy=None,
    portfolio=None,
    mode=None,
    ell=None,
    deadline_ms=None,
) -> dict[str, Any]:
    return {
        "generator.deadline_ms": deadline_ms,
        "retrieval.policy": policy,
        "retrieval.portfolio": portfolio,
        "retrieval.portfolio_mode": mode,
        "retrieval.portfolio_ell": ell,
        "generator.backend": generator,
        "generator.model": model,
        "embedder.name": embedder,
        "compress.budget_tokens": budget_tokens,
    }


def _check_portfolio_flags(cfg, mode, ell) -> None:
    """--portfolio-mode and --portfolio-ell mean nothing without a portfolio: say so."""
    if (mode is not None or ell is not None) and not cfg.retrieval.portfolio.strip():
        raise click.UsageError(
            "--portfolio-mode and --portfolio-ell need a portfolio: give --portfolio NAME "
            "(or set retrieval.portfolio)"
        )


class _AnswerStream:
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


def _ask_events(console):
    def on_event(event: str, **info: Any) -> None:
        if event == "escalate":
            console.print(
                f"[yellow]low confidence ({info['confidence']:.2f}) → retrieving deeper "
                f"(k = {info['k']}) and regenerating[/yellow]"
            )

    return on_event


def _deadline_option(whose: str, taken: str):
    return click.option(
        "--deadline-ms",
        type=click.FloatRange(min=0),
        default=None,
        help=f"End-to-end time budget for {whose} (generator.deadline_ms): llama.cpp and "
        f"transformers stop generating when {taken} has taken this long (the report says the "
        "answer was cut).",
    )


_ASK_OPTIONS = [
    click.option(
        "--k",
        "k",
        type=click.IntRange(0, 200),
        default=None,
        help="Fix the retrieval depth (0 = answer without retrieval).",
    ),
    click.option(
        "--generator",
        type=click.Choice(["auto", "llamacpp", "ollama", "openai", "huggingface", "extractive"]),
        default=None,
        help="Answer backend.",
    ),
    click.option("--model", default=None, help="Generator model (name, GGUF path, …)."),
    click.option("--embedder", default=None, help="Embedding model name or path."),
    click.option(
        "--budget-tokens",
        type=click.IntRange(0),
        default=None,
        help="Context budget in the generator's tokens (default: the query type's).",
    ),
    click.option("--no-rerank", is_flag=True, help="Skip the reranker."),
    _deadline_option("the answer", "the ask"),
    click.option(
        "--policy",
        default=None,
        help="Depth policy: a policy file, 'strategy', or 'auto' (the shipped learned policy "
        "when present). --k overrides it.",
    ),
    click.option(
        "--portfolio",
        default=None,
        help="Retrieve through a retriever portfolio (`fathom portfolio build`): a file or a "
        "name under FATHOM_HOME/portfolios.",
    ),
    click.option(
        "--portfolio-mode",
        type=click.Choice(["fuse", "select"]),
        default=None,
        help="fuse: the chosen members' results ranked together; select: one answer per member, "
        "the generator picks or merges them. Default fuse.",
    ),
    click.option(
        "--portfolio-ell",
        type=click.IntRange(1),
        default=None,
        help="How many portfolio members the router runs per question (default 2).",
    ),
]


_DEADLINE_ROWS = _deadline_option("every row", "the row")


def _with_ask_options(fn):
    for opt in reversed(_ASK_OPTIONS):
        fn = opt(fn)
    return fn


@main.command()
@click.argument("target")
@click.argument("question")
@_with_ask_options
@click.option("--rebuild", is_flag=True, help="Re-index TARGET before answering.")
@click.option(
    "--password",
    default=None,
    envvar="FATHOM_PDF_PASSWORD",
    help="Password for an encrypted PDF TARGET (or set FATHOM_PDF_PASSWORD).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the answer and report as JSON.")
@click.option(
    "--no-stream",
    is_flag=True,
    help="Print the answer only when it is complete (always so when stdout is not a terminal).",
)
@click.pass_context
def ask(
    ctx: click.Context,
    target: str,
    question: str,
    k: int | None,
    generator: str | None,
    model: str | None,
    embedder: str | None,
    budget_tokens: int | None,
    no_rerank: bool,
    deadline_ms: float | None,
    policy: str | None,
    portfolio: str | None,
    portfolio_mode: str | None,
    portfolio_ell: int | None,
    rebuild: bool,
    password: str | None,
    as_json: bool,
    no_stream: bool,
) -> None:
    """Answer QUESTION from TARGET (a file, a folder or a collection name), with citations."""
    from fathom.stages.pipeline import ask as run_ask

    cfg = _config(
        ctx,
        **_ask_overrides(
            generator, model, embedder, budget_tokens, policy, portfolio, portfolio_mode,
            portfolio_ell, deadline_ms,
        ),
    )  # fmt: skip
    _check_portfolio_flags(cfg, portfolio_mode, portfolio_ell)
    err = _stderr_console()
    # Streaming is for a terminal: piped or redirected, each feedback round's draft would land
    # in the output before the final answer.
    stream = _AnswerStream(enabled=not as_json and not no_stream and sys.stdout.isatty())
    from fathom.index.targets import resolve_target

    # Index first (with its progress bars), then stream the answer on a quiet terminal.
    with _IngestProgress(enabled=not as_json) as prog:
        name = resolve_target(cfg, target, progress=prog, rebuild=rebuild, password=password)
    answer = run_ask(
        cfg,
        target,
        question,
        k=k,
        rerank=False if no_rerank else None,
        on_token=stream,
        on_event=_ask_events(err),
        collection=name,
    )
    if as_json:
        _print_json(answer.to_dict())
        return
    _render_answer(answer, streamed=stream.started)


def _render_answer(answer, streamed: bool) -> None:
    from rich.console import Console
    from rich.panel import Panel
    from rich.table import Table

    out = Console()
    tr = answer.trace
    if streamed:
        out.print()
    final_differs = tr.passes > 1
    if not streamed or final_differs:
        title = "Answer" if not final_differs else f"Answer (after {tr.passes} rounds)"
        out.print(Panel(_plain(answer.text), title=title, expand=False))
    if answer.sources:
        table = Table(title="Sources", title_justify="left")
        for col in ("n", "document", "pages", "section", "score", "cited"):
            table.add_column(col, overflow="fold")
        cited = {c.n for c in answer.citations}
        for c in answer.sources:
            table.add_row(
                str(c.n),
                _plain(c.title or c.path),
                c.pages,
                _plain(c.section),
                f"{c.score:.4f}",
                "✓" if c.n in cited else "",
            )
        out.print(table)
    d = tr.decision
    conf = answer.confidence
    out.print(
        f"[bold]Decision[/bold] {tr.query_type.replace('_', '-')} question · policy "
        f"{d.policy if d else '-'} · k = {d.k if d else 0} · {d.reason if d else ''}",
        highlight=False,
    )
    out.print(
        f"[bold]Confidence[/bold] {conf['score']:.2f}"
        + (" (abstained)" if conf.get("abstained") else "")
        + f" · {tr.passes} round(s) · backend {tr.backend} · model {tr.model} · "
        f"reranker {tr.reranker} · embedder {tr.embedder}",
        highlight=False,
    )
    if tr.portfolio:
        pf = tr.portfolio
        out.print(
            f"[bold]Portfolio[/bold] {pf['name']} · {pf['mode']} · router chose "
            f"{', '.join(pf['members'])}",
            highlight=False,
        )
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
    tok = tr.tokens
    cost = f"{tr.cost:.6f} {tr.currency}" if tr.cost else f"0 {tr.currency} (local model)"
    out.print(
        f"[bold]Tokens[/bold] embedding {tok['embedding']} · context {tok['context']} · prompt "
        f"{tok['prompt']} · completion {tok['completion']} · [bold]cost[/bold] {cost}",
        highlight=False,
    )
    for notice in tr.notices:
        out.print("[yellow]note[/yellow]", _plain(notice), highlight=False)


@main.command()
@click.argument("target")
@_with_ask_options
@click.pass_context
def chat(
    ctx: click.Context,
    target: str,
    k: int | None,
    generator: str | None,
    model: str | None,
    embedder: str | None,
    budget_tokens: int | None,
    no_rerank: bool,
    deadline_ms: float | None,
    policy: str | None,
    portfolio: str | None,
    portfolio_mode: str | None,
    portfolio_ell: int | None,
) -> None:
    """Ask questions about TARGET one after another, with the index and models kept loaded."""
    from fathom.index.targets import resolve_target
    from fathom.stages.history import record_ask
    from fathom.stages.pipeline import Engine

    cfg = _config(
        ctx,
        **_ask_overrides(
            generator, model, embedder, budget_tokens, policy, portfolio, portfolio_mode,
            portfolio_ell, deadline_ms,
        ),
    )  # fmt: skip
    _check_portfolio_flags(cfg, portfolio_mode, portfolio_ell)
    err = _stderr_console()
    with _IngestProgress(enabled=True) as prog:
        name = resolve_target(cfg, target, progress=prog)
    engine = Engine(cfg, name)
    err.print(f"chatting with {name!r} — an empty line or Ctrl-D ends the session")
    try:
        while True:
            try:
                question = click.prompt(
                    "?", prompt_suffix=" ", default="", show_default=False, err=True
                )
            except (EOFError, click.Abort):
                break
            if not question.strip():
                break
            stream = _AnswerStream(enabled=sys.stdout.isatty())
            try:
                answer = engine.ask(
                    question,
                    k=k,
                    rerank=False if no_rerank else None,
                    on_token=stream,
                    on_event=_ask_events(err),
                )
            except Exception as exc:
                from fathom.core.errors import FathomError

                if not isinstance(exc, FathomError):
                    raise
                err.print("[red]error[/red]", _plain(str(exc)))
                continue
            record_ask(cfg, target, answer)
            _render_answer(answer, streamed=stream.started)
    finally:
        engine.close()


@main.command()
@click.option("-n", "limit", type=click.IntRange(1, 10000), default=20, help="How many.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def history(ctx: click.Context, limit: int, as_json: bool) -> None:
    """Recent questions with their depth, latency, tokens and cost."""
    from fathom.stages.history import History

    cfg = _config(ctx)
    rows = History(cfg.home_path() / "history.db").recent(limit)
    if as_json:
        for row in rows:
            _print_json(row)
        return
    import datetime as dt

    from rich.console import Console
    from rich.table import Table

    table = Table()
    for col in ("when", "question", "type", "k", "ms", "tokens", "cost", "conf", "model"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(
            dt.datetime.fromtimestamp(r["ts"]).strftime("%Y-%m-%d %H:%M"),
            _plain(r["question"]),
            r["query_type"] or "",
            str(r["k"]),
            f"{r['total_ms']:.0f}",
            str((r["prompt_tokens"] or 0) + (r["completion_tokens"] or 0)),
            f"{r['cost'] or 0:.4f}",
            f"{r['confidence'] or 0:.2f}",
            r["model"] or "",
        )
    Console().print(table)


@main.command()
@click.option(
    "--slo-ms",
    type=click.FloatRange(min=0),
    default=None,
    help="Latency objective: report the share of asks within it.",
)
@click.option(
    "--days",
    type=click.FloatRange(min=0),
    default=None,
    help="Only the last N days (default: everything).",
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def stats(ctx: click.Context, slo_ms: float | None, days: float | None, as_json: bool) -> None:
    """Latency P50/P95, SLO compliance, mean depth, tokens and cost over recorded asks."""
    import time

    from fathom.stages.history import History

    cfg = _config(ctx)
    since = time.time() - days * 86400 if days is not None else None
    data = History(cfg.home_path() / "history.db").stats(since=since, slo_ms=slo_ms)
    if as_json:
        _print_json(data)
        return

    def f(x, fmt="{:.1f}"):
        return "-" if x is None else fmt.format(x)

    lat = data["latency_ms"]
    click.echo(f"asks            {data['asks']}")
    click.echo(f"latency P50/P95 {f(lat['p50'])} / {f(lat['p95'])} ms")
    if slo_ms is not None:
        click.echo(f"SLO {slo_ms:g} ms    {f(data['slo_compliance'], '{:.1%}')} of asks within")
    click.echo(f"mean depth k    {f(data['mean_k'], '{:.2f}')}")
    t = data["tokens"]
    click.echo(
        f"tokens          prompt {t['prompt']} · completion {t['completion']} · "
        f"context {t['context']}"
    )
    click.echo(f"cost            {data['cost']:.6f} {data['currency']}")
    click.echo(f"escalated       {data['escalated']} asks needed a deeper round")


# ---------------------------------------------------------------------------------------------
# collections
# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# eval
# ---------------------------------------------------------------------------------------------


@main.group("eval", invoke_without_command=True)
@click.option("--docs", default=None, help="Documents: file, folder, or docs.jsonl.")
@click.option("--collection", "-c", default=None, help="An existing collection instead of --docs.")
@click.option(
    "--questions",
    default=None,
    help="Questions: JSONL (qid, question, answers, doc_ids) or a BEIR folder.",
)
@click.option("--qrels", default=None, help="A BEIR qrels TSV for a JSONL question file.")
@click.option(
    "--strategies",
    default="none,fixed:1,fixed:2,fixed:4,fixed:8,gap,threshold:p50",
    show_default=True,
    help="Comma-separated: none, fixed:K, gap[:A-B], threshold:pNN[:K], strategy, "
    "forest[:FILE][@C|@lambda=L], reinforce:FILE, utility:FILE[@PRESET]; +fb adds the "
    "feedback loop.",
)
@click.option("--baseline", default=None, help="Strategy the others are compared with.")
@click.option(
    "--generator",
    type=click.Choice(["auto", "llamacpp", "ollama", "openai", "huggingface", "extractive"]),
    default=None,
    help="Answer backend.",
)
@click.option("--model", default=None, help="Generator model (name, GGUF path, …).")
@click.option(
    "--judge",
    type=click.Choice(["contains", "f1", "qrels", "recall"]),
    default="contains",
    show_default=True,
    help="What `quality` is: gold answer in the answer, token F1, nDCG@10 by qrels, or "
    "answer recall (a gold answer in the context: retrieval alone).",
)
@click.option("--slo-ms", type=click.FloatRange(min=0, min_open=True), default=None)
@_DEADLINE_ROWS
@click.option("--limit", type=click.IntRange(1), default=None, help="Evaluate this many.")
@click.option("--fit-size", type=click.IntRange(1), default=200, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--bootstrap", type=click.IntRange(100), default=2000, show_default=True)
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True)
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True)
@click.option("--ray-address", default=None, help="A Ray cluster (default: local Ray).")
@click.option("--no-cache", is_flag=True, help="Do not reuse cached generations.")
@click.option(
    "--split",
    "doc_split",
    type=click.Choice(["all", "train", "test"]),
    default="all",
    show_default=True,
    help="Only questions on this half of the documents (split by document id).",
)
@click.option("--split-seed", type=int, default=0, show_default=True)
@click.option(
    "--portfolio",
    default=None,
    help="Retrieve through this retriever portfolio (file or name) for every strategy.",
)
@click.option("--portfolio-mode", type=click.Choice(["fuse", "select"]), default=None)
@click.option("--portfolio-ell", type=click.IntRange(1), default=None)
@click.option("--out", "out", type=click.Path(path_type=Path), default=None, help="Output folder.")
@click.option("--json", "as_json", is_flag=True, help="Print summary.json to stdout.")
@click.pass_context
def eval_cmd(
    ctx: click.Context,
    docs: str | None,
    collection: str | None,
    questions: str | None,
    qrels: str | None,
    strategies: str,
    baseline: str | None,
    generator: str | None,
    model: str | None,
    judge: str,
    slo_ms: float | None,
    deadline_ms: float | None,
    limit: int | None,
    fit_size: int,
    seed: int,
    bootstrap: int,
    workers: int,
    executor: str,
    ray_address: str | None,
    no_cache: bool,
    doc_split: str,
    split_seed: int,
    portfolio: str | None,
    portfolio_mode: str | None,
    portfolio_ell: int | None,
    out: Path | None,
    as_json: bool,
) -> None:
    """Evaluate strategies side by side on a document set (`fathom eval report DIR` redraws)."""
    if ctx.invoked_subcommand is not None:
        return
    if not questions:
        raise click.UsageError("--questions is required")
    if not docs and not collection:
        raise click.UsageError("give --docs PATH or --collection NAME")
    if docs and collection:
        raise click.UsageError("give --docs PATH or --collection NAME, not both")
    from fathom.evaluation.runner import EvalSettings, run_eval

    cfg = _config(
        ctx,
        **{
            "generator.backend": generator,
            "generator.model": model,
            "generator.deadline_ms": deadline_ms,
            "retrieval.portfolio": portfolio,
            "retrieval.portfolio_mode": portfolio_mode,
            "retrieval.portfolio_ell": portfolio_ell,
        },
    )
    out = out or Path("eval-runs") / time.strftime("%Y%m%d-%H%M%S")
    settings = EvalSettings(
        questions=questions,
        out=str(out),
        docs=docs,
        collection=collection,
        qrels=qrels,
        strategies=strategies.split(","),
        baseline=baseline,
        judge=judge,
        slo_ms=slo_ms,
        limit=limit,
        fit_size=fit_size,
        seed=seed,
        bootstrap=bootstrap,
        workers=workers,
        executor=executor,
        ray_address=ray_address,
        cache=not no_cache,
        doc_split=None if doc_split == "all" else doc_split,
        split_seed=split_seed,
    )
    console = _stderr_console()
    with _IngestProgress(console.is_terminal) as ingest_progress, _EvalProgress(console) as bar:
        summary = run_eval(cfg, settings, progress=ingest_progress, on_rows=bar)
    _render_eval(summary, out, as_json)


class _EvalProgress:
    """Questions done / total with ETA on stderr."""

    def __init__(self, console) -> None:
        self.console = console
        self.progress = None
        self.task = None
        self.started: float | None = None
        self.first_done = 0
        self.last = 0.0

    def __enter__(self) -> _EvalProgress:
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


def _render_eval(summary: dict[str, Any], out: Path, as_json: bool) -> None:
    if as_json:
        _print_json(summary)
        return
    from fathom.evaluation.report import render_table
    from rich.console import Console

    console = Console()
    if not console.is_terminal:  # a file or pipe: wide enough for the whole table
        console = Console(width=220)
    console.print(render_table(summary))
    console.print(f"log, summary, plots and report in {out}/", highlight=False)


@eval_cmd.command("report")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print summary.json to stdout.")
def eval_report(run_dir: Path, as_json: bool) -> None:
    """Recompute summary.json, plots and report.md of a run from its log alone."""
    from fathom.evaluation.runner import report_from_dir

    summary = report_from_dir(run_dir)
    _render_eval(summary, run_dir, as_json)


# ---------------------------------------------------------------------------------------------
# policy
# ---------------------------------------------------------------------------------------------


@main.group()
def policy() -> None:
    """Learned retrieval-depth policies: sweep budgets, train, inspect."""


@policy.command("sweep")
@click.option("--docs", default=None, help="Documents: file, folder, or docs.jsonl.")
@click.option("--collection", "-c", default=None, help="An existing collection instead of --docs.")
@click.option("--questions", required=True, help="Questions: JSONL or a BEIR folder.")
@click.option("--budgets", type=IntList(low=0), default="0,1,2,3,5,8,12,20", show_default=True)
@click.option(
    "--generator",
    type=click.Choice(["auto", "llamacpp", "ollama", "openai", "huggingface", "extractive"]),
    default=None,
)
@click.option("--model", default=None)
@_DEADLINE_ROWS
@click.option(
    "--judge", type=click.Choice(["contains", "f1", "qrels", "recall"]), default="contains"
)
@click.option("--split", "doc_split", type=click.Choice(["train", "test", "all"]), default="train")
@click.option("--split-seed", type=int, default=0, show_default=True)
@click.option("--limit", type=click.IntRange(1), default=None)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True)
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local")
@click.option("--out", "out", type=click.Path(path_type=Path), required=True)
@click.pass_context
def policy_sweep(ctx: click.Context, **opts: Any) -> None:
    """Quality, tokens and latency of every budget for every training question (an eval run
    with probe features logged; resumable)."""
    from fathom.evaluation.runner import EvalSettings, run_eval
    from fathom.router.train_policy import WARN_RECALL, budget_strategies, load_sweep

    if not opts["docs"] and not opts["collection"]:
        raise click.UsageError("give --docs PATH or --collection NAME")
    budgets = opts["budgets"]
    cfg = _config(
        ctx,
        **{
            "generator.backend": opts["generator"],
            "generator.model": opts["model"],
            "generator.deadline_ms": opts["deadline_ms"],
        },
    )
    settings = EvalSettings(
        questions=opts["questions"],
        out=str(opts["out"]),
        docs=opts["docs"],
        collection=opts["collection"],
        strategies=budget_strategies(budgets),
        judge=opts["judge"],
        limit=opts["limit"],
        seed=opts["seed"],
        workers=opts["workers"],
        executor=opts["executor"],
        features=True,
        doc_split=None if opts["doc_split"] == "all" else opts["doc_split"],
        split_seed=opts["split_seed"],
        bootstrap=200,
    )
    console = _stderr_console()
    with _IngestProgress(console.is_terminal) as ingest_progress, _EvalProgress(console) as bar:
        run_eval(cfg, settings, progress=ingest_progress, on_rows=bar)
    sweep = load_sweep(opts["out"])
    recall = sweep.deepest_recall
    if recall is not None:
        console.print(
            f"answer recall at the deepest budget (k = {budgets[-1]}): {recall:.1%}",
            highlight=False,
        )
        if recall < WARN_RECALL:
            console.print(
                f"[yellow]warning[/yellow] below {WARN_RECALL:.0%}: the index rarely finds the "
                "answers, and no depth policy can fix that — improve retrieval (chunking, "
                "embedder) first"
            )
    click.echo(f"sweep of {len(sweep.qids)} questions × {len(budgets)} budgets in {opts['out']}/")


@policy.command("train")
@click.option(
    "--kind",
    type=click.Choice(["forest", "reinforce", "utility"]),
    default="forest",
    show_default=True,
)
@click.option(
    "--lambda",
    "lam",
    type=click.FloatRange(min=0),
    default=None,
    help="reinforce: reward = quality − λ · tokens / 1000 (default 0.1); forest: decide by "
    "P(enough) − λ · tokens / 1000 instead of --confidence.",
)
@click.option("--epochs", type=click.IntRange(1), default=60, show_default=True)
@click.option(
    "--preset",
    type=click.Choice(["quality", "balanced", "latency", "cost"]),
    default="balanced",
    show_default=True,
    help="utility: the default weight preset stored with the policy.",
)
@click.option(
    "--sweep",
    "sweep_dirs",
    type=click.Path(exists=True, file_okay=False),
    multiple=True,
    required=True,
    help="A sweep folder; repeat to train on several document sets.",
)
@click.option(
    "--quality",
    default="quality",
    show_default=True,
    help="Row metric to imitate: quality (the sweep's judge), answer_recall, f1, contains, …",
)
@click.option("--epsilon", type=click.FloatRange(0, 1), default=0.0, show_default=True)
@click.option("--slo-ms", type=click.FloatRange(min=0, min_open=True), default=None)
@click.option(
    "--strict-slo",
    is_flag=True,
    help="forest: the SLO comes first in the oracle labels (the best budget among those that "
    "meet it), not only among budgets as good as the best.",
)
@click.option(
    "--most-likely",
    is_flag=True,
    help="forest: decide by the most likely oracle label (skip when 'none suffices' wins) "
    "instead of --confidence or --lambda; suits --strict-slo.",
)
@click.option("--trees", type=click.IntRange(1), default=100, show_default=True)
@click.option("--max-depth", type=click.IntRange(1), default=10, show_default=True)
@click.option("--confidence", type=click.FloatRange(0, 1), default=0.9, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--out", "out", type=click.Path(path_type=Path), required=True)
@click.pass_context
def policy_train(ctx: click.Context, **opts: Any) -> None:
    """Train a depth policy on a sweep's oracle labels."""
    from fathom.index.embed import embedder_id_for
    from fathom.router.train_policy import combine_sweeps, load_sweep, train_forest

    cfg = _config(ctx)
    sweep = combine_sweeps([load_sweep(d, quality=opts["quality"]) for d in opts["sweep_dirs"]])
    # What a reinforce or utility policy records about its training.
    meta = {
        "judge": sweep.run.get("judge"),
        "embedder": embedder_id_for(cfg.embedder),
        "training_data": {"questions": sweep.run.get("questions"), "n_questions": len(sweep.qids)},
    }
    if opts["kind"] == "reinforce":
        from fathom.router.reinforce import ReinforcePolicy
        from fathom.router.train_policy import sweep_query_vectors

        rl = ReinforcePolicy.train(
            sweep,
            sweep_query_vectors(cfg, sweep),
            lam=0.1 if opts["lam"] is None else opts["lam"],
            epochs=opts["epochs"],
            seed=opts["seed"],
            meta=meta,
        )
        path = rl.save(opts["out"])
        click.echo(f"reinforce policy on {len(sweep.qids)} questions → {path}")
        return
    if opts["kind"] == "utility":
        from fathom.router.utility import UtilityPolicy

        util = UtilityPolicy.fit(sweep, preset=opts["preset"], meta=meta)
        path = util.save(opts["out"])
        click.echo(f"utility policy on {len(sweep.qids)} questions → {path}")
        return
    model = train_forest(
        sweep,
        epsilon=opts["epsilon"],
        slo_ms=opts["slo_ms"],
        strict_slo=opts["strict_slo"],
        most_likely=opts["most_likely"],
        n_trees=opts["trees"],
        max_depth=opts["max_depth"],
        seed=opts["seed"],
        confidence=opts["confidence"],
        embedder=embedder_id_for(cfg.embedder),
        cost=opts["lam"],
    )
    path = model.save(opts["out"])
    click.echo(f"{opts['kind']} policy on {len(sweep.qids)} questions → {path}")


@policy.command("show")
@click.argument("path", required=False)
@click.option("--json", "as_json", is_flag=True)
def policy_show(path: str | None, as_json: bool) -> None:
    """A policy's metadata and feature importances (default: the shipped policy)."""
    from fathom.router.forest import ForestPolicy, default_policy_path

    target = Path(path) if path else default_policy_path()
    if target.suffix == ".safetensors" or target.with_suffix(".safetensors").is_file():
        _show_reinforce(target, as_json)
        return
    meta_file = target.with_suffix(".json")
    if meta_file.is_file() and '"kind": "utility"' in meta_file.read_text(encoding="utf-8"):
        from fathom.router.utility import UtilityPolicy

        util = UtilityPolicy.load(meta_file)
        info = {"kind": "utility", "preset": util.preset, "bundles": util.bundles, **util.meta}
        info["utilities"] = {t: util.utilities(t) for t in util.priors}
        if as_json:
            _print_json({**info, "priors": util.priors})
        else:
            for key, value in info.items():
                click.echo(f"{key}: {json.dumps(value, ensure_ascii=False)}")
        return
    model = ForestPolicy.load(target)
    meta = {
        "budgets": list(model.budgets),
        "rule": model.rule,
        "confidence": model.confidence,
        "cost": model.cost,
        "budget_tokens": list(model.budget_tokens),
        "n_trees": len(model.trees),
        **model.meta,
    }
    if as_json:
        _print_json(meta)
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    imp = meta.pop("feature_importances", {})
    for key, value in meta.items():
        console.print(
            f"[bold]{key}[/bold]: {json.dumps(value, ensure_ascii=False)}", highlight=False
        )
    table = Table(title="feature importances (mean decrease in impurity)")
    table.add_column("feature")
    table.add_column("importance", justify="right")
    for name in sorted(imp, key=lambda k: -imp[k])[:15]:
        table.add_row(name, f"{imp[name]:.3f}")
    console.print(table)


def _show_reinforce(target: Path, as_json: bool) -> None:
    """A REINFORCE policy's metadata as saved (budgets, features, embedder, λ, training), its
    training curve summed up in the text form."""
    from fathom.router.reinforce import ReinforcePolicy

    ReinforcePolicy.load(target)  # checks the files, format, kind and feature schema
    meta = json.loads(target.with_suffix(".json").read_text(encoding="utf-8"))
    if as_json:
        _print_json(meta)
        return
    curves = meta.pop("curves", None) or []
    for key, value in meta.items():
        click.echo(f"{key}: {json.dumps(value, ensure_ascii=False)}")
    if curves:
        first, last = curves[0], curves[-1]
        click.echo(
            f"training: {len(curves)} epochs, mean reward {first['reward']:.4f} → "
            f"{last['reward']:.4f}; last epoch's budget shares "
            f"{json.dumps(last.get('action_shares'))}"
        )


@main.group()
def portfolio() -> None:
    """Retriever portfolios: pick the few retriever configurations that cover the most."""


@portfolio.command("build")
@click.option("--docs", default=None, help="Documents: file, folder, or docs.jsonl.")
@click.option("-c", "--collection", default=None, help="An existing collection instead of --docs.")
@click.option("--questions", required=True, help="Questions: JSONL or a BEIR folder.")
@click.option("--size", type=click.IntRange(1), default=3, show_default=True)
@click.option("--top-n", type=click.IntRange(1), default=10, show_default=True)
@click.option("--score", "by", type=click.Choice(["docs", "answer"]), default=None,
              help="s(q, r): gold-document recall (default when questions name documents) "
              "or answer containment in the member's top n.")  # fmt: skip
@click.option(
    "--split",
    type=click.Choice(["train", "test", "all"]),
    default="train",
    show_default=True,
    help="Which half of the documents' questions to score.",
)
@click.option("--split-seed", type=int, default=0, show_default=True)
@click.option("--limit", type=click.IntRange(1), default=None)
@click.option(
    "--out",
    required=True,
    help="Portfolio file (.json), or a bare name: $FATHOM_HOME/portfolios/NAME.json.",
)
@click.pass_context
def portfolio_build(ctx: click.Context, **opts: Any) -> None:
    """Score every pool member on the questions (cached beside --out), choose --size members
    greedily by best-of-K coverage and train the router that picks among them per question."""
    from fathom.core.errors import ConfigError
    from fathom.evaluation.runner import split_by_document
    from fathom.index.collection import Collection
    from fathom.index.embed import embedder_id_for, query_embedder_for
    from fathom.index.targets import resolve_target
    from fathom.ingestion.questions import load_questions
    from fathom.router.classify import QueryClassifier
    from fathom.router.portfolio_build import build_portfolio

    cfg = _config(ctx)
    target = opts["collection"] or opts["docs"]
    if not target:
        raise ConfigError("give --docs PATH or --collection NAME")
    name = resolve_target(cfg, target)
    questions = load_questions(opts["questions"])
    if opts["split"] != "all":
        questions = split_by_document(questions, opts["split"], opts["split_seed"])
    questions = [q for q in questions if q.doc_ids or q.answers][: opts["limit"]]
    if not questions:
        raise ConfigError("no answerable questions to score")
    spec = str(opts["out"])
    bare = "/" not in spec and not spec.endswith(".json")
    out = (cfg.home_path() / "portfolios" / spec if bare else Path(spec)).with_suffix(".json")
    embedder_id = embedder_id_for(cfg.embedder)
    coll = Collection.open(cfg, name, expect_embedder=embedder_id)
    info = build_portfolio(
        coll,
        query_embedder_for(cfg, coll),
        embedder_id,
        QueryClassifier.from_config(cfg),
        questions,
        size=opts["size"],
        n=opts["top_n"],
        by=opts["by"],
        cache=out.with_suffix(".scores.npz"),
        describe={
            "questions": str(opts["questions"]),
            "split": opts["split"],
            "split_seed": opts["split_seed"],
        },
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(info, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    _show_portfolio(info)
    click.echo(f"portfolio of {len(info['members'])} over {len(questions)} questions → {out}")


@portfolio.command("eval")
@click.argument("path")
@click.option("--docs", default=None, help="Documents (default: the portfolio's collection).")
@click.option("--questions", required=True, help="Questions: JSONL or a BEIR folder.")
@click.option("--split", type=click.Choice(["train", "test", "all"]), default="test",
              show_default=True)  # fmt: skip
@click.option("--bootstrap", type=click.IntRange(0), default=2000, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def portfolio_eval(ctx: click.Context, path: str, **opts: Any) -> None:
    """Coverage of a built portfolio on held-out questions: best-of coverage beside the best
    single member, the top K by average (both chosen on the training questions) and the whole
    pool; the router's top ℓ members fused against a random ℓ; paired bootstrap intervals."""
    from fathom.core.errors import ConfigError
    from fathom.evaluation.portfolio import evaluate_portfolio
    from fathom.evaluation.runner import split_by_document
    from fathom.index.collection import Collection
    from fathom.index.embed import embedder_id_for, query_embedder_for
    from fathom.index.targets import resolve_target
    from fathom.ingestion.questions import load_questions
    from fathom.router.classify import QueryClassifier
    from fathom.router.portfolio import load_portfolio
    from fathom.router.portfolio_runtime import resolve_portfolio

    cfg = _config(ctx)
    path = resolve_portfolio(cfg, path)
    info = load_portfolio(path)
    name = resolve_target(cfg, opts["docs"]) if opts["docs"] else info["collection"]
    questions = load_questions(opts["questions"])
    if opts["split"] != "all":
        questions = split_by_document(questions, opts["split"], info.get("split_seed", 0))
    questions = [q for q in questions if q.doc_ids or q.answers]
    if not questions:
        raise ConfigError("no answerable questions to evaluate")
    embedder_id = embedder_id_for(cfg.embedder)
    coll = Collection.open(cfg, name, expect_embedder=embedder_id)
    result = evaluate_portfolio(
        info,
        coll,
        query_embedder_for(cfg, coll),
        embedder_id,
        QueryClassifier.from_config(cfg),
        questions,
        opts["bootstrap"],
    )
    result = {
        "portfolio": str(path),
        "questions": str(opts["questions"]),
        "split": opts["split"],
        **result,
    }
    if opts["as_json"]:
        _print_json(result)
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(
        title=f"coverage on {len(questions)} {opts['split']} questions "
        f"(s = {info['score']} in the top {info['top_n']})"
    )
    table.add_column("retrievers")
    table.add_column("coverage [95% CI]", justify="right")
    for k, ci in result["coverage"].items():
        table.add_row(k, f"{ci['mean']:.3f} [{ci['lo']:.3f}, {ci['hi']:.3f}]")
    console.print(table)
    for k, g in result["differences"].items():
        console.print(
            f"{k}: {g['mean']:+.3f} [{g['lo']:+.3f}, {g['hi']:+.3f}] (paired bootstrap)",
            highlight=False,
        )


@portfolio.command("show")
@click.argument("path")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def portfolio_show(ctx: click.Context, path: str, as_json: bool) -> None:
    """A portfolio's members, their marginal gains and coverage, beside the baselines and the
    router (a file or a name under $FATHOM_HOME/portfolios)."""
    from fathom.router.portfolio import load_portfolio
    from fathom.router.portfolio_runtime import resolve_portfolio

    info = load_portfolio(resolve_portfolio(_config(ctx), path))
    if as_json:
        _print_json(info)
        return
    _show_portfolio(info)


def _show_portfolio(info: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(
        title=f"portfolio over {info['n_questions']} questions "
        f"(s = {info['score']} in the top {info['top_n']})"
    )
    for col in ("step", "member", "parameters", "mean score alone", "marginal gain", "coverage"):
        table.add_column(col, justify="left" if col in ("member", "parameters") else "right")
    pool = {m["name"]: m for m in info["pool"]}
    for i, (name, gain, cov) in enumerate(
        zip(info["members"], info["gains"], info["coverage"], strict=True), start=1
    ):
        m = pool[name]
        params = ", ".join(f"{k}={v}" for k, v in m["params"].items()) or m["kind"]
        table.add_row(str(i), name, params, f"{m['mean_score']:.3f}", f"{gain:+.3f}", f"{cov:.3f}")
    console.print(table)
    b = info["baselines"]
    console.print(
        f"best single member {b['best_single']['member']}: {b['best_single']['coverage']:.3f} · "
        f"top {len(info['members'])} by average ({', '.join(b['top_k_by_average']['members'])}): "
        f"{b['top_k_by_average']['coverage']:.3f} · all {len(info['pool'])} members: "
        f"{b['all_members']['coverage']:.3f}",
        highlight=False,
    )
    router = info.get("router")
    if router:
        console.print(
            f"router: ridge per member over the query embedding and "
            f"{router['feature_schema'].get('n_probe_features', '?')} probe features, "
            f"α = {router['alpha']:g} (leave-one-out)",
            highlight=False,
        )


@main.group()
def collections() -> None:
    """List, show and remove collections."""


@collections.command("list")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def collections_list(ctx: click.Context, as_json: bool) -> None:
    """List collections."""
    from fathom.index.collection import list_collections

    cfg = _config(ctx)
    unreadable: list[tuple[str, str]] = []
    manifests = list_collections(cfg, unreadable)
    err = _stderr_console()
    for name, reason in unreadable:  # on stderr, so --json output stays the list it was
        err.print(f"[yellow]warning:[/yellow] collection {name!r} cannot be read: {_plain(reason)}")
    if as_json:
        _print_json(
            [
                {
                    "name": m.name,
                    "generation": m.generation,
                    "embedder": m.embedder_id,
                    "updated": m.updated,
                    **m.counts(),
                }
                for m in manifests
            ]
        )
        return
    from rich.console import Console
    from rich.table import Table

    table = Table()
    for col in ("name", "documents", "failed", "chunks", "embedder", "updated"):
        table.add_column(col)
    for m in manifests:
        c = m.counts()
        table.add_row(
            m.name,
            str(c["documents"]),
            str(c["failed"]),
            str(c["chunks"]),
            m.embedder_id,
            m.updated,
        )
    Console().print(table)


@collections.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def collections_show(ctx: click.Context, name: str, as_json: bool) -> None:
    """Show a collection's manifest."""
    from fathom.index.collection import Collection

    cfg = _config(ctx)
    coll = Collection.open(cfg, name)
    data = coll.manifest.to_dict()
    if as_json:
        _print_json(data)
        return
    from rich.console import Console
    from rich.table import Table

    out = Console()
    c = data["counts"]
    out.print(
        f"[bold]{name}[/bold] · generation {data['generation']} · {c['documents']} documents, "
        f"{c['failed']} failed, {c['chunks']} chunks · embedder {data['embedder_id']} "
        f"({data['embedder_dim']}d) · dense {data['dense'].get('kind')} · chunker "
        f"{data['chunker']}",
        highlight=False,
    )
    table = Table()
    for col in ("path", "status", "pages", "chunks", "title / error"):
        table.add_column(col, overflow="fold")
    for d in data["documents"]:
        table.add_row(
            _plain(d["path"]),
            d["status"],
            str(d["pages"]),
            str(d["chunks"]),
            _plain(d["error"] or d["title"]),
        )
    out.print(table)


@collections.command("views")
@click.argument("name")
@click.option(
    "--build",
    "build",
    multiple=True,
    help="Build (or rebuild) this view; repeatable. `all` builds the default views.",
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def collections_views(ctx: click.Context, name: str, build: tuple[str, ...], as_json: bool) -> None:
    """A collection's extra views for retriever portfolios (sentence windows, sections, BM25
    variants): list them, or build them with --build."""
    from fathom.core.errors import ConfigError
    from fathom.index.collection import Collection
    from fathom.index.embed import embedder_id_for, make_embedder
    from fathom.index.views import DEFAULT_VIEWS, build_view, list_views

    cfg = _config(ctx)
    coll = Collection.open(cfg, name)
    specs = {v.name: v for v in DEFAULT_VIEWS}
    wanted = list(specs) if "all" in build else list(build)
    unknown = [w for w in wanted if w not in specs]
    if unknown:
        raise ConfigError(f"unknown views {unknown}: one of {', '.join(specs)} or all")
    embedder = None
    for w in wanted:
        if specs[w].granularity == "sentences" and embedder is None:
            coll = Collection.open(cfg, name, expect_embedder=embedder_id_for(cfg.embedder))
            # As ingest embedded the collection: its model at its precision.
            embedder = make_embedder(
                dataclasses.replace(cfg.embedder, precision=coll.manifest.embedder_precision),
                cfg.models_path(),
            )
        t = time.perf_counter()
        view = build_view(coll, specs[w], embedder)
        click.echo(f"view {w}: {len(view)} units in {time.perf_counter() - t:.1f} s", err=True)
    views = list_views(coll)
    if as_json:
        _print_json(views)
        return
    for v in views:
        params = ", ".join(f"{k}={x}" for k, x in v["params"].items())
        state = "stale" if v["stale"] else "ok"
        click.echo(f"{v['name']:<22} {v['granularity']:<10} {v['n_units']:>8} units  {params}  "
                   f"[{state}]")  # fmt: skip
    if not views:
        click.echo(f"no views; build them with `fathom collections views {name} --build all`")


@collections.command("remove")
@click.argument("name")
@click.pass_context
def collections_remove(ctx: click.Context, name: str) -> None:
    """Delete a collection."""
    from fathom.index.collection import remove_collection

    remove_collection(_config(ctx), name)
    click.echo(f"removed {name}")


# ---------------------------------------------------------------------------------------------
# config
# ---------------------------------------------------------------------------------------------


@main.group()
def config() -> None:
    """Inspect the configuration."""


@config.command("show")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def config_show(ctx: click.Context, as_json: bool) -> None:
    """Print the effective configuration (defaults, fathom.toml, environment)."""
    cfg = _config(ctx)
    data = cfg.to_dict()
    data["home"] = str(cfg.home_path())
    if as_json:
        _print_json(data)
        return
    for key, value in data.items():
        if isinstance(value, dict):
            click.echo(f"[{key}]")
            for sub, subvalue in value.items():
                click.echo(f"{sub} = {json.dumps(subvalue)}")
            click.echo()
        else:
            click.echo(f"{key} = {json.dumps(value)}")


if __name__ == "__main__":
    main()
