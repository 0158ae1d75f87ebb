"""Every pool member's results and scores on a set of questions with gold: what a portfolio is
built from (``learn.portfolio_build``) and measured on (``evaluation.portfolio``).

``member_scores`` gives s(q, r) ∈ [0, 1] for every question and member: the share of the
question's gold documents among the documents of the member's top ``n`` chunks when the
questions name gold documents, else whether a gold answer occurs in those chunks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fathom.core.errors import ConfigError
from fathom.router.portfolio.pool import DEFAULT_POOL, Member, PoolSearcher

if TYPE_CHECKING:
    import numpy as np
    from fathom.core.base import Embedder
    from fathom.index.collection import Collection
    from fathom.learn.questions import Question


def question_score(question: Question, chunks: list[Any], by: str) -> float:
    """s(q, r) for the chunks one member returned: gold-document recall or answer containment."""
    if by == "docs":
        from fathom.core.base import source_id

        gold = set(question.doc_ids)
        return len(gold & {source_id(c) for c in chunks}) / len(gold) if gold else 0.0
    from fathom.feedback.judges import answer_recall

    hit = answer_recall("\n".join(c.text for c in chunks), list(question.answers))
    return float(hit or 0.0)


def fuse_rows(lists: list[list[int]], n: int, rrf_k: int = 60) -> list[int]:
    """Reciprocal rank fusion of several members' rows (best first) to the top ``n``; ties
    break by row, so the result is deterministic."""
    fused: dict[int, float] = {}
    for rows in lists:
        for rank, row in enumerate(rows, start=1):
            fused[row] = fused.get(row, 0.0) + 1.0 / (rrf_k + rank)
    return sorted(fused, key=lambda r: (-fused[r], r))[:n]


@dataclass
class MemberRuns:
    """Every member's top ``n`` rows per question, with what a router reads before choosing:
    the query embedding and the probe features (``router.features``) of the probe
    ``Engine.prepare`` makes with the collection's configuration (``probe`` lists its settings,
    ``router.portfolio.router.probe_settings``)."""

    members: tuple[Member, ...]
    n: int
    rows: list[dict[str, list[int]]]  # per question: member name → rows, best first
    qvecs: np.ndarray  # (questions, dim)
    features: np.ndarray  # (questions, len(FEATURE_NAMES))
    probe: dict[str, Any] = field(default_factory=dict)


def member_runs(
    collection: Collection,
    embedder: Embedder,
    questions: list[Question],
    pool: tuple[Member, ...] = DEFAULT_POOL,
    n: int = 10,
    classifier: Any | None = None,
    features: bool = True,
) -> MemberRuns:
    """Run every member of ``pool`` on every question (shared searches per question), and
    compute the router's inputs from the probe ``Engine.prepare`` would make for the question
    with no ``--k`` — the retriever configured in ``collection.cfg``, to the depth the
    question's strategy and the reranker ask for (unless ``features`` is false: then
    ``MemberRuns.features`` has no columns)."""
    import numpy as np
    from fathom.index.retrieve import retriever_for
    from fathom.router.features import probe_features
    from fathom.router.portfolio.router import probe_depth, probe_settings

    searcher = PoolSearcher(collection)
    settings = probe_settings(collection.cfg)
    probe_retriever = retriever_for(collection.cfg, collection, embedder)
    qvecs = np.asarray(embedder.embed([q.question for q in questions]), dtype=np.float32)
    rows: list[dict[str, list[int]]] = []
    feats: list[list[float]] = []
    for q, qvec in zip(questions, qvecs, strict=True):
        rows.append(searcher.run_many(list(pool), q.question, qvec, n))  # shared searches
        if not features:
            feats.append([])
            continue
        qtype, probs = None, None
        if classifier is not None:
            qtype, probs = classifier.classify(q.question, embedding=qvec)
        depth = probe_depth(settings, q.question, qtype)
        probe = probe_retriever.probe(q.question, depth, qvec=qvec)
        feats.append(probe_features(q.question, probe, probs))
    feats_arr = np.asarray(feats, dtype=np.float32)
    return MemberRuns(tuple(pool), n, rows, qvecs, feats_arr, settings if features else {})


def score_rows(
    collection: Collection, questions: list[Question], rows: list[list[int]], by: str
) -> np.ndarray:
    """s(q, rows_q) per question for one list of rows per question."""
    import numpy as np

    return np.array(
        [question_score(q, collection.chunks(r), by) for q, r in zip(questions, rows, strict=True)],
        dtype=np.float32,
    )


def run_scores(
    collection: Collection, questions: list[Question], runs: MemberRuns, by: str
) -> np.ndarray:
    """s(q, r) for every question and member of ``runs``: ``(questions, members)``."""
    import numpy as np

    cols = [
        score_rows(collection, questions, [r[m.name] for r in runs.rows], by) for m in runs.members
    ]
    return np.stack(cols, axis=1) if cols else np.zeros((len(questions), 0), np.float32)


def resolve_score(questions: list[Question], by: str | None) -> str:
    """What s(q, r) measures: ``docs`` (default when every question names gold documents) or
    ``answer``."""
    if by is None:
        by = "docs" if questions and all(q.doc_ids for q in questions) else "answer"
    if by not in ("docs", "answer"):
        raise ConfigError(f"portfolio score {by!r}: docs or answer")
    return by


def member_scores(
    collection: Collection,
    embedder: Embedder,
    questions: list[Question],
    pool: tuple[Member, ...] = DEFAULT_POOL,
    n: int = 10,
    by: str | None = None,
) -> tuple[np.ndarray, str]:
    """``(questions, members)`` scores in [0, 1], and what they measure (``docs`` or
    ``answer``; default: ``docs`` when every question names gold documents)."""
    by = resolve_score(questions, by)
    runs = member_runs(collection, embedder, questions, pool, n, features=False)
    return run_scores(collection, questions, runs, by), by
