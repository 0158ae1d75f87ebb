"""NLTK Punkt, configured for Fathom through its public extension points.

Importing this module imports NLTK (``nltk/__init__`` loads its taggers, chunkers and
scipy.stats: seconds on a cold laptop), so ``chunking.sentences`` imports it only when text is
split for real. Query time reads the sentence spans stored with each chunk and never gets here
(see ``chunking.sentences.chunk_sentences``).

``LanguageVars`` and ``Token`` are the subclasses Punkt's constructors take (``lang_vars=``,
``token_cls=``), so that NLTK's own English patterns are matched with the stdlib ``re``. NLTK
routes every pattern through ``nltk.redos`` (the ``regex`` engine under a wall-clock timeout), a
backstop for caller-supplied patterns; these are NLTK's fixed patterns, linear on any input. With
the stdlib engine, training Punkt on 200,000 characters of COVID-QA papers takes 0.25 s instead
of stock NLTK's 0.8 s. The overrides are public members (``word_tokenize``,
``period_context_re``, ``re_boundary_realignment``, the token's ``is_*`` properties) and one
protected hook, ``PunktToken._get_type``, which every token's construction calls (without it
training takes 0.5 s). tests/test_chunking_sentences.py trains and splits with these classes
and with stock NLTK and requires the same parameters and the same sentences, so an NLTK release
that changes what they replace fails the tests instead of splitting differently.
"""

from __future__ import annotations

import re
from typing import Any

from nltk.tokenize.punkt import (
    PunktLanguageVars,
    PunktParameters,
    PunktSentenceTokenizer,
    PunktToken,
    PunktTrainer,
)

__all__ = [
    "LanguageVars",
    "PunktParameters",
    "PunktSentenceTokenizer",
    "PunktTrainer",
    "Token",
    "trained_params",
]

# NLTK's English word-tokenizer pattern (``PunktLanguageVars._word_tokenize_fmt`` filled with the
# class's default character sets). Punkt exposes it only through ``word_tokenize``; a test checks
# that it still equals NLTK's.
WORD_TOKENIZER = r"""(
        (?:\-{2,}|\.{2,}|(?:\.\s){2,}\.)
        |
        (?=[^\(\"\`{\[:;&\#\*@\)}\]\-,])\S+?  # Accept word characters until end is found
        (?= # Sequences marking a word's end
            \s|                                 # White-space
            $|                                  # End-of-string
            (?:[)\";}\]\*:@\'\({\[\u2018\u2019\u201c\u201d\xab\xbb\?!])|(?:\-{2,}|\.{2,}|(?:\.\s){2,}\.)|          # Punctuation
            ,(?=$|\s|(?:[)\";}\]\*:@\'\({\[\u2018\u2019\u201c\u201d\xab\xbb\?!])|(?:\-{2,}|\.{2,}|(?:\.\s){2,}\.)) # Comma if at end of word
        )
        |
        \S
    )"""  # noqa: E501 - NLTK's pattern, verbatim


def _stdlib(pattern: Any) -> re.Pattern[str]:
    """``pattern`` (an ``re`` or ``nltk.redos`` pattern, both expose ``.pattern``/``.flags``)
    recompiled with the stdlib ``re``."""
    flags = pattern.flags & (re.IGNORECASE | re.MULTILINE | re.VERBOSE)
    return re.compile(pattern.pattern, flags | re.UNICODE)


_WORD_RE = re.compile(WORD_TOKENIZER, re.UNICODE | re.VERBOSE)
_PERIOD_CONTEXT_RE = _stdlib(PunktLanguageVars().period_context_re())


class LanguageVars(PunktLanguageVars):
    """NLTK's English Punkt rules, matched with the stdlib ``re``."""

    __slots__ = ()
    re_boundary_realignment = _stdlib(PunktLanguageVars.re_boundary_realignment)

    def word_tokenize(self, s: str) -> list[str]:
        return _WORD_RE.findall(s)

    def period_context_re(self) -> re.Pattern[str]:
        return _PERIOD_CONTEXT_RE


_ELLIPSIS = re.compile(r"\.\.+$")
_INITIAL = re.compile(r"[^\W\d]\.$", re.UNICODE)
_ALPHA = re.compile(r"[^\W\d]+$", re.UNICODE)
_NON_PUNCT = re.compile(r"[^\W\d]", re.UNICODE)


_NUMERIC = re.compile(r"^-?[\.,]?\d[\d,\.-]*\.?$")


class Token(PunktToken):
    """``PunktToken`` matching NLTK's token patterns with the stdlib ``re``."""

    __slots__ = ()

    def _get_type(self, tok: str) -> str:
        return _NUMERIC.sub("##number##", tok.lower())

    @property
    def is_ellipsis(self) -> re.Match[str] | None:
        return _ELLIPSIS.match(self.tok)

    @property
    def is_initial(self) -> re.Match[str] | None:
        return _INITIAL.match(self.tok)

    @property
    def is_alpha(self) -> re.Match[str] | None:
        return _ALPHA.match(self.tok)

    @property
    def is_non_punct(self) -> re.Match[str] | None:
        return _NON_PUNCT.search(self.type)


def trained_params(sample: str, abbreviations: frozenset[str]) -> PunktParameters:
    """Punkt parameters learned unsupervised from ``sample``, plus ``abbreviations``."""
    trainer = PunktTrainer(lang_vars=LanguageVars(), token_cls=Token)
    trainer.train(sample, finalize=True)
    params = trainer.get_params()
    params.abbrev_types.update(abbreviations)
    return params


def builtin_params(abbreviations: frozenset[str]) -> PunktParameters:
    params = PunktParameters()
    params.abbrev_types.update(abbreviations)
    return params


def tokenizer(params: PunktParameters) -> PunktSentenceTokenizer:
    return PunktSentenceTokenizer(params, lang_vars=LanguageVars(), token_cls=Token)
