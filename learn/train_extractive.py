"""Train the extractive answerer's sentence scorer (``sentence_scorer``) on training halves.

For every question of the training half of each set (split by document, as ``fathom eval
--split train``), the answerer's context is made exactly as ``ask`` makes it — the default
configuration, depth ``--k`` (4, as ``fixed:4``), reranker as configured — and every sentence
of it becomes a candidate with its features. The gold sentence is the one whose span in its
document covers the gold answer's character offsets (COVID-QA's ``answer_starts``; SQuAD's
answer inside its ``para_char_start``–``para_char_end`` paragraph); an answer longer than a
sentence marks every sentence it overlaps.

Then, numpy only:

* two linear rankers (``lexical``: the overlap, cue and position features; ``dense``: those
  plus the embedding similarities), each a softmax over a question's candidates fitted by
  cross-entropy against the gold sentences (Adam, L2);
* ``keep_ratio``: the share, relative to the best, a further sentence needs to be quoted, chosen
  on the training questions as the one maximising ``contains − EXTRA_COST × (quoted − 1)``;
* ``min_own``: the largest overlap floor — when no sentence holds that much of the question,
  nothing is supported and the answerer abstains — that keeps its abstentions on the
  (answerable) training questions at most ``MAX_ABSTAIN`` / 2;
* ``support``: a logistic calibration of the best candidate's score, share and overlap, and of
  the share of the question no candidate mentions, against whether the quote holds the answer
  — the confidence each answer states. It is fitted on the training sets and on the training
  half of ``--calibrate`` (SQuAD 2.0, whose unanswerable questions hold no answer anywhere);
  ``min_confidence``, under which the answerer abstains, is the largest that keeps abstentions
  on the answerable training questions at most ``MAX_ABSTAIN``. SQuAD 2.0's articles are
  SQuAD 1.1's, and the split is by article (the same hash of the same title), so no article of
  the SQuAD 1.1 test half is seen.

    python -m fathom.learn.train_extractive [--data DIR] \\
        [--sets squad_v1.1_dev,covidqa_200423] [--calibrate squad_v2.0_dev] [--split train] \\
        [--k 4] [--limit N] \\
        [--work DIR] [--out stages/generate/data/extractive_scorer.json]

Contexts and features are cached under ``--work`` (one ``.npz`` per set), so a retrain with
other settings reads them instead of answering again.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from fathom.core.base import source_id
from fathom.stages.generate.extractive import ExtractiveGenerator, candidates
from fathom.stages.generate.sentence_scorer import (
    DEFAULT_SCORER,
    DENSE_FEATURES,
    FEATURES,
    LEXICAL_FEATURES,
    Candidate,
    LinearModel,
    SentenceScorer,
    features,
    unmatched,
)

EXTRA_COST = 0.05  # contains a further quoted sentence must add to be worth quoting
MAX_ABSTAIN = 0.03
L2 = 1e-3
STEPS = 600
SETS = ("squad_v1.1_dev", "covidqa_200423")
CALIBRATE = ("squad_v2.0_dev",)


class _Recorder(ExtractiveGenerator):
    """The answerer, recording each context it is given (with every sentence's vector)."""

    def __init__(self, cfg) -> None:
        super().__init__(cfg, learned=False)
        self.seen: list[tuple[str, list, Any]] = []

    def generate(self, question, hits, on_token=None, time_budget_ms=None):
        cands = candidates(hits)
        cos = None
        if self._vectors is not None and cands:
            sv = self._vectors.embed([c.text for c in cands])
            qv = np.asarray(self._vectors.embed_query(question), dtype=np.float32).reshape(-1)
            cos = (sv @ qv).astype(np.float64)
        self.seen.append((question, list(hits), cos))
        return super().generate(question, hits, on_token, time_budget_ms)


def _gold_spans(raw: dict[str, Any], doc_text: str) -> list[tuple[int, int]]:
    """The gold answers' character spans in their document."""
    answers = [a for a in raw.get("answers") or [] if a]
    starts = raw.get("answer_starts")
    spans = []
    if starts:
        for a, s in zip(answers, starts, strict=False):
            if s is not None and s >= 0 and doc_text[s : s + len(a)] == a:
                spans.append((s, s + len(a)))
    lo, hi = raw.get("para_char_start"), raw.get("para_char_end")
    if not spans and lo is not None and hi is not None:
        for a in answers:
            at = doc_text.find(a, lo, hi)
            if at >= 0:
                spans.append((at, at + len(a)))
    return spans


def _labels(cands, hits, gold_docs, spans, docs: dict[str, str]) -> np.ndarray:
    """1 for the candidates whose document span covers a gold answer (else: overlaps one)."""
    cover = np.zeros(len(cands))
    overlap = np.zeros(len(cands))
    for i, c in enumerate(cands):
        chunk = hits[c.n - 1].chunk
        doc = source_id(chunk)  # a docs.jsonl record's own id
        if doc not in gold_docs:
            continue
        text = docs.get(doc, "")
        if text[chunk.char_start : chunk.char_end] != chunk.text:
            continue  # a condensed chunk: its offsets no longer map into the document
        a, b = chunk.char_start + c.span[0], chunk.char_start + c.span[1]
        for s, e in spans:
            if a <= s and e <= b:
                cover[i] = 1
            elif s < b and a < e:
                overlap[i] = 1
    return cover if cover.any() else overlap


def collect(data: Path, name: str, split: str, k: int, limit: int | None, work: Path) -> Path:
    """Answer the set's ``split`` questions as ``ask`` would at depth ``k``; cache the
    candidates' features and labels in ``work/<name>-<split>-k<k>.npz``."""
    from fathom.core.config import load_config
    from fathom.index.targets import resolve_target
    from fathom.learn.questions import read_set
    from fathom.stages.pipeline import Engine

    out = work / f"{name}-{split}-k{k}.npz"
    if out.is_file():
        return out
    work.mkdir(parents=True, exist_ok=True)
    cfg = load_config()
    docs, raw, questions = read_set(data / name, split)
    # Unanswerable questions (SQuAD 2.0) only calibrate the confidence: they have no gold.
    questions = [q for q in questions if q.answers or q.unanswerable][: limit or None]
    collection = resolve_target(cfg, str(data / name / "docs.jsonl"))
    recorder = _Recorder(cfg.generator)
    engine = Engine(cfg, collection, generator=recorder)
    collected = _Collected(raw, docs)
    t0 = time.perf_counter()
    for i, q in enumerate(questions, 1):
        recorder.seen.clear()
        engine.answer(engine.prepare(q.question, depth=k), k=k, feedback=False)
        if not recorder.seen or not collected.add(q, *recorder.seen[0]):
            continue
        if i % 100 == 0:
            rate = i / (time.perf_counter() - t0)
            print(f"{name}: {i}/{len(questions)} questions ({rate:.1f}/s)", file=sys.stderr)
    engine.close()
    collected.save(out)
    return out


class _Collected:
    """The candidates collected so far, question by question: their features and labels (the
    ``.npz``) and their texts (the ``.json`` beside it)."""

    def __init__(self, raw: dict[str, dict[str, Any]], docs: dict[str, str]) -> None:
        self.raw = raw
        self.docs = docs
        self.rows: dict[str, list] = {
            key: [] for key in ("x", "gold", "hit", "quotable", "own", "dense")
        }
        self.offsets: list[int] = [0]
        self.texts: list[list] = []
        self.qids: list[list] = []

    def add(self, q: Any, question: str, hits: list, cos: Any) -> bool:
        """Add the candidates of the context the answerer read for ``q``; False when it has
        none, or the question no answer terms."""
        from fathom.core.words import answer_terms
        from fathom.feedback.judges import contains

        cands = candidates(hits)
        wanted = answer_terms(question)
        if not cands or not wanted:
            return False
        x, own = features(question, wanted, cands, cos)
        docs = self.docs
        spans = _gold_spans(self.raw[q.qid], docs.get(q.doc_ids[0], "")) if q.doc_ids else []
        rows = self.rows
        rows["x"].append(x)
        rows["gold"].append(_labels(cands, hits, set(q.doc_ids), spans, docs))
        rows["hit"].append(np.array([contains(c.text, q.answers) or 0.0 for c in cands]))
        rows["quotable"].append(np.array([c.quotable for c in cands]))
        rows["own"].append(own)
        rows["dense"].append(np.full(len(cands), cos is not None))
        self.offsets.append(self.offsets[-1] + len(cands))
        self.texts.append(
            [
                [c.n, c.pos, c.text, source_id(hits[c.n - 1].chunk), hits[c.n - 1].chunk.char_start]
                for c in cands
            ]
        )
        self.qids.append([q.qid, list(q.answers), q.question, q.unanswerable])
        return True

    def save(self, out: Path) -> None:
        np.savez(
            out,
            **{key: np.concatenate(v) if v else np.zeros(0) for key, v in self.rows.items()},
            offsets=np.asarray(self.offsets, dtype=np.int64),
        )
        out.with_suffix(".json").write_text(
            json.dumps({"questions": self.qids, "candidates": self.texts}), encoding="utf-8"
        )


class Data:
    """The cached candidates of one or more sets, question by question."""

    def __init__(self, paths: list[Path]) -> None:
        parts = [np.load(p, allow_pickle=False) for p in paths]
        meta = [json.loads(p.with_suffix(".json").read_text(encoding="utf-8")) for p in paths]
        self.x = np.concatenate([p["x"] for p in parts])
        self.gold = np.concatenate([p["gold"] for p in parts])
        self.hit = np.concatenate([p["hit"] for p in parts])
        self.quotable = np.concatenate([p["quotable"] for p in parts]).astype(bool)
        self.own = np.concatenate([p["own"] for p in parts])
        offsets, base = [0], 0
        for p in parts:
            o = p["offsets"]
            offsets += list(o[1:] + base)
            base += int(o[-1])
        self.offsets = np.asarray(offsets)
        self.questions = [q for m in meta for q in m["questions"]]
        self.candidates = [c for m in meta for c in m["candidates"]]
        self.unanswerable = np.array([bool(q[3]) if len(q) > 3 else False for q in self.questions])
        self.set_of = np.concatenate([np.full(len(m["questions"]), i) for i, m in enumerate(meta)])

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def rows(self, i: int) -> slice:
        return slice(int(self.offsets[i]), int(self.offsets[i + 1]))


def _fit_ranker(data: Data, columns: list[int], seed: int = 0) -> LinearModel:
    """A linear softmax ranker over ``columns``: cross-entropy against the gold sentences of
    the questions that have one among their quotable candidates."""
    rng = np.random.default_rng(seed)
    groups = []
    for i in range(len(data)):
        r = data.rows(i)
        idx = np.arange(r.start, r.stop)[data.quotable[r]]
        if len(idx) > 1 and data.gold[idx].any():
            groups.append(idx)
    idx = np.concatenate(groups)
    x = data.x[idx][:, columns]
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    z = (x - mean) / scale
    seg = np.repeat(np.arange(len(groups)), [len(g) for g in groups])
    starts = np.cumsum([0] + [len(g) for g in groups[:-1]])
    target = data.gold[idx].astype(np.float64)
    target /= np.add.reduceat(target, starts)[seg]
    w = rng.normal(0, 0.01, z.shape[1])
    m1 = np.zeros_like(w)
    m2 = np.zeros_like(w)
    for step in range(1, STEPS + 1):
        s = z @ w
        s -= np.maximum.reduceat(s, starts)[seg]
        e = np.exp(s)
        p = e / np.add.reduceat(e, starts)[seg]
        grad = z.T @ (p - target) / len(groups) + L2 * w
        m1 = 0.9 * m1 + 0.1 * grad
        m2 = 0.999 * m2 + 0.001 * grad * grad
        w -= 0.05 * (m1 / (1 - 0.9**step)) / (np.sqrt(m2 / (1 - 0.999**step)) + 1e-8)
    return LinearModel(tuple(columns), mean, scale, w)


def _choices(data: Data, model: LinearModel, i: int, keep_ratio: float, min_own: float):
    """What the answerer would quote for question ``i``: candidate rows, best first, and the
    best's ``(score, share, own)`` (None when no sentence is supported)."""
    r = data.rows(i)
    rows = np.arange(r.start, r.stop)
    keep = rows[data.quotable[r]]
    if len(keep) == 0 or data.own[keep].max() < min_own:
        return [], None
    s = model.scores(data.x[keep])
    e = np.exp(s - s.max())
    share = e / e.sum()
    order = np.argsort(-s, kind="stable")
    best = order[0]
    chosen = [keep[j] for j in order[:3] if share[j] >= keep_ratio * share[best]]
    return chosen, (float(s[best]), float(share[best]), float(data.own[keep[best]]))


def _quoted_contains(data: Data, i: int, chosen) -> float:
    from fathom.feedback.judges import contains

    if not chosen or data.unanswerable[i]:
        return 0.0
    base = int(data.offsets[i])
    text = " ".join(data.candidates[i][int(j) - base][2] for j in chosen)
    return contains(text, data.questions[i][1]) or 0.0


def _unmatched(data: Data, i: int) -> float:
    """``sentence_scorer.unmatched`` of question ``i``, from its cached sentences."""
    from fathom.core.words import answer_terms

    question = data.questions[i][2]
    cands = [
        Candidate(n, pos, 0, text, answer_terms(text), frozenset(), True, frozenset())
        for n, pos, text, *_ in data.candidates[i]
    ]
    return unmatched(answer_terms(question), cands, question)


def _fit_support(features_: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Logistic regression ``σ(c · (1, features))`` by Newton's method (L2 1e-3)."""
    x = np.column_stack([np.ones(len(features_)), features_])
    c = np.zeros(x.shape[1])
    for _ in range(50):
        p = 1 / (1 + np.exp(-np.clip(x @ c, -30, 30)))
        g = x.T @ (p - labels) + 1e-3 * c
        h = (x * (p * (1 - p))[:, None]).T @ x + 1e-3 * np.eye(x.shape[1])
        step = np.linalg.solve(h, g)
        c -= step
        if np.abs(step).max() < 1e-8:
            break
    return c


def evaluate(data: Data, model: LinearModel, keep_ratio: float, min_own: float):
    """``(contains, mean quoted sentences, abstained share)`` over the answerable questions
    (abstaining by ``min_own`` alone)."""
    got, quoted, abstained = [], [], 0
    answerable = [i for i in range(len(data)) if not data.unanswerable[i]]
    for i in answerable:
        chosen, best = _choices(data, model, i, keep_ratio, min_own)
        abstained += best is None
        quoted.append(len(chosen))
        got.append(_quoted_contains(data, i, chosen))
    n = max(1, len(answerable))
    return float(np.mean(got)), float(np.mean(quoted)), abstained / n


def _support_rows(data: Data, model: LinearModel, keep_ratio: float, min_own: float):
    """Per question: the support features of its best candidate (None when nothing is
    supported) and whether the quote holds the answer."""
    rows = []
    for i in range(len(data)):
        chosen, best = _choices(data, model, i, keep_ratio, min_own)
        feats = None if best is None else (*best, _unmatched(data, i))
        rows.append((feats, _quoted_contains(data, i, chosen), bool(data.unanswerable[i])))
    return rows


def train(
    paths: list[Path], trained_on: dict[str, Any], calibrate: list[Path] = ()
) -> tuple[SentenceScorer, dict]:
    """The rankers, ``min_own`` and ``keep_ratio`` from ``paths``; the support calibration and
    ``min_confidence`` from ``paths`` and ``calibrate`` (sets with unanswerable questions)."""
    data = Data(paths)
    lexical = [FEATURES.index(f) for f in LEXICAL_FEATURES]
    dense = lexical + [FEATURES.index(f) for f in DENSE_FEATURES]
    models = {"lexical": _fit_ranker(data, lexical), "dense": _fit_ranker(data, dense)}
    report: dict[str, Any] = {"questions": len(data)}
    best_own = _choose_min_own(data, models["dense"])
    best_ratio, report["keep_ratio_grid"] = _choose_keep_ratio(data, models["dense"], best_own)
    calib = Data(list(paths) + list(calibrate)) if calibrate else data
    support, thresholds = {}, {}
    for name, model in models.items():
        rows = _support_rows(calib, model, best_ratio, best_own)
        fitted = [(f, y) for f, y, _ in rows if f is not None]
        support[name] = _fit_support(
            np.asarray([f for f, _ in fitted]), np.asarray([y for _, y in fitted])
        )
        probe = SentenceScorer(models, {name: support[name]}, best_ratio, best_own, 0.0, {})
        thresholds[name], report[name] = _min_confidence(probe, name, rows, len(data))
    scorer = SentenceScorer(
        models=models,
        support=support,
        keep_ratio=best_ratio,
        min_own=best_own,
        min_confidence=min(thresholds.values()),
        meta={
            "kind": "extractive-sentence-scorer",
            "trained_on": trained_on,
            "training": report,
            "extra_cost": EXTRA_COST,
            "max_abstain": MAX_ABSTAIN,
        },
    )
    return scorer, report


def _choose_min_own(data: Data, model: LinearModel) -> float:
    """min_own: the largest overlap floor that keeps abstentions at most MAX_ABSTAIN / 2."""
    best_own = 0.0
    for floor in np.round(np.arange(0.0, 0.61, 0.05), 2):
        _, _, abst = evaluate(data, model, 1.0, float(floor))
        if abst <= MAX_ABSTAIN / 2:
            best_own = float(floor)
    return best_own


def _choose_keep_ratio(
    data: Data, model: LinearModel, min_own: float
) -> tuple[float, dict[str, dict[str, float]]]:
    """keep_ratio: contains against the sentences it quotes; and every ratio tried."""
    best_ratio, best_value = 1.0, -1.0
    grid = {}
    for ratio in (1.0, 0.8, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.05):
        c, q, _ = evaluate(data, model, ratio, min_own)
        grid[str(ratio)] = {"contains": round(c, 4), "quoted": round(q, 3)}
        value = c - EXTRA_COST * (q - 1)
        if value > best_value + 1e-9:
            best_ratio, best_value = ratio, value
    return best_ratio, grid


def _min_confidence(
    probe: SentenceScorer, name: str, rows: list, n_data: int
) -> tuple[float, dict[str, Any]]:
    """min_confidence for the ``name`` ranker: the largest that keeps abstentions on the
    answerable training questions (the first ``n_data`` of ``rows``) at most MAX_ABSTAIN; and
    its report."""

    def conf(f):
        return probe.confidence(name, *f)

    answerable = [(f, y) for f, y, u in rows[:n_data] if not u]
    unanswerable = [f for f, _, u in rows if u]
    chosen_t = 0.0
    for t in np.round(np.arange(0.0, 0.61, 0.02), 2):
        abst = sum(f is None or conf(f) < t for f, _ in answerable) / max(1, len(answerable))
        if abst <= MAX_ABSTAIN:
            chosen_t = float(t)
    kept = [y for f, y in answerable if f is not None and conf(f) >= chosen_t]
    return chosen_t, {
        "contains": round(sum(kept) / max(1, len(answerable)), 4),
        "abstained": round(1 - len(kept) / max(1, len(answerable)), 4),
        "min_confidence": chosen_t,
        "unanswerable_abstained": round(
            sum(f is None or conf(f) < chosen_t for f in unanswerable) / len(unanswerable), 4
        )
        if unanswerable
        else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("FATHOM_DATA", "data")))
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument(
        "--calibrate",
        default=",".join(CALIBRATE),
        help="sets with unanswerable questions, for the confidence and abstention only",
    )
    parser.add_argument("--split", default="train", choices=("train", "test"))
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--limit", type=int, default=None, help="questions per set")
    parser.add_argument("--work", type=Path, default=Path("extractive-train"))
    parser.add_argument("--out", type=Path, default=DEFAULT_SCORER)
    args = parser.parse_args(argv)
    if args.split != "train":
        print("train on the training halves (--split train)", file=sys.stderr)
        return 2
    names = [s for s in args.sets.split(",") if s]
    calibrate = [s for s in args.calibrate.split(",") if s]
    paths = [collect(args.data, n, args.split, args.k, args.limit, args.work) for n in names]
    extra = [collect(args.data, n, args.split, args.k, args.limit, args.work) for n in calibrate]
    trained_on = {
        "sets": [f"$FATHOM_DATA/{n}" for n in names],
        "calibrated_on": [f"$FATHOM_DATA/{n}" for n in calibrate],
        "split": args.split,
        "split_seed": 0,
        "k": args.k,
        "limit": args.limit,
    }
    scorer, report = train(paths, trained_on, extra)
    scorer.save(args.out)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
