"""MMLongBench-Doc's published scoring, and the short answer it scores from a Fathom answer.

The scorer is a port of upstream ``eval/eval_score.py`` (github.com/mayubo2333/MMLongBench-Doc,
Apache-2.0, commit d73f0dc): ``eval_score``, ``anls_compute``, ``levenshtein_distance``,
``is_float_equal``, ``get_clean_string``, ``is_exact_match``, ``isfloat`` and ``eval_acc_and_f1``
keep upstream's behaviour, quirks included (each noted where it is); the one change is that list
strings are parsed with ``ast.literal_eval``, never ``eval``.

Upstream lets a language model extract a short answer from a response; here the short answer is
Fathom's own, deterministically (``short_answer``): an abstention is ``Not answerable``; else the
answer's ``short_answer`` field, its span's text, or its text with the ``[n]`` citations
stripped; a number out of it for Int and Float questions; a list for List questions.
"""

from __future__ import annotations

import ast
import re
from math import isclose
from typing import Any

NOT_ANSWERABLE = "Not answerable"
FORMATS = ("Str", "Int", "Float", "List", "None")

# ---------------------------------------------------------------------------------------------
# Upstream eval/eval_score.py
# ---------------------------------------------------------------------------------------------


def levenshtein_distance(s1: str, s2: str) -> int:
    """Edit distance between ``s1`` and ``s2`` (insertions, deletions, substitutions)."""
    if len(s1) > len(s2):
        s1, s2 = s2, s1
    distances = list(range(len(s1) + 1))
    for i2, c2 in enumerate(s2):
        distances_ = [i2 + 1]
        for i1, c1 in enumerate(s1):
            if c1 == c2:
                distances_.append(distances[i1])
            else:
                distances_.append(1 + min((distances[i1], distances[i1 + 1], distances_[-1])))
        distances = distances_
    return distances[-1]


def anls_compute(groundtruth: str, prediction: str, threshold: float = 0.5) -> float:
    """1 - normalised edit distance, or 0.0 when that similarity is at most ``threshold``."""
    dist = levenshtein_distance(groundtruth, prediction)
    # Upstream quirk: the length is taken of the upper-cased strings (the distance of the strings
    # as given), which differ only where upper-casing changes a length ("ß" → "SS").
    length = max(len(groundtruth.upper()), len(prediction.upper()))
    value = 0.0 if length == 0 else float(dist) / float(length)
    anls = 1.0 - value
    if anls <= threshold:  # a similarity of exactly 0.5 scores 0
        anls = 0.0
    return anls


def is_float_equal(
    reference: Any, prediction: Any, include_percentage: bool = False, is_close: bool = False
) -> bool:
    """Whether ``prediction`` equals ``reference`` as a number: within 1 % (``is_close``), or
    equal when both are rounded to the fewer of their decimals (at least 2); with
    ``include_percentage`` also against ``reference / 100`` and ``reference * 100``."""

    def get_precision(gt_ans: float) -> int:
        precision = 3
        if "." in str(gt_ans):
            precision = len(str(gt_ans).split(".")[-1])
        return precision

    # Upstream quirk: a reference that is not a number raises here (outside the try); every
    # Float answer in the data is a number.
    reference = float(str(reference).strip().rstrip("%").strip())
    try:
        prediction = float(str(prediction).strip().rstrip("%").strip())
    except ValueError:
        return False

    gt_result = [reference / 100, reference, reference * 100] if include_percentage else [reference]
    for item in gt_result:
        try:
            if is_close and isclose(item, prediction, rel_tol=0.01):
                return True
            precision = max(min(get_precision(prediction), get_precision(item)), 2)
            if round(prediction, precision) == round(item, precision):
                return True
        except Exception:  # upstream skips a value that cannot be compared (inf, nan)
            continue
    return False


def get_clean_string(s: Any) -> str:
    """Lower-cased, stripped, without parentheses, surrounding quotes, a leading ``$`` or a
    trailing ``%``."""
    s = str(s).lower().strip()
    # Upstream quirk: it means to drop a trailing "mile", "miles" or "million" but discards
    # the result of ``s.rstrip(...)``, so the units stay; kept as upstream scores.
    # remove parenthesis
    s = re.sub(r"\s*\([^)]*\)", "", s).strip()
    # remove quotes
    s = re.sub(r"^['\"]|['\"]$", "", s).strip()
    s = s.strip().lstrip("$").strip()
    s = s.strip().rstrip("%").strip()
    return s


