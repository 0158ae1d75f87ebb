"""A built portfolio at ask time: the router picks ``ell`` members, they run, and their results
are fused (``fuse`` mode) or each answers and the generator selects (``select`` mode, in
``stages.pipeline``).

The members chosen for one question run together (``PoolSearcher.run_many``): one dense and one
BM25 search serve every member built on them, and only what a member adds (PRF's expanded
query, a view's own indexes) is searched again — cheaper than running each in a thread, which
on a small machine would repeat the shared searches. ``bench/portfolio_parallel.py`` measures
what that costs against the slowest member alone.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from fathom.core.base import Hit
from fathom.core.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np
    from fathom.core.base import Probe
    from fathom.core.config import Config
    from fathom.index.collection import Collection

MODES = ("fuse", "select")


class PortfolioRuntime:
    """One portfolio over one open collection: choose members, run them, fuse their hits."""

    def __init__(
        self,
        info: dict[str, Any],
        collection: Collection,
        embedder_id: str,
        dim: int,
        ell: int,
        mode: str,
        name: str = "",
        cfg: Config | None = None,
    ) -> None:
        """``cfg`` is the run's configuration: the portfolio's probe settings must be its
        (``check_probe``), and its ``retrieval.rrf_k`` fuses the members' results (60 without
        one; then the probe is not checked)."""
        from fathom.router.portfolio.pool import PoolSearcher, pool_members
        from fathom.router.portfolio.router import (
            LEGACY_PROBE,
            PortfolioRouter,
            check_probe,
            input_schema,
        )

        if mode not in MODES:
            raise ConfigError(f"retrieval.portfolio_mode = {mode!r}: fuse or select")
        if info.get("collection") not in (None, collection.name):
            raise ConfigError(
                f"portfolio {name or ''} was built on collection {info.get('collection')!r}, "
                f"not {collection.name!r}; its members and router belong to that collection"
            )
        if not info.get("router"):
            raise ConfigError(f"portfolio {name}: no router (rebuild it with this Fathom)")
        self.name = name
        self.members = pool_members(collection, list(info["members"]))
        self.by_name = {m.name: m for m in self.members}
        self.router = PortfolioRouter.from_dict(
            info["router"], expect_schema=input_schema(embedder_id, dim)
        )
        if not 1 <= ell <= len(self.members):
            raise ConfigError(
                f"retrieval.portfolio_ell = {ell}: between 1 and the portfolio's "
                f"{len(self.members)} members"
            )
        self.ell = ell
        self.mode = mode
        self.collection = collection
        self.searcher = PoolSearcher(collection)
        self.cfg = cfg
        trained = dict(info.get("probe") or LEGACY_PROBE)
        self.probe = check_probe(info, cfg, name) if cfg is not None else trained
        self.rrf_k = cfg.retrieval.rrf_k if cfg is not None else 60
        self._retriever: Any = None  # the probe's retriever, for a probe deeper than trained

    @classmethod
    def load(cls, cfg: Config, collection: Collection, embedder_id: str, dim: int):
        from fathom.router.portfolio.file import load_portfolio, resolve_portfolio

        path = resolve_portfolio(cfg, cfg.retrieval.portfolio)
        r = cfg.retrieval
        return cls(
            load_portfolio(path),
            collection,
            embedder_id,
            dim,
            r.portfolio_ell,
            r.portfolio_mode,
            name=path.stem,
            cfg=cfg,
        )

    def features(
        self, question: str, qvec: np.ndarray, probe: Probe, type_probs: dict[str, float]
    ) -> np.ndarray:
        """The probe features the router reads, ``(len(FEATURE_NAMES),) float32``: those of
        the probe the portfolio was trained on — with no ``--k`` it is ``probe`` itself; a
        deeper one (``--k 40``) is cut to the trained depth, or, when it fused deeper
        candidate lists than that depth would (``--k`` above ``retrieval.candidates``), made
        again at the trained depth."""
        import numpy as np
        from fathom.router.features import probe_features
        from fathom.router.portfolio.router import probe_depth

        qtype = max(type_probs, key=type_probs.__getitem__) if type_probs else None
        depth = probe_depth(self.probe, question, qtype)
        if len(probe.hits) > depth:
            candidates = self.probe.get("retrieval.candidates")
            if candidates is not None and len(probe.hits) > max(depth, int(candidates)):
                probe = self._probe_retriever().probe(question, depth, qvec=qvec)
            else:
                probe = replace(probe, hits=probe.hits[:depth])
        return np.asarray(probe_features(question, probe, type_probs), dtype=np.float32)

    def _probe_retriever(self):
        """The configured retriever (the one ``Engine.prepare`` probes with), built once; it
        is always given the query's embedding, so its embedder never loads."""
        if self._retriever is None:
            from fathom.index.embed import query_embedder_for
            from fathom.index.retrieve import retriever_for

            if self.cfg is None:
                raise ConfigError(f"portfolio {self.name}: no configuration to probe with")
            embedder = query_embedder_for(self.cfg, self.collection)
            self._retriever = retriever_for(self.cfg, self.collection, embedder)
        return self._retriever

    def choose(
        self, question: str, qvec: np.ndarray, probe: Probe, type_probs: dict[str, float]
    ) -> list[str]:
        """The router's ``ell`` members for this question, best first."""
        from fathom.router.portfolio.router import router_inputs

        feats = self.features(question, qvec, probe, type_probs)[None, :]
        return self.router.choose(router_inputs(qvec[None, :], feats), self.ell)[0]

    def member_hits(
        self, question: str, qvec: np.ndarray, names: list[str], depth: int
    ) -> dict[str, list[Hit]]:
        """Each chosen member's top ``depth`` hits (shared searches, see the module doc)."""
        rows = self.searcher.run_many([self.by_name[n] for n in names], question, qvec, depth)
        out: dict[str, list[Hit]] = {}
        for name, member_rows in rows.items():
            chunks = self.collection.chunks(member_rows)
            out[name] = [
                Hit(chunk=c, score=1.0 / (self.rrf_k + rank), ranks={name: rank}, row=row)
                for rank, (c, row) in enumerate(zip(chunks, member_rows, strict=True), start=1)
            ]
        return out

    def fuse(self, lists: dict[str, list[Hit]], depth: int, rrf_k: int | None = None) -> list[Hit]:
        """Reciprocal rank fusion of the members' hits (``retrieval.rrf_k`` unless ``rrf_k``
        is given); each hit keeps every member's rank."""
        rrf_k = self.rrf_k if rrf_k is None else rrf_k
        fused: dict[int, float] = {}
        ranks: dict[int, dict[str, int]] = {}
        first: dict[int, Hit] = {}
        for name, hits in lists.items():
            for rank, h in enumerate(hits, start=1):
                fused[h.row] = fused.get(h.row, 0.0) + 1.0 / (rrf_k + rank)
                ranks.setdefault(h.row, {})[name] = rank
                first.setdefault(h.row, h)
        order = sorted(fused, key=lambda r: (-fused[r], r))[:depth]
        return [Hit(chunk=first[r].chunk, score=fused[r], ranks=ranks[r], row=r) for r in order]
