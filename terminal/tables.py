"""What the command line prints about runs and what it keeps: evaluations, sweeps, depth
policies, portfolios, the history of asks and its statistics, collections and the configuration,
as tables and summaries on stdout or ``--json``.

Like ``fathom.terminal.render``, whose rich helpers it shares, it imports only click, the standard
library and ``fathom.core`` at the top; rich loads inside the functions that draw. Results arrive as
the objects the commands produce; nothing here computes them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from fathom.terminal.render import identifier_column, plain, print_json, stderr_console

# ---------------------------------------------------------------------------------------------
# history, stats
# ---------------------------------------------------------------------------------------------


def render_history(rows: list[dict[str, Any]], as_json: bool = False) -> None:
    if as_json:
        for row in rows:
            print_json(row)
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
            plain(r["question"]),
            r["query_type"] or "",
            str(r["k"]),
            f"{r['total_ms']:.0f}",
            str((r["prompt_tokens"] or 0) + (r["completion_tokens"] or 0)),
            f"{r['cost'] or 0:.4f}",
            f"{r['confidence'] or 0:.2f}",
            r["model"] or "",
        )
    Console().print(table)


_MARKS = {"ok": "[green]ok[/green]", "warning": "[yellow]warning[/yellow]",
          "problem": "[red]problem[/red]"}  # fmt: skip


def render_doctor(result: dict[str, Any], as_json: bool = False) -> None:
    """``fathom doctor``: one line per check under its section, the fix below any that is not
    ok, then the verdict."""
    if as_json:
        print_json(result)
        return
    from rich.console import Console

    console = Console()
    section = None
    for c in result["checks"]:
        if c["section"] != section:
            section = c["section"]
            console.print(f"[bold]{section}[/bold]")
        console.print(f"  {_MARKS[c['status']]}  {plain(c['name'])}: {plain(c['detail'])}",
                      highlight=False)  # fmt: skip
        if c["fix"]:
            console.print(f"      fix: {plain(c['fix'])}", highlight=False)
    verdict = (
        "ask can answer here" if result["ok"] else "ask cannot answer until a problem is fixed"
    )
    console.print(f"[bold]{verdict}[/bold]", highlight=False)


def render_stats(data: dict[str, Any], slo_ms: float | None, as_json: bool = False) -> None:
    if as_json:
        print_json(data)
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
# eval, policy
# ---------------------------------------------------------------------------------------------


def render_eval(
    summary: dict[str, Any],
    out: Path,
    as_json: bool,
    *,
    table: Callable[[dict[str, Any]], tuple[str, tuple[str, ...], list[list[str]]]],
) -> None:
    """summary.json, or the comparison table and where the run's files are; ``table(summary)``
    gives its title, columns and rows (the evaluation layer's ``table_data``)."""
    if as_json:
        print_json(summary)
        return
    from rich.console import Console

    console = Console()
    if not console.is_terminal:  # a file or pipe: wide enough for the whole table
        console = Console(width=220)
    console.print(eval_table(*table(summary)))
    console.print(f"log, summary, plots and report in {out}/", highlight=False)


def eval_table(title: str, columns: tuple[str, ...], rows: list[list[str]]) -> Any:
    """The per-strategy comparison as a rich table: the first column (the strategy) left
    aligned, the numbers right."""
    from fathom.core.text import safe_terminal_text
    from rich.table import Table

    table = Table(title=title)
    for i, col in enumerate(columns):
        table.add_column(col, justify="left" if i == 0 else "right", overflow="fold")
    for row in rows:
        table.add_row(safe_terminal_text(row[0]), *row[1:])
    return table


def render_sweep(sweep, budgets: list[int], out: Path, warn_recall: float) -> None:
    """A finished sweep: its answer recall at the deepest budget on stderr (with a warning
    below ``warn_recall``), then its size."""
    console = stderr_console()
    recall = sweep.deepest_recall
    if recall is not None:
        console.print(
            f"answer recall at the deepest budget (k = {budgets[-1]}): {recall:.1%}",
            highlight=False,
        )
        if recall < warn_recall:
            console.print(
                f"[yellow]warning[/yellow] below {warn_recall:.0%}: the index rarely finds the "
                "answers, and no depth policy can fix that — improve retrieval (chunking, "
                "embedder) first"
            )
    click.echo(f"sweep of {len(sweep.qids)} questions × {len(budgets)} budgets in {out}/")


def render_policy(policy, path: Path, priced=None, as_json: bool = False) -> None:
    """A depth policy as it describes itself (``describe``, whatever its kind): its metadata,
    a forest's feature importances as a table, a REINFORCE policy's training curve summed up,
    a utility policy's priors in ``--json`` only; ``priced``: what a priced policy's
    preferences are worth (``commands.depth_policy``), said in words by the caller."""
    info = policy.describe(path)
    if priced:
        info["pricing"] = priced["pricing"]
    if as_json:
        print_json(info)
        return
    importances = info.pop("feature_importances", None)
    curves = info.pop("curves", None) or []
    for key in ("pricing", "priors"):
        info.pop(key, None)
    for key, value in info.items():
        click.echo(f"{key}: {json.dumps(value, ensure_ascii=False)}")
    if curves:
        first, last = curves[0], curves[-1]
        click.echo(
            f"training: {len(curves)} epochs, mean reward {first['reward']:.4f} → "
            f"{last['reward']:.4f}; last epoch's budget shares "
            f"{json.dumps(last.get('action_shares'))}"
        )
    if importances is not None:
        _render_importances(importances)
    if priced:
        from rich.console import Console

        Console().print(f"[bold]Depth and cost[/bold]: {priced['explain']}", highlight=False)


def _render_importances(imp: dict[str, float]) -> None:
    """A forest's 15 most important features (mean decrease in impurity)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="feature importances (mean decrease in impurity)")
    table.add_column("feature", overflow="fold")
    table.add_column("importance", justify="right")
    for name in sorted(imp, key=lambda k: -imp[k])[:15]:
        table.add_row(name, f"{imp[name]:.3f}")
    Console().print(table)


# ---------------------------------------------------------------------------------------------
# portfolio
# ---------------------------------------------------------------------------------------------


def render_portfolio(info: dict[str, Any], as_json: bool = False) -> None:
    """A portfolio's members, their marginal gains and coverage, the baselines and the
    router."""
    if as_json:
        print_json(info)
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(
        title=f"portfolio over {info['n_questions']} questions "
        f"(s = {info['score']} in the top {info['top_n']})"
    )
    table.add_column("step", justify="right")
    identifier_column(table, "member", list(info["members"]))
    table.add_column("parameters", overflow="fold")
    for col in ("mean score alone", "marginal gain", "coverage"):
        table.add_column(col, justify="right")
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


def render_portfolio_eval(result: dict[str, Any], as_json: bool = False) -> None:
    """``portfolio eval``: the coverage table with its intervals, then the paired
    differences."""
    if as_json:
        print_json(result)
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(
        title=f"coverage on {result['n_questions']} {result['split']} questions "
        f"(s = {result['score']} in the top {result['top_n']})"
    )
    identifier_column(table, "retrievers", list(result["coverage"]))
    table.add_column("coverage [95% CI]", justify="right")
    table.add_column("by document", justify="right")
    by_doc = result.get("coverage_documents") or {}
    for k, ci in result["coverage"].items():
        d = by_doc.get(k)
        table.add_row(
            k,
            f"{ci['mean']:.3f} [{ci['lo']:.3f}, {ci['hi']:.3f}]",
            f"[{d['lo']:.3f}, {d['hi']:.3f}]" if d else "–",
        )
    console.print(table)
    diff_docs = result.get("differences_documents") or {}
    for k, g in result["differences"].items():
        d = diff_docs.get(k)
        over_docs = f"; by document [{d['lo']:+.3f}, {d['hi']:+.3f}]" if d else ""
        console.print(
            f"{k}: {g['mean']:+.3f} [{g['lo']:+.3f}, {g['hi']:+.3f}] (paired bootstrap{over_docs})",
            highlight=False,
        )


# ---------------------------------------------------------------------------------------------
# collections, config
# ---------------------------------------------------------------------------------------------


def render_collections(
    manifests: list, unreadable: list[tuple[str, str]], as_json: bool = False
) -> None:
    """The collections' table (or JSON list); the ones that cannot be read as warnings on
    stderr, so ``--json`` output stays the list it was."""
    err = stderr_console()
    for name, reason in unreadable:
        err.print(f"[yellow]warning:[/yellow] collection {name!r} cannot be read: {plain(reason)}")
    if as_json:
        print_json(
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
    identifier_column(table, "name", [m.name for m in manifests])
    for col in ("documents", "failed", "chunks", "embedder", "updated"):
        table.add_column(col, overflow="fold")
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


def render_collection(name: str, data: dict[str, Any], as_json: bool = False) -> None:
    """A collection's manifest: one summary line and its documents' table."""
    if as_json:
        print_json(data)
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
            plain(d["path"]),
            d["status"],
            str(d["pages"]),
            str(d["chunks"]),
            plain(d["error"] or d["title"]),
        )
    out.print(table)
    _render_metadata(out, data["documents"])


def _render_metadata(out: Any, documents: list[dict[str, Any]]) -> None:
    """What each indexed document says about itself (``DocEntry.meta``): title, authors,
    organisation, date (ISO beside it when it reads differently) and version; nothing when no
    document has any."""
    from rich.table import Table

    rows = []
    for d in documents:
        meta = d.get("meta") or {}
        if d["status"] != "ok" or not any(meta.get(k) for k in _META_COLUMNS):
            continue
        date = meta.get("date", "")
        iso = meta.get("iso_date", "")
        if iso and iso != date:
            date = f"{date} ({iso})"
        rows.append(
            [
                d["path"].rsplit("/", 1)[-1],
                meta.get("title", ""),
                "; ".join(meta.get("authors", [])),
                meta.get("organisation", ""),
                date,
                meta.get("version", ""),
            ]
        )
    if not rows:
        return
    table = Table(title="document metadata")
    for col in ("document", *_META_COLUMNS):
        table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(*(plain(v) for v in row))
    out.print(table)


_META_COLUMNS = ("title", "authors", "organisation", "date", "version")


def render_views(name: str, views: list[dict[str, Any]], as_json: bool = False) -> None:
    if as_json:
        print_json(views)
        return
    for v in views:
        params = ", ".join(f"{k}={x}" for k, x in v["params"].items())
        state = "stale" if v["stale"] else "ok"
        click.echo(f"{v['name']:<22} {v['granularity']:<10} {v['n_units']:>8} units  {params}  "
                   f"[{state}]")  # fmt: skip
    if not views:
        click.echo(f"no views; build them with `fathom collections views {name} --build all`")


def render_config(cfg, as_json: bool = False) -> None:
    """The effective configuration with its home folder, as TOML-like sections or JSON."""
    data = cfg.to_dict()
    data["home"] = str(cfg.home_path())
    if as_json:
        print_json(data)
        return
    for key, value in data.items():
        if isinstance(value, dict):
            click.echo(f"[{key}]")
            for sub, subvalue in value.items():
                click.echo(f"{sub} = {json.dumps(subvalue)}")
            click.echo()
        else:
            click.echo(f"{key} = {json.dumps(value)}")
