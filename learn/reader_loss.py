"""The reader's training loss: each window's span and relevance, and, with ``--group-loss``,
one term per question across its windows.

Per window: cross-entropy of the gold start and end token (``[CLS]``, position 0, when the
window holds no answer; positions past ``MAX_ANSWER_TOKENS`` teach relevance only) plus binary
cross-entropy of relevance. That teaches each window on its own whether it holds an answer,
but the answerer compares windows: it answers with the best span margin over no-answer among
every window of every source (``stages/generate/span.py``), and a wrong passage's best margin
beating the right one's is where most of its misses at k = 4 come from. The group term trains
that comparison directly: over a question's windows, a softmax of the positive window's gold
span margin against each negative window's best span margin (start + end − no-answer's, the
score the answerer decodes), whose cross-entropy puts the gold span first.
"""

from __future__ import annotations

from typing import Any

from fathom.index.reader import MAX_ANSWER_TOKENS
from fathom.learn.reader_examples import IGNORE


def window_loss(start: Any, end: Any, rel: Any, t: dict[str, Any]) -> tuple[Any, Any, Any]:
    """``(span + relevance loss, span loss, relevance loss)`` of a batch's windows."""
    import torch

    ce = torch.nn.functional.cross_entropy
    span = (ce(start, t["start"], ignore_index=IGNORE) + ce(end, t["end"], ignore_index=IGNORE)) / 2
    if torch.isnan(span):  # a batch whose every example teaches relevance only
        span = torch.zeros(())
    rel_loss = torch.nn.functional.binary_cross_entropy_with_logits(rel, t["relevant"])
    return span + rel_loss, span, rel_loss


def best_margins(start: Any, end: Any, passage: Any) -> Any:
    """Each window's best span score minus no-answer's (``index.reader.best_spans``, in torch)."""
    import torch

    n, width = start.shape
    low = torch.finfo(start.dtype).min / 4
    s = start.masked_fill(~passage, low)
    e = end.masked_fill(~passage, low)
    i = torch.arange(width)
    band = (i[None, :] >= i[:, None]) & (i[None, :] - i[:, None] < MAX_ANSWER_TOKENS)
    pair = (s[:, :, None] + e[:, None, :]).masked_fill(~band, low)
    return pair.reshape(n, -1).max(dim=1).values - (start[:, 0] + end[:, 0])


def group_loss(start: Any, end: Any, t: dict[str, Any]) -> Any:
    """Mean over the batch's questions with a positive window whose answer it can point to
    (``t["group"]`` numbers each window's question) of −log softmax of the gold span's margin
    among it and the question's negative windows' best margins; 0 without such a question."""
    import torch

    rows = torch.arange(len(start))
    gold_start, gold_end = t["start"].clamp(min=0), t["end"].clamp(min=0)
    null = start[:, 0] + end[:, 0]
    gold = start[rows, gold_start] + end[rows, gold_end] - null
    best = best_margins(start, end, t["passage"])
    pointed = (t["start"] > 0) & (t["relevant"] > 0.5)
    negative = t["relevant"] < 0.5
    losses = []
    for g in torch.unique(t["group"]):
        mine = t["group"] == g
        pos = torch.nonzero(mine & pointed).flatten()
        negs = torch.nonzero(mine & negative).flatten()
        if not len(pos) or not len(negs):
            continue
        scores = torch.cat([gold[pos[:1]], best[negs]])
        losses.append(torch.logsumexp(scores, dim=0) - scores[0])
    return torch.stack(losses).mean() if losses else torch.zeros(())


def loss(model: Any, b: dict[str, Any], weight: float = 0.0) -> tuple[Any, float, float]:
    """The batch's loss (``weight`` × the group term added), its span and relevance parts."""
    import torch

    t = {k: torch.from_numpy(v) for k, v in b.items()}
    start, end, rel = model(t["input_ids"], t["attention_mask"], t["token_type_ids"])
    total, span, rel_loss = window_loss(start, end, rel, t)
    if weight:
        total = total + weight * group_loss(start.float(), end.float(), t)
    return total, span.item(), rel_loss.item()
