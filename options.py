"""The pieces ``fathom.cli`` builds its commands from: the parameter types, the options several
commands share, the option sets of ``ask``/``chat`` and of ``eval``, and the configuration key
each of those options overrides.

Besides click and the standard library only the generator registry is imported (a table of
names: no backend loads), so ``--help`` stays instant. Importing it also registers its names
with the configuration, so every command checks ``generator.backend`` as it reads it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click
from fathom.stages.generate import registry

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


class IntList(click.ParamType):
    """Comma-separated integers (``0,1,2``), each at least ``low``; anything else is a usage
    error (exit 2)."""

    name = "N,N,..."

    def __init__(self, low: int | None = None) -> None:
        self.low = low

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None):
        if isinstance(value, list):
            return value
        out: list[int] = []
        for item in str(value).split(","):
            if not item.strip():
                continue
            try:
                number = int(item)
            except ValueError:
                self.fail(f"{item.strip()!r} in {value!r} is not an integer", param, ctx)
            if self.low is not None and number < self.low:
                self.fail(f"{number} in {value!r} is below {self.low}", param, ctx)
            out.append(number)
        if not out:
            self.fail(f"{value!r}: give at least one integer", param, ctx)
        return out


class RegistryChoice(click.Choice):
    """A ``click.Choice`` whose choices are read from a registry each time they are used, so a
    backend registered after the command was defined is offered too."""

    def __init__(self, names: Callable[[], Sequence[str]]) -> None:
        # click.Choice.__init__ would store a fixed tuple where the property below reads.
        self._names = names
        self.case_sensitive = True

    @property  # type: ignore[override]
    def choices(self) -> Sequence[str]:
        return tuple(self._names())


def stack(*decorators: Decorator) -> Decorator:
    """One decorator for ``decorators``, as if they were written one above the other."""

    def apply(fn: Callable[..., Any]) -> Callable[..., Any]:
        for decorator in reversed(decorators):
            fn = decorator(fn)
        return fn

    return apply


def generator_option(**extra: Any) -> Decorator:
    """``--generator``: the answer backend (``generator.backend``): ``auto`` or one of the
    generator registry's backends."""
    choice = RegistryChoice(registry.generator_choices)
    return click.option("--generator", type=choice, default=None, **extra)


def deadline_option(whose: str, taken: str) -> Decorator:
    return click.option(
        "--deadline-ms",
        type=click.FloatRange(min=0),
        default=None,
        help=f"End-to-end time budget for {whose} (generator.deadline_ms): llama.cpp and "
        f"transformers stop generating when {taken} has taken this long (the report says the "
        "answer was cut).",
    )


def password_option(help_text: str) -> Decorator:
    """``--password``, for encrypted PDFs (or ``FATHOM_PDF_PASSWORD``)."""
    return click.option("--password", default=None, envvar="FATHOM_PDF_PASSWORD", help=help_text)


PREFER_OPTION = click.option(
    "--prefer",
    type=click.Choice(["quality", "balanced", "fast"]),
    default=None,
    help="What one point of answer recall is worth to the depth policy (retrieval.prefer): "
    "quality 5 s / 0.1 cents, balanced 1 s / 0.02 cents, fast 0.25 s / 0.005 cents of the "
    "answering model's reading time or price. Default balanced.",
)

# `--doc`: which documents of the collection `ask`, `chat` and `search` read
# (index/doc_filter.py holds the rule).
DOC_OPTION = click.option(
    "--doc",
    "docs",
    multiple=True,
    metavar="PATTERN",
    help="Read only the documents PATTERN selects: a title or file name (any case), a glob over "
    "the path, file name or title ('*.pdf'), or part of a title. Repeat for several (their "
    "union). A pattern that selects none is an error naming the closest titles.",
)

# `--show [DIR]`: each cited source where it stands (index/grounding.py); given alone, its
# value is "" and the files go to FATHOM_HOME/shown.
SHOW_OPTION = click.option(
    "--show",
    "show",
    is_flag=False,
    flag_value="",
    default=None,
    metavar="[DIR]",
    help="Show each cited source where it stands: its PDF page, scan or image with the passage "
    "highlighted (a PNG, drawn in kitty, Ghostty, iTerm2 and WezTerm), or its passage in the "
    "surrounding text; files go to DIR (default FATHOM_HOME/shown), their paths are printed.",
)

# What `ask` and `chat` take besides their arguments.
ASK_OPTIONS = stack(
    DOC_OPTION,
    click.option(
        "--k",
        "k",
        type=click.IntRange(0, 200),
        default=None,
        help="Fix the retrieval depth (0 = answer without retrieval).",
    ),
    generator_option(help="Answer backend."),
    click.option("--model", default=None, help="Generator model (name, GGUF path, …)."),
    click.option("--embedder", default=None, help="Embedding model name or path."),
    click.option(
        "--budget-tokens",
        type=click.IntRange(0),
        default=None,
        help="Context budget in the generator's tokens (default: the query type's).",
    ),
    click.option("--no-rerank", is_flag=True, help="Skip the reranker."),
    deadline_option("the answer", "the ask"),
    click.option(
        "--policy",
        default=None,
        help="Depth policy: a policy file, 'strategy', 'cascade' (start shallow, deepen while "
        "the answer's confidence is low), or 'auto' (the shipped learned policy when "
        "present). --k overrides it.",
    ),
    PREFER_OPTION,
    click.option(
        "--portfolio",
        default=None,
        help="Retrieve through a retriever portfolio (`fathom portfolio build`): a file or a "
        "name under FATHOM_HOME/portfolios.",
    ),
    click.option(
        "--portfolio-mode",
        type=click.Choice(["fuse", "select"]),
        default=None,
        help="fuse: the chosen members' results ranked together; select: one answer per member, "
        "the generator picks or merges them. Default fuse.",
    ),
    click.option(
        "--portfolio-ell",
        type=click.IntRange(1),
        default=None,
        help="How many portfolio members the router runs per question (default 2).",
    ),
)

