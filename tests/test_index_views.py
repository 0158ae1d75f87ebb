"""Extra views of a collection (index/views.py): units are spans of the stored chunks, their
text is rebuilt from the chunks, a view answers in chunk rows, and a re-ingest makes it stale."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from fathom.bench.support.docgen import make_qa_set
from fathom.core.base import Chunk
from fathom.core.config import load_config
from fathom.core.errors import ConfigError
from fathom.index.collection import Collection
from fathom.index.embed import embedder_id_for
from fathom.index.ingest import ingest_paths
from fathom.index.targets import resolve_target
from fathom.index.views import DEFAULT_VIEWS, View, ViewSpec, build_view, list_views, unit_text
from fathom.router.portfolio.pool import PoolSearcher, pool_for


def _chunk(doc: str, text: str, start: int, ordinal: int) -> Chunk:
    return Chunk(Chunk.make_id(doc, start, start + len(text)), doc, text, start,
                 start + len(text), 1, 1, "S", 5, ordinal)  # fmt: skip


def test_unit_text_takes_overlap_once_and_marks_gaps() -> None:
    doc = "Alpha one. Beta two. Gamma three. Delta four."
    a = _chunk("d", doc[0:20], 0, 0)  # "Alpha one. Beta two."
    b = _chunk("d", doc[11:33], 11, 1)  # overlaps "Beta two."
    assert unit_text([a, b], 0, len(b.text)) == doc[0:33]
    c = _chunk("d", doc[34:], 34, 2)  # a gap of one space before it
    assert unit_text([b, c], 0, len(c.text)) == doc[11:33] + "\n\n" + doc[34:]
    assert unit_text([a], 6, 10) == "one."
    # The end applies to the last chunk only.
    assert unit_text([a, b], 0, 8) == doc[0:20]


@pytest.fixture(scope="module")
def qa_collection(tmp_path_factory: pytest.TempPathFactory, minilm):
    tmp = tmp_path_factory.mktemp("views")
    home = tmp / "home"
    mp = pytest.MonkeyPatch()
    mp.setenv("FATHOM_HOME", str(home))
    docs, qfile = make_qa_set(tmp / "qa", n_docs=10)
    cfg = load_config()
    name = resolve_target(cfg, str(docs))
    coll = Collection.open(cfg, name, expect_embedder=embedder_id_for(cfg.embedder))
    views = {spec.name: build_view(coll, spec, minilm) for spec in DEFAULT_VIEWS}
    yield cfg, coll, views, docs, qfile, minilm
    mp.undo()


def test_views_are_spans_of_the_chunks(qa_collection) -> None:
    _cfg, coll, views, *_ = qa_collection
    chunks = coll.store.all()
    sentences = views["sentences"]
    assert len(sentences) > len(chunks)  # several windows per chunk
    for u in range(len(sentences)):
        (row,) = sentences.unit_rows(u)
        assert sentences.text(u) in chunks[row].text and sentences.text(u).strip()
    sections = views["sections"]
    covered = [r for u in range(len(sections)) for r in sections.unit_rows(u)]
    assert covered == list(range(len(chunks)))  # every chunk once, in order
    for u in range(len(sections)):
        rows = sections.unit_rows(u)
        group = [chunks[r] for r in rows]
        assert len({(c.doc_id, c.section) for c in group}) == 1
        text = sections.text(u)
        for c in group:
            assert c.text in text or c.text.strip() in text
    # Section vectors are the normalised mean of their chunks' vectors.
    v = sections.dense.rows_vectors([0])[0]
    mean = coll.dense.rows_vectors(sections.unit_rows(0)).mean(axis=0)
    assert np.allclose(v, mean / np.linalg.norm(mean), atol=1e-5)
    bm = views["bm25-k1=0.9-b=0.4"]
    assert bm.dense is None and len(bm) == len(chunks)
    q = "Where was " + chunks[0].text.split()[0]
    assert not np.allclose(bm.bm25.scores(q), coll.bm25.scores(q))  # other k1, b


def test_view_members_answer_in_chunk_rows(qa_collection) -> None:
    _cfg, coll, views, _docs, _qfile, minilm = qa_collection
    pool = pool_for(coll)
    names = [m.name for m in pool]
    assert {"sentences-hybrid", "sections-hybrid", "bm25-k1=0.9-b=0.4"} <= set(names)
    searcher = PoolSearcher(coll)
    chunks = coll.store.all()
    question = f"What is known about {chunks[3].title or chunks[3].text[:40]}?"
    qvec = minilm.embed_query(question)
    found = searcher.run_many(list(pool), question, qvec, 5)
    for name, rows in found.items():
        assert 0 < len(rows) <= 5 and len(set(rows)) == len(rows), name
        assert all(0 <= r < len(chunks) for r in rows), name
    # A sentence window stands for the chunk it lies in: the member's first row is the chunk
    # of the view's best unit.
    view = views["sentences"]
    units = view.ranked(question, qvec, 100)
    assert set(units) == {"dense", "bm25"}
    assert view.chunk_rows([5, 6, 5], 10) == list(
        dict.fromkeys(view.unit_rows(5) + view.unit_rows(6))
    )


def test_reingest_makes_views_stale(tmp_path: Path, minilm, monkeypatch) -> None:
    monkeypatch.setenv("FATHOM_HOME", str(tmp_path / "home"))
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("Ada Quill kept bees in Norwood.\n\nShe sold honey.\n", "utf-8")
    cfg = load_config()
    name = "bees"
    ingest_paths(cfg, [folder], name, embedder=minilm)
    coll = Collection.open(cfg, name)
    build_view(coll, ViewSpec("sections", "sections", {"max_tokens": 1024}), None)
    assert [v["stale"] for v in list_views(coll)] == [False]
    assert "sections-hybrid" in [m.name for m in pool_for(coll)]
    (folder / "b.txt").write_text("Zebulon Marsh kept a lighthouse in Port Aster.\n", "utf-8")
    ingest_paths(cfg, [folder], name, embedder=minilm)
    fresh = Collection.open(cfg, name)
    assert fresh.manifest.data_dir_name != coll.manifest.data_dir_name
    assert [v["stale"] for v in list_views(fresh)] == [True]
    assert "sections-hybrid" not in [m.name for m in pool_for(fresh)]  # stale views sit out
    with pytest.raises(ConfigError, match="rebuild it"):
        View.open(fresh, "sections")
    rebuilt = build_view(fresh, ViewSpec("sections", "sections", {"max_tokens": 1024}), None)
    assert [v["stale"] for v in list_views(fresh)] == [False]
    assert sum(len(rebuilt.unit_rows(u)) for u in range(len(rebuilt))) == len(fresh)


def test_unknown_granularity_and_missing_view(qa_collection) -> None:
    _cfg, coll, *_ = qa_collection
    with pytest.raises(ConfigError, match="granularity"):
        build_view(coll, ViewSpec("words", "words"), None)
    with pytest.raises(ConfigError, match="no view"):
        View.open(coll, "paragraphs")
