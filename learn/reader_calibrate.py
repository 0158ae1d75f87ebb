"""The reader's abstention bar: the margin over no-answer under which the answerer says the
sources do not answer.

Fitted on a training half with unanswerable questions (SQuAD 2.0's): each question's first
``CONTEXT`` retrieved passages (``reader_data`` records) are read as the extractive answerer
reads its sources (``stages.generate.span.read_span`` without a bar), and the bar is the
``ANSWERABLE_ABSTAIN`` quantile of the answerable questions' best margins — the answerer then
abstains on about that share of answerable questions — reported with the share of unanswerable
questions it abstains on.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np

CONTEXT = 4
ANSWERABLE_ABSTAIN = 0.10
SAMPLE = 400  # questions of each kind


def _hit(n: int, text: str) -> Any:
    from fathom.core.base import Chunk, Hit

    chunk = Chunk(f"c{n}", f"d{n}", text, 0, len(text), 1, 1, "", 0, 0)
    return Hit(chunk=chunk, score=1.0 / n)


def best_margins(reader: Any, records: list[dict[str, Any]]) -> np.ndarray:
    """Each record's best acceptable margin over its first ``CONTEXT`` passages."""
    from fathom.stages.generate.extractive import candidates
    from fathom.stages.generate.span import read_span

    saved = reader.meta.get("abstain_below")
    reader.meta["abstain_below"] = float("-inf")
    out = []
    try:
        for rec in records:
            texts = [p["text"] for p in rec["passages"][:CONTEXT]]
            hits = [_hit(i, t) for i, t in enumerate(texts, 1)]
            _, margin = read_span(reader, rec["question"], hits, candidates(hits))
            out.append(margin)
    finally:
        reader.meta["abstain_below"] = saved
    return np.asarray(out, dtype=np.float64)


def fit_abstain(reader: Any, records: list[dict[str, Any]], seed: int = 0) -> dict[str, Any]:
    """The bar and what it does on the records' answerable and unanswerable questions."""
    rng = random.Random(seed)
    answerable = [r for r in records if not r["unanswerable"]]
    unanswerable = [r for r in records if r["unanswerable"]]
    answerable = rng.sample(answerable, min(SAMPLE, len(answerable)))
    unanswerable = rng.sample(unanswerable, min(SAMPLE, len(unanswerable)))
    pos = best_margins(reader, answerable)
    neg = best_margins(reader, unanswerable)
    finite = pos[np.isfinite(pos)]
    bar = float(np.quantile(finite, ANSWERABLE_ABSTAIN)) if len(finite) else 0.0
    return {
        "abstain_below": round(bar, 4),
        "fit": {
            "answerable": len(pos),
            "unanswerable": len(neg),
            "abstain_answerable": round(float(np.mean(pos < bar)), 4) if len(pos) else None,
            "abstain_unanswerable": round(float(np.mean(neg < bar)), 4) if len(neg) else None,
            "quantile": ANSWERABLE_ABSTAIN,
            "context": CONTEXT,
            "seed": seed,
        },
    }
