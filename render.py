"""What the command line prints: progress on stderr, results on stdout, as text or ``--json``.

One ``render_*`` function per command output, plus the progress displays and the rich helpers
they share. Only click and the standard library (and ``fathom.core``) are imported at the top;
rich loads inside the functions that draw, so importing this module stays cheap. Results arrive
as the objects the commands produce (reports, answers, policies, plain dicts); nothing here
computes them.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
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
                TextColumn("{task.description}"),
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


def ask_events(console):
    def on_event(event: str, **info: Any) -> None:
        if event == "escalate":
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
    verb = "committed" if report.committed else "nothing to change"
    out.print(
        f"collection [bold]{report.collection}[/bold] (generation {report.generation}, {verb}): "
        f"{c['ok']} ingested, {c['unchanged']} unchanged, {c['failed']} failed, "
        f"{c['skipped']} skipped, {c['removed']} removed · "
        f"{report.embedded_chunks} chunks embedded, {report.total_chunks} in the collection · "
        f"{report.seconds.get('total', 0):.1f} s",
        highlight=False,
    )


def render_hits(
    collection: str, query: str, probe, *, mode: str, k: int, as_json: bool = False
) -> None:
    """The search table (or JSON): ``probe``'s hits for ``query`` in ``collection``."""
    if as_json:
        print_json(
            {
                "collection": collection,
                "query": query,
                "mode": mode,
                "k": k,
                "timings_ms": {k: round(v, 3) for k, v in probe.timings_ms.items()},
                "hits": [h.to_dict() for h in probe.hits],
            }
        )
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=plain(f"{collection}: {query}"), show_lines=True)
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
# ask, history, stats
# ---------------------------------------------------------------------------------------------


def render_answer(answer, streamed: bool = False, as_json: bool = False) -> None:
    """The answer panel (unless it was streamed and is final), its sources, the decision,
    confidence, portfolio, latency, tokens and notices."""
    if as_json:
        print_json(answer.to_dict())
        return
    from rich.console import Console
    from rich.panel import Panel

    out = Console()
    tr = answer.trace
    if streamed:
        out.print()
    final_differs = tr.passes > 1
    if not streamed or final_differs:
        title = "Answer" if not final_differs else f"Answer (after {tr.passes} rounds)"
        out.print(Panel(plain(answer.text), title=title, expand=False))
    if answer.sources:
        out.print(sources_table(answer))
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
    print_latency(out, tr)
    tok = tr.tokens
    cost = f"{tr.cost:.6f} {tr.currency}" if tr.cost else f"0 {tr.currency} (local model)"
    out.print(
        f"[bold]Tokens[/bold] embedding {tok['embedding']} · context {tok['context']} · prompt "
        f"{tok['prompt']} · completion {tok['completion']} · [bold]cost[/bold] {cost}",
        highlight=False,
    )
    for notice in tr.notices:
        out.print("[yellow]note[/yellow]", plain(notice), highlight=False)


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
    summary: dict[str, Any], out: Path, as_json: bool, *, table: Callable[[dict[str, Any]], Any]
) -> None:
    """summary.json, or the comparison ``table(summary)`` draws (the evaluation layer's
    ``render_table``) and where the run's files are."""
    if as_json:
        print_json(summary)
        return
    from rich.console import Console

    console = Console()
    if not console.is_terminal:  # a file or pipe: wide enough for the whole table
        console = Console(width=220)
    console.print(table(summary))
    console.print(f"log, summary, plots and report in {out}/", highlight=False)


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


def render_policy(policy, path: Path, as_json: bool = False) -> None:
    """A depth policy as ``fathom.router.depth.load_policy`` returns it, by its kind (each
    policy class names itself after its kind): a forest's metadata and feature importances, a
    utility policy's bundles and utilities, a REINFORCE policy's metadata as saved beside it."""
    kind = policy.name
    if kind == "reinforce":
        render_reinforce_policy(path, as_json)
    elif kind == "utility":
        render_utility_policy(policy, as_json)
    else:
        render_forest_policy(policy, as_json)


def render_utility_policy(util, as_json: bool) -> None:
    info = {"kind": "utility", "preset": util.preset, "bundles": util.bundles, **util.meta}
    info["utilities"] = {t: util.utilities(t) for t in util.priors}
    if as_json:
        print_json({**info, "priors": util.priors})
    else:
        for key, value in info.items():
            click.echo(f"{key}: {json.dumps(value, ensure_ascii=False)}")


def render_forest_policy(model, as_json: bool) -> None:
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
        print_json(meta)
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


def render_reinforce_policy(target: Path, as_json: bool) -> None:
    """A REINFORCE policy's metadata as saved (budgets, features, embedder, λ, training), its
    training curve summed up in the text form."""
    meta = json.loads(target.with_suffix(".json").read_text(encoding="utf-8"))
    if as_json:
        print_json(meta)
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
