from __future__ import annotations

import re
from pathlib import Path

import pytest
from fathom.core.config import load_config
from fathom.core.errors import ConfigError


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


def test_price_entries_are_checked_and_name_the_model() -> None:
    cfg = load_config(env={"FATHOM_PRICES__MODELS": '{"mine": [1, 2.5]}'})
    assert cfg.prices.models["mine"] == [1.0, 2.5] and "gpt-4o-mini" in cfg.prices.models
    for bad in ('"cheap"', "[1]", "[1, 2, 3]", '[1, "a"]', "[-1, 2]", "{}"):
        with pytest.raises(ConfigError, match=r'prices\.models\."mine" = .*\(from environment'):
            load_config(env={"FATHOM_PRICES__MODELS": f'{{"mine": {bad}}}'})


def test_price_entries_from_toml_are_checked(tmp_path: Path) -> None:
    toml = tmp_path / "fathom.toml"
    toml.write_text('[prices.models]\n"gpt-4.1" = "cheap"\n')
    with pytest.raises(ConfigError, match=r'prices\.models\."gpt-4\.1" = .*fathom\.toml'):
        load_config(toml, env={})


@pytest.mark.parametrize(
    ("env", "key", "value"),
    [
        ("FATHOM_RETRIEVAL__K", "retrieval.k", "-3"),
        ("FATHOM_RETRIEVAL__K", "retrieval.k", "0"),
        ("FATHOM_RETRIEVAL__CANDIDATES", "retrieval.candidates", "0"),
        ("FATHOM_RETRIEVAL__PORTFOLIO_ELL", "retrieval.portfolio_ell", "0"),
        ("FATHOM_RETRIEVAL__DENSE_WEIGHT", "retrieval.dense_weight", "1.5"),
        ("FATHOM_RERANK__CANDIDATES", "rerank.candidates", "-1"),
        ("FATHOM_RERANK__BATCH_SIZE", "rerank.batch_size", "0"),
        ("FATHOM_EMBEDDER__BATCH_SIZE", "embedder.batch_size", "0"),
        ("FATHOM_GENERATOR__MAX_TOKENS", "generator.max_tokens", "0"),
        ("FATHOM_GENERATOR__RETRIES", "generator.retries", "-1"),
        ("FATHOM_GENERATOR__TIMEOUT_S", "generator.timeout_s", "0"),
        ("FATHOM_GENERATOR__DEADLINE_MS", "generator.deadline_ms", "-5"),
        ("FATHOM_FEEDBACK__MAX_ROUNDS", "feedback.max_rounds", "-1"),
        ("FATHOM_COMPRESS__BUDGET_TOKENS", "compress.budget_tokens", "-100"),
        ("FATHOM_INGEST__MAX_FILE_MB", "ingest.max_file_mb", "0"),
    ],
)
def test_out_of_range_counts_are_errors_naming_the_key(env: str, key: str, value: str) -> None:
    with pytest.raises(
        ConfigError, match=rf"{re.escape(key)} = .*\(from environment {env}\): must"
    ):
        load_config(env={env: value})


def test_range_edges_are_accepted(tmp_path: Path) -> None:
    toml = tmp_path / "fathom.toml"
    toml.write_text("[retrieval]\nk = 1\ndense_weight = 1.0\n[feedback]\nmax_rounds = 0\n")
    cfg = load_config(toml, env={"FATHOM_GENERATOR__THREADS": "0"})
    assert (cfg.retrieval.k, cfg.retrieval.dense_weight, cfg.feedback.max_rounds) == (1, 1.0, 0)
    with pytest.raises(ConfigError, match=r"retrieval\.k = 0 \(from command line\): must be at"):
        load_config(env={}, overrides={"retrieval.k": 0})
