"""The pool of retriever configurations a portfolio is chosen from, and the searcher that runs
them.

Every member searches the same collection (no copy of the text); each is named and described by
its parameters:

* ``dense`` and ``bm25``: one retriever alone;
* ``hybrid-convex-W``: convex fusion of min-max normalised dense and BM25 scores with dense weight
  W (0.3, 0.5, 0.7), and ``hybrid-rrf``: reciprocal rank fusion;
* ``dense-mmr``: the dense top 50 re-ordered by maximal marginal relevance (λ = 0.5) over the
  stored chunk vectors, so near-duplicates give way to other passages;
* ``bm25-prf``: BM25 with pseudo-relevance feedback — the query plus the 8 terms that weigh most
  in the top 3 BM25 chunks (term frequency × the chunk's normalised score; RM3 without the
  language-model smoothing).

``PoolSearcher`` runs several members on one question, sharing their searches;
``learn.portfolio_runs`` scores them against gold to build a portfolio.
"""

from __future__ import annotations

import os
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fathom.core.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np
    from fathom.index.collection import Collection

PRF_DOCS = 3
PRF_TERMS = 8
MMR_LAMBDA = 0.5
MMR_POOL = 50


@dataclass(frozen=True)
class Member:
    """One retriever configuration of the pool."""

    name: str
    kind: str  # dense | bm25 | hybrid | mmr | prf
    params: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        args = ", ".join(f"{k}={v}" for k, v in self.params.items())
        return f"{self.kind}({args})" if args else self.kind


DEFAULT_POOL: tuple[Member, ...] = (
    Member("dense", "dense"),
    Member("bm25", "bm25"),
    Member("hybrid-convex-0.3", "hybrid", {"fusion": "convex", "dense_weight": 0.3}),
    Member("hybrid-convex-0.5", "hybrid", {"fusion": "convex", "dense_weight": 0.5}),
    Member("hybrid-convex-0.7", "hybrid", {"fusion": "convex", "dense_weight": 0.7}),
    Member("hybrid-rrf", "hybrid", {"fusion": "rrf", "rrf_k": 60}),
    Member("dense-mmr", "mmr", {"lambda": MMR_LAMBDA, "pool": MMR_POOL}),
    Member("bm25-prf", "prf", {"docs": PRF_DOCS, "terms": PRF_TERMS}),
)


def view_member(meta: dict[str, Any]) -> Member:
    """The pool member that searches one extra view (``index.views``)."""
    if meta["granularity"] == "chunks":
        return Member(meta["name"], "view", {"view": meta["name"], **meta.get("params", {})})
    return Member(
        f"{meta['name']}-hybrid",
        "view",
        {"view": meta["name"], **meta.get("params", {}), "dense_weight": 0.5},
    )


def pool_for(collection: Collection) -> tuple[Member, ...]:
    """The default pool plus one member per up-to-date extra view of ``collection``."""
    from fathom.index.views import list_views

    extra = [view_member(meta) for meta in list_views(collection) if not meta["stale"]]
    return DEFAULT_POOL + tuple(extra)


_EXECUTOR: ThreadPoolExecutor | None = None


def _executor() -> ThreadPoolExecutor:
    """One small thread pool per process for members' independent searches."""
    global _EXECUTOR
    if _EXECUTOR is None:
        _EXECUTOR = ThreadPoolExecutor(
            max_workers=min(4, os.cpu_count() or 1), thread_name_prefix="fathom-pool"
        )
    return _EXECUTOR


def _run_now(fn, *args) -> Future:
    """``submit`` without a thread: run now, return a finished future."""
    done: Future = Future()
    try:
        done.set_result(fn(*args))
    except BaseException as exc:  # re-raised by .result(), as a pool future would
        done.set_exception(exc)
    return done


