"""The kinds of learned depth policy, in one registry, and the policy the configuration names.

A learned policy is a file: its weights (``.npz`` for a forest, ``.safetensors`` for
REINFORCE; a utility policy has none) and a ``.json`` beside them whose ``"kind"`` names the
entry here that reads it. Each entry says what it is called, the suffix of its weights file and
how to load it; the loaded policy describes itself (``describe``, what ``fathom policy show``
prints). Adding a kind is its module and one line in ``POLICY_KINDS``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fathom.core.base import DepthPolicy
from fathom.core.errors import FathomError, IndexMismatchError


@dataclass(frozen=True, slots=True)
class PolicyKind:
    """One kind of learned depth policy: its name (the metadata's ``"kind"``), its weights
    file's suffix ("" when the ``.json`` is the whole policy) and its loader
    ``load(path, expect_embedder)``, which refuses a policy trained on another embedder."""

    kind: str
    weights: str
    load: Callable[[Path, str | None], DepthPolicy]


def _forest(path: Path, expect_embedder: str | None) -> DepthPolicy:
    from fathom.router.forest import ForestPolicy

    return ForestPolicy.load(path, expect_embedder=expect_embedder)


def _reinforce(path: Path, expect_embedder: str | None) -> DepthPolicy:
    from fathom.router.reinforce import ReinforcePolicy

    return ReinforcePolicy.load(path, expect_embedder=expect_embedder)


def _utility(path: Path, expect_embedder: str | None) -> DepthPolicy:
    from fathom.router.utility import UtilityPolicy

    return UtilityPolicy.load(path.with_suffix(".json"))


POLICY_KINDS: dict[str, PolicyKind] = {
    "forest": PolicyKind("forest", ".npz", _forest),
    "reinforce": PolicyKind("reinforce", ".safetensors", _reinforce),
    "utility": PolicyKind("utility", "", _utility),
}
DEFAULT_KIND = "forest"  # a weights file of no registered suffix is read as a forest


def load_policy(path: str | Path, expect_embedder: str | None = None) -> DepthPolicy:
    """A learned depth policy by its file: the ``kind`` its JSON metadata records. Without the
    metadata file, the kind whose weights file is there (or whose suffix ``path`` has) loads
    it, and says what is missing."""
    path = Path(path)
    meta = path.with_suffix(".json")
    if not meta.is_file():
        return _kind_by_weights(path).load(path, expect_embedder)
    try:
        kind = json.loads(meta.read_text(encoding="utf-8")).get("kind")
    except (UnicodeDecodeError, json.JSONDecodeError, AttributeError) as exc:
        raise FathomError(f"{meta}: not a depth policy's metadata ({exc})") from None
    spec = POLICY_KINDS.get(kind) if isinstance(kind, str) else None
    if spec is None:
        raise FathomError(
            f"{meta}: a policy of kind {kind!r}; this Fathom reads {', '.join(POLICY_KINDS)}"
        )
    return spec.load(path, expect_embedder)


def _kind_by_weights(path: Path) -> PolicyKind:
    """The kind a metadata-less ``path`` belongs to: the one whose weights file lies beside it,
    else the one whose weights suffix it has, else the default."""
    kinds = [spec for spec in POLICY_KINDS.values() if spec.weights]
    for spec in kinds:
        if spec.kind != DEFAULT_KIND and path.with_suffix(spec.weights).is_file():
            return spec
    for spec in kinds:
        if path.suffix == spec.weights:
            return spec
    return POLICY_KINDS[DEFAULT_KIND]


def configured_policy(cfg: Any) -> tuple[DepthPolicy | None, str]:
    """The depth policy ``retrieval.policy`` names — ``auto``: the shipped one when present,
    ``strategy`` or empty: none (the query type's strategy decides), ``cascade``: the cascade
    (``router.cascade``), else a policy file — and a notice for the report ("" when none is
    due).

    The shipped policy reads scores of the embedder it was trained on; with another embedder
    its features mean something else, so it gives way to the strategy, and the notice says so.
    A policy asked for by name that does not fit the embedder is an error."""
    from fathom.index.embed import embedder_id_for
    from fathom.router.forest import default_policy_path

    choice = cfg.retrieval.policy.strip()
    if choice == "cascade":
        from fathom.router.cascade import CascadeDepth

        return CascadeDepth(), ""
    path = None
    if choice == "auto":
        path = default_policy_path() if default_policy_path().is_file() else None
    elif choice and choice != "strategy":
        path = Path(choice)
    if path is None:
        return None, ""
    expect = embedder_id_for(cfg.embedder)
    try:
        return load_policy(path, expect_embedder=expect), ""
    except IndexMismatchError:
        if choice != "auto":
            raise
        return None, (
            f"depth policy: the shipped one was trained on another embedder's scores, "
            f"not {expect}'s; the query type's strategy chose the depth (train one for "
            "this embedder with `fathom policy sweep` and `fathom policy train`)"
        )
