"""``fathom eval``: every strategy on the same questions, index and generator; one log row per
(question, strategy); the summary, plots and report derived from the log alone.

A question's shared stages (embed, classify, probe) run once and every strategy reuses them, so
the strategies differ only in what they decide and what that costs; each row still charges
the shared stages it would have paid on its own (a no-retrieval row pays no probe).

Scores that judge what a strategy did come from its own context and answer, never from the
shared probe: ``--judge qrels`` scores a row by ``context_ndcg@10``, the nDCG@10 (qrels grades,
else binary gold documents) of the documents the strategy put in the context, each once in the
order of their first chunk — 0 for an empty context (k = 0) when the question has relevant
documents. ``mrr`` and ``ndcg@10`` rank the probe's documents (``ranked_doc_ids``): a property
of the index, equal for every strategy that retrieves. On an unanswerable question EM, F1 and
``contains`` credit an abstention as ``feedback.judges.is_abstention`` reads the answer text.

Resumable: rows already in ``log.jsonl`` are skipped. Parallel: ``workers`` processes (or Ray
tasks with ``executor="ray"``) each hold one engine and answer a shard of the questions.

``fathom policy sweep`` is such a run over fixed budgets (``sweep_settings``, ``run_sweep``);
``learn.train_policy`` turns sweeps into a depth policy of any kind.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fathom.core.errors import ConfigError, FathomError
from fathom.evaluation.executors import execute, ray_session
from fathom.evaluation.strategies import StrategySpec, make_policy, parse_strategies
from fathom.evaluation.worker import config_fingerprint, generator_settings
from fathom.learn.questions import Question, load_questions, split_by_document, split_questions

if TYPE_CHECKING:
    from fathom.router.sweep import Sweep

FORMAT = 1
JUDGES = ("contains", "f1", "qrels", "recall")
CONTEXT_JUDGES = ("qrels", "recall")  # judges that read the context, not the answer

Progress = Callable[..., None]


@dataclass
class EvalSettings:
    """What to evaluate and how; everything ``run.json`` records besides the fitted gates."""

    questions: str
    out: str
    docs: str | None = None
    collection: str | None = None
    qrels: str | None = None
    strategies: list[str] = field(
        default_factory=lambda: ["none", "fixed:1", "fixed:2", "fixed:4", "fixed:8", "gap"]
    )
    baseline: str | None = None
    judge: str = "contains"
    slo_ms: float | None = None
    limit: int | None = None
    fit_size: int = 200
    seed: int = 0
    bootstrap: int = 2000
    workers: int = 1
    executor: str = "local"
    ray_address: str | None = None
    cache: bool = True
    features: bool = False  # log each question's probe features (the policy sweep needs them)
    # With ``features``: also what Fathom's reader makes of the candidates (a policy that
    # reads passages trains on them).
    reading: bool = False
    # Hand each strategy's context to no generator: rows score the context alone (a sweep
    # judged by answer recall or qrels needs no answers, and runs in a fraction of the time).
    context_only: bool = False
    doc_split: str | None = None  # "train" / "test": only questions on that half of the documents
    split_seed: int = 0


# ---------------------------------------------------------------------------------------------
# Planning: questions, split, collection, run.json
# ---------------------------------------------------------------------------------------------


def _strategy_names(specs: list[StrategySpec]) -> list[str]:
    return [s.name for s in specs]


def _baseline(settings: EvalSettings, specs: list[StrategySpec]) -> str:
    names = _strategy_names(specs)
    if settings.baseline:
        if settings.baseline not in names:
            raise ConfigError(
                f"--baseline {settings.baseline!r} is not among the strategies ({', '.join(names)})"
            )
        return settings.baseline
    fixed = [s for s in specs if s.kind == "fixed"]
    return (fixed[len(fixed) // 2] if fixed else specs[0]).name


TIMING_FORMAT = 2  # how rows are timed; a run is only resumed under the same


def same_config(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether a run recorded with fingerprint ``old`` may be resumed under ``new``: equal,
    except that a setting added to Fathom since (absent from ``old``) may hold its default —
    settings are added with defaults that keep the old behaviour."""
    from fathom.core.config import Config

    default = config_fingerprint(Config())
    filled = {section: {**default.get(section, {}), **values} for section, values in old.items()}
    for section in new:
        filled.setdefault(section, default.get(section))
    return filled == new


# ---------------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------------


