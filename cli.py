"""Fathom command line: parse, call one function per command, render.

The options several commands share come from ``fathom.options``; what a command does between its
options and its output is in ``fathom.commands`` (or the layer that owns the work), and
``fathom.terminal.render`` and ``fathom.terminal.tables`` draw it. The ``policy`` and ``portfolio``
groups are in ``fathom.cli_learn``, and what the command modules share in ``fathom.cli_base``. Only
click and the standard library are imported at the top, so ``--help`` is instant; every heavy
library loads inside the command that needs it. stdout carries results; progress, warnings and logs
go to stderr. Exit codes: 0 ok, 1 an expected failure (FathomError), 2 bad usage.
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

import sys
from pathlib import Path
from typing import Any

import click
from fathom import __version__, options
from fathom.cli_base import FathomGroup, command_config
from fathom.cli_learn import policy, portfolio


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


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--collection", "-c", default=None, help="Collection name (default: from content).")
@click.option("--rebuild", is_flag=True, help="Re-parse and re-embed everything.")
@click.option("--strict", is_flag=True, help="Exit 1 when any file failed.")
@click.option("--embedder", default=None, help="Embedding model name or path.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option(
    "--watch",
    is_flag=True,
    help="Then keep the collection in step with PATHS: each burst of changes is ingested as "
    "one commit, with one line; Ctrl-C stops.",
)
@click.option(
    "--executor", type=click.Choice(["local", "ray"]), default="local",
    help="Parse, chunk and embed here, or as Ray tasks committed here (docs/ray.md).",
)  # fmt: skip
@click.option("--ray-address", default=None, help="Ray cluster (implies --executor ray).")
@options.password_option("Password for encrypted PDFs (or set FATHOM_PDF_PASSWORD).")
@click.pass_context
def ingest(
    ctx: click.Context,
    paths: tuple[Path, ...],
    collection: str | None,
    rebuild: bool,
    strict: bool,
    embedder: str | None,
    as_json: bool,
    watch: bool,
    executor: str,
    ray_address: str | None,
    password: str | None,
) -> None:
    """Ingest PDF, DOCX, PPTX, HTML, EPUB, TXT and MD files, scans and images (by OCR), folders
    or a docs.jsonl into a collection."""
    from fathom import commands
    from fathom.terminal.render import IngestProgress, render_ingest

    cfg = command_config(ctx, **{"embedder.name": embedder, "ingest.strict": strict or None})
    display = IngestProgress(enabled=not as_json)
    report = commands.ingest(
        cfg, paths, collection, display=display, rebuild=rebuild, password=password,
        executor=executor, ray_address=ray_address,
    )  # fmt: skip
    render_ingest(report, as_json)
    if watch:
        from fathom.index.watch import watch_collection
        from fathom.terminal.render import WatchDisplay

        try:
            watch_collection(
                cfg, list(paths), report.collection, emit=WatchDisplay(as_json), password=password
            )
        except KeyboardInterrupt:
            click.echo("stopped watching", err=True)
        return
    if cfg.ingest.strict and report.count("failed"):
        sys.exit(1)


# ---------------------------------------------------------------------------------------------
# search
# ---------------------------------------------------------------------------------------------


@main.command()
@click.argument("collection")
@click.argument("query")
@click.option("-k", "k", type=click.IntRange(1, 1000), default=None, help="Number of hits.")
@click.option("--mode", type=click.Choice(["dense", "bm25", "hybrid"]), default=None)
@options.DOC_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print hits as JSON.")
@click.pass_context
def search(
    ctx: click.Context,
    collection: str,
    query: str,
    k: int | None,
    mode: str | None,
    docs: tuple[str, ...],
    as_json: bool,
) -> None:
    """Search COLLECTION for QUERY and print the best chunks."""
    from fathom import commands
    from fathom.terminal.render import render_hits

    cfg = command_config(ctx, **{"retrieval.k": k, "retrieval.mode": mode})
    probe, used, kept = commands.search(cfg, collection, query, docs)
    render_hits(collection, query, probe, mode=used, k=cfg.retrieval.k, as_json=as_json, docs=kept)


# ---------------------------------------------------------------------------------------------
# ask / chat / history / stats
# ---------------------------------------------------------------------------------------------


def _ask_config(ctx: click.Context, opts: dict[str, Any]):
    """The configuration with the ask options in ``opts`` (taken out of it) as overrides;
    --portfolio-mode and --portfolio-ell mean nothing without a portfolio: say so."""
    mode, ell = opts["portfolio_mode"], opts["portfolio_ell"]
    cfg = command_config(ctx, **options.overrides(opts, *options.ASK_CONFIG))
    if (mode is not None or ell is not None) and not cfg.retrieval.portfolio.strip():
        raise click.UsageError(
            "--portfolio-mode and --portfolio-ell need a portfolio: give --portfolio NAME "
            "(or set retrieval.portfolio)"
        )
    return cfg


@main.command()
@click.argument("target")
@click.argument("question")
@options.ASK_OPTIONS
@click.option("--rebuild", is_flag=True, help="Re-index TARGET before answering.")
@options.password_option("Password for an encrypted PDF TARGET (or set FATHOM_PDF_PASSWORD).")
@options.SHOW_OPTION
@click.option(
    "--session",
    metavar="NAME",
    default=None,
    help="A conversation kept in the history: QUESTION may follow up the session's earlier "
    'questions ("And its limits?"), and is recorded as its next turn.',
)
@click.option("--json", "as_json", is_flag=True, help="Print the answer and report as JSON.")
@click.option(
    "--no-stream",
    is_flag=True,
    help="Print the answer only when it is complete (always so when stdout is not a terminal).",
)
@click.pass_context
def ask(ctx: click.Context, target: str, question: str, **opts: Any) -> None:
    """Answer QUESTION from TARGET (a file, a folder or a collection name), with citations."""
    from fathom import commands
    from fathom.terminal.render import (
        AnswerStream,
        IngestProgress,
        ask_events,
        render_answer,
        stderr_console,
    )
    from fathom.terminal.render_show import render_shown

    cfg = _ask_config(ctx, opts)
    err = stderr_console()
    as_json = opts["as_json"]
    # Streaming is for a terminal: piped or redirected, each feedback round's draft would land
    # in the output before the final answer.
    stream = AnswerStream(enabled=not as_json and not opts["no_stream"] and sys.stdout.isatty())
    answer = commands.ask(
        cfg,
        target,
        question,
        display=IngestProgress(enabled=not as_json),
        rebuild=opts["rebuild"],
        password=opts["password"],
        on_token=stream,
        on_event=ask_events(err, followup=not as_json),
        session=opts["session"],
        **options.answer_options(opts),
    )
    if opts["show"] is None:
        render_answer(answer, streamed=stream.started, as_json=as_json)
        return
    # --show: the answer first, then each cited source where it stands (one object with --json)
    if not as_json:
        render_answer(answer, streamed=stream.started)
    shown = commands.show_answer(cfg, answer, opts["show"], password=opts["password"])
    if as_json:
        render_answer(answer, as_json=True, shown=shown)
    else:
        render_shown(shown)


@main.command()
@click.argument("target")
@options.ASK_OPTIONS
@options.password_option("Password for an encrypted PDF TARGET (or set FATHOM_PDF_PASSWORD).")
@options.SHOW_OPTION
@click.pass_context
def chat(ctx: click.Context, target: str, **opts: Any) -> None:
    """Ask questions about TARGET one after another, with the index and models kept loaded.
    A follow-up ("How well does it do on HotpotQA?") is made standalone from the turns before
    it. /sources, /show [DIR], /doc PATTERN, /clear and /help; Ctrl-C stops an answer being
    written."""
    from fathom import commands
    from fathom.core.errors import FathomError
    from fathom.terminal.render import (
        AnswerStream,
        IngestProgress,
        ask_events,
        docs_note,
        plain,
        render_answer,
        stderr_console,
    )
    from fathom.terminal.render_show import render_chat_command

    cfg = _ask_config(ctx, opts)
    err = stderr_console()
    display = IngestProgress(enabled=True)
    answer_opts = options.answer_options(opts)
    docs, show = answer_opts.pop("docs"), opts["show"]
    with commands.Chat(
        cfg, target, display=display, docs=docs, show=show, password=opts["password"]
    ) as session:
        within = f" ({docs_note(session.docs)})" if session.docs else ""
        err.print(
            plain(
                f"chatting with {session.collection!r}{within} — /help for commands; an empty "
                "line or Ctrl-D ends the session"
            )
        )
        while True:
            try:
                question = click.prompt(
                    "?", prompt_suffix=" ", default="", show_default=False, err=True
                )
            except (EOFError, click.Abort):
                break
            if not question.strip():
                break
            try:
                if question.lstrip().startswith("/"):
                    render_chat_command(*session.command(question))
                    continue
                stream = AnswerStream(enabled=sys.stdout.isatty())
                answer = session.ask(
                    question, on_token=stream, on_event=ask_events(err), **answer_opts
                )
                render_answer(answer, streamed=stream.started)
                if show is not None:  # --show: after every answer, what /show shows
                    render_chat_command("show", session.show())
            except FathomError as exc:  # one question's failure, not the chat's
                err.print("[red]error[/red]", plain(str(exc)))
            except KeyboardInterrupt:  # Ctrl-C while answering: that answer stops, not the chat
                err.print("\n[yellow]stopped[/yellow] — the answer was not kept")


@main.command("show")
@click.argument("collection")
@click.argument("chunk_id")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the page's PNG (or the marked passage) to FILE; a chunk's further pages beside "
    "it as FILE-pN.png (default: FATHOM_HOME/shown/COLLECTION-CHUNK_ID-pN.png).",
)
@options.password_option("Password for an encrypted PDF (or set FATHOM_PDF_PASSWORD).")
@click.option("--json", "as_json", is_flag=True, help="Print what was shown as JSON.")
@click.pass_context
def show_command(
    ctx: click.Context,
    collection: str,
    chunk_id: str,
    out: Path | None,
    password: str | None,
    as_json: bool,
) -> None:
    """Show chunk CHUNK_ID of COLLECTION where it stands in its source: its PDF page, scan or
    image with the passage highlighted, or the passage in its surrounding text."""
    from fathom import commands
    from fathom.terminal.render_show import render_shown

    cfg = command_config(ctx)
    shown = commands.show(cfg, collection, chunk_id, out=out, password=password)
    render_shown(shown, as_json, head={"collection": collection, "chunk_id": chunk_id})


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
@click.pass_context
def doctor(ctx: click.Context, as_json: bool) -> None:
    """What Fathom will use on this machine and whether it works (exit 1 when ask cannot answer)."""
    from fathom import doctor as checks
    from fathom.terminal.tables import render_doctor

    result = checks.run_checks(command_config(ctx))
    render_doctor(result, as_json)
    ctx.exit(0 if result["ok"] else 1)


@main.command()
@click.option("-n", "limit", type=click.IntRange(1, 10000), default=20, help="How many.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def history(ctx: click.Context, limit: int, as_json: bool) -> None:
    """Recent questions with their depth, latency, tokens and cost."""
    from fathom import commands
    from fathom.terminal.tables import render_history

    render_history(commands.history(command_config(ctx), limit), as_json)


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
    from fathom import commands
    from fathom.terminal.tables import render_stats

    render_stats(commands.stats(command_config(ctx), days, slo_ms), slo_ms, as_json)


# ---------------------------------------------------------------------------------------------
# mcp
# ---------------------------------------------------------------------------------------------


@main.command("mcp")
@click.option(
    "--collection",
    "-c",
    "collections",
    multiple=True,
    help="A collection to serve; repeat for several (default: every collection).",
)
@click.option(
    "--root",
    "roots",
    multiple=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="A folder the ingest tool may read; repeat for several (none: no ingest tool).",
)
@options.generator_option(help="Backend for the ask tool, and whose tokens retrieve counts.")
@click.pass_context
def mcp_command(
    ctx: click.Context, collections: tuple[str, ...], roots: tuple[Path, ...], generator: str | None
) -> None:
    """Serve Fathom to an MCP client (an assistant, an editor, an agent) over stdio: search,
    retrieve, ask, show (a cited page as an image), list_collections, chunks and pages as
    fathom:// resources, and ingest under --root."""
    from fathom.mcp_server import serve

    serve(command_config(ctx, **{"generator.backend": generator}), list(collections), list(roots))


