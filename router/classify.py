"""Query-type classification: regex cues plus a small logistic regression, evaluated in numpy.

A question becomes ``[query embedding (dim) ‖ rule features]``; a multinomial logistic regression
trained by ``learn.train_classifier`` maps that to the four ``QueryType`` classes. The rules carry
the surface cues (summarise, why, how many, "the X of the Y who …"), the embedding carries the
paraphrases the rules miss. The policy is a JSON file of weights that this module evaluates with
one matrix-vector product: no sklearn, no torch at query time. The pipeline embeds the question
once and passes the vector in (``classify(question, embedding=vec)``), so classifying costs well
under a millisecond.

A summary is answered only when it is asked for: the type is the most probable one, except that a
question with no summary cue in it (``asks_for_summary``: summarise, overview, key findings, what
is this about, …) takes its most probable other type. Every summary request among the training
questions carries such a cue and no other question does, yet the embedding alone carried the
summary class over to plain questions about a passage ("What are the clinical symptoms of
pertussis?", "What are stators attached to?": 4 % of SQuAD's questions, 6.5 % of COVID-QA's),
which were then summarised, read without reranking, instead of answered. The class probabilities
stay the model's own: they are what depth policies read.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fathom.core.errors import IndexMismatchError

if TYPE_CHECKING:
    import numpy as np
    from fathom.core.base import Embedder, QueryType
    from fathom.core.config import Config

CLASSES: tuple[QueryType, ...] = ("factual", "summarization", "reasoning", "multi_hop")
POLICY_FORMAT = 1
POLICY_KIND = "query_type_logreg"
DEFAULT_POLICY = Path(__file__).resolve().parent / "policies" / "query_type.json"
DEFAULT_DATA = Path(__file__).resolve().parent / "data" / "query_types.jsonl"

# ---------------------------------------------------------------------------------------------
# Rule features
# ---------------------------------------------------------------------------------------------

_I = re.IGNORECASE
_DOC = (
    r"(?:document|doc|docs|report|paper|article|manual|handbook|guide|guideline|contract|"
    r"agreement|policy|thesis|transcript|minutes|notes|brochure|whitepaper|readme|review|study|"
    r"book|memo|filing|proposal|plan|protocol|assessment|opinion|statement|release notes)"
)
_SUMMARY_VERB = re.compile(
    r"\b(?:summari[sz]\w*|(?<!discharge )summary(?! judgments?\b| tables?\b| statistics\b)|"
    r"synopsis|recap\w*|sum(?:s|med)? up|condense|digest|gist|"
    r"tl;?\s?dr|overview|outline|rundown|run-down|big picture|in a nutshell|abstract-style|"
    r"skim|bullet points|in a few sentences|in plain language|high-level)\b",
    _I,
)
_SUMMARY_PHRASE = re.compile(
    r"\b(?:(?:key|main|major|principal|central|headline|overarching|most important|general)\s+"
    r"(?:[a-z]+\s+)?"
    r"(?:findings?|points?|takeaways?|highlights?|results?|themes?|topics?|ideas?|features?|"
    r"clauses?|recommendations?|conclusions?|arguments?|goals?|messages?|sections?|events?|"
    r"numbers?|obligations?|limitations?|contributions?|changes?|issues?|lessons|risks|"
    r"provisions)|"
    r"what(?:'s| is| are)? (?:this|the|that) [\w -]{0,30}?(?:mainly |mostly )?about\b|"
    r"what (?:does|do) (?:this|the) [\w -]{0,30}?(?:cover|contain|say|propose)\b|"
    r"what (?:this|the) (?:whole |entire )?[\w-]+ (?:covers|contains)\b|"
    r"what ground does|describe (?:the )?(?:contents?|overall|main)|what it'?s about)",
    _I,
)
_DOC_NOUN = re.compile(rf"\b{_DOC}s?\b", _I)
_SECTION_REF = re.compile(
    r"\b(?:section|chapter|appendix|clause|paragraph|page|table|figure|part|schedule|annex|"
    r"exhibit|slide|step|note|article|amendment)\s+(?:\d|[ivx]+\b|[a-z]\b)",
    _I,
)
_WHY = re.compile(r"\bwhy\b|\bhow come\b|\bfor what reason\b", _I)
_HOW_MECH = re.compile(
    r"\bhow (?:does|do|did|would|could|can|might|will|should|is|are|was|were)\b", _I
)
_HOW_QTY = re.compile(r"\bhow (?:many|much|long|old|far|tall|often|big|large|high|fast)\b", _I)
_EXPLAIN = re.compile(
    r"\b(?:explain\w*|rationale|reasons?|reasoning|justif\w+|interpret\w*|implications?|"
    r"consequences?|significance|mechanism|trade-?offs?|advantages?|disadvantages?|"
    r"lessons?|evaluate|assess|predict|suggests?|likely|enforceable|robust|sensitive|"
    r"causal(?:ity)?|support the claim|mean by|risks?|downsides?|drawbacks?|upsides?|"
    r"impl(?:y|ies|ied)|adequate|sufficient|enough)\b",
    _I,
)
_HYPOTHETICAL = re.compile(
    r"\bwhat (?:would|will|could|might|happens)\b|\bwhat if\b|\bsuppose\b|\bif\b[^?]*\b(?:would|"
    r"will|could|might)\b|\b(?:would|could|might)\b|^\s*should\b|\bgiven\b|"
    r"\bunder what conditions\b",
    _I,
)
_COMPARE = re.compile(
    r"\b(?:compare\w*|comparison|versus|vs\.?|better|worse|more (?:robust|effective|suitable|"
    r"advantageous|likely)|most (?:advantageous|suitable|effective|robust)|differ\w*|prefer\w*|"
    r"recommend\b|improve on|suits?)\b",
    _I,
)
_AFFECT = re.compile(
    r"\b(?:affect\w*|impact\w*|influenc\w+|effects?|change the|lead to|leads to|caus\w+|"
    r"interact\w*|connected to|relate to|erode\w*|protect\w*|reduce\w*|prevent\w*)\b",
    _I,
)
_WH_START = re.compile(
    r"^\s*(?:who|whom|whose|when|where|which|what|in what|in which|on what|at what|from which|"
    r"to which|for which|how (?:many|much|long|old|far|tall|often))\b",
    _I,
)
_QUANTITY = re.compile(
    r"\bhow (?:many|much|long|old|far|tall|often)\b|\bwhat (?:year|date|percentage|rate|number|"
    r"amount|value|size|time|dose|dosage|temperature|version|port|price)\b|\b(?:date|year|"
    r"number|value|rate|ratio|percentage|temperature|pressure|voltage|dose|threshold|deadline|"
    r"version|port|price|code|name|title|length|size|period)\b",
    _I,
)
_IMPERATIVE_FACT = re.compile(r"^\s*(?:name|list|give the|tell me the|state|find)\b", _I)
_YES_NO = re.compile(r"^\s*(?:is|are|does|do|did|was|were|can|has|have|will)\b", _I)
_REL = re.compile(r"\b(?:that|who|whom|whose|which|where|when)\b", _I)
_OF_THE_REL = re.compile(r"\bof the\b[^?]*?\b(?:who|that|which|whose|where|when)\b", _I)
_POSSESSIVE = re.compile(r"\b(\w+)(?:'s|’s|s')(?=\s)", _I)
_CONTRACTIONS = {"what", "it", "that", "who", "there", "here", "where", "how", "let", "he", "she"}
_LEAD_WH = re.compile(
    r"^\s*(?:(?:in|on|at|from|to|for|by|of|with)\s+)?(?:what|which|who|whom|whose|when|where)\b",
    _I,
)
_POSSESSIVE_CHAIN = re.compile(r"\w(?:'s|’s)\s+\w+(?:\s+\w+)?(?:'s|’s)\s", _I)
_PARTICIPLE = re.compile(
    r"\b(?:\w+(?:ed|en|ld|nt)|used|run|held|made|led|won|sold|built|set|hit)\s+"
    r"(?:by|in|into|for|from|at|on|with)\s+(?:the|a|an|its|their)\b",
    _I,
)
_OF_THE = re.compile(r"\bof (?:the|its|their|a|an)\b", _I)
_OF_CHAIN = re.compile(r"\bthe \w+(?: \w+)? of the \w+(?: \w+)? of\b", _I)
_BRIDGE = re.compile(
    r"\b(?:born|birthplace|founded|founder|headquartered|headquarters|capital of|parent company|"
    r"successor|succeeded|predecessor|acquired|acquirer|bought|owned by|owns|author of|"
    r"authors?|director of|inventor|invented|nationality|located|attend(?:ed)?|alma mater|"
    r"subsidiary|sponsored|hosted|hosts|signed by|married|employer|trained|named after|after whom|"
    r"supplies|supplier|replaced|depends on|maintains|funded|cited by|cites|succeeded by)\b",
    _I,
)
_BOTH_SAME = re.compile(r"\b(?:both|the same|also|each|in each|either)\b", _I)
_TWO_OPTIONS = re.compile(r"\b(?:[A-Z][\w.]*(?: [A-Z][\w.]*)*|the one [^,?]+) or (?:the one|[A-Z])")
_YEARS = re.compile(r"\b(?:1[5-9]|20)\d\d\b")
_CAPITAL = re.compile(r"(?<=\s)[A-Z][a-z]+\b")
_WORD = re.compile(r"[\w'’-]+")

RULE_FEATURES: tuple[str, ...] = (
    "summary_verb",
    "summary_phrase",
    "doc_noun",
    "section_ref",
    "why",
    "how_mechanism",
    "how_quantity",
    "explain",
    "hypothetical",
    "compare",
    "affect",
    "wh_start",
    "quantity",
    "imperative_fact",
    "yes_no",
    "relative_clauses",
    "of_the_relative",
    "possessives",
    "possessive_chain",
    "of_chain",
    "participle_link",
    "chain_links",
    "bridge_terms",
    "both_same",
    "two_options",
    "two_years",
    "capitalised",
    "n_words",
    "short",
)
RULES_VERSION = 1


def rule_features(question: str) -> list[float]:
    """The rule feature vector of ``question``, in ``RULE_FEATURES`` order (values in [0, 1])."""
    q = question.strip()
    n = len(_WORD.findall(q))
    # Relative pronouns after the question word (not the question word itself) link two facts.
    rel = len(_REL.findall(_LEAD_WH.sub("", q, count=1)))
    possessives = sum(1 for m in _POSSESSIVE.finditer(q) if m.group(1).lower() not in _CONTRACTIONS)
    # Each relative clause, "of the", participle ("issued by the") or possessive is a link
    # from one entity to the next; two or more usually mean a chain of lookups.
    links = (
        rel
        + len(_PARTICIPLE.findall(q))
        + len(_OF_THE.findall(q))
        + possessives
        + len(_BOTH_SAME.findall(q))
    )
    return [
        float(bool(_SUMMARY_VERB.search(q))),
        float(bool(_SUMMARY_PHRASE.search(q))),
        float(bool(_DOC_NOUN.search(q))),
        float(bool(_SECTION_REF.search(q))),
        float(bool(_WHY.search(q))),
        float(bool(_HOW_MECH.search(q))),
        float(bool(_HOW_QTY.search(q))),
        float(bool(_EXPLAIN.search(q))),
        float(bool(_HYPOTHETICAL.search(q))),
        float(bool(_COMPARE.search(q))),
        float(bool(_AFFECT.search(q))),
        float(bool(_WH_START.search(q))),
        float(bool(_QUANTITY.search(q))),
        float(bool(_IMPERATIVE_FACT.search(q))),
        float(bool(_YES_NO.search(q))),
        min(rel, 3) / 3.0,
        float(bool(_OF_THE_REL.search(q))),
        min(possessives, 2) / 2.0,
        float(bool(_POSSESSIVE_CHAIN.search(q))),
        float(bool(_OF_CHAIN.search(q))),
        float(bool(_PARTICIPLE.search(q))),
        min(links, 4) / 4.0,
        min(len(_BRIDGE.findall(q)), 3) / 3.0,
        float(bool(_BOTH_SAME.search(q))),
        float(bool(_TWO_OPTIONS.search(q))),
        float(len(_YEARS.findall(q)) >= 2),
        min(len(_CAPITAL.findall(q)), 3) / 3.0,
        min(n, 30) / 30.0,
        float(n <= 6),
    ]


# Asking what a whole text is about without a summary word: a cue for ``asks_for_summary`` only
# (not a rule feature, so the model's inputs stay those it was trained on).
_ABOUT_WHOLE = re.compile(
    rf"\bwhat (?:is|are|was|were) (?:being )?(?:discussed|described|covered|presented|reported) "
    rf"in (?:this|the) (?:\w+ )?(?:{_DOC}|publication|text)s?\b|"
    rf"\bwhat (?:does|do|did) (?:this|the) (?:\w+ )?(?:{_DOC}|publication|text)s? "
    rf"(?:discuss|describe|present)\b|"
    # what a whole text or its authors conclude, recommend or find ("What does the report
    # conclude about X?"): its conclusions, recommendations or findings, on X when named
    rf"\bwhat (?:does|do|did) (?:this|the|its|their) (?:\w+ )?(?:{_DOC}s?|authors?|"
    rf"researchers?|committee|board|panel|agency|commission) (?:conclude|recommend|find)\b",
    _I,
)


def asks_for_summary(question: str) -> bool:
    """Whether ``question`` asks for a summary in so many words: a summary verb or phrase, or
    what a whole text discusses ("What is discussed in this publication?")."""
    return bool(
        _SUMMARY_VERB.search(question)
        or _SUMMARY_PHRASE.search(question)
        or _ABOUT_WHOLE.search(question)
    )


def chosen_type(classes: tuple[QueryType, ...], probs: np.ndarray, question: str) -> QueryType:
    """The most probable of ``classes`` under ``probs``, a summary only when the question asks
    for one (ties: the earlier class)."""
    import numpy as np

    summary = asks_for_summary(question)
    for i in np.argsort(-np.asarray(probs), kind="stable"):
        if summary or classes[int(i)] != "summarization":
            return classes[int(i)]
    return classes[int(np.argmax(probs))]


def rule_label(question: str) -> QueryType:
    """The query type from the rules alone: the fallback when no embedding or policy is at hand.

    Precedence: an explicit summary request wins, then an explicit reasoning cue (why, how does,
    explain, what would happen), then chaining cues (possessive chains, relative clauses after a
    bridging relation, "of the … who"), and anything else is a factual lookup.
    """
    f = dict(zip(RULE_FEATURES, rule_features(question), strict=True))
    if f["summary_verb"] or f["summary_phrase"]:
        return "summarization"
    if f["why"] or f["how_mechanism"] or f["explain"] or f["hypothetical"] or f["compare"]:
        return "reasoning"
    chained = (
        f["possessive_chain"]
        or f["of_chain"]
        or f["two_options"]
        or f["two_years"]
        or f["chain_links"] >= 2 / 4
        or (f["relative_clauses"] > 0 and f["bridge_terms"] > 0)
        or (f["bridge_terms"] >= 2 / 3)
    )
    if chained:
        return "multi_hop"
    return "factual"


# ---------------------------------------------------------------------------------------------
# The learned policy
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QueryTypePolicy:
    """A loaded policy: ``weights`` ``(dim + n_rules, n_classes)``, ``bias`` ``(n_classes,)``."""

    classes: tuple[QueryType, ...]
    embedder_id: str
    embedding_dim: int
    weights: np.ndarray
    bias: np.ndarray
    meta: dict[str, Any]

    @classmethod
    def load(cls, path: Path) -> QueryTypePolicy:
        """Read and validate a policy file written by ``learn.train_classifier``."""
        import numpy as np

        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise IndexMismatchError(
                f"{path}: no query-type policy — run `python -m fathom.learn.train_classifier`"
            ) from None
        except (OSError, json.JSONDecodeError) as exc:
            raise IndexMismatchError(
                f"{path}: unreadable query-type policy ({exc}) — run "
                "`python -m fathom.learn.train_classifier` to regenerate it"
            ) from None
        if data.get("kind") != POLICY_KIND or data.get("format") != POLICY_FORMAT:
            raise IndexMismatchError(
                f"{path}: not a query-type policy of format {POLICY_FORMAT} "
                f"(kind={data.get('kind')!r}, format={data.get('format')!r}) — retrain it with "
                "`python -m fathom.learn.train_classifier`"
            )
        dim = int(data["embedding_dim"])
        names = list(data["feature_names"])
        if names[dim:] != [f"rule:{r}" for r in RULE_FEATURES]:
            raise IndexMismatchError(
                f"{path}: trained on a different set of rule features than this code computes — "
                "retrain it with `python -m fathom.learn.train_classifier`"
            )
        weights = np.asarray(data["weights"], dtype=np.float64)
        bias = np.asarray(data["bias"], dtype=np.float64)
        classes = tuple(data["classes"])
        if weights.shape != (len(names), len(classes)) or bias.shape != (len(classes),):
            raise IndexMismatchError(
                f"{path}: weights of shape {weights.shape} do not match {len(names)} features × "
                f"{len(classes)} classes — the file is damaged; retrain it"
            )
        unknown = set(classes) - set(CLASSES)
        if unknown:
            raise IndexMismatchError(f"{path}: unknown query types {sorted(unknown)}")
        return cls(classes, data["embedder_id"], dim, weights, bias, data.get("training", {}))

    def probabilities(self, features: np.ndarray) -> np.ndarray:
        """Class probabilities for ``features`` ``(n, dim + n_rules)`` → ``(n, n_classes)``."""
        import numpy as np

        logits = features @ self.weights + self.bias
        logits -= logits.max(axis=-1, keepdims=True)
        e = np.exp(logits)
        return e / e.sum(axis=-1, keepdims=True)


class QueryClassifier:
    """Labels a question with its ``QueryType`` and class probabilities.

    Cheap to construct: the policy file is read, and checked against the embedder's id, on first
    use (or by ``load()``). ``embedder`` embeds questions when no embedding is passed in; give
    ``embedder_id`` instead when the caller always passes embeddings from its own embedder.
    """

    name = "logreg"

    def __init__(
        self,
        embedder: Embedder | None = None,
        policy_path: str | Path | None = None,
        *,
        embedder_id: str | None = None,
        policy: QueryTypePolicy | None = None,
    ) -> None:
        """``policy``: the policy already read from ``policy_path`` (it is then not read again);
        still checked against the embedder on first use."""
        self.embedder = embedder
        self.embedder_id = embedder_id or (embedder.id if embedder is not None else None)
        self.policy_path = Path(policy_path) if policy_path else DEFAULT_POLICY
        self._preloaded = policy
        self._policy: QueryTypePolicy | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, cfg: Config, policy_path: str | Path | None = None) -> QueryClassifier:
        """A classifier using the configured query-path embedder (the ONNX export when present)."""
        from fathom.index.embed import make_query_embedder

        return cls(make_query_embedder(cfg.embedder, cfg.models_path()), policy_path)

    def load(self) -> QueryTypePolicy:
        """Read the policy once; ``IndexMismatchError`` when it was trained on another embedder."""
        if self._policy is None:
            with self._lock:
                if self._policy is None:
                    policy = self._preloaded or QueryTypePolicy.load(self.policy_path)
                    if self.embedder_id is not None and policy.embedder_id != self.embedder_id:
                        raise IndexMismatchError(
                            f"{self.policy_path}: query-type policy was trained on embeddings "
                            f"of {policy.embedder_id!r} but the embedder in use is "
                            f"{self.embedder_id!r} — retrain it with `python -m "
                            "fathom.learn.train_classifier --embedder <name>` or use the "
                            "policy's "
                            "embedder"
                        )
                    self._policy = policy
        return self._policy

    def features(self, question: str, embedding: np.ndarray | None = None) -> np.ndarray:
        """``[embedding ‖ rule features]`` as ``(dim + n_rules,) float64``."""
        import numpy as np

        policy = self.load()
        if embedding is None:
            if self.embedder is None:
                raise ValueError(
                    "QueryClassifier has no embedder: pass embedding=… or build it with "
                    "QueryClassifier.from_config(cfg)"
                )
            embedding = self.embedder.embed([question])[0]
        vec = np.asarray(embedding, dtype=np.float64).reshape(-1)
        if vec.shape[0] != policy.embedding_dim:
            raise IndexMismatchError(
                f"{self.policy_path}: expects {policy.embedding_dim}-dimensional embeddings of "
                f"{policy.embedder_id!r}, got {vec.shape[0]} — embed with that model or retrain"
            )
        out = np.empty(policy.embedding_dim + len(RULE_FEATURES), dtype=np.float64)
        out[: policy.embedding_dim] = vec
        out[policy.embedding_dim :] = rule_features(question)
        return out

    def classify(
        self, question: str, embedding: np.ndarray | None = None
    ) -> tuple[QueryType, dict[str, float]]:
        """The question's type (the most probable; a summary only when asked for) and every
        class's probability.

        ``embedding`` is the question's ``(dim,) float32`` vector from the policy's embedder; when
        omitted the classifier's own embedder computes it.
        """
        policy = self.load()
        probs = policy.probabilities(self.features(question, embedding))
        return chosen_type(policy.classes, probs, question), {
            c: float(p) for c, p in zip(policy.classes, probs, strict=True)
        }

    def classify_batch(
        self, questions: list[str], embeddings: np.ndarray | None = None
    ) -> list[tuple[QueryType, dict[str, float]]]:
        """``classify`` for many questions; ``embeddings`` is ``(n, dim)`` when given."""
        import numpy as np

        if embeddings is None:
            if self.embedder is None:
                raise ValueError("QueryClassifier has no embedder: pass embeddings=…")
            embeddings = self.embedder.embed(list(questions))
        policy = self.load()
        feats = np.stack([self.features(q, e) for q, e in zip(questions, embeddings, strict=True)])
        probs = policy.probabilities(feats)
        return [
            (
                chosen_type(policy.classes, row, q),
                {c: float(p) for c, p in zip(policy.classes, row, strict=True)},
            )
            for q, row in zip(questions, probs, strict=True)
        ]
