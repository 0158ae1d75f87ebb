from __future__ import annotations

from pathlib import Path

import pytest

from stages.config import load_config
from stages.errors import ConfigError


def test_defaults_then_toml_then_env_then_flags(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    toml = tmp_path / "conf" / "fathom.toml"
    toml.write_text('[retrieval]\nk = 7\nmode = "bm25"\n[chunker]\ntarget_tokens = 120\n')
    cfg = load_config(toml, env={})
    assert (cfg.retrieval.k, cfg.retrieval.mode, cfg.chunker.target_tokens) == (7, "bm25", 120)
    cfg = load_config(toml, env={"FATHOM_RETRIEVAL__K": "9"})
    assert cfg.retrieval.k == 9 and cfg.retrieval.mode == "bm25"
    cfg = load_config(toml, env={"FATHOM_RETRIEVAL__K": "9"}, overrides={"retrieval.k": 3})
    assert cfg.retrieval.k == 3
    assert load_config(env={}).retrieval.k == 10  # no fathom.toml in the test's cwd


def test_unknown_key_names_key_value_and_source(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    toml = tmp_path / "conf" / "fathom.toml"
    toml.write_text("[retrieval]\ndepth = 4\n")
    with pytest.raises(ConfigError, match=r"retrieval\.depth = 4 \(from .*fathom\.toml\)"):
        load_config(toml, env={})
    with pytest.raises(ConfigError, match=r"unknown section \[nope\]"):
        load_config(env={"FATHOM_NOPE__X": "1"})


def test_wrong_type_is_an_error_naming_the_source() -> None:
    with pytest.raises(ConfigError, match=r"retrieval\.k = 'ten' \(from environment"):
        load_config(env={"FATHOM_RETRIEVAL__K": "ten"})
    with pytest.raises(ConfigError, match="must be one of dense, bm25, hybrid"):
        load_config(env={}, overrides={"retrieval.mode": "fuzzy"})
    with pytest.raises(ConfigError, match="expected int"):
        load_config(env={}, overrides={"chunker.max_tokens": 2.5})


def test_env_bool_and_home(tmp_path: Path) -> None:
    cfg = load_config(env={"FATHOM_INGEST__STRICT": "yes", "FATHOM_HOME": str(tmp_path)})
    assert cfg.ingest.strict is True
    assert cfg.home_path() == tmp_path


def test_missing_explicit_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "absent.toml", env={})
