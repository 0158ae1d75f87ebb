"""Follow-up questions made standalone before retrieval (``fathom chat``, ``ask --session``).

A follow-up leans on the turns before it: "How well does it do on HotpotQA?" after "Which two
abilities does ReAct interleave?" means ReAct. Retrieval reads one question, so the follow-up
is rewritten first, and the rewritten question is what the Engine embeds, searches and answers;
the answer's ``followup`` record keeps both (``Rewrite.to_dict``).

The rule (``resolve``), used with the extractive answerer and whenever the model cannot:

1. **Is it a follow-up?** (``needs_context``) A referring pronoun — it, its, they, them, their,
   he, him, his, she, her, this, these, those, and "that" after a preposition or a form of
   "be"/"do" — with no proper name and fewer than four content words before it in the
   question (in "What did Tesla say about his father?", "his" is Tesla), unless it ends the
   question ("Who won it?"); "it" in "is it called when…" or "it is hard to…" refers to
   nothing. Or an elliptical question: one that opens with "and", "but", "also", "so" or
   "what/how about", or has at most three words without opening with a question word ("On
   ALFWorld?").
2. **Its subject** (``subject_of``): the sure subject of the latest turn, or of an earlier
   one whose answer cited the same document as the latest's: the subject that turn was
   itself resolved to, when its question still names it, else the proper name of its
   question (capitalised words, digits and connectives: "Super Bowl 50", "Newcastle upon
   Tyne") that shares a word with the title of the document its answer cited first, the
   longest, else that title when the question holds all its words. Without one, the latest
   question's longest proper name; else the cited title when the question shares a word
   with it; else the question's longest run of content words.
3. **The rewrite** (``substitute``): the first referring pronoun becomes the subject ("its" the
   subject's possessive, "this method" "the ReAct method"); an elliptical question without
   one loses its opening connective and gains "for SUBJECT". A question that names the
   subject already, or is not a follow-up, is left as it is.

With a generative backend, ``rewrite`` asks the model in a short prompt (the last turns, the
follow-up, "Standalone question:") when the rule finds a follow-up, and falls back to the rule
when the model fails, times out or answers with something that is not one short line.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fathom.core.errors import FathomError
from fathom.core.words import QUESTION_STOPWORDS

# How many earlier turns the rule and the model read.
LOOKBACK = 3
# The model's rewrite must come back within this (where the backend holds to a deadline) and
# be at most this many characters longer than the follow-up, else the rule's is used.
MODEL_TIME_MS = 15_000.0
MODEL_EXTRA_CHARS = 200

_TOKEN = re.compile(r"[\w][\w\-]*(?:['’]s)?")
_PRONOUNS = frozenset(
    "it its they them their theirs he him his she her hers this these those that".split()
)
_POSSESSIVE = frozenset({"its", "their", "theirs", "his", "hers"})
_DEMONSTRATIVE = frozenset({"this", "these", "those", "that"})
# "that" refers back only after these ("is that true?", "the cost of that"): elsewhere it is a
# relative pronoun or a conjunction ("the team that won", "said that").
_BEFORE_THAT = frozenset("of about is was are were in on for with from by do does did".split())
_QUESTION_WORDS = frozenset(
    "what which who whom whose when where why how is are was were do does did can could should "
    "would will has have had may might must shall".split()
)
_CONNECTIVES = ("and", "but", "also", "so", "then")
_NAME_JOINERS = frozenset({"of", "upon", "on", "de", "du", "von", "van", "der", "la", "and"})
_EXPLETIVE = (
    re.compile(r"\b(?:is|was)\s+it\s+(?:called|known|termed|named|referred)\b", re.I),
    re.compile(r"\bit\s+(?:is|was)\s+(?:called|known|termed|named)\s+(?:when|if)\b", re.I),
    re.compile(r"\bit\s+(?:is|was|be)\s+\w+\s+(?:to|that|for)\b", re.I),
    re.compile(r"\b(?:is|was)\s+it\s+\w+\s+(?:to|that|for)\b", re.I),
)

REWRITE_PROMPT = (
    "Rewrite the user's follow-up question as a standalone question that can be understood "
    "without the conversation: replace pronouns with what they refer to and fill in what an "
    "elliptical question leaves out. Keep the user's wording otherwise. Reply with the "
    "rewritten question only, on one line."
)


@dataclass(frozen=True, slots=True)
class Turn:
    """One earlier question of a conversation: as asked, as answered (standalone), the
    subject it was resolved to ("" when it needed none) and the titles of the documents its
    answer cited, most cited first."""

    asked: str
    question: str
    subject: str = ""
    cited: tuple[str, ...] = ()
    answer: str = ""

    @classmethod
    def from_answer(cls, answer: Any) -> Turn:
        """The turn an ``Answer`` makes (its ``followup`` record, when it has one)."""
        follow = answer.followup or {}
        titles = Counter(c.title for c in answer.citations if c.title)
        return cls(
            asked=follow.get("asked", answer.question),
            question=answer.question,
            subject=follow.get("subject", ""),
            cited=tuple(t for t, _ in titles.most_common()),
            answer=answer.text,
        )


@dataclass(frozen=True, slots=True)
class Rewrite:
    """A question as asked and as retrieval reads it; ``method``: ``rule``, ``model`` or
    ``unchanged``; ``reason`` says why (or why the model's rewrite was not used)."""

    asked: str
    question: str
    method: str
    subject: str = ""
    reason: str = ""

    @property
    def rewritten(self) -> bool:
        return self.question != self.asked

    def to_dict(self) -> dict[str, Any]:
        return {
            "asked": self.asked,
            "question": self.question,
            "method": self.method,
            "subject": self.subject,
            "reason": self.reason,
        }


def _tokens(text: str) -> list[re.Match[str]]:
    return list(_TOKEN.finditer(text))


def _bare(token: str) -> str:
    return re.sub(r"['’]s$", "", token)


def _is_name_word(token: str, first: bool) -> bool:
    """A word of a proper name: capitalised or with inner capitals ("ReAct", "NFL"), not a
    question or function word (the question's first word is capitalised anyway)."""
    word = _bare(token)
    low = word.lower()
    if low in QUESTION_STOPWORDS or low in _QUESTION_WORDS:
        return False
    if first and not any(c.isupper() for c in word[1:]):
        return False  # a capitalised first word is the sentence's, not a name's
    return word[:1].isupper() or (word[:1].isalpha() and any(c.isupper() for c in word[1:]))


def proper_names(question: str) -> list[tuple[int, str]]:
    """The proper names in ``question`` with where each starts: runs of name words, with
    digits after them and connectives between them ("Super Bowl 50", "Newcastle upon Tyne")."""
    toks = _tokens(question)
    names: list[tuple[int, str]] = []
    i = 0
    while i < len(toks):
        if not _is_name_word(toks[i].group(), i == 0):
            i += 1
            continue
        j = i + 1
        while j < len(toks):
            word = toks[j].group()
            if _is_name_word(word, False) or word.isdigit():
                j += 1
            elif (
                word.lower() in _NAME_JOINERS
                and j + 1 < len(toks)
                and _is_name_word(toks[j + 1].group(), False)
            ):
                j += 2
            else:
                break
        start, end = toks[i].start(), toks[j - 1].end()
        names.append((start, _bare(question[start:end])))
        i = j
    return names


def _expletive(question: str, at: int) -> bool:
    """Whether the "it" at ``at`` refers to nothing ("what is it called when…")."""
    return any(m.start() <= at < m.end() for p in _EXPLETIVE for m in p.finditer(question))


def referring_pronoun(question: str) -> re.Match[str] | None:
    """The first pronoun of ``question`` that refers outside it (step 1), or None."""
    toks = _tokens(question)
    names = proper_names(question)
    for i, tok in enumerate(toks):
        word = tok.group().lower()
        if word not in _PRONOUNS:
            continue
        last = i == len(toks) - 1  # "Who won it?": the question's own object is rarely it
        if not last and any(start < tok.start() for start, _ in names):
            return None  # a name before it: the pronoun is most likely that name
        before = [t.group().lower() for t in toks[:i]]
        if not last and sum(w not in QUESTION_STOPWORDS for w in before) >= 4:
            return None  # enough words before it to hold what it refers to
        if word == "that" and (i == 0 or toks[i - 1].group().lower() not in _BEFORE_THAT):
            continue
        if word == "it" and _expletive(question, tok.start()):
            continue
        return tok
    return None


def elliptical(question: str) -> bool:
    """Whether ``question`` leaves its subject out (step 1): it opens with a connective or
    "what/how about", or it has at most three words and does not open with a question word."""
    toks = [t.group().lower() for t in _tokens(question)]
    if not toks:
        return False
    if toks[0] in _CONNECTIVES or toks[:2] in (["what", "about"], ["how", "about"]):
        return True
    return len(toks) <= 3 and toks[0] not in _QUESTION_WORDS


def needs_context(question: str) -> bool:
    """Whether ``question`` is a follow-up that the turns before it must complete."""
    return referring_pronoun(question) is not None or elliptical(question)


def _words(text: str) -> set[str]:
    return {t.group().lower() for t in _tokens(text)} - QUESTION_STOPWORDS


def _content_run(question: str) -> str:
    """The longest run of consecutive content words of ``question``."""
    best: list[str] = []
    run: list[str] = []
    for tok in _tokens(question):
        word = _bare(tok.group())
        if word.lower() in QUESTION_STOPWORDS or word.lower() in _QUESTION_WORDS:
            run = []
            continue
        run.append(word)
        if len(run) > len(best):
            best = list(run)
    return " ".join(best)


def _strong_subject(turn: Turn) -> str:
    """The subject ``turn`` names for sure: the one it was resolved to, when its question
    still names it, else its longest proper name sharing a word with its first cited title."""
    if turn.subject and turn.subject.lower() in turn.question.lower():
        return turn.subject
    names = [name for _, name in proper_names(turn.question)]
    titled = [n for n in names if any(_words(n) & _words(t) for t in turn.cited[:1])]
    if titled:
        return max(titled, key=len)
    title = turn.cited[0] if turn.cited else ""
    return title if title and _words(title) <= _words(turn.question) else ""


def subject_of(turns: Sequence[Turn]) -> str:
    """What the latest of ``turns`` was about (step 2); "" when none says. An older turn's
    sure subject (``_strong_subject``) carries over a later turn that cited the same document
    and names no sure subject of its own (a standalone question about the same document)."""
    recent = list(turns)[-LOOKBACK:]
    if not recent:
        return ""
    latest = recent[-1]
    for turn in reversed(recent):
        strong = _strong_subject(turn)
        if strong and (turn is latest or turn.cited[:1] == latest.cited[:1]):
            return strong
    names = [name for _, name in proper_names(latest.question)]
    if names:
        return max(names, key=len)
    if latest.cited and _words(latest.cited[0]) & _words(latest.question):
        return latest.cited[0]
    return _content_run(latest.question) or (latest.cited[0] if latest.cited else "")


def _possessive(subject: str) -> str:
    return subject + ("'" if subject.endswith("s") else "'s")


def substitute(question: str, subject: str) -> str:
    """``question`` with its first referring pronoun replaced by ``subject``, or, elliptical,
    its opening connective dropped and "for SUBJECT" added (step 3)."""
    text = question.strip()
    first = _tokens(text)[:1]
    if first and first[0].group().lower() in _CONNECTIVES and len(_tokens(text)) > 1:
        text = text[first[0].end() :].lstrip(" ,")
        text = text[:1].upper() + text[1:]
    pron = referring_pronoun(text)
    if pron is None:
        body = text.rstrip(" ?.!")
        return f"{body} for {subject}?"
    word = pron.group().lower()
    after = text[pron.end() :]
    nxt = re.match(r"\s+([A-Za-z][\w\-]*)", after)
    next_content = nxt is not None and nxt.group(1).lower() not in QUESTION_STOPWORDS
    if word in _POSSESSIVE or (word == "her" and next_content):
        new = _possessive(subject)
    elif word in _DEMONSTRATIVE and word != "that" and next_content:
        new = f"the {subject}"
    else:
        new = subject
    if pron.start() == 0:
        new = new[:1].upper() + new[1:]
    return text[: pron.start()] + new + after


def resolve(question: str, turns: Sequence[Turn]) -> Rewrite:
    """``question`` made standalone from ``turns`` by the rule (module docstring)."""
    asked = question.strip()
    if not needs_context(asked):
        return Rewrite(asked, asked, "unchanged", reason="standalone")
    subject = subject_of(turns)
    if not subject:
        reason = "a follow-up, but no earlier turn" if not turns else "no subject found"
        return Rewrite(asked, asked, "unchanged", reason=reason)
    if re.search(rf"(?<!\w){re.escape(subject)}(?!\w)", asked, re.I):
        return Rewrite(asked, asked, "unchanged", subject, "names its subject already")
    return Rewrite(asked, substitute(asked, subject), "rule", subject, "follow-up")


def rewrite_messages(question: str, turns: Sequence[Turn]) -> list[dict[str, str]]:
    """The model's short prompt: the last turns (question, the start of the answer, the cited
    titles), then the follow-up."""
    lines = []
    for turn in list(turns)[-LOOKBACK:]:
        lines.append(f"User: {turn.question}")
        answer = " ".join(turn.answer.split())[:300]
        cited = f" (from: {'; '.join(turn.cited[:2])})" if turn.cited else ""
        lines.append(f"Assistant: {answer}{cited}")
    convo = "\n".join(lines)
    user = f"Conversation:\n{convo}\n\nFollow-up: {question}\nStandalone question:"
    return [{"role": "system", "content": REWRITE_PROMPT}, {"role": "user", "content": user}]


def _clean(reply: str) -> str:
    """The model's reply as one question: its first non-empty line, without a label or
    quotes."""
    line = next((s.strip() for s in reply.splitlines() if s.strip()), "")
    line = re.sub(
        r"^(?:standalone question|rewritten question|question)\s*:\s*", "", line, flags=re.I
    )
    return line.strip().strip("\"'“”").strip()


def rewrite(question: str, turns: Sequence[Turn], generator: Any = None) -> Rewrite:
    """``question`` made standalone: by ``generator``'s model when it is a language model and
    the rule finds a follow-up, else (or when the model fails) by the rule."""
    ruled = resolve(question, turns)
    if not turns or generator is None or not generator.language_model:
        return ruled
    if not needs_context(ruled.asked):
        return ruled
    try:
        reply = generator.complete(rewrite_messages(ruled.asked, turns), MODEL_TIME_MS)
    except (FathomError, OSError) as exc:
        return _fallback(ruled, f"the model failed ({exc})")
    text = _clean(reply)
    if not text or len(text) > len(ruled.asked) + MODEL_EXTRA_CHARS:
        return _fallback(ruled, "the model's reply was not one short question")
    return Rewrite(ruled.asked, text, "model", ruled.subject, f"rewritten by {generator.name}")


def _fallback(ruled: Rewrite, why: str) -> Rewrite:
    return Rewrite(ruled.asked, ruled.question, ruled.method, ruled.subject, f"{why}; rule used")
