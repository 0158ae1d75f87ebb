"""What the commands do between the options ``fathom.cli`` parses and what it renders: the
collection a command works on, the work itself through the layer that owns it, and the results
``cli`` hands to ``fathom.terminal.render`` and ``fathom.terminal.tables``.

Nothing here prints: progress and streamed tokens go to the displays ``cli`` passes in. Beyond
the standard library, everything (Fathom's own layers included) loads inside the function that
needs it, so importing this module stays as cheap as importing ``cli``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

# A progress display as ``cli`` passes it: entered while the work it shows lasts.
Display = AbstractContextManager[Any]


def ingest(
    cfg: Any,
    paths: tuple[Path, ...],
    collection: str | None,
    *,
    display: Display,
    rebuild: bool,
    password: str | None,
    executor: str = "local",
    ray_address: str | None = None,
) -> Any:
    """``fathom ingest``: ``paths`` into ``collection`` (by default the one named for them),
    parsed, chunked and embedded here or on Ray (``executor``; the cluster at ``ray_address``,
    which implies Ray, else a local Ray); returns the ingest report."""
    from fathom.index.collection import collection_for
    from fathom.index.embed import embedder_id_for

    # The collection `ask FILE` would use for these files with this embedder.
    name = collection or collection_for(paths, embedder=embedder_id_for(cfg.embedder))
    with display as prog:
        if executor == "ray" or ray_address:
            from fathom.index.ray_ingest import ingest_on_ray

            return ingest_on_ray(
                cfg, list(paths), name, rebuild=rebuild, progress=prog, password=password,
                address=ray_address,
            )  # fmt: skip
        from fathom.index.ingest import ingest_paths

        return ingest_paths(
            cfg, list(paths), name, rebuild=rebuild, progress=prog, password=password
        )


def search(
    cfg: Any, collection: str, query: str, docs: tuple[str, ...] = ()
) -> tuple[Any, str, dict[str, Any] | None]:
    """``fathom search``: the probe of ``query`` in ``collection`` to ``retrieval.k`` (within
    the documents the patterns ``docs`` select), the retrieval mode it ran in, and those
    documents (None without patterns)."""
    from fathom.index.doc_filter import select_documents
    from fathom.index.retrieve import open_retriever

    retriever = open_retriever(cfg, collection)
    within = select_documents(retriever.collection.manifest, docs)
    probe = retriever.probe(query, cfg.retrieval.k, within=within)
    return probe, retriever.mode, within.to_dict() if within is not None else None


def ask(
    cfg: Any,
    target: str,
    question: str,
    *,
    display: Display,
    rebuild: bool,
    password: str | None,
    **answer_opts: Any,
) -> Any:
    """``fathom ask``: index ``target`` first (with ``display`` shown, so the answer streams on
    a quiet terminal), then answer ``question`` from it; ``answer_opts`` go to the Engine
    (``k``, ``rerank``, ``on_token``, ``on_event``)."""
    from fathom.index.targets import resolve_target
    from fathom.stages.pipeline import ask as run_ask

    with display as prog:
        name = resolve_target(cfg, target, progress=prog, rebuild=rebuild, password=password)
    return run_ask(cfg, target, question, collection=name, **answer_opts)


def show(
    cfg: Any, collection: str, chunk_id: str, *, out: Path | None, password: str | None
) -> list[Any]:
    """``fathom show``: chunk ``chunk_id`` of ``collection`` where it stands in its source (its
    page highlighted, or its passage in context), written to ``out`` or under
    ``FATHOM_HOME/shown``; the records written (``index.grounding.Shown``)."""
    from fathom.index.collection import Collection
    from fathom.index.grounding import ocr_settings, save_shown, show_chunk, shown_dir

    coll = Collection.open(cfg, collection)
    try:
        shown = show_chunk(coll, chunk_id, ocr=ocr_settings(cfg), password=password)
    finally:
        coll.close()
    return save_shown(shown, shown_dir(cfg), out)


def show_answer(cfg: Any, answer: Any, folder: str, *, password: str | None) -> list[Any]:
    """``ask --show [DIR]``: every chunk ``answer`` cites, shown as ``show`` shows one (the
    span's sentence marked in its chunk) and written into ``folder`` (empty: the default,
    ``FATHOM_HOME/shown``). A source that cannot be shown is a record of kind ``none`` whose
    note says why; the others are still shown."""
    from fathom.core.errors import FathomError
    from fathom.index.collection import Collection
    from fathom.index.grounding import Shown, ocr_settings, save_shown, show_chunk, shown_dir

    directory = Path(folder) if folder else shown_dir(cfg)
    span = answer.span or {}
    shown: list[Any] = []
    cited = {c.chunk_id: c for c in answer.citations}  # a chunk cited twice is shown once
    if not cited:
        return shown
    coll = Collection.open(cfg, answer.trace.collection)
    try:
        for c in cited.values():
            sentence = span.get("sentence") if span.get("chunk_id") == c.chunk_id else None
            try:
                found = show_chunk(
                    coll,
                    c.chunk_id,
                    sentence=sentence,
                    ocr=ocr_settings(cfg),
                    password=password,
                    n=c.n,
                )
            except FathomError as exc:
                fields = (c.chunk_id, c.doc_id, c.title, c.path, c.pages, c.section)
                shown.append(Shown(coll.name, *fields, kind="none", n=c.n, note=str(exc)))
                continue
            shown += save_shown(found, directory)
    finally:
        coll.close()
    return shown


CHAT_HELP = (
    'Ask a question, or a follow-up ("And its failure modes?"): a follow-up is made '
    "standalone from the turns before it, and the report shows how.\n"
    "/sources        the last answer's sources\n"
    "/doc PATTERN    read only the documents PATTERN selects (as --doc); /doc alone: all\n"
    "/show [DIR]     the last answer's cited pages and passages where they stand, as --show\n"
    "/clear          forget the turns so far (the next question starts afresh)\n"
    "/help           this help\n"
    "Ctrl-C stops an answer being written; Ctrl-C at the prompt, Ctrl-D or an empty line "
    "ends the session."
)


class Chat:
    """``fathom chat``: one Engine over ``target``'s collection, kept loaded from one question
    to the next, and the conversation's turns, which complete a follow-up
    (``stages.followup``); every answer is recorded in the history. Closes the Engine on
    leaving. ``docs``, the session's document patterns (``/doc`` changes them), are checked
    before the first question: the documents they select (``DocFilter.to_dict``) are
    ``self.docs``. ``show``: the folder ``--show`` gave (``""``: the default; None: no
    ``--show``), where ``/show`` writes too; ``password`` opens an encrypted PDF."""

    def __init__(
        self,
        cfg: Any,
        target: str,
        display: Display,
        docs: tuple[str, ...] = (),
        *,
        show: str | None = None,
        password: str | None = None,
    ):
        from fathom.index.targets import resolve_target
        from fathom.stages.pipeline import Engine

        self.cfg, self.target = cfg, target
        self.show_folder, self.password = show, password
        self.turns: list[Any] = []  # stages.followup.Turn, oldest first
        self.last: Any = None  # the last answer
        with display as prog:
            self.collection = resolve_target(cfg, target, progress=prog, password=password)
        self.engine = Engine(cfg, self.collection)
        try:
            self.set_docs(docs)
        except BaseException:
            self.engine.close()
            raise

    def __enter__(self) -> Chat:
        return self

    def __exit__(self, *exc: object) -> None:
        self.engine.close()

    def set_docs(self, patterns: tuple[str, ...]) -> dict[str, Any] | None:
        """Read only the documents ``patterns`` select from now on (none: all of them); the
        selection (``DocFilter.to_dict``), or None. A pattern that selects nothing raises,
        and the documents read stay as they were."""
        from fathom.index.doc_filter import select_documents

        within = select_documents(self.engine.collection.manifest, patterns)
        self.patterns = tuple(patterns)
        self.docs = within.to_dict() if within is not None else None
        return self.docs

    def ask(self, question: str, **answer_opts: Any) -> Any:
        """Answer ``question`` as a turn of the conversation, within the session's documents;
        the turn is remembered once the answer is complete."""
        from fathom.stages.followup import Turn
        from fathom.stages.history import record_ask

        answer_opts["docs"] = self.patterns
        answer = self.engine.ask(question, turns=self.turns, **answer_opts)
        record_ask(self.cfg, self.target, answer)
        self.turns.append(Turn.from_answer(answer))
        self.last = answer
        return answer

    def show(self, folder: str | None = None) -> list[Any] | None:
        """The last answer's cited sources where they stand, as ``ask --show`` shows them
        (``show_answer``), written into ``folder`` (None: the session's ``--show`` folder,
        else the default); None before any answer."""
        if self.last is None:
            return None
        where = self.show_folder if folder is None else folder
        return show_answer(self.cfg, self.last, where or "", password=self.password)

    def command(self, line: str) -> tuple[str, Any]:
        """A slash command (``CHAT_HELP``): ``(what it did, what to show)``: ``("sources",
        the last answer or None)``, ``("show", what ``show`` wrote or None)``, ``("doc", the
        selection or None)``, ``("clear", turns forgotten)``, ``("help", text)``, or
        ``("unknown", the command)``."""
        name, _, arg = line.strip().partition(" ")
        name = name.lower()
        if name == "/sources":
            return "sources", self.last
        if name == "/show":
            return "show", self.show(arg.strip() or None)
        if name == "/doc":
            return "doc", self.set_docs((arg.strip(),) if arg.strip() else ())
        if name == "/clear":
            forgotten = len(self.turns)
            self.turns.clear()
            self.last = None
            return "clear", forgotten
        if name in ("/help", "/?"):
            return "help", CHAT_HELP
        return "unknown", name


def history(cfg: Any, limit: int) -> list[dict[str, Any]]:
    """``fathom history``: the ``limit`` most recent asks."""
    from fathom.stages.history import History

    return History(cfg.home_path() / "history.db").recent(limit)


def stats(cfg: Any, days: float | None, slo_ms: float | None) -> dict[str, Any]:
    """``fathom stats``: the recorded asks' statistics, over the last ``days`` when given."""
    from fathom.stages.history import History

    since = time.time() - days * 86400 if days is not None else None
    return History(cfg.home_path() / "history.db").stats(since=since, slo_ms=slo_ms)


