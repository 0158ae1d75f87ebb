"""Evaluation plots (PNG): quality vs tokens, latency CDF, depth actions, cost per 1,000 questions.

matplotlib loads inside the functions that draw, so importing this module stays cheap. Figures are
built with ``matplotlib.figure.Figure`` (rendered by Agg) rather than through pyplot: no
interactive backend, no global figure registry to leak from, and the caller's own pyplot
backend is left alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from fathom.evaluation.summary import action_key, get_path

DPI = 120

# Everything that could make two renderings of the same data differ, pinned.
_RC = {
    "svg.hashsalt": "fathom",
    "path.simplify": False,
    "font.family": "DejaVu Sans",  # bundled with matplotlib: same glyphs on every machine
    "axes.grid": True,
    "grid.alpha": 0.3,
}
# PNG text chunks matplotlib would add; "Software" carries its version string.
_PNG_METADATA = {"Software": None}


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point dominates, as ``(cost, quality)`` pairs.

    Lower cost and higher quality are better; a point is dominated by one at least as good on
    both and strictly better on one, so exact duplicates both stay on the front. Pairs with a
    NaN are ignored. Indices come sorted by cost, then by quality descending, then by index.
    """
    valid = [
        i for i, (c, q) in enumerate(points) if not (math.isnan(float(c)) or math.isnan(float(q)))
    ]
    front = []
    for i in valid:
        ci, qi = points[i]
        dominated = any(
            points[j][0] <= ci and points[j][1] >= qi and (points[j][0] < ci or points[j][1] > qi)
            for j in valid
        )
        if not dominated:
            front.append(i)
    return sorted(front, key=lambda i: (points[i][0], -points[i][1], i))


def cost_per_1000(summary: dict) -> tuple[Literal["cost", "tokens"], dict[str, float]]:
    """What the cost plot shows: ``("cost", per_1000)``, or ``("tokens", …)`` when all cost 0.

    Strategies without a value are left out; ``("tokens", {})`` means nothing to plot.
    """
    strategies = summary.get("strategies") or {}
    costs = {
        name: float(v)
        for name, s in strategies.items()
        if (v := get_path(s, "cost", "per_1000")) is not None
    }
    if any(v != 0 for v in costs.values()):
        return "cost", costs
    tokens = {
        name: float(v) * 1000
        for name, s in strategies.items()
        if (v := get_path(s, "tokens", "total", "mean")) is not None
    }
    return "tokens", tokens


def write_plots(out_dir: Path, summary: dict, rows: list[dict]) -> list[Path]:
    """Write the run's PNG plots into ``out_dir``; a plot with nothing to show is skipped."""
    import matplotlib

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    names = list((summary.get("strategies") or {}).keys())
    for row in rows:
        if row.get("strategy") is not None and row["strategy"] not in names:
            names.append(row["strategy"])
    colors = _colors(names)
    written: list[Path] = []
    with matplotlib.rc_context(_RC):
        for filename, draw in (
            ("pareto.png", _draw_pareto),
            ("latency_cdf.png", _draw_latency_cdf),
            ("actions.png", _draw_actions),
            ("cost.png", _draw_cost),
        ):
            fig = draw(summary, rows, colors)
            if fig is None:
                continue
            path = out_dir / filename
            fig.savefig(path, format="png", dpi=DPI, metadata=_PNG_METADATA)
            written.append(path)
    return written


# ---------------------------------------------------------------------------------------------
# one function per plot: (summary, rows, colours) -> Figure, or None when there is nothing to plot
# ---------------------------------------------------------------------------------------------


def _draw_pareto(summary: dict, rows: list[dict], colors: dict[str, Any]):
    run = summary.get("run") or {}
    judge = run.get("judge") or "quality"
    baseline = run.get("baseline")
    pts: list[tuple[str, dict, dict]] = []
    for name, s in (summary.get("strategies") or {}).items():
        quality = get_path(s, "metrics", "quality")
        tokens = get_path(s, "tokens", "total")
        if get_path(quality, "mean") is not None and get_path(tokens, "mean") is not None:
            pts.append((name, quality, tokens))
    if not pts:
        return None

    fig, ax = _figure((7.5, 5.0))
    for name, quality, tokens in pts:
        x, y = float(tokens["mean"]), float(quality["mean"])
        is_base = name == baseline
        ax.errorbar(
            x,
            y,
            xerr=_err(tokens),
            yerr=_err(quality),
            fmt="*" if is_base else "o",
            markersize=14 if is_base else 7,
            color=colors[name],
            markeredgecolor="black" if is_base else colors[name],
            ecolor=colors[name],
            elinewidth=1,
            capsize=3,
            zorder=3,
            label=f"{name} (baseline)" if is_base else name,
        )
        ax.annotate(
            f"{name} (baseline)" if is_base else name,
            (x, y),
            xytext=(6, 6),
            textcoords="offset points",
            fontsize=8,
            fontweight="bold" if is_base else "normal",
        )
    front = pareto_front([(float(t["mean"]), float(q["mean"])) for _, q, t in pts])
    if front:
        xs = [float(pts[i][2]["mean"]) for i in front]
        ys = [float(pts[i][1]["mean"]) for i in front]
        # Best quality reachable within a token budget: flat until the next front point.
        ax.step(xs, ys, where="post", color="grey", linestyle="--", linewidth=1, zorder=2)
        ax.plot([], [], color="grey", linestyle="--", linewidth=1, label="Pareto front")
    ax.set_xlabel("mean total tokens per question (95% CI)")
    ax.set_ylabel(f"quality — judge: {judge} (95% CI)")
    ax.set_title(f"Quality vs tokens (judge: {judge})")
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return fig


