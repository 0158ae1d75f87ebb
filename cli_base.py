"""What the command line's modules share: the root group's handling of expected failures, and
the configuration a command runs with. Only click and the standard library are imported at
the top, as in ``fathom.cli``."""

from __future__ import annotations

from typing import Any

import click


class FathomGroup(click.Group):
    """Turns a FathomError into one clear line on stderr and exit code 1."""

    def invoke(self, ctx: click.Context) -> Any:
        from fathom.core.errors import FathomError

        try:
            return super().invoke(ctx)
        except FathomError as exc:
            from fathom.core.text import safe_terminal_text

            # Messages carry paths and server replies: no escape sequences reach the terminal.
            raise click.ClickException(safe_terminal_text(str(exc))) from None


def command_config(ctx: click.Context, **overrides: Any):
    """The configuration a command runs with: ``--config`` (or ./fathom.toml), the environment,
    then ``overrides`` (``{"section.key": value}``; None leaves a key alone)."""
    from fathom.core.config import load_config

    return load_config(ctx.obj.get("config_path"), overrides=overrides)
