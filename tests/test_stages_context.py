"""``Engine.context``: the sources ask would hand its generator, without generating; and
``Engine.reopen``: a newer generation of the collection, with the models kept loaded."""

from __future__ import annotations

from pathlib import Path

import pytest
from fathom.bench.support import docgen
from fathom.core.config import load_config
from fathom.core.errors import CollectionNotFound
from fathom.index.collection import remove_collection
from fathom.index.ingest import ingest_paths
from fathom.stages.pipeline import Engine

QUESTION = "Which exit code does Fathom use when the command line itself is wrong?"


@pytest.fixture
def guide(tmp_path: Path, minilm):
    cfg = load_config(overrides={"generator.backend": "extractive"})
    folder = tmp_path / "docs"
    folder.mkdir()
    docgen.make_user_guide_pdf(folder / "guide.pdf")
    ingest_paths(cfg, [folder], "guide", embedder=minilm)
    return cfg, folder


def test_context_is_what_ask_reads_first_without_generating(guide) -> None:
    cfg, _ = guide
    engine = Engine(cfg, "guide")
    try:
        ctx = engine.context(QUESTION)
        answer = engine.ask(QUESTION)
    finally:
        engine.close()
    tr = ctx.trace
    assert tr.decision is not None and tr.decision.k >= 1 and tr.decision.reason
    assert tr.rounds == [] and tr.tokens["prompt"] == tr.tokens["completion"] == 0
    assert "generate" not in tr.stages_ms and {"probe", "decide", "compress"} <= set(tr.stages_ms)
    assert 0 < tr.tokens["context"] <= tr.budget["tokens"]
    assert ctx.sources and [s.n for s in ctx.sources] == list(range(1, len(ctx.sources) + 1))
    assert ctx.sources[0].pages == "3" and ctx.sources[0].section == "Exit codes"
    assert len(ctx.used) == len(ctx.sources)
    # The first round of ask read the same sources at the same depth.
    assert answer.trace.rounds[0]["k"] == tr.decision.k
    assert [s.chunk_id for s in answer.sources[: len(ctx.sources)]] == [
        s.chunk_id for s in ctx.sources
    ] or answer.trace.passes > 1
    data = ctx.to_dict()
    assert data["collection"] == "guide" and data["trace"]["budget"] == tr.budget


def test_context_at_a_fixed_depth(guide) -> None:
    cfg, _ = guide
    engine = Engine(cfg, "guide")
    try:
        two = engine.context(QUESTION, k=2)
        none = engine.context(QUESTION, k=0)
    finally:
        engine.close()
    assert two.trace.decision.k == 2 and 1 <= len(two.sources) <= 2
    assert two.trace.budget["source"] == "depth"
    assert none.sources == () and none.trace.tokens["context"] == 0


def test_reopen_moves_to_a_new_generation_and_keeps_the_models(guide, minilm) -> None:
    cfg, folder = guide
    engine = Engine(cfg, "guide")
    try:
        embedder, classifier = engine.embedder, engine.parts.classifier
        assert engine.reopen() is False  # nothing committed since it opened
        docgen.make_text(folder / "pump.txt", "The Zorblax pump impeller is cast from titanium.")
        ingest_paths(cfg, [folder], "guide", embedder=minilm)
        before = engine.collection.manifest.generation
        hits = engine.retriever.search("Zorblax impeller", 3)
        assert all("Zorblax" not in h.chunk.text for h in hits)
        assert engine.reopen() is True
        assert engine.collection.manifest.generation == before + 1
        assert engine.embedder is embedder and engine.parts.classifier is classifier
        hits = engine.retriever.search("Zorblax impeller", 3)
        assert "Zorblax" in hits[0].chunk.text
        ctx = engine.context("What is the Zorblax pump impeller cast from?")
        assert any(s.path.endswith("pump.txt") for s in ctx.sources)
        remove_collection(cfg, "guide")
        with pytest.raises(CollectionNotFound):
            engine.reopen()
    finally:
        engine.close()


def test_a_context_no_source_fits_says_so(guide) -> None:
    """A budget that holds no source gives an empty context with the same notice ask gives."""
    cfg, _ = guide
    engine = Engine(cfg, "guide")
    try:
        ctx = engine.context(QUESTION, k=2, budget_tokens=10)
    finally:
        engine.close()
    assert not ctx.sources and ctx.trace.tokens["context"] == 0
    assert any(n.startswith("no source fits the 10-token") for n in ctx.trace.notices)
