"""Fathom command line: parse, call one function per command, render.

Only click and the standard library are imported at the top, so ``--help`` is instant; every
heavy library loads inside the command that needs it. stdout carries results; progress, warnings
and logs go to stderr. Exit codes: 0 ok, 1 an expected failure (FathomError), 2 bad usage.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click


class FathomGroup(click.Group):
    """Turns a FathomError into one clear line on stderr and exit code 1."""

    def invoke(self, ctx: click.Context) -> Any:
        from stages.errors import FathomError

        try:
            return super().invoke(ctx)
        except FathomError as exc:
            raise click.ClickException(str(exc)) from None


def _config(ctx: click.Context, **overrides: Any):
    from stages.config import load_config

    return load_config(ctx.obj.get("config_path"), overrides=overrides)


def _stderr_console():
    from rich.console import Console

    return Console(stderr=True)


def _print_json(obj: Any) -> None:
    click.echo(json.dumps(obj, ensure_ascii=False, indent=None))


@click.group(cls=FathomGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="fathom.toml to read (default: ./fathom.toml when present).",
)
@click.version_option("0.1.0", prog_name="fathom")
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
            p.console.print(f"[yellow]warning[/yellow] {info['message']}")
        elif event == "writing":
            p.console.print(f"writing index ({info['chunks']} chunks)…")


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--collection", "-c", default=None, help="Collection name (default: from content).")
@click.option("--rebuild", is_flag=True, help="Re-parse and re-embed everything.")
@click.option("--strict", is_flag=True, help="Exit 1 when any file failed.")
@click.option("--embedder", default=None, help="Embedding model name or path.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def ingest(
    ctx: click.Context,
    paths: tuple[Path, ...],
    collection: str | None,
    rebuild: bool,
    strict: bool,
    embedder: str | None,
    as_json: bool,
) -> None:
    """Ingest PDF, DOCX, TXT and MD files (or folders, or docs.jsonl) into a collection."""
    from index.collection import collection_for, ingest_paths

    cfg = _config(ctx, **{"embedder.name": embedder, "ingest.strict": strict or None})
    name = collection or collection_for(paths)
    with _IngestProgress(enabled=not as_json) as prog:
        report = ingest_paths(cfg, list(paths), name, rebuild=rebuild, progress=prog)
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
            err.print(f"[red]failed[/red]  {f.reason}", markup=True, highlight=False)
        elif f.status == "skipped":
            err.print(f"[yellow]skipped[/yellow] {f.path}: {f.reason}", highlight=False)
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
    from stages.retrieve import open_retriever

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

    from stages.text import safe_terminal_text

    table = Table(title=f"{collection}: {query}", show_lines=True)
    for col in ("#", "score", "document", "pages", "section", "text"):
        table.add_column(col, overflow="fold")
    for i, hit in enumerate(probe.hits, start=1):
        c = hit.chunk
        text = c.text if len(c.text) <= 300 else c.text[:300] + "…"
        table.add_row(
            str(i),
            f"{hit.score:.4f}",
            safe_terminal_text(c.title or c.doc_id),
            c.pages,
            safe_terminal_text(c.section),
            safe_terminal_text(text),
        )
    Console().print(table)


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
    from index.collection import list_collections

    cfg = _config(ctx)
    manifests = list_collections(cfg)
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
            m.name, str(c["documents"]), str(c["failed"]), str(c["chunks"]), m.embedder_id,
            m.updated,
        )
    Console().print(table)


@collections.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def collections_show(ctx: click.Context, name: str, as_json: bool) -> None:
    """Show a collection's manifest."""
    from index.collection import Collection

    cfg = _config(ctx)
    coll = Collection.open(cfg, name)
    data = coll.manifest.to_dict()
    if as_json:
        _print_json(data)
        return
    from rich.console import Console
    from rich.table import Table

    from stages.text import safe_terminal_text

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
            safe_terminal_text(d["path"]), d["status"], str(d["pages"]), str(d["chunks"]),
            safe_terminal_text(d["error"] or d["title"]),
        )
    out.print(table)


@collections.command("remove")
@click.argument("name")
@click.pass_context
def collections_remove(ctx: click.Context, name: str) -> None:
    """Delete a collection."""
    from index.collection import remove_collection

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
