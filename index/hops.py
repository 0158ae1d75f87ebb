"""Multi-hop retrieval: a follow-up query from what the hops so far found, fused with them.

The follow-up is the question plus bridge entities — exact names, which BM25 matches best — so
a further hop searches BM25 alone and needs no query embedding.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING

from fathom.core.base import Hit, Probe
from fathom.index.retrieve import rrf_fuse

if TYPE_CHECKING:
    from fathom.index.doc_filter import DocFilter
    from fathom.index.retrieve import CollectionRetriever

_CAPS = re.compile(
    r"\b[A-Z][a-zA-Z0-9'’-]+(?:[ \t]+(?:(?:of|the|de|von|van|and)[ \t]+)?[A-Z][a-zA-Z0-9'’-]+)*"
)


def followup_query(question: str, hits: list[Hit], asked: list[str] | tuple[str, ...] = ()) -> str:
    """A further hop's query: the question plus the bridge entities the hops so far surfaced.

    Capitalised phrases (names, places, titles) from the top hits that the question, and the
    follow-ups already ``asked``, do not contain are the likely bridges; the most frequent few
    are appended.
    """
    q_lower = " ".join([question, *asked]).lower()
    counts: dict[str, int] = {}
    for h in hits:
        for m in _CAPS.finditer(h.chunk.text):
            phrase = m.group(0).strip()
            if len(phrase) < 3 or phrase.lower() in q_lower:
                continue
            counts[phrase] = counts.get(phrase, 0) + 1
    if not counts:
        return ""
    bridges = sorted(counts, key=lambda p: (-counts[p], -len(p)))[:3]
    return f"{question} {' '.join(bridges)}"


def next_hop(
    sparse: CollectionRetriever,
    question: str,
    probe: Probe,
    depth: int,
    rrf_k: int,
    asked: list[str] | None = None,
    within: DocFilter | None = None,
) -> tuple[Probe, str]:
    """The hops so far (``probe``) fused with one more, searched by ``sparse`` (BM25) for the
    follow-up query (``within`` those documents only, as the first hop was). Returns the fused
    probe and the follow-up ("" when there was none, or when it repeats one in ``asked``: the
    probe is then returned as it was)."""
    import numpy as np

    follow = followup_query(question, list(probe.hits[:3]), asked or ())
    if not follow or follow in (asked or ()):
        return probe, ""
    second = sparse.probe(follow, depth, within=within)

    # The second hop's scores and ranks are kept under "hop2_*" names, so "dense" and "bm25"
    # always mean the first hop's lists; a chunk both hops found keeps its first-hop hit.
    by_id: dict[str, Hit] = {
        h.chunk.chunk_id: replace(
            h,
            scores={f"hop2_{k}": v for k, v in h.scores.items()},
            ranks={f"hop2_{k}": v for k, v in h.ranks.items()},
        )
        for h in second.hits
    }
    for h in probe.hits:
        other = by_id.get(h.chunk.chunk_id)
        by_id[h.chunk.chunk_id] = (
            h
            if other is None
            else replace(h, scores={**other.scores, **h.scores}, ranks={**other.ranks, **h.ranks})
        )
    ids = list(by_id)
    index = {cid: i for i, cid in enumerate(ids)}

    def as_ranked(p: Probe):
        rows = np.array([index[h.chunk.chunk_id] for h in p.hits], dtype=np.int64)
        return np.array([h.score for h in p.hits]), rows

    fused = rrf_fuse({"hop1": as_ranked(probe), "hop2": as_ranked(second)}, rrf_k, depth)
    hits = tuple(
        replace(by_id[ids[row]], score=score, ranks={**by_id[ids[row]].ranks, **ranks})
        for row, score, ranks, _ in fused
    )
    return Probe(query=question, hits=hits, timings_ms={**probe.timings_ms}), follow