# The ask options that override a configuration key, in the order they are applied.
ASK_CONFIG = (
    "deadline_ms",
    "policy",
    "prefer",
    "portfolio",
    "portfolio_mode",
    "portfolio_ell",
    "generator",
    "model",
    "embedder",
    "budget_tokens",
)


DEADLINE_ROWS = deadline_option("every row", "the row")

# The documents an evaluation, a sweep or a portfolio build reads: files or a collection.
DOCUMENTS = stack(
    click.option("--docs", default=None, help="Documents: file, folder, or docs.jsonl."),
    click.option(
        "--collection", "-c", default=None, help="An existing collection instead of --docs."
    ),
)

QUESTIONS = click.option("--questions", required=True, help="Questions: JSONL or a BEIR folder.")

# What `eval` takes to describe a run (its `--json` aside).
EVAL_OPTIONS = stack(
    DOCUMENTS,
    click.option(
        "--questions",
        default=None,
        help="Questions: JSONL (qid, question, answers, doc_ids) or a BEIR folder.",
    ),
    click.option("--qrels", default=None, help="A BEIR qrels TSV for a JSONL question file."),
    click.option(
        "--strategies",
        default="none,fixed:1,fixed:2,fixed:4,fixed:8,gap,threshold:p50",
        show_default=True,
        help="Comma-separated: none, fixed:K, gap[:A-B], threshold:pNN[:K], strategy, "
        "forest[:FILE][@C|@lambda=L], reinforce:FILE, utility:FILE[@PRESET]; +fb adds the "
        "feedback loop.",
    ),
    click.option("--baseline", default=None, help="Strategy the others are compared with."),
    PREFER_OPTION,
    generator_option(help="Answer backend."),
    click.option("--model", default=None, help="Generator model (name, GGUF path, …)."),
    click.option(
        "--judge",
        type=click.Choice(["contains", "f1", "qrels", "recall"]),
        default="contains",
        show_default=True,
        help="What `quality` is: gold answer in the answer, token F1, nDCG@10 by qrels, or "
        "answer recall (a gold answer in the context: retrieval alone).",
    ),
    click.option("--slo-ms", type=click.FloatRange(min=0, min_open=True), default=None),
    DEADLINE_ROWS,
    click.option("--limit", type=click.IntRange(1), default=None, help="Evaluate this many."),
    click.option("--fit-size", type=click.IntRange(1), default=200, show_default=True),
    click.option("--seed", type=int, default=0, show_default=True),
    click.option("--bootstrap", type=click.IntRange(100), default=2000, show_default=True),
    click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True),
    click.option(
        "--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True
    ),
    click.option("--ray-address", default=None, help="A Ray cluster (default: local Ray)."),
    click.option("--no-cache", is_flag=True, help="Do not reuse cached generations."),
    click.option(
        "--split",
        "doc_split",
        type=click.Choice(["all", "train", "test"]),
        default="all",
        show_default=True,
        help="Only questions on this half of the documents (split by document id).",
    ),
    click.option("--split-seed", type=int, default=0, show_default=True),
    click.option(
        "--portfolio",
        default=None,
        help="Retrieve through this retriever portfolio (file or name) for every strategy.",
    ),
    click.option("--portfolio-mode", type=click.Choice(["fuse", "select"]), default=None),
    click.option("--portfolio-ell", type=click.IntRange(1), default=None),
    click.option(
        "--out", "out", type=click.Path(path_type=Path), default=None, help="Output folder."
    ),
)

# The eval options that override a configuration key, in the order they are applied.
EVAL_CONFIG = (
    "generator",
    "model",
    "deadline_ms",
    "prefer",
    "portfolio",
    "portfolio_mode",
    "portfolio_ell",
)

# The configuration key each option overrides; a value of None leaves the configured one.
CONFIG_KEYS = {
    "generator": "generator.backend",
    "model": "generator.model",
    "deadline_ms": "generator.deadline_ms",
    "embedder": "embedder.name",
    "budget_tokens": "compress.budget_tokens",
    "policy": "retrieval.policy",
    "prefer": "retrieval.prefer",
    "portfolio": "retrieval.portfolio",
    "portfolio_mode": "retrieval.portfolio_mode",
    "portfolio_ell": "retrieval.portfolio_ell",
}


def overrides(opts: dict[str, Any], *names: str) -> dict[str, Any]:
    """The options ``names``, taken out of ``opts``, as configuration overrides (in that
    order, the order they are applied and checked in)."""
    return {CONFIG_KEYS[name]: opts.pop(name) for name in names}


def answer_options(opts: dict[str, Any]) -> dict[str, Any]:
    """What the ask options left in ``opts`` ask of the Engine: a fixed depth, no reranker,
    the documents to read."""
    return {"k": opts["k"], "rerank": False if opts["no_rerank"] else None, "docs": opts["docs"]}