class PoolSearcher:
    """Runs pool members over one open collection (the caller embeds the query); returns chunk
    rows, best first."""

    def __init__(self, collection: Collection, candidates: int = 100):
        self.collection = collection
        self.candidates = candidates
        self._views: dict[str, Any] = {}

    def view(self, name: str):
        """An extra view of the collection (``index.views``), opened once."""
        if name not in self._views:
            from fathom.index.views import View

            self._views[name] = View.open(self.collection, name)
        return self._views[name]

    def rows(self, member: Member, question: str, qvec: np.ndarray, n: int) -> list[int]:
        """The member's top ``n`` chunk rows for ``question``, best first."""
        return self.run_many([member], question, qvec, n)[member.name]

    def run_many(
        self,
        members: list[Member],
        question: str,
        qvec: np.ndarray,
        n: int,
        parallel: bool = False,
    ) -> dict[str, list[int]]:
        """Several members on one question, sharing what they have in common: one dense and one
        BM25 search (to the deepest any member needs) serve every fusion, the dense-only and
        BM25-only members, MMR's pool and PRF's feedback chunks; only PRF's expanded query and
        the views' own indexes are searched again. Each member's rows are exactly what it
        returns alone.

        With ``parallel``, the shared dense search, the shared BM25 search and each view member
        run in threads (FAISS and numpy release the GIL for the heavy parts); the fusions,
        MMR and PRF follow on this thread. Off by default: the searches take milliseconds, and
        handing the GIL between threads (a 5 ms switch interval) costs more than overlapping
        them saves — on HotpotQA with a sentence-window view, 15 ms at P50 in threads against
        5 ms on one thread (``bench/portfolio_parallel.py``, 2 busy cores)."""
        kinds = {m.kind for m in members}
        for m in members:
            if m.kind not in ("dense", "bm25", "hybrid", "mmr", "prf", "view"):
                raise ConfigError(f"pool member {m.name!r}: unknown kind {m.kind!r}")
        depth = max(
            [n]
            + [self.candidates for m in members if m.kind == "hybrid"]
            + [int(m.params["pool"]) for m in members if m.kind == "mmr"]
            + [int(m.params["docs"]) for m in members if m.kind == "prf"]
        )
        views = [m for m in members if m.kind == "view"]
        for m in views:
            self.view(str(m.params["view"]))  # opened here, not in a worker thread
        need_dense = bool(kinds & {"dense", "hybrid", "mmr"})
        need_bm25 = bool(kinds & {"bm25", "hybrid", "prf"})
        submit = _executor().submit if parallel else _run_now
        futures: dict[str, Future] = {}
        for m in views:
            futures[m.name] = submit(self._view_rows, m, question, qvec, n)
        if need_dense:
            futures["dense"] = submit(self.collection.dense.search, qvec, depth)
        if need_bm25:
            futures["bm25"] = submit(self.collection.bm25.search, question, depth)
        ranked: dict[str, Any] = {k: futures[k].result() for k in ("dense", "bm25") if k in futures}
        out: dict[str, list[int]] = {}
        for m in members:
            if m.kind != "view":
                out[m.name] = self._member_rows(m, question, ranked, n)
        for m in views:
            out[m.name] = futures[m.name].result()
        return {m.name: out[m.name] for m in members}

    def _member_rows(self, m: Member, question: str, ranked: dict, n: int) -> list[int]:
        from fathom.index.retrieve import convex_fuse, rrf_fuse

        p = m.params
        if m.kind in ("dense", "bm25"):
            return [int(r) for r in ranked[m.kind][1][:n].tolist()]
        if m.kind == "hybrid":
            # As CollectionRetriever.probe fuses: each list to max(n, candidates) deep.
            deep = max(n, self.candidates)
            lists = {k: (ranked[k][0][:deep], ranked[k][1][:deep]) for k in ("dense", "bm25")}
            if p.get("fusion", "convex") == "rrf":
                top = rrf_fuse(lists, int(p.get("rrf_k", 60)), n)
            else:
                w = float(p.get("dense_weight", 0.5))
                top = convex_fuse(lists, {"dense": w, "bm25": 1.0 - w}, n)
            return [row for row, *_ in top]
        if m.kind == "mmr":
            pool = max(n, int(p["pool"]))
            scores, rows = ranked["dense"]
            return self._mmr(scores[:pool], rows[:pool], n, float(p["lambda"]))
        scores, rows = ranked["bm25"]
        return self._prf(question, scores, rows, n, int(p["docs"]), int(p["terms"]))

    def _view_rows(self, m: Member, question: str, qvec: np.ndarray, n: int) -> list[int]:
        """A view member: its units ranked by the view's own BM25 (and dense, when the view
        has vectors; fused convexly with the member's dense weight), as chunk rows."""
        from fathom.index.retrieve import convex_fuse

        view = self.view(str(m.params["view"]))
        deep = max(n, self.candidates)  # n chunk rows need at least n units
        lists = view.ranked(question, qvec, deep)
        w = float(m.params.get("dense_weight", 0.5)) if "dense" in lists else 0.0
        top = convex_fuse(lists, {"dense": w, "bm25": 1.0 - w}, deep)
        return view.chunk_rows([row for row, *_ in top], n)

    def _mmr(self, scores: np.ndarray, rows: np.ndarray, n: int, lam: float) -> list[int]:
        import numpy as np

        if len(rows) == 0:
            return []
        vecs = self.collection.dense.rows_vectors(rows.tolist())
        sims = vecs @ vecs.T
        rel = np.asarray(scores, dtype=np.float64)
        chosen: list[int] = [0]
        best_sim = sims[0].astype(np.float64)
        left = np.ones(len(rows), dtype=bool)
        left[0] = False
        while len(chosen) < min(n, len(rows)):
            mmr = lam * rel - (1.0 - lam) * best_sim
            mmr[~left] = -np.inf
            j = int(np.argmax(mmr))
            chosen.append(j)
            left[j] = False
            best_sim = np.maximum(best_sim, sims[j])
        return [int(rows[j]) for j in chosen]

    def _prf(
        self, question: str, scores: np.ndarray, rows: np.ndarray, n: int, docs: int, terms: int
    ) -> list[int]:
        from fathom.core.words import content_terms, words

        if len(rows) == 0:
            return []
        top = float(scores[0]) or 1.0
        q_terms = content_terms(question)
        weight: Counter[str] = Counter()
        for chunk, s in zip(
            self.collection.chunks(rows[:docs].tolist()), scores[:docs].tolist(), strict=True
        ):
            content = content_terms(chunk.text)
            counts = Counter(w for w in words(chunk.text) if w in content and w not in q_terms)
            for w, c in counts.items():
                weight[w] += c * s / top
        expansion = [w for w, _ in weight.most_common(terms)]
        # The original question twice, so its terms outweigh the expansion's.
        expanded = " ".join([question, question, *expansion])
        return [int(r) for r in self.collection.bm25.search(expanded, n)[1].tolist()]


def pool_members(collection: Collection, names: list[str]) -> tuple[Member, ...]:
    """Pool members by name, in the given order (views must exist and be up to date)."""
    pool = {m.name: m for m in pool_for(collection)}
    unknown = [n for n in names if n not in pool]
    if unknown:
        raise ConfigError(
            f"portfolio names pool members {unknown} that collection {collection.name!r} does "
            "not have (a view that is missing or stale: `fathom collections views`)"
        )
    return tuple(pool[n] for n in names)
