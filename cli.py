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
    from fathom.index.collection import collection_for
    from fathom.index.embed import embedder_id_for
    from fathom.index.ingest import ingest_paths
    from fathom.render import IngestProgress, render_ingest

    cfg = _config(ctx, **{"embedder.name": embedder, "ingest.strict": strict or None})
    # The collection `ask FILE` would use for these files with this embedder.
    name = collection or collection_for(paths, embedder=embedder_id_for(cfg.embedder))
    with IngestProgress(enabled=not as_json) as prog:
        report = ingest_paths(
            cfg, list(paths), name, rebuild=rebuild, progress=prog, password=password
        )
    render_ingest(report, as_json)
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
@click.option("--json", "as_json", is_flag=True, help="Print hits as JSON.")
@click.pass_context
def search(
    ctx: click.Context, collection: str, query: str, k: int | None, mode: str | None, as_json: bool
) -> None:
    """Search COLLECTION for QUERY and print the best chunks."""
    from fathom.index.retrieve import open_retriever
    from fathom.render import render_hits

    cfg = _config(ctx, **{"retrieval.k": k, "retrieval.mode": mode})
    retriever = open_retriever(cfg, collection)
    probe = retriever.probe(query, cfg.retrieval.k)
    render_hits(collection, query, probe, mode=retriever.mode, k=cfg.retrieval.k, as_json=as_json)


# ---------------------------------------------------------------------------------------------
# ask / chat / history / stats
# ---------------------------------------------------------------------------------------------


def _ask_config(ctx: click.Context, opts: dict[str, Any]):
    """The configuration with the ask options in ``opts`` (taken out of it) as overrides;
    --portfolio-mode and --portfolio-ell mean nothing without a portfolio: say so."""
    mode, ell = opts.pop("portfolio_mode"), opts.pop("portfolio_ell")
    cfg = _config(
        ctx,
        **{
            "generator.deadline_ms": opts.pop("deadline_ms"),
            "retrieval.policy": opts.pop("policy"),
            "retrieval.portfolio": opts.pop("portfolio"),
            "retrieval.portfolio_mode": mode,
            "retrieval.portfolio_ell": ell,
            "generator.backend": opts.pop("generator"),
            "generator.model": opts.pop("model"),
            "embedder.name": opts.pop("embedder"),
            "compress.budget_tokens": opts.pop("budget_tokens"),
        },
    )
    if (mode is not None or ell is not None) and not cfg.retrieval.portfolio.strip():
        raise click.UsageError(
            "--portfolio-mode and --portfolio-ell need a portfolio: give --portfolio NAME "
            "(or set retrieval.portfolio)"
        )
    return cfg


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
def ask(ctx: click.Context, target: str, question: str, **opts: Any) -> None:
    """Answer QUESTION from TARGET (a file, a folder or a collection name), with citations."""
    from fathom.index.targets import resolve_target
    from fathom.render import (
        AnswerStream,
        IngestProgress,
        ask_events,
        render_answer,
        stderr_console,
    )
    from fathom.stages.pipeline import ask as run_ask

    cfg = _ask_config(ctx, opts)
    err = stderr_console()
    as_json = opts["as_json"]
    # Streaming is for a terminal: piped or redirected, each feedback round's draft would land
    # in the output before the final answer.
    stream = AnswerStream(enabled=not as_json and not opts["no_stream"] and sys.stdout.isatty())
    # Index first (with its progress bars), then stream the answer on a quiet terminal.
    with IngestProgress(enabled=not as_json) as prog:
        name = resolve_target(
            cfg, target, progress=prog, rebuild=opts["rebuild"], password=opts["password"]
        )
    answer = run_ask(
        cfg,
        target,
        question,
        k=opts["k"],
        rerank=False if opts["no_rerank"] else None,
        on_token=stream,
        on_event=ask_events(err),
        collection=name,
    )
    render_answer(answer, streamed=stream.started, as_json=as_json)


@main.command()
@click.argument("target")
@_with_ask_options
@click.pass_context
def chat(ctx: click.Context, target: str, **opts: Any) -> None:
    """Ask questions about TARGET one after another, with the index and models kept loaded."""
    from fathom.core.errors import FathomError
    from fathom.index.targets import resolve_target
    from fathom.render import (
        AnswerStream,
        IngestProgress,
        ask_events,
        plain,
        render_answer,
        stderr_console,
    )
    from fathom.stages.history import record_ask
    from fathom.stages.pipeline import Engine

    cfg = _ask_config(ctx, opts)
    err = stderr_console()
    with IngestProgress(enabled=True) as prog:
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
            stream = AnswerStream(enabled=sys.stdout.isatty())
            try:
                answer = engine.ask(
                    question,
                    k=opts["k"],
                    rerank=False if opts["no_rerank"] else None,
                    on_token=stream,
                    on_event=ask_events(err),
                )
            except FathomError as exc:
                err.print("[red]error[/red]", plain(str(exc)))
                continue
            record_ask(cfg, target, answer)
            render_answer(answer, streamed=stream.started)
    finally:
        engine.close()


