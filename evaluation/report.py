"""The evaluation summary as table rows (``tables.eval_table`` draws them in the terminal) and as a
self-contained ``report.md``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from fathom.evaluation.summary import get_path

MISSING = "–"

COLUMNS = (
    "strategy",
    "n",
    "quality [95% CI]",
    "by document",
    "Δ by document",
    "EM",
    "F1",
    "answer recall",
    "mean k",
    "context tok",
    "prompt+compl tok",
    "cost/1k",
    "P50 ms",
    "P95 ms",
    "SLO %",
    "win/tie/loss",
)

# Pipeline order for the per-stage table; stages not listed follow in order of appearance.
_STAGE_ORDER = (
    "embed",
    "classify",
    "probe",
    "hop",
    "decide",
    "rerank",
    "compress",
    "generate",
    "feedback",
)

_CAPTIONS = {
    "pareto.png": (
        "Quality vs tokens",
        "Mean quality against mean total tokens per question; the dashed step is the Pareto "
        "front, the star the baseline, bars 95% CIs.",
    ),
    "latency_cdf.png": (
        "Latency CDF",
        "Share of questions answered within a given total latency; the dashed line is the SLO.",
    ),
    "actions.png": (
        "Depth actions",
        "Share of questions at each retrieval depth per strategy (skip = no retrieval).",
    ),
    "cost.png": (
        "Cost per 1,000 questions",
        "Cost per 1,000 questions per strategy (tokens per 1,000 when every cost is 0).",
    ),
}


def summary_rows(summary: dict) -> list[list[str]]:
    """One row of formatted cells per strategy, in ``COLUMNS`` order (missing values ``–``)."""
    baseline = get_path(summary, "run", "baseline")
    rows = []
    for name, s in (summary.get("strategies") or {}).items():
        prompt = get_path(s, "tokens", "prompt", "mean")
        completion = get_path(s, "tokens", "completion", "mean")
        slo = get_path(s, "slo_compliance", "mean")
        rows.append(
            [
                name,
                _fmt(s.get("n"), "d"),
                _fmt_ci(get_path(s, "metrics", "quality")),
                _fmt_interval(get_path(s, "metrics_documents", "quality")),
                MISSING
                if name == baseline
                else _fmt_interval(get_path(s, "vs_baseline", "quality_diff_documents"), True),
                _fmt(get_path(s, "metrics", "em", "mean"), ".3f"),
                _fmt(get_path(s, "metrics", "f1", "mean"), ".3f"),
                _fmt(get_path(s, "metrics", "answer_recall", "mean"), ".3f"),
                _fmt(get_path(s, "k", "mean"), ".2f"),
                _fmt(get_path(s, "tokens", "context", "mean"), ".0f"),
                _fmt(None if prompt is None or completion is None else prompt + completion, ".0f"),
                _fmt(get_path(s, "cost", "per_1000"), ".4f"),
                _fmt(get_path(s, "latency_ms", "p50"), ".1f"),
                _fmt(get_path(s, "latency_ms", "p95"), ".1f"),
                _fmt(None if slo is None else 100 * slo, ".1f"),
                _fmt_wtl(s.get("vs_baseline"), is_baseline=name == baseline),
            ]
        )
    return rows


def table_data(summary: dict) -> tuple[str, tuple[str, ...], list[list[str]]]:
    """The per-strategy comparison as the terminal draws it (``tables.eval_table``): its title
    (the judge and question count), columns and rows."""
    return title(summary), COLUMNS, summary_rows(summary)


def write_report(out_dir: Path, summary: dict, plots: list[Path]) -> Path:
    """Write ``out_dir/report.md``: settings, results, stage latencies, plots, how to read it."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    run = summary.get("run") or {}
    lines = ["# Fathom evaluation report", "", title(summary) + ".", ""]

    lines += ["## Run settings", "", *_settings_table(summary), ""]
    fitted = run.get("fitted") or {}
    if fitted:
        lines += ["### Fitted thresholds", "", *_fitted_table(fitted), ""]

    lines += ["## Results", "", *_md_table(list(COLUMNS), summary_rows(summary)), ""]

    answers = _answers_table(summary)
    if answers:
        lines += ["## How the answers ended", "", *answers, ""]

    stage_table = _stage_table(summary)
    if stage_table:
        lines += ["## Latency by stage", "", "P50 / P95 in milliseconds.", "", *stage_table, ""]

    if plots:
        lines += ["## Plots", ""]
        for plot in plots:
            plot = Path(plot)
            alt, caption = _CAPTIONS.get(plot.name, (plot.stem.replace("_", " "), ""))
            link = _relative_link(plot, out_dir)
            lines += [f"![{alt}]({link})", ""]
            if caption:
                lines += [f"*{caption}*", ""]

    baseline = run.get("baseline")
    lines += [
        "## How to read this",
        "",
        f"- Quality is the judge's score (`{run.get('judge') or '?'}`), averaged per strategy; "
        "EM, F1 and answer recall follow SQuAD answer normalisation.",
        f"- Intervals are 95% percentile bootstrap CIs ({run.get('bootstrap') or '?'} resamples, "
        f"seed {run.get('seed')}); means skip questions where a metric does not apply. "
        '"by document" resamples documents with their questions kept together: questions '
        "about one document are not independent, so a claim that one strategy beats another "
        "rests on that interval (Δ: the paired difference from the baseline's quality).",
        f"- win/tie/loss compares each strategy with the baseline (`{baseline}`) question by "
        "question (paired): a win is a higher quality on the same question.",
        "- Token counts are means per question; cost/1k is the cost of 1,000 questions; SLO % is "
        "the share of questions answered within the latency SLO.",
        f"- A missing value ({MISSING}) means the metric does not apply to this run.",
        "",
    ]
    path = out_dir / "report.md"
    with path.open("w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(lines))
    return path


# ---------------------------------------------------------------------------------------------
# report sections
# ---------------------------------------------------------------------------------------------


def title(summary: dict) -> str:
    """The run's title: its judge and how many questions it asked."""
    judge = get_path(summary, "run", "judge") or "?"
    n = summary.get("n_questions")
    if n is None:
        n = get_path(summary, "run", "n_questions")
    return f"Fathom eval — judge: {judge}, {n if n is not None else '?'} questions"


def _settings_table(summary: dict) -> list[str]:
    run = summary.get("run") or {}
    gen = run.get("generator") or {}
    generator = gen.get("backend") or MISSING
    if gen.get("model") and gen.get("model") != gen.get("backend"):
        generator += f" ({gen['model']})"
    questions = str(run.get("questions") or MISSING)
    if run.get("n_questions") is not None:
        questions += f" ({run['n_questions']} evaluated"
        if run.get("n_fit_questions"):
            questions += f", {run['n_fit_questions']} for fitting"
        questions += ")"
    slo = run.get("slo_ms")
    settings = [
        ("collection", run.get("collection")),
        ("documents", run.get("docs")),
        ("questions", questions),
        ("strategies", ", ".join(f"`{s}`" for s in run.get("strategies") or []) or None),
        ("baseline", f"`{run['baseline']}`" if run.get("baseline") else None),
        ("generator", generator),
        ("judge", run.get("judge")),
        ("latency SLO", f"{slo:g} ms" if slo is not None else "none"),
        ("seed", run.get("seed")),
        ("bootstrap resamples", run.get("bootstrap")),
        ("fathom version", run.get("fathom_version")),
        ("created", run.get("created")),
    ]
    return _md_table(
        ["setting", "value"],
        [[k, MISSING if v is None else str(v)] for k, v in settings],
        numeric=False,
    )


def _fitted_table(fitted: dict) -> list[str]:
    keys: list[str] = []
    for params in fitted.values():
        for key in params or {}:
            if key not in keys:
                keys.append(key)
    rows = [
        [name, *(_fmt_any((params or {}).get(k)) for k in keys)] for name, params in fitted.items()
    ]
    return _md_table(["strategy", *keys], rows)


def _answers_table(summary: dict) -> list[str]:
    """Per strategy, the shares of answers that abstained and that gave a span marked unsure
    (the extractive answerer under its reader's bar), by kind when some questions are
    unanswerable; nothing for a summary without them."""
    strategies = summary.get("strategies") or {}
    if not any("answers" in s for s in strategies.values()):
        return []
    kinds = any("unanswerable" in (s.get("answers") or {}) for s in strategies.values())
    header = ["strategy", "abstained", "marked unsure"]
    if kinds:
        header += [f"{what}, {kind}" for kind in ("unanswerable", "answerable")
                   for what in ("abstained", "unsure")]  # fmt: skip
    rows = []
    for name, s in strategies.items():
        a = s.get("answers") or {}
        parts = [a, *((a.get("unanswerable") or {}, a.get("answerable") or {}) if kinds else ())]
        rows.append([name, *(_pct(p.get(k)) for p in parts for k in ("abstained", "unsure"))])
    return _md_table(header, rows)


def _pct(share: float | None) -> str:
    return MISSING if share is None else f"{100 * share:.1f}%"


def _stage_table(summary: dict) -> list[str]:
    strategies = summary.get("strategies") or {}
    seen: list[str] = []
    for s in strategies.values():
        for stage in s.get("stages_ms") or {}:
            if stage not in seen:
                seen.append(stage)
    if not seen:
        return []
    stages = [s for s in _STAGE_ORDER if s in seen] + [s for s in seen if s not in _STAGE_ORDER]
    rows = []
    for name, s in strategies.items():
        cells = [_fmt_p50_p95(get_path(s, "stages_ms", stage)) for stage in stages]
        rows.append([name, *cells, _fmt_p50_p95(s.get("latency_ms"))])
    return _md_table(["strategy", *stages, "total"], rows)


def _relative_link(plot: Path, out_dir: Path) -> str:
    """``plot`` relative to the report's folder; a bare file name already is."""
    if plot.parent == Path("."):
        return plot.as_posix()
    return Path(os.path.relpath(plot.resolve(), out_dir.resolve())).as_posix()


def _md_table(header: list[str], rows: list[list[str]], *, numeric: bool = True) -> list[str]:
    """Markdown table lines; with ``numeric`` every column but the first is right-aligned."""
    right = [False] + [numeric] * (len(header) - 1)
    out = [
        "| " + " | ".join(_md_cell(h) for h in header) + " |",
        "|" + "|".join("---:" if r else "---" for r in right) + "|",
    ]
    out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    return out


def _md_cell(text: str) -> str:
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


# ---------------------------------------------------------------------------------------------
# formatting
# ---------------------------------------------------------------------------------------------


def _fmt(value: Any, spec: str) -> str:
    if value is None:
        return MISSING
    if spec == "d":
        return str(int(value))
    return format(float(value), spec)


def _fmt_any(value: Any) -> str:
    if value is None:
        return MISSING
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _fmt_ci(ci: dict | None, signed: bool = False) -> str:
    mean = get_path(ci, "mean")
    if mean is None:
        return MISSING
    f = "{:+.3f}" if signed else "{:.3f}"
    lo, hi = get_path(ci, "lo"), get_path(ci, "hi")
    if lo is None or hi is None:
        return f.format(mean)
    return f"{f.format(mean)} [{f.format(lo)}, {f.format(hi)}]"


def _fmt_interval(ci: dict | None, signed: bool = False) -> str:
    """``[lo, hi]`` of an interval (its mean is in another column)."""
    lo, hi = get_path(ci, "lo"), get_path(ci, "hi")
    f = "{:+.3f}" if signed else "{:.3f}"
    return MISSING if lo is None or hi is None else f"[{f.format(lo)}, {f.format(hi)}]"


def _fmt_wtl(vs: dict | None, *, is_baseline: bool) -> str:
    if is_baseline:
        return "baseline"
    if not vs or any(vs.get(k) is None for k in ("win", "tie", "loss")):
        return MISSING
    return " / ".join(f"{100 * vs[k]:.0f}%" for k in ("win", "tie", "loss"))


def _fmt_p50_p95(stats: dict | None) -> str:
    p50, p95 = get_path(stats, "p50"), get_path(stats, "p95")
    if p50 is None and p95 is None:
        return MISSING
    return f"{_fmt(p50, '.1f')} / {_fmt(p95, '.1f')}"
