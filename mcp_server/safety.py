"""What keeps ``fathom mcp`` inside its bounds: paths resolved inside the ``--root`` folders,
secrets redacted from results and logs, and the SDK's schema errors made one line."""

from __future__ import annotations

import dataclasses
import logging
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fathom.core.errors import ConfigError, FathomError

if TYPE_CHECKING:
    from fathom.core.config import Config

# Environment variables that hold secrets: OPENAI_API_KEY, HF_TOKEN, FATHOM_PDF_PASSWORD,
# AWS_SECRET_ACCESS_KEY, … (whole words between underscores: not TOKENIZERS_PARALLELISM).
_SECRET_NAME = re.compile(
    r"(?:^|_)(?:API_?KEY|KEY|SECRET|TOKEN|PASSWORD|PASSWD|PASS|CREDENTIALS?)(?:_|$)",
    re.IGNORECASE,
)


class Redactor:
    """Replaces every secret value (``generator.api_key``, and environment variables whose
    names speak of keys, secrets, tokens or passwords) with ``***``."""

    def __init__(self, cfg: Config, environ: dict[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        values = {cfg.generator.api_key}
        values |= {v for name, v in env.items() if _SECRET_NAME.search(name)}
        # Short values ("1", "true") are settings, not secrets; replacing them would garble text.
        self.secrets = sorted((v for v in values if len(v) >= 6), key=len, reverse=True)

    def text(self, text: str) -> str:
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, "***")
        return text

    def data(self, obj: Any) -> Any:
        """``obj`` (JSON-shaped) with every string redacted."""
        if not self.secrets:
            return obj
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, dict):
            return {k: self.data(v) for k, v in obj.items()}
        if isinstance(obj, list | tuple):
            return [self.data(v) for v in obj]
        return obj


class RedactingFilter(logging.Filter):
    """A log filter that leaves no secret in a record's message, nor in the traceback of an
    exception logged with it."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = self.redactor.text(message)
        if cleaned != message:
            record.msg, record.args = cleaned, ()
        if record.exc_info and not record.exc_text:
            # Handlers format the traceback from exc_text when it is set.
            record.exc_text = self.redactor.text(_TRACEBACK.formatException(record.exc_info))
        return True


_TRACEBACK = logging.Formatter()


@dataclasses.dataclass(frozen=True)
class Root:
    """A folder ``ingest`` may read: as given (absolute) and with symlinks resolved."""

    path: Path
    real: Path

    @classmethod
    def of(cls, raw: str | Path) -> Root:
        path = Path(os.path.abspath(os.path.expanduser(str(raw))))
        if not path.is_dir():
            raise ConfigError(f"--root {raw}: not a folder — give a folder ingest may read")
        return cls(path, Path(os.path.realpath(path)))

    def holds(self, real: Path) -> bool:
        return real == self.real or self.real in real.parents


def resolve_under(
    raw: str, roots: list[Root], allow: str = "start `fathom mcp` with --root for its folder"
) -> Path:
    """``raw`` (absolute, or relative to a root) as a resolved path inside one of ``roots``;
    a ``FathomError`` naming the path and the rule it breaks otherwise (``allow``: how to let
    a folder in, as the front end serving says it)."""
    shown = ", ".join(str(r.path) for r in roots)
    if not raw.strip() or "\x00" in raw:
        raise FathomError(f"{raw!r}: not a path — give a file or folder under {shown}")
    given = Path(os.path.expanduser(raw))
    if ".." in given.parts:
        raise FathomError(
            f"{raw}: '..' is not allowed in a path — give it without '..', absolute or relative "
            f"to a --root folder ({shown})"
        )
    if given.is_absolute():
        candidates = [Path(os.path.abspath(given))]
        lexical = any(candidates[0] == r.path or r.path in candidates[0].parents for r in roots)
        if not lexical and not any(r.holds(Path(os.path.realpath(given))) for r in roots):
            raise FathomError(
                f"{raw}: outside the folders this server may read ({shown}) — {allow} to allow it"
            )
    else:
        candidates = [r.path / given for r in roots]
    for candidate in candidates:
        if not os.path.lexists(candidate):
            continue
        real = Path(os.path.realpath(candidate))
        if not any(r.holds(real) for r in roots):
            raise FathomError(
                f"{raw}: leads through a symlink to {real}, outside the folders this server may "
                f"read ({shown}) — copy the file under a --root folder instead"
            )
        if not real.exists():
            raise FathomError(f"{raw}: a broken symlink — fix or remove it")
        return real
    raise FathomError(f"{raw}: no such file or folder under {shown}")


_VALIDATION = re.compile(r"Error executing tool (\w+): \d+ validation errors? for \w+\n")


def one_line_error(text: str) -> str:
    """The SDK's report of arguments that fail a tool's schema (pydantic's, several lines with
    the values given) as one line: ``search: k: input should be a valid integer; query: field
    required — see the tool's input schema``. Other texts are returned as they are."""
    m = _VALIDATION.match(text)
    if m is None:
        return text
    field, problems = "", []
    for line in text[m.end() :].splitlines():
        if not line.startswith(" "):
            field = line.strip()
        elif not line.strip().startswith("For further information"):
            problem = re.sub(r"\s*\[type=.*$", "", line.strip())
            problems.append(f"{field}: {problem[:1].lower()}{problem[1:]}")
    return f"{m.group(1)}: {'; '.join(problems)} — see the tool's input schema"
