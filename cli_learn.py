"""The command groups that learn retrieval choices from data and inspect them: ``fathom policy``
(depth policies: sweep budgets, train, show) and ``fathom portfolio`` (retriever portfolios:
build, eval, show). ``fathom.cli`` adds them to its root group. As there, only click and the
standard library are imported at the top; the work loads inside each command."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from fathom import options
from fathom.cli_base import command_config

# ---------------------------------------------------------------------------------------------
# policy
# ---------------------------------------------------------------------------------------------


def _shares(values: tuple[str, ...]) -> dict[str, float] | None:
    """``--multi-hop-price`` values as a mapping (``learn.train_policy.parse_shares``)."""
    from fathom.core.errors import FathomError
    from fathom.learn.train_policy import parse_shares

    try:
        return parse_shares(values)
    except FathomError as exc:
        raise click.BadParameter(str(exc)) from None


@click.group()
def policy() -> None:
    """Learned retrieval-depth policies: sweep budgets, train, inspect."""


@policy.command("sweep")
@options.DOCUMENTS
@options.QUESTIONS
@click.option(
    "--budgets", type=options.IntList(low=0), default="0,1,2,3,5,8,12,20", show_default=True
)
@options.generator_option()
@click.option("--model", default=None)
@options.DEADLINE_ROWS
@click.option(
    "--judge", type=click.Choice(["contains", "f1", "qrels", "recall"]), default="contains"
)
@click.option("--split", "doc_split", type=click.Choice(["train", "test", "all"]), default="train")
@click.option("--split-seed", type=int, default=0, show_default=True)
@click.option("--limit", type=click.IntRange(1), default=None)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True)
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local")
@click.option(
    "--reading/--no-reading",
    default=True,
    show_default=True,
    help="Also log what Fathom's reader makes of each question's candidates (a policy that "
    "reads passages trains on them).",
)
@click.option(
    "--context-only",
    is_flag=True,
    help="Score each budget's context without generating an answer (judges recall and qrels "
    "only; the latencies then leave out generation).",
)
@click.option("--out", "out", type=click.Path(path_type=Path), required=True)
@click.pass_context
def policy_sweep(ctx: click.Context, **opts: Any) -> None:
    """Quality, tokens and latency of every budget for every training question (an eval run
    with probe features logged; resumable)."""
    from fathom import commands
    from fathom.learn.sweep import WARN_RECALL
    from fathom.terminal.render import EvalProgress, IngestProgress, stderr_console
    from fathom.terminal.tables import render_sweep

    if not opts["docs"] and not opts["collection"]:
        raise click.UsageError("give --docs PATH or --collection NAME")
    cfg = command_config(ctx, **options.overrides(opts, "generator", "model", "deadline_ms"))
    console = stderr_console()
    sweep = commands.sweep(
        cfg, opts, display=IngestProgress(console.is_terminal), on_rows=EvalProgress(console)
    )
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
@click.option(
    "--balance-sets",
    is_flag=True,
    help="forest: every --sweep weighs the same in training, however many questions it has.",
)
@click.option(
    "--reading/--no-reading",
    default=True,
    show_default=True,
    help="forest: learn from the reader's readings too, where every --sweep logged them (the "
    "policy then reads the candidates before deciding).",
)
@click.option(
    "--multi-hop-price",
    "multi_hop_price",
    multiple=True,
    metavar="PREFER=SHARE",
    callback=lambda ctx, param, value: _shares(value),
    help="forest: at this preference a question the router types multi-hop pays SHARE of the "
    "token price (e.g. quality=0.5); repeat for several.",
)
@click.option("--trees", type=click.IntRange(1), default=100, show_default=True)
@click.option("--max-depth", type=click.IntRange(1), default=10, show_default=True)
@click.option("--confidence", type=click.FloatRange(0, 1), default=0.9, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--out", "out", type=click.Path(path_type=Path), required=True)
@click.pass_context
def policy_train(ctx: click.Context, **opts: Any) -> None:
    """Train a depth policy on a sweep's oracle labels."""
    from fathom.learn.train_policy import train_policy

    path, n_questions = train_policy(command_config(ctx), **opts)
    click.echo(f"{opts['kind']} policy on {n_questions} questions → {path}")


@policy.command("show")
@click.argument("path", required=False)
@click.option("--json", "as_json", is_flag=True)
def policy_show(path: str | None, as_json: bool) -> None:
    """A policy's metadata and feature importances (default: the shipped policy)."""
    from fathom import commands
    from fathom.terminal.tables import render_policy

    render_policy(*commands.depth_policy(path), as_json)


# ---------------------------------------------------------------------------------------------
# portfolio
# ---------------------------------------------------------------------------------------------


@click.group()
def portfolio() -> None:
    """Retriever portfolios: pick the few retriever configurations that cover the most."""


@portfolio.command("build")
@options.DOCUMENTS
@options.QUESTIONS
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
    from fathom.learn.portfolio_build import build_portfolio_file
    from fathom.terminal.tables import render_portfolio

    collection, docs = opts.pop("collection"), opts.pop("docs")
    info, out, n_questions = build_portfolio_file(
        command_config(ctx), collection or docs, opts.pop("questions"), **opts
    )
    render_portfolio(info)
    click.echo(f"portfolio of {len(info['members'])} over {n_questions} questions → {out}")


@portfolio.command("eval")
@click.argument("path")
@click.option("--docs", default=None, help="Documents (default: the portfolio's collection).")
@options.QUESTIONS
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
    from fathom.terminal.tables import render_portfolio_eval

    as_json = opts.pop("as_json")
    render_portfolio_eval(evaluate_portfolio_file(command_config(ctx), path, **opts), as_json)


@portfolio.command("show")
@click.argument("path")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def portfolio_show(ctx: click.Context, path: str, as_json: bool) -> None:
    """A portfolio's members, their marginal gains and coverage, beside the baselines and the
    router (a file or a name under $FATHOM_HOME/portfolios)."""
    from fathom import commands
    from fathom.terminal.tables import render_portfolio

    render_portfolio(commands.portfolio_info(command_config(ctx), path), as_json)
