"""The shared sample PDFs and DOCX ingest cleanly; re-ingesting them embeds nothing."""

from __future__ import annotations

import time

import pytest
from fathom.chunking import make_chunker
from fathom.index.collection import Collection
from fathom.index.ingest import ingest

pytestmark = [pytest.mark.data, pytest.mark.slow]


def test_shared_pdfs_and_docx_ingest_then_reingest_is_cheap(cfg, data_dir, minilm) -> None:
    paths = [data_dir / "pdfs", data_dir / "docx"]
    chunker = make_chunker(cfg.chunker, minilm.token_counter())
    t0 = time.perf_counter()
    first = ingest(cfg, paths, "shared", minilm, chunker)
    first_s = time.perf_counter() - t0
    assert first.count("failed") == 0, [f.reason for f in first.files if f.status == "failed"]
    assert first.count("ok") == 11 and first.embedded_chunks > 500  # 9 documents + 2 SOURCE.md
    coll = Collection.open(cfg, "shared")
    assert coll.check() == []
    by_name = {d.path.rsplit("/", 1)[-1]: d for d in coll.manifest.documents}
    assert by_name["react_arxiv2210.03629v2.pdf"].pages > 20
    assert by_name["usdoj_chapter13_trustee_handbook_2012.docx"].sections > 10

    t0 = time.perf_counter()
    second = ingest(cfg, paths, "shared", minilm, chunker)
    second_s = time.perf_counter() - t0
    assert second.embedded_chunks == 0 and second.count("unchanged") == 11
    assert not second.committed
    # Hashing the files is all a re-ingest does; the ratio is logged, not asserted.
    print(
        f"first ingest {first_s:.1f} s, re-ingest {second_s:.2f} s "
        f"({second_s / first_s:.1%} of the first)"
    )
