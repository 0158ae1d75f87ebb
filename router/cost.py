"""What a chunk of context costs, in the unit the answering backend pays in, and what one point
of answer recall is worth to the user (``retrieval.prefer``).

A learned depth policy maximises P(enough by k) − weight · tokens(k): the probability that the
first k chunks hold the answer, less the price of reading them. ``ReadingCost`` says what that
price is for the backend that will answer:

* **seconds** for a local model whose prompt speed was measured on this machine (llama.cpp from
  its own prompt evaluations, Ollama from the ``prompt_eval_duration`` of its replies): a chunk
  of 200 tokens at 7 ms per token is 1.4 s of waiting;
* **money** for a model in the price table (``prices.models``, per million input tokens);
* **context tokens** otherwise — the extractive answerer (which reads in microseconds) and
  backends whose speed is not known yet — priced at the policy's own trained λ.

``prefer`` (``quality | balanced | fast``) says how much one point (0.01) of answer recall is
worth: ``WORTH`` below, in each unit. Only the sources' tokens are priced: the instructions and
the question cost the same at every depth.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fathom.core.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np

PREFERENCES = ("quality", "balanced", "fast")

# What one point (0.01) of answer recall is worth, per preference: seconds of waiting for a
# local model, cents for an API. With token pricing, a multiple of the policy's trained λ: the
# shipped forest's λ = 0.01 prices one point at 1,000 context tokens for quality, 250 when
# balanced, 100 for fast. Balanced is the largest λ at which the shipped forest, in
# cross-validation on its training halves, keeps SQuAD's and COVID-QA's answer recall within one
# point of their best fixed k up to 8 (docs/depth-policies.md); the extractive answer's quality
# levels off after a few chunks, so reading more buys it little.
WORTH: dict[str, dict[str, float]] = {
    "s": {"quality": 5.0, "balanced": 1.0, "fast": 0.25},
    "cents": {"quality": 0.1, "balanced": 0.02, "fast": 0.005},
}
TOKEN_SCALE = {"quality": 1.0, "balanced": 4.0, "fast": 10.0}  # × the policy's λ


def check_preference(prefer: str) -> str:
    if prefer not in PREFERENCES:
        raise ConfigError(f"retrieval.prefer = {prefer!r}: use one of {', '.join(PREFERENCES)}")
    return prefer


@dataclass(frozen=True, slots=True)
class ReadingCost:
    """The price of one context token in ``unit`` (``"tokens"``, ``"s"`` or ``"cents"``),
    where that price comes from (``basis``, for the report) and the user's ``prefer``."""

    prefer: str = "balanced"
    unit: str = "tokens"
    per_token: float = 1.0
    basis: str = "context tokens"
    currency: str = ""

    def __post_init__(self) -> None:
        check_preference(self.prefer)
        if self.unit not in ("tokens", *WORTH):
            raise ConfigError(f"reading cost unit {self.unit!r}: tokens, s or cents")
        if self.per_token < 0:
            raise ConfigError(f"reading cost {self.per_token} {self.unit} per token: below 0")

    @classmethod
    def seconds(cls, prefer: str, ms_per_token: float, basis: str) -> ReadingCost:
        return cls(prefer, "s", ms_per_token / 1000.0, basis)

    @classmethod
    def money(cls, prefer: str, per_million: float, currency: str, basis: str) -> ReadingCost:
        return cls(prefer, "cents", per_million / 1e6 * 100.0, basis, currency)

    def weight(self, policy_lambda: float) -> float:
        """P(enough) given up per context token: the policy's λ / 1000 (scaled by the
        preference) with token pricing, else one point per ``WORTH`` units."""
        if self.unit == "tokens":
            return policy_lambda * TOKEN_SCALE[self.prefer] / 1000.0
        return 0.01 * self.per_token / WORTH[self.unit][self.prefer]

    def amount(self, tokens: float) -> float:
        """What reading ``tokens`` context tokens costs, in ``unit``."""
        return tokens * self.per_token

    def format(self, amount: float) -> str:
        """``amount`` in words: "1.2 s", "0.03 ¢ (USD)", "1,200 tokens"."""
        if self.unit == "s":
            return f"{amount:.2g} s" if abs(amount) < 10 else f"{amount:.0f} s"
        if self.unit == "cents":
            return f"{amount:.2g} ¢" + (f" ({self.currency})" if self.currency else "")
        return f"{amount:,.0f} tokens"

    def worth_text(self, policy_lambda: float, share: float = 1.0) -> str:
        """What one point of answer recall is worth, in words, to a question that pays
        ``share`` of the price (a multi-hop one at the forest's ``multi_hop_price``)."""
        if self.unit == "tokens":
            weight = max(self.weight(policy_lambda) * share, 1e-12)
            return f"{self.format(0.01 / weight)} of context"
        return self.format(WORTH[self.unit][self.prefer] / share)

    def to_dict(self) -> dict[str, Any]:
        return {
            "prefer": self.prefer,
            "unit": self.unit,
            "per_token": self.per_token,
            "basis": self.basis,
            **({"currency": self.currency} if self.currency else {}),
        }


