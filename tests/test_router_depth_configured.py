"""``configured_policy``: the depth policy ``retrieval.policy`` names (``auto``, ``strategy``,
empty or a file), and the shipped policy giving way to the query type's strategy when the
embedder is not the one it was trained with, where a policy named by its file is an error."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fathom.core.config import Config
from fathom.core.errors import FathomError, IndexMismatchError
from fathom.router import forest
from fathom.router.forest import ForestPolicy, default_policy_path
from fathom.router.registry import configured_policy


def config(policy: str, embedder: str | None = None) -> Config:
    cfg = Config()
    cfg.retrieval.policy = policy
    if embedder is not None:
        cfg.embedder.name = embedder
    return cfg


def copy_shipped(folder: Path, name: str = "depth") -> Path:
    """The shipped forest's two files copied to ``folder``; the path of its ``.npz``."""
    src = default_policy_path()
    dst = folder / f"{name}.npz"
    shutil.copyfile(src, dst)
    shutil.copyfile(src.with_suffix(".json"), dst.with_suffix(".json"))
    return dst


@pytest.fixture
def shipped_elsewhere(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Points ``default_policy_path`` at ``tmp_path/shipped/depth_forest.npz`` (absent until a
    test writes it) and returns that path."""
    path = tmp_path / "shipped" / "depth_forest.npz"
    path.parent.mkdir()
    monkeypatch.setattr(forest, "default_policy_path", lambda: path)
    return path


def test_the_shipped_policy_is_installed_and_names_the_default_embedder() -> None:
    """The premise of ``auto``: the forest ships, trained on all-MiniLM-L6-v2's scores."""
    path = default_policy_path()
    assert path.is_file() and path.with_suffix(".json").is_file()
    meta = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
    assert meta["kind"] == "forest"
    assert meta["embedder"] == "sentence-transformers/all-MiniLM-L6-v2"


def test_auto_is_the_shipped_policy_with_no_notice() -> None:
    """``auto`` with the default embedder: the shipped forest, and nothing to report."""
    policy, notice = configured_policy(config("auto"))
    assert isinstance(policy, ForestPolicy)
    assert notice == ""


@pytest.mark.parametrize("alias", ["all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"])
def test_auto_accepts_any_name_of_the_trained_embedder(alias: str) -> None:
    """Another name of the same embedder is the same embedder: the forest is used."""
    policy, notice = configured_policy(config("auto", embedder=alias))
    assert isinstance(policy, ForestPolicy) and notice == ""


def test_auto_without_a_shipped_policy_leaves_the_depth_to_the_strategy(
    shipped_elsewhere: Path,
) -> None:
    """``auto`` when no shipped policy is installed: no policy, no notice."""
    assert configured_policy(config("auto")) == (None, "")


def test_auto_reads_the_shipped_policy_where_it_is(shipped_elsewhere: Path) -> None:
    """``auto`` loads whatever ``default_policy_path`` holds."""
    copy_shipped(shipped_elsewhere.parent, "depth_forest")
    policy, notice = configured_policy(config("auto"))
    assert isinstance(policy, ForestPolicy) and notice == ""


@pytest.mark.parametrize(
    "choice",
    ["strategy", "", "   ", "  strategy  "],
    ids=["strategy", "empty", "blank", "padded-strategy"],
)
def test_strategy_or_empty_means_no_policy(choice: str) -> None:
    """``strategy`` or an empty setting (surrounding space ignored): the query type's
    strategy decides, so no policy and no notice."""
    assert configured_policy(config(choice)) == (None, "")


def test_a_policy_file_is_loaded(tmp_path: Path) -> None:
    """A path: the policy that file holds (here a copy of the forest)."""
    path = copy_shipped(tmp_path)
    policy, notice = configured_policy(config(str(path)))
    assert isinstance(policy, ForestPolicy) and notice == ""
    assert policy.budgets == ForestPolicy.load(default_policy_path()).budgets


def test_a_missing_policy_file_is_an_error(tmp_path: Path) -> None:
    """A path with nothing there is an error, not a silent fallback."""
    with pytest.raises(FathomError, match="no forest policy here"):
        configured_policy(config(str(tmp_path / "nothing.npz")))


def test_with_another_embedder_the_shipped_policy_gives_way_to_the_strategy() -> None:
    """``auto`` with an embedder the forest was not trained on: no policy (the strategy
    decides), and a notice naming the embedder and how to train a policy for it."""
    policy, notice = configured_policy(config("auto", embedder="hashing:384"))
    assert policy is None
    assert notice.startswith("depth policy: the shipped one was trained on another embedder")
    assert "not hashing:384's" in notice
    assert "the query type's strategy chose the depth" in notice
    assert "`fathom policy sweep`" in notice and "`fathom policy train`" in notice


def test_a_policy_file_for_another_embedder_is_an_error(tmp_path: Path) -> None:
    """A policy asked for by its file that does not fit the embedder is refused, even when it
    is the shipped one's file: only ``auto`` gives way."""
    cfg = config(str(copy_shipped(tmp_path)), embedder="hashing:384")
    with pytest.raises(IndexMismatchError, match="hashing:384"):
        configured_policy(cfg)
    with pytest.raises(IndexMismatchError):
        configured_policy(config(str(default_policy_path()), embedder="hashing:384"))


def test_auto_gives_way_only_for_another_embedder(shipped_elsewhere: Path) -> None:
    """A shipped policy that is broken in another way (another feature schema) is an error
    under ``auto`` too: only the embedder mismatch falls back to the strategy."""
    path = copy_shipped(shipped_elsewhere.parent, "depth_forest")
    meta_path = path.with_suffix(".json")
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    meta["feature_names"] = meta["feature_names"][:-1]
    meta_path.write_text(json.dumps(meta), encoding="utf-8")
    with pytest.raises(FathomError, match="another feature schema") as info:
        configured_policy(config("auto", embedder="hashing:384"))
    assert not isinstance(info.value, IndexMismatchError)
