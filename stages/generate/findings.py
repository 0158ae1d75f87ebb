"""Key findings and overviews without a language model: which sections to quote from, which
sentences never to quote, and which few sentences to quote.

**Section roles.** ``section_kind(title, text)`` names what a section is from its title (and,
for an untitled or generic one, from how its text opens or reads): ``abstract``, ``executive
summary``, ``summary``, ``key findings``, ``results``, ``conclusions``, ``recommendations``,
``discussion`` are *preferred*; ``introduction`` and ``body`` are *neutral*; ``references``,
``acknowledgements``, ``appendix``, ``supplementary``, ``prompts`` and ``examples`` are
*excluded*. A section after a document's references (a paper's appendices) is excluded too.

**Sentence filters.** ``rejection(sentence)`` says why a sentence is never quoted, or None:
fewer than ``MIN_WORDS`` words, a reference entry, a figure or table caption, a running header
or footer or page number, a line of a prompt or trajectory ("Question:", "Thought 1:",
"Act 2:", "Obs 3:", "You are in the middle of a room", "> go to …"), code, a URL or e-mail
with little else, or a fragment (it starts in lower case). A sentence found in three or more
places of a document is a running header.

**Ranking.** ``pick(question, hits)`` scores every remaining sentence of ``hits`` by
centrality (TextRank over term vectors, ``extractive.textrank``, scaled to the best), relevance
to the question's own content words (IDF-weighted share; summary words such as "key
findings" add none), the role prior of its section and a small cue for statements of findings
("we show", "outperforms", …), then takes the best one per section first and fills up to two
per section, dropping near-duplicates (Jaccard of terms ≥ ``DUPLICATE``), stopping once at
least ``fewest`` are taken and the next scores under ``KEEP_RATIO`` of the best. The picks come
back in document order. An overview question ("What is this document about?") takes 3–4
sentences and favours the opening sections; ``document_title`` gives the title it names.

Pure text rules over chunks: no embedding, no model; deterministic.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

from fathom.core.words import answer_terms
from fathom.stages.generate.candidates import candidates, textrank
from fathom.stages.generate.span import title_cased

if TYPE_CHECKING:
    from fathom.core.base import Chunk, Hit
    from fathom.stages.generate.sentence_scorer import Candidate

Role = Literal["preferred", "neutral", "excluded"]

MIN_WORDS = 6  # a quoted sentence has at least this many words
DUPLICATE = 0.5  # Jaccard of terms at which a sentence says what a picked one says
KEEP_RATIO = 0.6  # past ``fewest``, a sentence under this share of the best score is left out
PER_SECTION = 2  # at most this many sentences from one section
FINDINGS = (3, 6)  # (fewest, most) sentences of a key-findings answer
OVERVIEW = (3, 4)  # (fewest, most) sentences of an overview (fewer when the text has fewer)
REPEATS = 3  # a sentence in this many places of a document is a running header or footer

# (kind, role, title pattern), first match wins: "Prompts for the results" is excluded.
_KINDS: tuple[tuple[str, Role, re.Pattern[str]], ...] = tuple(
    (kind, role, re.compile(pattern, re.IGNORECASE))
    for kind, role, pattern in (
        ("references", "excluded", r"\b(?:references?|bibliography|works cited|citations)\b"),
        ("acknowledgements", "excluded", r"\backnowledge?ments?\b|\bfunding\b"),
        ("appendix", "excluded", r"\bappendi(?:x|ces)\b"),
        ("supplementary", "excluded", r"\bsupplement(?:ary|al)?\b"),
        ("prompts", "excluded", r"\bprompts?\b|\btrajector(?:y|ies)\b"),
        ("examples", "excluded", r"^(?:worked |more |additional )?examples?\b"),
        ("executive summary", "preferred", r"\bexecutive summary\b"),
        ("abstract", "preferred", r"^abstract\b"),
        ("key findings", "preferred", r"\bfindings\b|\bhighlights\b|\bkey (?:points|takeaways)"),
        ("conclusions", "preferred", r"\bconclu(?:sions?|ding)\b"),
        ("recommendations", "preferred", r"\brecommendations?\b"),
        ("results", "preferred", r"\bresults?\b|\boutcomes?\b"),
        ("discussion", "preferred", r"\bdiscussion\b"),
        ("summary", "preferred", r"\bsummary\b"),
        ("introduction", "neutral", r"\bintroduction\b|\boverview\b|\bbackground\b"),
    )
)
ROLES: dict[str, Role] = {kind: role for kind, role, _ in _KINDS} | {"body": "neutral"}
# The role prior each kind adds to a sentence's score (key findings; overview).
_PRIOR = {
    "abstract": (0.35, 0.5),
    "executive summary": (0.35, 0.5),
    "key findings": (0.35, 0.3),
    "summary": (0.3, 0.4),
    "conclusions": (0.3, 0.2),
    "recommendations": (0.25, 0.1),
    "results": (0.2, 0.0),
    "discussion": (0.2, 0.0),
    "introduction": (0.0, 0.3),
    "body": (0.0, 0.0),
}
# "1", "2.3", "IV.", "A.1" before a title
_NUMBERING = re.compile(r"^\s*(?:(?:\d+|[ivxlc]+|[A-Z])(?:\.\d+)*\.?\)?\s+)", re.IGNORECASE)
# "A.1 Setup", "B Prompts": a lettered section, as appendices are numbered
_LETTERED = re.compile(r"^\s*[A-H](?:\.\d+)+\.?\s|^\s*[A-H]\s+[A-Z]{2,}\b")

# --- sentence filters ---------------------------------------------------------------------
_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)?")
_URL = re.compile(r"(?:https?://|www\.)\S+|\S+@\S+\.\w+", re.IGNORECASE)
_CAPTION = re.compile(
    r"(?:fig(?:ure)?|table|tab|listing|algorithm|chart|exhibit|plate)\.?\s*[A-Z]?\d+[a-z]?"
    r"(?:\.\d+)*\s*[:.|—–-]",
    re.IGNORECASE,
)
_PAGE = re.compile(r"(?:page\s+)?\d+(?:\s*(?:of|/)\s*\d+)?", re.IGNORECASE)
_PAGE_OF = re.compile(r"\bpage \d+ of \d+\b")
_HEADERS = (
    "published as a conference paper", "under review as a", "preprint. under review",
    "all rights reserved", "©", "for release ", "for media or other inquiries",
)  # fmt: skip
_HEADER = re.compile(r"\bproceedings of the \d|\(c\) \d{4}|arxiv:\d{4}\.\d{4,5}")
# reference entries: markers (lower case), then patterns tried only where they can match
_REFERENCE_MARKS = (
    "arxiv preprint", "in proceedings", "proceedings of", "doi:", "doi.org", "isbn", "url http",
)  # fmt: skip
_REFERENCE_START = re.compile(r"\[\d+\]\s|\d+\.\s+[A-Z][a-z]+,\s+[A-Z]\.")
_VOLUME = re.compile(r"\b(?:vol|pp)\.\s*\d")
_VENUE = re.compile(r"\b(?:conference|journal|transactions|workshop) on\b.{0,60}\b(?:19|20)\d\d\b")
_INITIALS = re.compile(r"(?:[A-Z][a-z]+,\s(?:[A-Z]\.\s?){1,3},\s){2}")
_YEAR_END = re.compile(r"[,:]\s*(?:19|20)\d\d[a-z]?\.$")
_ISSUE = re.compile(r"\d+\(\d+\):\s?\d+")
# a line that heads a document's references ("References", "10 REFERENCES Josh Abramson, …")
_REFERENCES_HEADING = re.compile(
    r"^\s*(?:\d+\.?\s+)?(?:(?:references|bibliography|works cited)\s*$|"
    r"(?-i:REFERENCES|BIBLIOGRAPHY)\b)",
    re.IGNORECASE | re.MULTILINE,
)
# "Abstract" or "Executive summary" alone on a line, near the start of an untitled section
_SUMMARY_HEADING = re.compile(
    r"^\s*(abstract|executive summary)\b(?:\s*[:.—–-]|\s*$)", re.IGNORECASE | re.MULTILINE
)
OPENING_SECTIONS = 3  # a document's first sections may hold its abstract under another title
_THANKS = re.compile(
    r"\bwe (?:thank|are (?:very )?grateful|gratefully|acknowledge)\b|\bsupported (?:in part )?by\b"
    r"|\bgrant (?:no\.?|number)|\bfunded by\b|\bthanks? (?:go|goes) to\b"
)
_ENUMERATED = re.compile(r"\((?:\d{1,2}|[a-h]|[ivx]{1,4})\)\s")
_FOOTNOTE = re.compile(r"\d+[A-Z][a-z]|[∗*†‡§]")
_NAME_WORDS = frozenset({"and", "et", "al", "de", "van", "von", "der", "da", "di", "le", "la"})
MAX_WORDS = 60  # a longer "sentence" is a run-on of list items or a missed split
_BULLET = "•◦▪●■►‣⁃·"
# prompt and trajectory lines: labels ("Thought 1:"), agent actions ("Search[x]", "> go to"),
# and what text-game environments say
_PROMPT_LABEL = re.compile(
    r"(?:^|\s)(?:question|thought|act|action|obs|observation|answer|claim|context|task|q|a)"
    r"\s*\d*\s*:(?:\s|$)",
    re.IGNORECASE,
)
_PROMPT_ACTION = re.compile(r"\b(?:search|lookup|finish|think|click)\s*\[[^\]]*\]", re.IGNORECASE)
_PROMPT_MOVE = re.compile(
    r"(?:^|\s)>\s*(?:go|take|put|open|close|use|think|look|examine|heat|cool|clean|toggle)\b",
    re.IGNORECASE,
)
_PROMPT_PHRASES = (
    "you are in the middle of a room", "looking quickly around you", "so the answer is",
    "nothing happens", "you pick up", "you arrive at", "your task is to",
)  # fmt: skip
_CODE_MARKS = ("==", "!=", "<=", ">=", "=>", "->", "+=", "::", "#include")
_CODE_START = re.compile(
    r"\s*(?:def|class|import|from|return|for|while|if|elif|else|print)\b.*[:(]"
)
_CODE_CALL = re.compile(r"\w+\([^)]*\)\s*[;:{]|\b\w+_\w+\(")
_CODE_TAG = re.compile(r"</?\w+>")
_CODE_VAR = re.compile(r"\$\w+")
_SYMBOL = re.compile(r"[^\w\s.,;:'’\"“”()\[\]%/—–…-]")
_FINDING_CUE = re.compile(
    r"\b(?:we (?:show|find|found|demonstrate|observe|conclude|propose|present|introduce)|"
    r"(?:results?|findings|experiments|analysis|evidence) (?:show|suggest|indicate|reveal|"
    r"demonstrate|confirm)|outperforms?|improves?|improvements?|significant(?:ly)?|"
    r"increase[sd]?|reduce[sd]?|achieves?|leads? to|conclude|recommend)",
    re.IGNORECASE,
)
_OVERVIEW_CUE = re.compile(
    r"\b(?:this (?:paper|report|document|study|work|article|chapter|handbook|guide)|"
    r"in this (?:paper|report|work|study|document)|we (?:propose|present|introduce|describe)|"
    r"(?:is|are) (?:about|intended|designed|meant))\b",
    re.IGNORECASE,
)
# Words a summary question uses that say nothing about its topic ("What are the key findings
# of this report?" asks about nothing in particular).
_SUMMARY_WORDS = answer_terms(
    "key main major important central findings finding results result points point conclusions "
    "conclude concludes concluded takeaways highlights summary summarize summarise summarized "
    "overview report paper study document article text file this about say says said overall "
    "brief briefly short gist essence topic topics covered cover covers discussed discuss "
    "discusses describe outline recap tldr"
)
_OVERVIEW_QUESTION = re.compile(
    r"\b(?:what(?:'s| is| are)\s+(?:this|the|these)\s+(?:\w+\s+){0,2}"
    r"(?:document|report|paper|file|article|text|book|study|handbook|guide|documents|sources?)"
    r"\s+(?:all\s+)?about|what (?:does|do) (?:this|the) \w+ (?:cover|discuss|describe)|"
    r"\boverview\b|\bgist\b|\btl;?dr\b)",
    re.IGNORECASE,
)


def section_kind(title: str, text: str = "") -> str:
    """What a section is, from its ``title`` (numbering stripped) or, for an untitled one, from
    how its ``text`` opens: one of ``ROLES``' kinds; ``"body"`` when nothing says."""
    head = " ".join(title.split()[:8])
    if _LETTERED.match(head):
        bare = _NUMBERING.sub("", head, count=1)
        for kind, role, pattern in _KINDS:
            if role == "excluded" and pattern.search(bare):
                return kind
        return "appendix"
    bare = _NUMBERING.sub("", head, count=1).strip(" .:")
    if bare:
        for kind, _, pattern in _KINDS:
            if pattern.search(bare):
                return kind
    opening = text.lstrip()[:40].lower()
    for kind in ("abstract", "executive summary", "summary"):
        if opening.startswith(kind):
            return kind
    if not bare:  # an untitled opening: a title page with "Abstract" on a line of its own
        heading = _SUMMARY_HEADING.search(text[:1500])
        if heading:
            return heading.group(1).lower()
    if text and (_mostly_references(text) or _REFERENCES_HEADING.search(text)):
        return "references"
    return "body"