# ---------------------------------------------------------------------------------------------
# serve
# ---------------------------------------------------------------------------------------------


_FOLDER = click.Path(exists=True, file_okay=False, path_type=Path)


@main.command("serve")
@click.argument("targets", nargs=-1, metavar="[TARGET]...")
@click.option("--collection", "-c", "collections", multiple=True, help="Serve only this one.")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=click.IntRange(1, 65535), default=8765, show_default=True)
@click.option("--root", "roots", multiple=True, type=_FOLDER, help="Ingest from it by path.")
@click.option("--runs", multiple=True, type=_FOLDER, help="Show the `fathom eval` runs in it.")
@click.option("--open", "open_browser", is_flag=True, help="Open the page in a browser.")
@click.option("--allow-remote", is_flag=True, help="Allow a --host others reach (token needed).")
@options.generator_option(help="Default answer backend.")
@click.pass_context
def serve_command(ctx: click.Context, targets: tuple[str, ...], **opts: Any) -> None:
    """Serve a local web page and its API (/api/v1) over TARGETs (files, folders or names,
    indexed first) and the collections: streamed answers, cited pages, ingest, history."""
    from fathom.web.guard import remote_refusal

    refusal = remote_refusal(opts["host"], opts["allow_remote"])
    if refusal:
        click.echo(f"Error: {refusal}", err=True)
        ctx.exit(2)
    from fathom.index.targets import resolve_target
    from fathom.terminal.render import IngestProgress
    from fathom.web import serve

    cfg = command_config(ctx, **{"generator.backend": opts.pop("generator")})
    with IngestProgress(enabled=bool(targets)) as progress:  # as chat opens its target
        opts["collections"] += tuple(resolve_target(cfg, t, progress=progress) for t in targets)
    serve(cfg, **opts)