def _draw_latency_cdf(summary: dict, rows: list[dict], colors: dict[str, Any]):
    by_strategy: dict[str, list[float]] = {name: [] for name in colors}
    for row in rows:
        ms = row.get("total_ms")
        if row.get("strategy") in by_strategy and ms is not None and not math.isnan(ms):
            by_strategy[row["strategy"]].append(float(ms))
    by_strategy = {name: sorted(v) for name, v in by_strategy.items() if v}
    if not by_strategy:
        return None

    fig, ax = _figure((7.5, 5.0))
    for name, values in by_strategy.items():
        n = len(values)
        # Start at 0 on the fastest value so the first step is drawn too.
        ax.step(
            [values[0], *values],
            [0.0, *((i + 1) / n for i in range(n))],
            where="post",
            color=colors[name],
            label=f"{name} (n={n})",
        )
    everything = [v for values in by_strategy.values() for v in values]
    lo, hi = min(everything), max(everything)
    if lo > 0 and hi / lo > 100:
        ax.set_xscale("log")
    slo = (summary.get("run") or {}).get("slo_ms")
    if slo is not None:
        ax.axvline(float(slo), color="black", linestyle="--", linewidth=1, label=f"SLO {slo:g} ms")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("total latency per question (ms)")
    ax.set_ylabel("share of questions answered within")
    ax.set_title("Latency CDF")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


def _draw_actions(summary: dict, rows: list[dict], colors: dict[str, Any]):
    counts = {
        name: {str(a): int(c) for a, c in (s.get("actions") or {}).items()}
        for name, s in (summary.get("strategies") or {}).items()
    }
    counts = {name: c for name, c in counts.items() if sum(c.values()) > 0}
    if not counts:
        return None
    actions = sorted({a for c in counts.values() for a in c}, key=action_key)
    # Depth is ordered: a sequential colour map, distinct from the per-strategy colours.
    action_colors = _sequential_colors(actions)
    names = list(counts)

    fig, ax = _figure((max(6.0, 1.1 * len(names) + 3.0), 5.0))
    bottoms = [0.0] * len(names)
    for action in actions:
        shares = [counts[n].get(action, 0) / sum(counts[n].values()) for n in names]
        ax.bar(
            range(len(names)),
            shares,
            bottom=bottoms,
            color=action_colors[action],
            edgecolor="white",
            linewidth=0.5,
            label=_action_label(action),
        )
        bottoms = [b + s for b, s in zip(bottoms, shares, strict=True)]
    ax.set_xticks(range(len(names)), names, rotation=30, ha="right")
    ax.set_ylim(0, 1)
    ax.set_ylabel("share of questions")
    ax.set_title("Depth chosen per strategy")
    ax.legend(title="action", fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
    ax.grid(axis="x", visible=False)
    fig.tight_layout()
    return fig


def _draw_cost(summary: dict, rows: list[dict], colors: dict[str, Any]):
    kind, values = cost_per_1000(summary)
    if not values:
        return None
    names = list(values)

    fig, ax = _figure((max(6.0, 1.0 * len(names) + 2.5), 5.0))
    bars = ax.bar(range(len(names)), [values[n] for n in names], color=[colors[n] for n in names])
    ax.bar_label(bars, fmt="{:,.4g}" if kind == "cost" else "{:,.0f}", fontsize=8)
    ax.set_xticks(range(len(names)), names, rotation=30, ha="right")
    if kind == "cost":
        ax.set_ylabel("cost per 1,000 questions")
        ax.set_title("Cost per 1,000 questions")
    else:
        ax.set_ylabel("tokens per 1,000 questions")
        ax.set_title("Tokens per 1,000 questions (all costs are 0: local models)")
    ax.grid(axis="x", visible=False)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------


def _figure(size: tuple[float, float]):
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, dpi=DPI)
    return fig, fig.subplots()


def _colors(names: list[str]) -> dict[str, Any]:
    """One fixed colour per name, by position (tab10, tab20 beyond ten)."""
    from matplotlib import colormaps

    cmap = colormaps["tab10" if len(names) <= 10 else "tab20"]
    return {name: cmap(i % cmap.N) for i, name in enumerate(names)}


def _sequential_colors(names: list[str]) -> dict[str, Any]:
    from matplotlib import colormaps

    cmap = colormaps["viridis"]
    step = 1 / max(1, len(names) - 1)
    return {name: cmap(min(1.0, 0.9 * i * step)) for i, name in enumerate(names)}


def _err(ci: dict) -> list[list[float]] | None:
    """``[[below], [above]]`` error bar lengths from a ``{mean, lo, hi}`` interval."""
    mean, lo, hi = ci.get("mean"), ci.get("lo"), ci.get("hi")
    if mean is None or lo is None or hi is None:
        return None
    return [[max(0.0, float(mean) - float(lo))], [max(0.0, float(hi) - float(mean))]]


def _action_label(action: str) -> str:
    return "skip" if action == "0" else f"k={action}"