def is_exact_match(s: str) -> bool:
    """Whether a (cleaned) answer must match exactly rather than by ANLS: a URL, a code file, a
    page reference, a phone-like number, a time, a date (YYYY-MM-DD, YYYY-MM), an email."""
    flag = False
    # Website
    if "https://" in s:
        flag = True
    # code file (upstream: "ipynb" without the dot)
    if s.endswith(".py") or s.endswith("ipynb"):
        flag = True
    if s.startswith("page"):
        flag = True
    # telephone number (upstream: also any bare integer, "2", "2 3", "12-34")
    if re.fullmatch(r"\b\d+(-\d+|\s\d+)?\b", s):
        flag = True
    # time
    if "a.m." in s or "p.m." in s:
        flag = True
    # YYYY-MM-DD
    if re.fullmatch(r"\b\d{4}[-\s]\d{2}[-\s]\d{2}\b", s):
        flag = True
    # YYYY-MM
    if re.fullmatch(r"\b\d{4}[-\s]\d{2}\b", s):
        flag = True
    # Email address
    if re.fullmatch(r"[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}", s):
        flag = True
    return flag


def isfloat(num: Any) -> bool:
    try:
        float(num)
        return True
    except (ValueError, TypeError):
        return False


def _parse_list(value: Any) -> Any:
    """Upstream ``eval``s a string starting with "["; here ``ast.literal_eval`` parses it (a
    string it cannot parse stays a string, which upstream's ``eval`` would raise on)."""
    if isinstance(value, str) and value.startswith("["):
        try:
            return ast.literal_eval(value)
        except (ValueError, SyntaxError):
            return value
    return value


def eval_score(gt: Any, pred: Any, answer_type: str) -> float:
    """Upstream's score of ``pred`` against ``gt`` for an ``answer_type`` (``FORMATS``): 1.0 or
    0.0 for Int, Float and exact-match kinds, else ANLS (0.0 at a similarity of 0.5 or less);
    a List scores 0.0 when the lengths differ, else item by item after sorting (exact when the
    first ground-truth item is a number or an exact-match kind, else the worst item's ANLS)."""
    if answer_type == "Int":
        try:
            gt, pred = int(gt), int(float(pred))  # upstream truncates "3.7" to 3
        except (ValueError, TypeError, OverflowError):
            # Upstream quirk: ``gt`` stays a string when it is not an integer ("GPT-4"), so
            # such a question scores 0 whatever the prediction.
            pred = ""
        score: float | bool = gt == pred
    elif answer_type == "Float":
        try:
            gt = float(get_clean_string(str(gt)))
            pred = float(get_clean_string(str(pred)))
        except ValueError:
            pred = ""
        score = is_float_equal(gt, pred, include_percentage=True, is_close=True)
    elif answer_type in ["Str", "None"]:
        gt = get_clean_string(gt)
        pred = get_clean_string(pred)
        # Upstream quirk: only the ground truth decides exact matching, so a short integer
        # string answer ("2") must be said exactly.
        score = gt == pred if is_exact_match(gt) else anls_compute(gt, pred)
    else:
        gt = _parse_list(gt)
        if not isinstance(gt, list):
            gt = [gt]
        pred = _parse_list(pred)
        if not isinstance(pred, list):
            pred = [pred]
        # (upstream prints the lengths and the sorted lists here)
        if len(gt) != len(pred):
            score = 0.0
        else:
            gt = sorted([get_clean_string(a) for a in gt])
            pred = sorted([get_clean_string(a) for a in pred])
            # Upstream quirk: the first sorted ground-truth item alone decides exact matching
            # of the whole list; an empty list raises (none in the data).
            if isfloat(gt[0]) or is_exact_match(gt[0]):
                score = "-".join(gt) == "-".join(pred)
            else:
                score = min(
                    [anls_compute(gt_v, pred_v) for gt_v, pred_v in zip(gt, pred, strict=True)]
                )
    return float(score)