@main.command()
@click.option("-n", "limit", type=click.IntRange(1, 10000), default=20, help="How many.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def history(ctx: click.Context, limit: int, as_json: bool) -> None:
    """Recent questions with their depth, latency, tokens and cost."""
    from fathom.stages.history import History
    from fathom.tables import render_history

    cfg = _config(ctx)
    render_history(History(cfg.home_path() / "history.db").recent(limit), as_json)


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
    from fathom.stages.history import History
    from fathom.tables import render_stats

    cfg = _config(ctx)
    since = time.time() - days * 86400 if days is not None else None
    data = History(cfg.home_path() / "history.db").stats(since=since, slo_ms=slo_ms)
    render_stats(data, slo_ms, as_json)


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
    from fathom.evaluation.runner import EvalSettings, run_eval
    from fathom.render import EvalProgress, IngestProgress, stderr_console

    cfg = _config(
        ctx,
        **{
            "generator.backend": opts.pop("generator"),
            "generator.model": opts.pop("model"),
            "generator.deadline_ms": opts.pop("deadline_ms"),
            "retrieval.portfolio": opts.pop("portfolio"),
            "retrieval.portfolio_mode": opts.pop("portfolio_mode"),
            "retrieval.portfolio_ell": opts.pop("portfolio_ell"),
        },
    )
    out = opts.pop("out") or Path("eval-runs") / time.strftime("%Y%m%d-%H%M%S")
    as_json, doc_split = opts.pop("as_json"), opts.pop("doc_split")
    settings = EvalSettings(
        out=str(out),
        strategies=opts.pop("strategies").split(","),
        cache=not opts.pop("no_cache"),
        doc_split=None if doc_split == "all" else doc_split,
        **opts,
    )
    console = stderr_console()
    with IngestProgress(console.is_terminal) as ingest_progress, EvalProgress(console) as bar:
        summary = run_eval(cfg, settings, progress=ingest_progress, on_rows=bar)
    _render_eval(summary, out, as_json)


def _render_eval(summary: dict[str, Any], out: Path, as_json: bool) -> None:
    from fathom.evaluation.report import render_table
    from fathom.tables import render_eval

    render_eval(summary, out, as_json, table=render_table)


@eval_cmd.command("report")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print summary.json to stdout.")
def eval_report(run_dir: Path, as_json: bool) -> None:
    """Recompute summary.json, plots and report.md of a run from its log alone."""
    from fathom.evaluation.runner import report_from_dir

    _render_eval(report_from_dir(run_dir), run_dir, as_json)


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
    from fathom.evaluation.runner import run_sweep, sweep_settings
    from fathom.render import EvalProgress, IngestProgress, stderr_console
    from fathom.router.sweep import WARN_RECALL
    from fathom.tables import render_sweep

    if not opts["docs"] and not opts["collection"]:
        raise click.UsageError("give --docs PATH or --collection NAME")
    cfg = _config(
        ctx,
        **{
            "generator.backend": opts.pop("generator"),
            "generator.model": opts.pop("model"),
            "generator.deadline_ms": opts.pop("deadline_ms"),
        },
    )
    settings = sweep_settings(**opts)
    console = stderr_console()
    with IngestProgress(console.is_terminal) as ingest_progress, EvalProgress(console) as bar:
        sweep = run_sweep(cfg, settings, progress=ingest_progress, on_rows=bar)
    render_sweep(sweep, opts["budgets"], opts["out"], WARN_RECALL)


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
    from fathom.router.train_policy import train_policy

    path, n_questions = train_policy(_config(ctx), **opts)
    click.echo(f"{opts['kind']} policy on {n_questions} questions → {path}")


@policy.command("show")
@click.argument("path", required=False)
@click.option("--json", "as_json", is_flag=True)
def policy_show(path: str | None, as_json: bool) -> None:
    """A policy's metadata and feature importances (default: the shipped policy)."""
    from fathom.router.depth import load_policy
    from fathom.router.forest import default_policy_path
    from fathom.tables import render_policy

    target = Path(path) if path else default_policy_path()
    if target.suffix == ".safetensors" and not target.is_file():
        from fathom.router.reinforce import ReinforcePolicy

        ReinforcePolicy.load(target)  # fails, naming the two files a REINFORCE policy needs
    render_policy(load_policy(target), target, as_json)


# ---------------------------------------------------------------------------------------------
# portfolio
# ---------------------------------------------------------------------------------------------


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
    from fathom.router.portfolio_build import build_portfolio_file
    from fathom.tables import render_portfolio

    collection, docs = opts.pop("collection"), opts.pop("docs")
    info, out, n_questions = build_portfolio_file(
        _config(ctx), collection or docs, opts.pop("questions"), **opts
    )
    render_portfolio(info)
    click.echo(f"portfolio of {len(info['members'])} over {n_questions} questions → {out}")


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
    from fathom.evaluation.portfolio import evaluate_portfolio_file
    from fathom.tables import render_portfolio_eval

    as_json = opts.pop("as_json")
    render_portfolio_eval(evaluate_portfolio_file(_config(ctx), path, **opts), as_json)


@portfolio.command("show")
@click.argument("path")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def portfolio_show(ctx: click.Context, path: str, as_json: bool) -> None:
    """A portfolio's members, their marginal gains and coverage, beside the baselines and the
    router (a file or a name under $FATHOM_HOME/portfolios)."""
    from fathom.router.portfolio import load_portfolio
    from fathom.router.portfolio_runtime import resolve_portfolio
    from fathom.tables import render_portfolio

    render_portfolio(load_portfolio(resolve_portfolio(_config(ctx), path)), as_json)


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
    from fathom.index.collection import list_collections
    from fathom.tables import render_collections

    unreadable: list[tuple[str, str]] = []
    manifests = list_collections(_config(ctx), unreadable)
    render_collections(manifests, unreadable, as_json)


@collections.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def collections_show(ctx: click.Context, name: str, as_json: bool) -> None:
    """Show a collection's manifest."""
    from fathom.index.collection import Collection
    from fathom.tables import render_collection

    coll = Collection.open(_config(ctx), name)
    render_collection(name, coll.manifest.to_dict(), as_json)


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
    from fathom.tables import render_views

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
    render_views(name, list_views(coll), as_json)


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
    from fathom.tables import render_config

    render_config(_config(ctx), as_json)


if __name__ == "__main__":
    main()