def read_rows(log: Path) -> list[dict[str, Any]]:
    from fathom.core.jsonl import read_log

    return read_log(log) if log.exists() else []


def fit_gates(
    cfg: Any, collection: str, specs: list[StrategySpec], fit: list[Question]
) -> dict[str, Any]:
    """Each threshold gate's cut: its percentile of the top similarity over ``fit``."""
    from fathom.router.depth import ScoreThresholdDepth, top_similarity
    from fathom.stages.pipeline import Engine

    gates = [s for s in specs if s.needs_fit]
    if not gates:
        return {}
    if not fit:
        raise ConfigError("the threshold gates need fitting questions (lower --limit)")
    # The very probe the gates will decide on in the run (second hop included).
    engine = Engine(cfg, collection, generator=_NoGenerator())
    try:
        tops = [top_similarity(engine.prepare(q.question).probe) for q in fit]
    finally:
        engine.close()
    out = {}
    for s in gates:
        assert s.percentile is not None and s.k is not None
        g = ScoreThresholdDepth.fit(tops, s.percentile, s.k)
        out[s.name] = {"threshold": g.threshold, "percentile": s.percentile, "k": s.k}
    return out


class _NoGenerator:
    """Stands in for the generator where only retrieval runs (fitting the gates)."""

    name = model = "none"


def _resolve_collection(cfg: Any, settings: EvalSettings, progress: Progress | None) -> str:
    """The collection to evaluate on; ``--docs`` not yet indexed are ingested first (their
    embedding on Ray actors with ``--executor ray``)."""
    from fathom.index.targets import resolve_target

    if settings.collection:
        return resolve_target(cfg, settings.collection)
    if not settings.docs:
        raise ConfigError("give --docs PATH or --collection NAME")
    if settings.executor != "ray":
        return resolve_target(cfg, settings.docs, progress=progress)
    from fathom.index.embed import make_embedder
    from fathom.index.ray_embed import RayEmbedder

    with ray_session(settings.workers, settings.ray_address):
        models = cfg.models_path()
        embedder = RayEmbedder(
            make_embedder(cfg.embedder, models), cfg.embedder, settings.workers, models=models
        )
        try:
            return resolve_target(cfg, settings.docs, progress=progress, embedder=embedder)
        finally:
            embedder.close()