# ---------------------------------------------------------------------------------------------
# eval
# ---------------------------------------------------------------------------------------------


@main.group("eval", invoke_without_command=True)
@options.EVAL_OPTIONS
@click.option("--json", "as_json", is_flag=True, help="Print summary.json to stdout.")
@click.pass_context
def eval_cmd(ctx: click.Context, **opts: Any) -> None:
    """Evaluate strategies side by side on a document set (`fathom eval report DIR` redraws)."""
    if ctx.invoked_subcommand is not None:
        return
    if not opts["questions"]:
        raise click.UsageError("--questions is required")
    docs, collection = opts["docs"], opts["collection"]
    if not docs and not collection:
        raise click.UsageError("give --docs PATH or --collection NAME")
    if docs and collection:
        raise click.UsageError("give --docs PATH or --collection NAME, not both")
    from fathom import commands
    from fathom.terminal.render import EvalProgress, IngestProgress, stderr_console

    cfg = command_config(ctx, **options.overrides(opts, *options.EVAL_CONFIG))
    as_json = opts.pop("as_json")
    console = stderr_console()
    summary, out = commands.evaluate(
        cfg, opts, display=IngestProgress(console.is_terminal), on_rows=EvalProgress(console)
    )
    _render_eval(summary, out, as_json)