def evaluate(
    cfg: Any, opts: dict[str, Any], *, display: Display, on_rows: Display
) -> tuple[dict[str, Any], Path]:
    """``fathom eval``: the run ``opts`` (the command's remaining options) describe, into
    ``--out`` or a new timestamped folder under ``eval-runs/``, with ``display`` showing the
    ingest and ``on_rows`` the questions done; returns the summary and the run's folder."""
    from fathom.evaluation.runner import EvalSettings, run_eval

    out = opts.pop("out") or Path("eval-runs") / time.strftime("%Y%m%d-%H%M%S")
    doc_split = opts.pop("doc_split")
    settings = EvalSettings(
        out=str(out),
        strategies=opts.pop("strategies").split(","),
        cache=not opts.pop("no_cache"),
        doc_split=None if doc_split == "all" else doc_split,
        **opts,
    )
    with display as ingest_progress, on_rows as bar:
        return run_eval(cfg, settings, progress=ingest_progress, on_rows=bar), out


def sweep(cfg: Any, opts: dict[str, Any], *, display: Display, on_rows: Display) -> Any:
    """``fathom policy sweep``: the sweep ``opts`` describe, shown as ``evaluate`` shows a
    run; returns it read back, its answer recall at the deepest budget included."""
    from fathom.evaluation.runner import run_sweep, sweep_settings

    settings = sweep_settings(**opts)
    with display as ingest_progress, on_rows as bar:
        return run_sweep(cfg, settings, progress=ingest_progress, on_rows=bar)