def plan_run(
    cfg: Any, settings: EvalSettings, progress: Progress | None = None
) -> tuple[dict[str, Any], list[Question]]:
    """``run.json``'s content and the evaluated questions; fits the gates on a new run and
    checks that an existing ``run.json`` describes the same run."""
    if settings.judge not in JUDGES:
        raise ConfigError(f"--judge {settings.judge!r}: must be one of {', '.join(JUDGES)}")
    specs = parse_strategies(settings.strategies)
    questions = _load_run_questions(settings)
    need_fit = any(s.needs_fit for s in specs)
    evaluated, fit = split_questions(
        questions, settings.limit, settings.fit_size, settings.seed, need_fit
    )
    out = Path(settings.out)
    if out.exists() and not out.is_dir():
        raise FathomError(f"{out}: exists and is not a folder — give a new --out")
    _check_policies(cfg, specs)  # a mistyped policy file fails before run.json is written
    collection = _resolve_collection(cfg, settings, progress)
    run_path = out / "run.json"
    identity = _run_identity(cfg, settings, specs, collection, evaluated)
    # Settings that do not change the rows; they may change between resumes.
    mutable = {
        "baseline": _baseline(settings, specs),
        "slo_ms": settings.slo_ms,
        "bootstrap": settings.bootstrap,
        "cache": settings.cache,
    }
    if run_path.exists():
        return _resume_run(out, identity, mutable), evaluated
    from fathom import __version__

    run = {
        **identity,
        **mutable,
        "fathom_version": __version__,
        "n_questions": len(evaluated),
        "n_fit_questions": len(fit),
        "fit_qids": [q.qid for q in fit],
        "has_unanswerable": any(q.unanswerable for q in evaluated),
        "fitted": fit_gates(cfg, collection, specs, fit),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FathomError(
            f"{out}: cannot create the output folder ({exc.strerror or exc}) — give another --out"
        ) from None
    _write_json(run_path, run)
    return run, evaluated


def _load_run_questions(settings: EvalSettings) -> list[Question]:
    """The questions of ``--questions`` (with ``--qrels``), on the ``--split`` half of the
    documents when one is given; an error when that half is empty or when the judge needs
    relevance the questions do not have."""
    questions = load_questions(settings.questions, settings.qrels)
    if settings.doc_split:
        questions = split_by_document(questions, settings.doc_split, settings.split_seed)
        if not questions:
            raise FathomError(
                f"{settings.questions}: no questions on the {settings.doc_split} half of the "
                f"documents (split seed {settings.split_seed}) — use another --split or "
                "--split-seed, or more questions"
            )
    if settings.judge == "qrels" and not any(q.qrels or q.doc_ids for q in questions):
        raise ConfigError("--judge qrels needs qrels or gold doc_ids in the questions")
    return questions


def _run_identity(
    cfg: Any,
    settings: EvalSettings,
    specs: list[StrategySpec],
    collection: str,
    evaluated: list[Question],
) -> dict[str, Any]:
    """What makes a run this run: a resume under anything else would mix rows of two runs."""
    from fathom.stages.generate import make_generator

    gen = make_generator(cfg.generator)
    return {
        "format": FORMAT,
        "collection": collection,
        "docs": settings.docs,
        "questions": str(settings.questions),
        "qrels": settings.qrels,
        "qids": [q.qid for q in evaluated],
        "strategies": _strategy_names(specs),
        "generator": {"backend": gen.name, "model": gen.model, **generator_settings(cfg)},
        "judge": settings.judge,
        "seed": settings.seed,
        "doc_split": settings.doc_split,
        "split_seed": settings.split_seed,
        "features": settings.features,
        "reading": settings.reading,
        "context_only": settings.context_only,
        "config": config_fingerprint(cfg),
        # 2: every row is timed from an empty KV cache (QuestionWorker.rows); runs before that
        # may have timed deeper budgets on their shallower neighbour's cached prefix.
        "timing": TIMING_FORMAT,
    }


def _resume_run(out: Path, identity: dict[str, Any], mutable: dict[str, Any]) -> dict[str, Any]:
    """``out``'s existing ``run.json`` with this call's ``mutable`` settings, written back; an
    error when it describes another run than ``identity``."""
    run_path = out / "run.json"
    old = json.loads(run_path.read_text(encoding="utf-8"))
    # Keys added after format 1 shipped default to their old meaning.
    defaults = {
        "doc_split": None,
        "split_seed": 0,
        "features": False,
        "reading": False,
        "context_only": False,
        "timing": 1,
    }
    diff = [
        k
        for k, v in identity.items()
        if not (
            same_config(old.get(k) or {}, v) if k == "config" else old.get(k, defaults.get(k)) == v
        )
    ]
    if diff:
        raise FathomError(
            f"{out}: holds a different run (it differs in {', '.join(diff)}) — give a new "
            "--out, or delete the folder to start over"
        )
    old.update(mutable)
    _write_json(run_path, old)  # `eval report` must see what this summary used
    return old


def _check_policies(cfg: Any, specs: list[StrategySpec]) -> None:
    """Load every learned policy the strategies name, as the workers will (with the
    configured embedder), so a missing or mismatched file is an error before anything runs."""
    from fathom.router.registry import POLICY_KINDS

    learned = [s for s in specs if s.kind in POLICY_KINDS]
    if not learned:
        return
    from fathom.index.embed import embedder_id_for

    embedder = embedder_id_for(cfg.embedder)
    for spec in learned:
        make_policy(spec, None, embedder)


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)