def eval_acc_and_f1(samples: list[dict[str, Any]]) -> tuple[float, float]:
    """Upstream's accuracy (the mean score) and generalized F1 of scored ``samples`` (each with
    ``score``, ``answer`` and ``pred``): recall over the answerable questions, precision over the
    questions not predicted ``Not answerable``."""
    evaluated = [s for s in samples if "score" in s]
    if not evaluated:
        return 0.0, 0.0
    acc = sum(s["score"] for s in evaluated) / len(evaluated)
    answerable = [s for s in evaluated if s["answer"] != NOT_ANSWERABLE]
    predicted = [s for s in evaluated if s["pred"] != NOT_ANSWERABLE]
    if not answerable or not predicted:
        return acc, 0.0  # upstream: a ZeroDivisionError caught as F1 = 0
    hits = sum(s["score"] for s in answerable)
    recall, precision = hits / len(answerable), hits / len(predicted)
    f1 = 2 * recall * precision / (recall + precision) if (recall + precision) > 0.0 else 0.0
    return acc, f1


def strict_right(score: float) -> bool:
    """A question counts right: exact for Int, Float and exact-match kinds (score 1), an ANLS
    similarity of at least 0.5 for the rest (``anls_compute`` already zeroes 0.5 and below)."""
    return score >= 0.5


# ---------------------------------------------------------------------------------------------
# The short answer of a Fathom answer
# ---------------------------------------------------------------------------------------------

_CITATION = re.compile(r"\s*\[\d+(?:\s*[,;–-]\s*\d+)*\]")
# A number with thousands separators and decimals ("1,234.5"), signed only where the minus
# starts a word ("-3", not the "-19" of "COVID-19").
_NUMBER = re.compile(r"(?:(?<!\w)[-−])?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")


def abstained(answer: dict[str, Any]) -> bool:
    """Whether a Fathom ``--json`` answer declined: ``"abstained": true``, or (an answer from
    before that field) text starting with "I don't know"."""
    text = str(answer.get("answer") or "").lstrip()
    return answer.get("abstained") is True or text.startswith(("I don't know", "I don’t know"))


def strip_citations(text: str) -> str:
    """``text`` without its ``[n]`` / ``[1, 2]`` citation marks."""
    return re.sub(r"\s+", " ", _CITATION.sub("", text)).strip()


def first_number(text: str) -> str | None:
    """The first number in ``text`` with thousands separators, ``%`` and ``$`` removed (``"$1,234
    (12%)"`` → ``"1234"``), or None."""
    m = _NUMBER.search(text.replace("$", ""))
    return m.group(0).replace(",", "").replace("−", "-") if m else None


def short_answer(answer: dict[str, Any], answer_format: str) -> str | list[str]:
    """What is scored of a Fathom ``--json`` answer for a question of ``answer_format``:
    ``Not answerable`` when it abstained; else its ``short_answer`` (a string, or a list of
    strings), else its span's text, else its text without citations. For Int and Float, the
    first number in it when it is not a number itself; for List, a list (a string is one item)."""
    if abstained(answer):
        return NOT_ANSWERABLE
    short = answer.get("short_answer")
    value: str | list[str]
    if isinstance(short, list) and short:
        value = [str(v) for v in short]
    elif isinstance(short, str) and short.strip():
        value = short.strip()
    elif isinstance(answer.get("span"), dict) and str(answer["span"].get("text") or "").strip():
        value = str(answer["span"]["text"]).strip()
    else:
        value = strip_citations(str(answer.get("answer") or ""))
    if answer_format == "List":
        return value if isinstance(value, list) else [value]
    if isinstance(value, list):
        value = ", ".join(value)
    if answer_format in ("Int", "Float") and not isfloat(value.strip()):
        return first_number(value) or value
    return value


def score_answer(answer: dict[str, Any], gold: str, answer_format: str) -> dict[str, Any]:
    """``{"pred", "score", "right", "abstained"}`` of a Fathom answer to a question whose gold
    answer is ``gold``."""
    pred = short_answer(answer, answer_format)
    score = eval_score(gold, pred, answer_format)
    return {
        "pred": pred,
        "score": score,
        "right": strict_right(score),
        "abstained": abstained(answer),
    }
