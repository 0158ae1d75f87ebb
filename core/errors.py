"""Fathom's exceptions: one clear message naming the input, the problem and the fix."""

from __future__ import annotations


class FathomError(Exception):
    """An expected failure: shown to the user as one line, exit code 1, no traceback."""


class ParseError(FathomError):
    """A document could not be read or has no usable text."""

    def __init__(self, path: str, problem: str, fix: str = "") -> None:
        self.path = path
        self.problem = problem
        self.fix = fix
        message = f"{path}: {problem}"
        if fix:
            message += f" — {fix}"
        super().__init__(message)


class IndexMismatchError(FathomError):
    """A collection on disk does not match what the code or configuration expects."""


class CollectionNotFound(FathomError):
    """No collection of that name exists."""


class CollectionLocked(FathomError):
    """Another process is writing the collection."""


class BackendUnavailable(FathomError):
    """A model or server the configuration names cannot be used."""


class ConfigError(FathomError):
    """A configuration key or value is wrong; the message names the key, value and source."""


class DocumentNotFound(FathomError):
    """A document pattern (``--doc``, the MCP tools' ``doc``) matches no document of the
    collection."""
