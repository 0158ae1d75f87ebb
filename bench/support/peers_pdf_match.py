"""The pure parts of bench/peers_pdf.py: a ranked chunk's pages, context token budgets matched
in both directions, whether a context holds an evidence page, and the paired comparison with
bootstrap intervals over questions and over documents.

A ranked chunk is ``[pages, tokens]``: the (1-based) pages it came from and its length in
MiniLM tokens, as the JSON a system's run writes it. A context is a list of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

RankedChunk = Sequence[Any]  # [pages: list[int], tokens: int]


def page_numbers(doc_ids: Sequence[str]) -> dict[str, int]:
    """Each page Document's id → its 1-based page number, by the order the reader returned them
    (one Document per page, in page order; a page label may be a roman numeral, so it is not
    read)."""
    return {doc_id: i for i, doc_id in enumerate(doc_ids, start=1)}


def tokens_of(chunks: Sequence[RankedChunk]) -> int:
    """The MiniLM tokens of a context."""
    return sum(int(c[1]) for c in chunks)


def take_until(ranked: Sequence[RankedChunk], budget: float) -> list[RankedChunk]:
    """The first chunks of ``ranked`` until their tokens reach ``budget``, the crossing chunk
    included: the context never falls short of the budget unless ``ranked`` runs out."""
    out: list[RankedChunk] = []
    total = 0
    for c in ranked:
        if total >= budget:
            break
        out.append(c)
        total += int(c[1])
    return out


def take_within(ranked: Sequence[RankedChunk], budget: float) -> list[RankedChunk]:
    """The first chunks of ``ranked`` while their tokens stay within ``budget``: the context
    never exceeds it (it stops at the first chunk that would, even if a later one would fit)."""
    out: list[RankedChunk] = []
    total = 0
    for c in ranked:
        if total + int(c[1]) > budget:
            break
        out.append(c)
        total += int(c[1])
    return out


def holds_page(chunks: Sequence[RankedChunk], evidence_pages: Sequence[int]) -> bool:
    """Whether any chunk of a context comes from one of the (1-based) ``evidence_pages``; a
    chunk without text (no tokens: a page whose text layer is empty) holds nothing."""
    want = {int(p) for p in evidence_pages}
    return any(int(c[1]) > 0 and want.intersection(int(p) for p in c[0]) for c in chunks)


def share(values: Sequence[float]) -> dict[str, Any]:
    """``{n, total, share}`` of 0/1 values (``share`` None when there are none)."""
    n = int(sum(values))
    return {"n": n, "total": len(values), "share": n / len(values) if values else None}


def by_type(values: Sequence[float], types: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``share`` of ``values`` within each document type, types in name order."""
    pairs = list(zip(values, types, strict=True))
    return {t: share([v for v, u in pairs if u == t]) for t in sorted(set(types))}


def paired(
    fathom: Sequence[float], peer: Sequence[float], docs: Sequence[str], n_boot: int = 2000
) -> dict[str, Any]:
    """Fathom against a peer on the same questions (0/1 each): both shares, the difference
    Fathom − peer with 95 % bootstrap intervals over questions and over documents (resampled
    with their questions), win / tie / loss shares, and whether Fathom is ahead with the lower
    bound of the interval over documents above zero (``ahead``; ``ahead_questions`` for the
    interval over questions)."""
    from fathom.evaluation.metrics import bootstrap_ci, cluster_bootstrap_ci, paired_compare

    diff = [float(a) - float(b) for a, b in zip(fathom, peer, strict=True)]
    by_q = bootstrap_ci(diff, n_boot=n_boot)
    by_doc = cluster_bootstrap_ci(diff, list(docs), n_boot=n_boot)
    return {
        "fathom": share(fathom),
        "peer": share(peer),
        "difference": by_q,
        "difference_documents": by_doc,
        "win_tie_loss": paired_compare(list(map(float, fathom)), list(map(float, peer))),
        "ahead": bool(by_doc and by_doc["lo"] > 0),
        "ahead_questions": bool(by_q and by_q["lo"] > 0),
    }