def section_role(title: str, text: str = "") -> Role:
    """``"preferred"``, ``"neutral"`` or ``"excluded"``: the role of ``section_kind``."""
    return ROLES[section_kind(title, text)]


def _mostly_references(text: str) -> bool:
    """Whether most lines of ``text`` (four words or more) read as reference entries."""
    lines = [" ".join(line.split()) for line in text.splitlines() if len(line.split()) >= 4]
    if len(lines) < 4:
        return False
    hits = sum(_is_reference(line, line.lower()) or _author_list(line) for line in lines)
    return hits >= 0.4 * len(lines)


@lru_cache(maxsize=65536)
def rejection(sentence: str) -> str | None:
    """Why ``sentence`` is never quoted in a summary (``"url"``, ``"caption"``, ``"header"``,
    ``"prompt"``, ``"code"``, ``"reference"``, ``"acknowledgement"``, ``"footnote"``,
    ``"short"``, ``"long"``, ``"fragment"``, ``"heading"``), or None when it may be. Cached: a
    session asks about the same sentences again."""
    text = " ".join(sentence.split())
    low = text.lower()
    has_url = "http" in low or "www." in low or "@" in text
    n_words = len(_WORD.findall(_URL.sub(" ", text) if has_url else text))
    checks = (
        ("url", lambda: has_url and _URL.search(text) and n_words < 2 * MIN_WORDS),
        ("caption", lambda: _CAPTION.match(text)),
        ("header", lambda: _is_header(text, low)),
        # a title or heading run into the text: capitalised as a title, no full stop
        ("heading", lambda: text[-1:] not in '.!?"”' and title_cased(text)),
        ("prompt", lambda: _is_prompt(text, low)),
        ("code", lambda: _is_code(text)),
        ("reference", lambda: _is_reference(text, low) or _author_list(text)),
        ("acknowledgement", lambda: _THANKS.search(low)),
        ("footnote", lambda: _FOOTNOTE.match(text)),
        ("short", lambda: n_words < MIN_WORDS),
        ("long", lambda: n_words > MAX_WORDS),
        ("code", lambda: _mostly_symbols(text)),
        ("fragment", lambda: text.lstrip(_BULLET + " \"'“‘([")[:1].islower()),
        ("fragment", lambda: _ENUMERATED.match(text)),  # "(2) Comparison of …": a caption's part
    )
    for why, check in checks:
        if check():
            return why
    return None