def run_eval(
    cfg: Any,
    settings: EvalSettings,
    progress: Progress | None = None,
    on_rows: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Run (or resume) an evaluation; returns the summary. ``on_rows(done, total)`` after each
    question; ``progress`` receives ingest events. With ``executor="ray"`` one Ray session
    serves the ingest embedding and the question shards."""
    session = (
        ray_session(settings.workers, settings.ray_address)
        if settings.executor == "ray"
        else contextlib.nullcontext()
    )
    with session:
        return _run_eval(cfg, settings, progress, on_rows)


def _run_eval(
    cfg: Any,
    settings: EvalSettings,
    progress: Progress | None,
    on_rows: Callable[[int, int], None] | None,
) -> dict[str, Any]:
    run, evaluated = plan_run(cfg, settings, progress)
    out = Path(settings.out)
    log = out / "log.jsonl"
    done: dict[str, set[str]] = {}
    for row in read_rows(log):
        done.setdefault(row["qid"], set()).add(row["strategy"])
    _truncate_partial_line(log)
    names = run["strategies"]
    items = [
        (q, [s for s in names if s not in done.get(q.qid, set())])
        for q in evaluated
        if not set(names) <= done.get(q.qid, set())
    ]
    total = len(evaluated)
    finished = total - len(items)
    if on_rows:
        on_rows(finished, total)
    with open(log, "a", encoding="utf-8") as fh:
        for rows in execute(
            cfg, run, items, settings.workers, settings.executor, settings.ray_address
        ):
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            fh.flush()
            finished += len({r["qid"] for r in rows}) if rows else 0
            if on_rows:
                on_rows(finished, total)
    return write_outputs(out, run)


def _truncate_partial_line(log: Path) -> None:
    """Cut an interrupted run's half-written last line, so appends start on a fresh line."""
    if not log.exists():
        return
    data = log.read_bytes()
    if data and not data.endswith(b"\n"):
        log.write_bytes(data[: data.rfind(b"\n") + 1])


def write_outputs(out: Path, run: dict[str, Any]) -> dict[str, Any]:
    """log.csv, summary.json, plots and report.md from ``run`` and ``log.jsonl``."""
    from fathom.evaluation.plots import write_plots
    from fathom.evaluation.report import write_report
    from fathom.evaluation.summary import summarize, write_csv, write_summary

    rows = read_rows(out / "log.jsonl")
    qids = set(run["qids"])
    rows = [r for r in rows if r["qid"] in qids and r["strategy"] in run["strategies"]]
    write_csv(out / "log.csv", rows)
    summary = summarize(rows, run)
    write_summary(out / "summary.json", summary)
    plots = write_plots(out, summary, rows)
    write_report(out, summary, plots)
    return summary


def report_from_dir(out: str | Path) -> dict[str, Any]:
    """``fathom eval report DIR``: everything again from ``run.json`` and ``log.jsonl``."""
    out = Path(out)
    run_path = out / "run.json"
    if not run_path.is_file():
        raise FathomError(f"{out}: no run.json — not a `fathom eval` output folder")
    run = json.loads(run_path.read_text(encoding="utf-8"))
    return write_outputs(out, run)


# ---------------------------------------------------------------------------------------------
# Depth-policy sweeps and training (`fathom policy sweep|train`)
# ---------------------------------------------------------------------------------------------


def sweep_settings(
    questions: str,
    out: str | Path,
    budgets: list[int],
    *,
    docs: str | None = None,
    collection: str | None = None,
    judge: str = "contains",
    doc_split: str = "train",
    split_seed: int = 0,
    limit: int | None = None,
    seed: int = 0,
    workers: int = 1,
    executor: str = "local",
    reading: bool = True,
    context_only: bool = False,
) -> EvalSettings:
    """The eval run a budget sweep is: one fixed-depth strategy per budget (checked: distinct,
    non-negative, ascending), probe features logged (``reading``: the reader's too),
    ``doc_split`` ``train``, ``test`` or ``all``. ``context_only``: no answers, only the
    contexts scored — for the judges that read nothing else (``recall``, ``qrels``)."""
    from fathom.learn.sweep import budget_strategies

    if context_only and judge not in CONTEXT_JUDGES:
        raise ConfigError(
            f"--context-only scores the context alone: the judge must be one of "
            f"{', '.join(CONTEXT_JUDGES)}, not {judge!r}"
        )

    return EvalSettings(
        questions=questions,
        out=str(out),
        docs=docs,
        collection=collection,
        strategies=budget_strategies(budgets),
        judge=judge,
        limit=limit,
        seed=seed,
        workers=workers,
        executor=executor,
        features=True,
        reading=reading,
        context_only=context_only,
        doc_split=None if doc_split == "all" else doc_split,
        split_seed=split_seed,
        bootstrap=200,
    )


def run_sweep(
    cfg: Any,
    settings: EvalSettings,
    progress: Progress | None = None,
    on_rows: Callable[[int, int], None] | None = None,
) -> Sweep:
    """Run (or resume) the sweep ``settings`` describe (``sweep_settings``) and read it back as
    a ``Sweep``, its answer recall at the deepest budget included."""
    from fathom.learn.sweep import load_sweep

    run_eval(cfg, settings, progress=progress, on_rows=on_rows)
    return load_sweep(settings.out)