def trade_line(
    cost: ReadingCost,
    policy_lambda: float,
    budgets: tuple[int, ...] | list[int],
    cum: list[float],
    tokens: list[float],
    i: int,
    share: float = 1.0,
) -> str:
    """The chosen depth's trade in the cost's unit: "k = 3: about 1.2 s of reading, P(enough)
    0.93; k = 20 would add 5.8 s for +0.02 (prefer = balanced: one point of answer recall is
    worth 1 s; 6.9 ms per prompt token, measured here)". The comparison is with the deepest
    budget, or, when that was chosen, with the one just below it; ``share``: the part of the
    price this question pays (``worth_text``)."""
    j = len(budgets) - 1 if i < len(budgets) - 1 else max(0, i - 1)
    here = f"k = {budgets[i]}: about {cost.format(cost.amount(tokens[i]))} of reading"
    here += f", P(enough) {cum[i]:.2f}"
    if j != i:
        delta = cost.amount(tokens[j]) - cost.amount(tokens[i])
        verb = "would add" if delta >= 0 else "would save"
        here += f"; k = {budgets[j]} {verb} {cost.format(abs(delta))} for {cum[j] - cum[i]:+.2f}"
    worth = cost.worth_text(policy_lambda, share)
    return f"{here} (prefer = {cost.prefer}: one point of answer recall is worth {worth}; " + (
        f"{cost.basis})"
    )


def pricing(policy_lambda: float) -> dict[str, dict[str, str]]:
    """What one point of answer recall is worth at each preference, in each unit (for
    ``fathom policy show``)."""
    return {
        prefer: {
            "local model (seconds of reading)": ReadingCost.seconds(prefer, 1.0, "").worth_text(
                policy_lambda
            ),
            "priced API (cents)": ReadingCost.money(prefer, 1.0, "", "").worth_text(policy_lambda),
            "extractive or unmeasured (context tokens)": ReadingCost(prefer).worth_text(
                policy_lambda
            ),
        }
        for prefer in PREFERENCES
    }


def explain(policy_lambda: float) -> str:
    """The cost model in a paragraph a user can act on."""
    table = pricing(policy_lambda)
    per = "; ".join(
        f"{p} {' / '.join(v.split(' of ')[0] for v in table[p].values())}" for p in PREFERENCES
    )
    return (
        "This policy takes, per question, the depth k that maximises P(the first k chunks hold "
        "the answer) minus the cost of reading them — this question's own chunks, whose lengths "
        "the first retrieval already knows — in the answering model's own unit: seconds "
        "at the prompt speed measured on this machine (llama.cpp, Ollama; kept in "
        "FATHOM_HOME/models/prompt-speed.json), cents at the input price of prices.models for an "
        "API model, context tokens for the extractive answerer and for a model whose speed is "
        "not measured yet. --prefer (retrieval.prefer) says what one point of answer recall is "
        f"worth — seconds / cents / tokens: {per}. A slow local model therefore reads fewer "
        "chunks than a fast one; the report's Trade line says what the chosen k costs and what "
        "the deepest would add. To get deeper answers use --prefer quality, to wait less "
        "--prefer fast, or fix the depth with --k."
    )