def depth_policy(path: str | None) -> tuple[Any, Path, dict[str, Any] | None]:
    """``fathom policy show``: the depth policy at ``path`` (default: the shipped one), the
    file it was read from, and, for a policy that prices its choice, what one point of answer
    recall is worth at each preference (``{"pricing", "explain"}``; None otherwise)."""
    from fathom.router.cost import explain, pricing
    from fathom.router.forest import default_policy_path
    from fathom.router.registry import load_policy

    target = Path(path) if path else default_policy_path()
    policy = load_policy(target)  # a missing file fails naming what its kind needs
    priced = None
    if policy.prices_reading:
        priced = {"pricing": pricing(policy.cost), "explain": explain(policy.cost)}
    return policy, target, priced


def portfolio_info(cfg: Any, path: str) -> dict[str, Any]:
    """``fathom portfolio show``: the portfolio a file or a name under $FATHOM_HOME/portfolios
    names."""
    from fathom.router.portfolio.file import load_portfolio, resolve_portfolio

    return load_portfolio(resolve_portfolio(cfg, path))


def list_collections(cfg: Any) -> tuple[list[Any], list[tuple[str, str]]]:
    """``fathom collections list``: the readable collections' manifests, and ``(name,
    reason)`` for each one that cannot be read."""
    from fathom.index import collection

    unreadable: list[tuple[str, str]] = []
    manifests = collection.list_collections(cfg, unreadable)
    return manifests, unreadable


def collection_manifest(cfg: Any, name: str) -> dict[str, Any]:
    """``fathom collections show``: collection ``name``'s manifest."""
    from fathom.index.collection import Collection

    return Collection.open(cfg, name).manifest.to_dict()


def build_views(
    cfg: Any, name: str, build: tuple[str, ...], on_built: Callable[[str, int, float], None]
) -> list[dict[str, Any]]:
    """``fathom collections views``: build the views ``build`` names (``all``: the default
    views), each reported to ``on_built(view, units, seconds)``; returns the collection's
    views."""
    from fathom.core.errors import ConfigError
    from fathom.index.collection import Collection
    from fathom.index.embed import embedder_id_for, make_embedder
    from fathom.index.views import DEFAULT_VIEWS, build_view, list_views

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
        on_built(w, len(view), time.perf_counter() - t)
    return list_views(coll)
