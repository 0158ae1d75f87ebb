"""A portfolio file: where one is found and what reading it checks.

``fathom portfolio build`` (``learn.portfolio_build``) writes it: JSON with the members in
greedy order, their gains, the baselines and the router's weights.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fathom.core.errors import ConfigError

if TYPE_CHECKING:
    from fathom.core.config import Config


def resolve_portfolio(cfg: Config, spec: str) -> Path:
    """A portfolio file: ``spec`` as a path, else ``FATHOM_HOME/portfolios/<spec>.json``."""
    path = Path(spec).expanduser()
    if path.is_file():
        return path
    named = Path(cfg.home).expanduser() / "portfolios" / f"{spec}.json"
    if named.is_file():
        return named
    raise ConfigError(
        f"portfolio {spec!r}: no such file, and no {named} — build one with "
        "`fathom portfolio build … --out NAME`"
    )


def load_portfolio(path: Path) -> dict[str, Any]:
    """A portfolio file written by ``fathom portfolio build``."""
    try:
        info = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read the portfolio ({exc})") from exc
    if not isinstance(info, dict) or info.get("kind") != "portfolio":
        raise ConfigError(f"{path}: not a portfolio (fathom portfolio build writes one)")
    return info