def _head_sums(chunk_tokens: Sequence[int], budgets: Sequence[int]) -> list[tuple[int, int]]:
    """For each budget b: the tokens of the first b chunks and how many there are (fewer where
    the probe found fewer). Plain Python: it runs in every decision, where numpy's per-call
    overhead would be most of its cost."""
    cum = [0]
    for t in chunk_tokens:
        cum.append(cum[-1] + int(t))
    heads = []
    for b in budgets:
        n = min(int(b), len(chunk_tokens))
        heads.append((cum[n], n))
    return heads


def probe_sums(
    chunk_tokens: Sequence[Sequence[int]], budgets: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    """``_head_sums`` of many questions (each a list of its probed chunks' token counts, in
    rank order): sums and counts as two ``(n_questions, n_budgets)`` float arrays."""
    import numpy as np

    heads = np.array([_head_sums(toks, budgets) for toks in chunk_tokens], dtype=np.float64)
    heads = heads.reshape(len(chunk_tokens), len(budgets), 2)
    return heads[:, :, 0], heads[:, :, 1]


@dataclass(frozen=True, slots=True)
class ContextTokens:
    """The context tokens one question's depth k will cost, from its own probe:
    ``scale`` × the stored token counts of its first k probed chunks + ``per_source`` × k.

    A budget's mean over a training sweep prices every question alike, but a HotpotQA paragraph
    holds a third fewer tokens than a SQuAD chunk: priced at the mean, a question of short
    chunks reads too little, and one of long chunks too much. The two coefficients are fitted
    (non-negative least squares) on a sweep's measured context tokens, so they absorb what
    turns a chunk into a source: the answerer's tokenizer against the chunker's count, the
    source's header, and the reranker's preference for longer chunks among the probe's."""

    scale: float
    per_source: float

    def estimate(self, sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """Expected context tokens, the shape of ``sums`` (``probe_sums``)."""
        return self.scale * sums + self.per_source * counts

    def for_probe(self, chunk_tokens: Sequence[int], budgets: Sequence[int]) -> list[float]:
        """One question's expected context tokens at each budget."""
        return [self.scale * t + self.per_source * n for t, n in _head_sums(chunk_tokens, budgets)]

    @classmethod
    def fit(cls, sums: np.ndarray, counts: np.ndarray, tokens: np.ndarray) -> ContextTokens:
        """Non-negative least squares of measured ``tokens`` on ``sums`` and ``counts`` (same
        shapes), through the origin (no chunk, no tokens); budgets with no source are left out.
        Non-negative: where chunks are all of a size the two columns are nearly collinear, and
        a free fit could price a longer chunk lower."""
        import numpy as np

        keep = np.asarray(counts, dtype=np.float64).ravel() > 0
        if not keep.any():
            raise ConfigError("no question read any chunk: nothing to fit context tokens on")
        a = np.stack([np.ravel(sums)[keep], np.ravel(counts)[keep]], axis=1).astype(np.float64)
        y = np.ravel(tokens)[keep].astype(np.float64)
        coef = np.linalg.lstsq(a, y, rcond=None)[0]
        if (coef < 0).any():  # the best fit on one column alone, the other at zero
            fits = [(col, max(0.0, float(a[:, col] @ y / max(a[:, col] @ a[:, col], 1e-12))))
                    for col in (0, 1)]  # fmt: skip
            col, c = min(fits, key=lambda f: float(((a[:, f[0]] * f[1] - y) ** 2).sum()))
            coef = np.array([c, 0.0] if col == 0 else [0.0, c])
        return cls(float(coef[0]), float(coef[1]))

    def to_dict(self) -> dict[str, float]:
        return {"scale": self.scale, "per_source": self.per_source}

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> ContextTokens | None:
        if not d:
            return None
        return cls(float(d["scale"]), float(d["per_source"]))
