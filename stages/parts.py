"""What an Engine holds loaded: the collection and its retriever, and the models and policies
built on first use (generator, query-type classifier, reranker, compressor, support scorer,
depth policy, retriever portfolio).

``Parts`` owns them, their lifetimes (``reopen`` moves to a newer generation of the
collection, models kept; ``close``) and the small measurements every step shares: the sources'
tokens as the prompt writes them, the context budget a window allows, the stored vectors of
hits and a hit's citation. The steps of an answer (``stages.prepare``, ``stages.plan``,
``stages.execute``) read what they need from here; nothing here runs a step.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from fathom.core.base import Citation, DepthPolicy, Generator, Hit, cited_text
from fathom.core.errors import IndexMismatchError
from fathom.stages.deadline import AnswerClock

# The generator backends' registry: with it imported, a configuration read for this Engine
# checks generator.backend against every registered backend.
from fathom.stages.generate import make_generator

if TYPE_CHECKING:
    from fathom.core.config import Config
    from fathom.router.portfolio.runtime import PortfolioRuntime


class Parts:
    """A collection with its retriever open, and everything else loaded when first asked."""

    def __init__(self, cfg: Config, collection: str, generator: Generator | None = None) -> None:
        from fathom.index.collection import Collection
        from fathom.index.embed import SentenceVectors, embedder_id_for, query_embedder_for
        from fathom.index.retrieve import retriever_for

        self.cfg = cfg
        self.collection = Collection.open(
            cfg, collection, expect_embedder=embedder_id_for(cfg.embedder)
        )
        self.embedder = query_embedder_for(cfg, self.collection)
        self.retriever = retriever_for(cfg, self.collection, self.embedder)
        # The reranker's sentence vectors, which the extractive answerer reads again.
        self.sentence_vectors = SentenceVectors(self.embedder)
        self.clock = AnswerClock(cfg.generator)
        self._generator = generator
        self._vectors_given = False
        self._owns_generator = generator is None  # made here, so closed here
        self._policy: DepthPolicy | bool | None = False  # False: not loaded yet
        self.policy_notice = ""  # why the configured policy gave way to the strategy
        self._portfolio: PortfolioRuntime | bool | None = False  # False: not loaded yet
        self._sparse = None  # BM25-only retriever for further hops
        self._classifier = None
        self.classifier_embeds = False  # the classifier embeds questions with its own model
        self._reranker = None
        self.rerank_notice: str | None = None
        self._compressor = None
        self._scorer = None
        self._token_counter = None
        self._paths_of: dict[str, str] | None = None

    @property
    def _paths(self) -> dict[str, str]:
        """Each document's path by doc id, read with the documents' entries on the first
        citation (a collection of a million documents opens without them)."""
        if self._paths_of is None:
            self._paths_of = {d.doc_id: d.path for d in self.collection.manifest.documents}
        return self._paths_of

    # -- models, built on first use ---------------------------------------------------------

    @property
    def generator(self) -> Generator:
        if self._generator is None:
            self._generator = make_generator(self.cfg.generator, self.cfg.models_path())
        if not self._vectors_given:
            self._generator.use_vectors(self.sentence_vectors)
            self._vectors_given = True
        return self._generator

    def depth_policy(self) -> DepthPolicy | None:
        """The configured depth policy (``retrieval.policy``), or None for the strategy's."""
        if self._policy is False:
            from fathom.router.registry import configured_policy

            self._policy, self.policy_notice = configured_policy(self.cfg)
        return self._policy  # type: ignore[return-value]

    def portfolio(self) -> PortfolioRuntime | None:
        """The configured retriever portfolio (``retrieval.portfolio``), or None."""
        if self._portfolio is False:
            self._portfolio = None
            if self.cfg.retrieval.portfolio.strip():
                from fathom.index.embed import embedder_id_for
                from fathom.router.portfolio.runtime import PortfolioRuntime

                self._portfolio = PortfolioRuntime.load(
                    self.cfg,
                    self.collection,
                    embedder_id_for(self.cfg.embedder),
                    self.collection.manifest.embedder_dim,
                )
        return self._portfolio  # type: ignore[return-value]

    @property
    def sparse(self) -> Any:
        """A BM25-only retriever over the collection (further hops search with it)."""
        if self._sparse is None:
            from fathom.index.retrieve import CollectionRetriever

            self._sparse = CollectionRetriever(self.collection, None, mode="bm25")
        return self._sparse

    @property
    def classifier(self) -> Any:
        """The query-type classifier. It reads questions through the embedder it was trained
        on: with a collection built on another (``--embedder``), it embeds each question itself
        with its own (``classifier_embeds``) instead of refusing to classify."""
        if self._classifier is None:
            from fathom.index.embed import embedder_id_for, make_query_embedder
            from fathom.router.classify import DEFAULT_POLICY, QueryClassifier, QueryTypePolicy

            policy = QueryTypePolicy.load(DEFAULT_POLICY)  # read once, here
            embedder_cfg = self.cfg.embedder
            if policy.embedder_id != embedder_id_for(embedder_cfg):
                embedder_cfg = replace(embedder_cfg, name=policy.embedder_id, precision="fp32")
                self.classifier_embeds = True
            embedder = make_query_embedder(embedder_cfg, self.cfg.models_path())
            self._classifier = QueryClassifier(embedder, DEFAULT_POLICY, policy=policy)
        return self._classifier

    def reranker(self) -> Any:
        if self._reranker is None:
            from fathom.stages.rerank import make_reranker

            self._reranker, self.rerank_notice = make_reranker(
                self.cfg.rerank, self.sentence_vectors, vectors=self.vectors
            )
        return self._reranker

    def use_reranker(self, reranker: Any, notice: str | None = None) -> None:
        """Rerank with ``reranker`` from now on (a caller's own, instead of the configured)."""
        self._reranker, self.rerank_notice = reranker, notice

    @property
    def compressor(self) -> Any:
        if self._compressor is None:
            from fathom.stages.compress import ContextCompressor

            c = self.cfg.compress
            self._compressor = ContextCompressor(
                self.generator.count_tokens,
                embedder=self.embedder,
                dedupe_threshold=c.dedupe_threshold,
                mmr_lambda=c.mmr_lambda,
                sentence_select_over=c.sentence_select_over,
                condense_to=c.condense_to,
                framing=self.cfg.generator.framing,
                vectors=self.vectors,
                embed_sentences=False,  # term overlap: no model call per sentence per ask
            )
        return self._compressor

    @property
    def scorer(self) -> Any:
        if self._scorer is None:
            from fathom.feedback.confidence import SupportScorer

            self._scorer = SupportScorer(self.embedder)
        return self._scorer

    # -- measurements the steps share -------------------------------------------------------

    def count_embedding_tokens(self, texts: list[str]) -> int:
        """Tokens of ``texts`` in the embedder's own tokenizer."""
        if self._token_counter is None:
            from fathom.chunking.tokens import token_counter_for

            self._token_counter = token_counter_for(self.embedder.model_dir())
        return sum(self._token_counter.count(texts))

    def context_tokens(self, kept: list[Hit]) -> int:
        """Tokens of the sources as the prompt writes them (``generator.framing``)."""
        if not kept:
            return 0
        from fathom.stages.generate.prompt import render_sources

        return sum(self.generator.count_tokens([render_sources(kept, self.cfg.generator.framing)]))

    def budget(self, question: str, wanted: int) -> int:
        """The context budget: what was asked for, capped so the prompt fits the window."""
        from fathom.stages.compress import context_budget

        return context_budget(self.generator, self.cfg.generator, question, wanted)

    def vectors(self, hits: list[Hit]) -> Any:
        """The stored embeddings of ``hits`` ``(len(hits), dim)``, or None if one has no row."""
        if not hits or any(h.row < 0 for h in hits):
            return None
        return self.collection.dense.rows_vectors(h.row for h in hits)

    def citation(self, n: int, hit: Hit) -> Citation:
        """Source ``[n]``: ``hit``'s chunk with its document, path, pages and section."""
        c = hit.chunk
        return Citation(
            n=n,
            chunk_id=c.chunk_id,
            doc_id=c.doc_id,
            title=c.title,
            path=self._paths.get(c.doc_id, ""),
            pages=c.pages,
            section=c.section,
            score=round(float(hit.score), 6),
            text=cited_text(c.text),
        )

    # -- lifetime -----------------------------------------------------------------------------

    def reopen(self) -> bool:
        """Move to the collection's newest committed generation when one was committed since
        it was opened (by this process or another), keeping the loaded models; whether it
        moved. The collection must keep its embedder and precision (an ingest ensures it
        unless it rebuilds; open a new Engine then)."""
        from fathom.index.collection import Collection
        from fathom.index.embed import embedder_id_for
        from fathom.index.retrieve import retriever_for

        old = self.collection
        fresh = Collection.open(
            self.cfg, old.name, expect_embedder=embedder_id_for(self.cfg.embedder)
        )
        if fresh.manifest.generation == old.manifest.generation:
            fresh.close()
            return False
        if fresh.manifest.embedder_precision != old.manifest.embedder_precision:
            fresh.close()
            raise IndexMismatchError(
                f"collection {old.name!r} was rebuilt at precision "
                f"{fresh.manifest.embedder_precision!r}, this engine embeds at "
                f"{old.manifest.embedder_precision!r} — open a new Engine for it"
            )
        self.collection = fresh
        self.retriever = retriever_for(self.cfg, fresh, self.embedder)
        self._paths_of = None
        self._sparse = None
        self._portfolio = False
        old.close()
        return True

    def close(self) -> None:
        """Close the collection and the generator made here (not one that was given)."""
        self.collection.close()
        if self._owns_generator and self._generator is not None:
            self._generator.close()

    def replace_generator(self, generator: Generator, owned: bool = True) -> None:
        """Answer with ``generator`` from now on; ``owned``: close it with these parts."""
        self._generator, self._owns_generator = generator, owned
        self._vectors_given = False