def _is_header(text: str, low: str) -> bool:
    """A running header or footer, or a page number."""
    if _PAGE.fullmatch(text) or ("page" in low and _PAGE_OF.search(low)):
        return True
    return any(h in low for h in _HEADERS) or (
        ("proceedings" in low or "(c)" in low or "arxiv:" in low) and bool(_HEADER.search(low))
    )


def _is_prompt(text: str, low: str) -> bool:
    """A line of a prompt or an agent's trajectory."""
    return (
        any(p in low for p in _PROMPT_PHRASES)
        or (":" in text and bool(_PROMPT_LABEL.search(text)))
        or ("[" in text and bool(_PROMPT_ACTION.search(text)))
        or (">" in text and bool(_PROMPT_MOVE.search(text)))
    )


def _is_code(text: str) -> bool:
    """Source code, markup or a formula."""
    return (
        text.rstrip()[-1:] in ("{", "}", ";")
        or any(m in text for m in _CODE_MARKS)
        or bool(_CODE_START.match(text))
        or ("(" in text and bool(_CODE_CALL.search(text)))
        or ("<" in text and bool(_CODE_TAG.search(text)))
        or ("$" in text and bool(_CODE_VAR.search(text)))
        or len(_SYMBOL.findall(text)) > max(3, len(text) // 25)
    )


def _mostly_symbols(text: str) -> bool:
    """Mostly numbers and symbols: a table row or a formula."""
    tokens = text.split()
    return sum(any(ch.isalpha() for ch in t) for t in tokens) < 0.6 * len(tokens)


def _is_reference(text: str, low: str) -> bool:
    """An entry of a reference list."""
    return (
        any(m in low for m in _REFERENCE_MARKS)
        or bool(_REFERENCE_START.match(text))
        or (("vol." in low or "pp." in low) and bool(_VOLUME.search(low)))
        or bool(_YEAR_END.search(text[-12:]))
        or ("):" in text and bool(_ISSUE.search(text)))
        or (" on " in low and bool(_VENUE.search(low)))
        or (text.count(",") >= 2 and bool(_INITIALS.search(text)))
    )


def _author_list(text: str) -> bool:
    """Whether ``text`` reads as a list of names ("Xuezhi Wang, Jason Wei, and Denny Zhou.")."""
    if text.count(",") < 2:
        return False
    words = _WORD.findall(text)
    lower = [w for w in words if w[0].islower() and w not in _NAME_WORDS]
    return len(words) >= 4 and len(lower) <= 1


def asks_overview(question: str) -> bool:
    """Whether ``question`` asks what a document is about (its title and an overview) rather
    than for its findings."""
    return bool(_OVERVIEW_QUESTION.search(question))


def topic_terms(question: str) -> frozenset[str]:
    """The question's content terms less the words every summary request uses: what it asks
    about ("conclude about *tariffs*"); empty for "What are the key findings?"."""
    return answer_terms(question) - _SUMMARY_WORDS


def document_title(chunks: list[Chunk]) -> str:
    """The title of the document most of ``chunks`` come from (``Chunk.title``), or ``""``."""
    titles = Counter(c.title.strip() for c in chunks if c.title.strip())
    return titles.most_common(1)[0][0] if titles else ""


def section_kinds(chunks: list[Chunk]) -> list[str]:
    """``section_kind`` of each chunk's section, read from the section's first chunk (one of a
    document's first ``OPENING_SECTIONS`` with "Abstract" or "Executive summary" on a line of
    its own near its start is that, whatever its title: a title page); a chunk
    that holds its document's references heading or reads as reference entries is
    ``references`` whatever its section, as are the rest of that section's chunks; every later
    chunk of its document that is not excluded already is an ``appendix`` (a paper's
    appendices follow its references)."""
    first: dict[tuple[str, str], str] = {}
    after_refs: dict[str, str] = {}  # document → the section its references start in
    opened: Counter[str] = Counter()  # sections seen per document
    out = []
    for c in chunks:
        key = (c.doc_id, c.section)
        if key not in first:
            kind = section_kind(c.section, c.text)
            if kind == "body" and opened[c.doc_id] < OPENING_SECTIONS:
                # a title page ("Fact-Checking Complex Claims …") with "Abstract" on a line
                heading = _SUMMARY_HEADING.search(c.text[:1500])
                kind = heading.group(1).lower() if heading else kind
            first[key] = kind
            opened[c.doc_id] += 1
        kind = first[key]
        if c.doc_id in after_refs:
            if after_refs[c.doc_id] == c.section:  # the references go on
                kind = "references"
            elif ROLES[kind] != "excluded":
                kind = "appendix"
        elif (
            kind == "references" or _REFERENCES_HEADING.search(c.text) or _mostly_references(c.text)
        ):
            kind = "references"
            after_refs[c.doc_id] = c.section
        out.append(kind)
    return out


@dataclass(frozen=True, slots=True)
class Pick:
    """A sentence a summary quotes: its source number (1-based, as cited), place in that
    source's sentences, text, span in the source's text, section kind and score."""

    n: int
    pos: int
    text: str
    span: tuple[int, int]
    kind: str
    score: float


def pick(
    question: str | None,
    hits: list[Hit],
    *,
    overview: bool | None = None,
    kinds: list[str] | None = None,
) -> list[Pick]:
    """The sentences of ``hits`` that answer a summary ``question`` (None: key findings), in
    source order: 3–6 for key findings, 3–4 for an overview (``overview``: default from
    ``asks_overview``). ``kinds``: each hit's section kind (default ``section_kinds``); sources
    of an excluded kind are never quoted. When the quotable sentences are no more than the
    most an answer takes, all of them are picked."""
    if not hits:
        return []
    question = question or ""
    overview = asks_overview(question) if overview is None else overview
    kinds = kinds if kinds is not None else section_kinds([h.chunk for h in hits])
    fewest, most = OVERVIEW if overview else FINDINGS
    repeats = _repeated(hits)
    cands = [
        c
        for c in candidates(hits)
        if c.quotable
        and ROLES[kinds[c.n - 1]] != "excluded"
        and " ".join(c.text.lower().split()) not in repeats
        and rejection(c.text) is None
    ]
    if not cands:
        return []
    scores = _scores(question, cands, [kinds[c.n - 1] for c in cands], overview)
    order = sorted(range(len(cands)), key=lambda i: (-scores[i], cands[i].n, cands[i].pos))
    chosen: list[int] = []
    if len(cands) <= most:
        chosen = [i for i in order if not any(_similar(cands[i], cands[j]) for j in chosen)]
    else:
        best = scores[order[0]]
        per: Counter[tuple[str, str]] = Counter()
        for cap in (1, PER_SECTION):
            for i in order:
                if len(chosen) == most:
                    break
                if i in chosen or per[_section(hits, cands[i].n)] >= cap:
                    continue
                if len(chosen) >= fewest and scores[i] < KEEP_RATIO * best:
                    break
                if any(_similar(cands[i], cands[j]) for j in chosen):
                    continue
                chosen.append(i)
                per[_section(hits, cands[i].n)] += 1
    picked = sorted(chosen, key=lambda i: (cands[i].n, cands[i].pos))
    return [_pick(cands[i], kinds, scores[i]) for i in picked]


def _pick(c: Candidate, kinds: list[str], score: float) -> Pick:
    """A picked candidate as the summary quotes it (a list bullet left off)."""
    text = c.text.lstrip(_BULLET + " ")
    return Pick(c.n, c.pos, text, c.span, kinds[c.n - 1], round(float(score), 6))


def _section(hits: list[Hit], n: int) -> tuple[str, str]:
    """The (document, section) of source ``n``; each chunk of an untitled text is its own."""
    c = hits[n - 1].chunk
    return c.doc_id, c.section or c.chunk_id


def _similar(a: Candidate, b: Candidate) -> bool:
    union = a.terms | b.terms
    return bool(union) and len(a.terms & b.terms) / len(union) >= DUPLICATE


def _repeated(hits: list[Hit]) -> set[str]:
    """Lines found in ``REPEATS`` or more chunks of one document: running headers, footers."""
    seen: Counter[tuple[str, str]] = Counter()
    for h in hits:
        lines = {" ".join(line.lower().split()) for line in h.chunk.text.splitlines()}
        for line in lines:
            if 3 <= len(line.split()) <= 20:
                seen[h.chunk.doc_id, line] += 1
    return {line for (_, line), n in seen.items() if n >= REPEATS}


@lru_cache(maxsize=65536)
def _cued(text: str, overview: bool) -> bool:
    """Whether ``text`` states a finding (or, for an overview, what the document is)."""
    return bool((_OVERVIEW_CUE if overview else _FINDING_CUE).search(text))


def _scores(question: str, cands: list[Candidate], kinds: list[str], overview: bool) -> Any:
    """Each candidate's score: centrality (scaled to the best) + relevance to the question's
    topic terms + its section's role prior + a cue for findings (or for an overview, for what
    the document is and for coming early)."""
    import numpy as np

    central = np.asarray(textrank(cands), dtype=np.float64)
    central = central / central.max() if central.size and central.max() > 0 else central
    score = 0.5 * central
    topic = topic_terms(question)
    if topic:
        df = Counter(t for c in cands for t in c.terms & topic)
        idf = {t: np.log((1 + len(cands)) / (1 + df.get(t, 0))) + 1.0 for t in topic}
        total = sum(idf.values())
        rel = np.array([sum(idf[t] for t in c.terms & topic) / total for c in cands])
        if rel.max() > 0:
            score = score * np.where(rel > 0, 1.0, 0.5) + rel
    which = 1 if overview else 0
    score += np.array([_PRIOR.get(k, (0.0, 0.0))[which] for k in kinds])
    score += np.array([0.1 if _cued(c.text, overview) else 0.0 for c in cands])
    score += np.array([0.05 / (1 + c.lead) for c in cands])
    if overview:  # the opening of the sources says what they are about
        score += 0.3 * (1.0 - np.arange(len(cands)) / max(1, len(cands)))
    return score