def _render_eval(summary: dict[str, Any], out: Path, as_json: bool) -> None:
    from fathom.evaluation.report import table_data
    from fathom.terminal.tables import render_eval

    render_eval(summary, out, as_json, table=table_data)


@eval_cmd.command("report")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print summary.json to stdout.")
def eval_report(run_dir: Path, as_json: bool) -> None:
    """Recompute summary.json, plots and report.md of a run from its log alone."""
    from fathom.evaluation.runner import report_from_dir

    _render_eval(report_from_dir(run_dir), run_dir, as_json)


# ---------------------------------------------------------------------------------------------
# policy and portfolio: their commands are in fathom.cli_learn
# ---------------------------------------------------------------------------------------------

main.add_command(policy)
main.add_command(portfolio)


# ---------------------------------------------------------------------------------------------
# collections
# ---------------------------------------------------------------------------------------------


@main.group()
def collections() -> None:
    """List, show and remove collections."""


@collections.command("list")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def collections_list(ctx: click.Context, as_json: bool) -> None:
    """List collections."""
    from fathom import commands
    from fathom.terminal.tables import render_collections

    render_collections(*commands.list_collections(command_config(ctx)), as_json)


@collections.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def collections_show(ctx: click.Context, name: str, as_json: bool) -> None:
    """Show a collection's manifest and what each document says about itself: title,
    authors, organisation, date, version (``--json``: each document's ``meta``)."""
    from fathom import commands
    from fathom.terminal.tables import render_collection

    render_collection(name, commands.collection_manifest(command_config(ctx), name), as_json)


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
    from fathom import commands
    from fathom.terminal.tables import render_views

    def built(view: str, units: int, seconds: float) -> None:
        click.echo(f"view {view}: {units} units in {seconds:.1f} s", err=True)

    render_views(name, commands.build_views(command_config(ctx), name, build, built), as_json)


@collections.command("remove")
@click.argument("name")
@click.pass_context
def collections_remove(ctx: click.Context, name: str) -> None:
    """Delete a collection."""
    from fathom.index.collection import remove_collection

    remove_collection(command_config(ctx), name)
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
    from fathom.terminal.tables import render_config

    render_config(command_config(ctx), as_json)


if __name__ == "__main__":
    main()
