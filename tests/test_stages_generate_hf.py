"""HuggingFaceGenerator on a tiny random-weight Llama saved to disk with a WordLevel tokenizer
(fast, exercises the real transformers path), and on the packaged SmolLM2 GGUF (slow)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from fathom.bench.support.hits import eiffel_hits, make_hit
from fathom.core.config import GeneratorConfig
from fathom.core.errors import BackendUnavailable, FathomError
from fathom.stages.generate.hf import HuggingFaceGenerator
from fathom.tests.support.generate_support import smollm2_path

QUESTION = "Where is the Eiffel Tower?"
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|> {{ m['role'] }} {{ m['content'] }} <|im_end|> "
    "{% endfor %}{% if add_generation_prompt %}<|im_start|> assistant {% endif %}"
)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer Llama with random weights and a WordLevel tokenizer, saved as a model folder."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    folder = tmp_path_factory.mktemp("tiny-llama")
    specials = ["<unk>", "<pad>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    corpus = [h.chunk.text for h in eiffel_hits()] + [
        QUESTION,
        "system user assistant Sources Question Answer with citations : [ 1 ] [ 2 ] [ 3 ]",
        "You answer questions using only the numbered sources provided by the user .",
        "The tower is in Paris , France . It was completed in 1889 .",
    ]
    tok.train_from_iterator(corpus, trainers.WordLevelTrainer(special_tokens=specials))
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        pad_token="<pad>",
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(folder)
    config = LlamaConfig(
        vocab_size=tok.get_vocab_size(),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=512,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def gen(tiny_model: Path) -> HuggingFaceGenerator:
    return HuggingFaceGenerator(GeneratorConfig(model=str(tiny_model), max_tokens=12))


def test_constructor_is_cheap(tiny_model: Path) -> None:
    g = HuggingFaceGenerator(GeneratorConfig(model=str(tiny_model)))
    assert g._tok is None and g._lm is None
    assert g.name == "huggingface" and g.model == str(tiny_model)


def test_tokens_context_and_prompt(gen: HuggingFaceGenerator, tiny_model: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model)
    texts = ["The Eiffel Tower is in Paris .", "", "unknown words here"]
    assert gen.count_tokens(texts) == [
        len(tok(t, add_special_tokens=False)["input_ids"]) for t in texts
    ]
    assert gen.context_window == 512  # capped by max_position_embeddings
    messages = [{"role": "system", "content": "a"}, {"role": "user", "content": "b"}]
    expected = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    assert gen._prompt_ids(messages) == list(expected["input_ids"])
    hits = eiffel_hits()
    assert gen.prompt_tokens(QUESTION, hits) > sum(gen.count_tokens([h.chunk.text for h in hits]))


def test_greedy_generation_fills_the_draft_and_is_deterministic(gen: HuggingFaceGenerator) -> None:
    hits = eiffel_hits()
    d = gen.generate(QUESTION, hits)
    assert d.backend == "huggingface" and d.prompt_tokens == gen.prompt_tokens(QUESTION, hits)
    assert 0 <= d.completion_tokens <= 12 and d.finish_reason in ("stop", "length")
    assert d.logprobs is None or len(d.logprobs) == d.completion_tokens
    assert d.logprobs is None or all(lp <= 0 for lp in d.logprobs)
    if d.finish_reason == "length":
        assert d.completion_tokens == 12
    assert all(1 <= n <= len(hits) for n in d.citations)
    assert gen.generate(QUESTION, hits).text == d.text


def test_streaming_calls_on_token(gen: HuggingFaceGenerator) -> None:
    pieces: list[str] = []
    d = gen.generate(QUESTION, eiffel_hits(), on_token=pieces.append)
    assert "".join(pieces).split() == d.text.split()
    assert pieces or not d.text


def test_prompt_that_cannot_fit_raises(gen: HuggingFaceGenerator) -> None:
    long_hits = [make_hit(i, "The tower is in Paris . " * 40) for i in (1, 2, 3)]
    with pytest.raises(FathomError, match="512-token context window"):
        gen.generate(QUESTION, long_hits)


def test_missing_model_is_a_clear_error(tmp_path: Path) -> None:
    g = HuggingFaceGenerator(GeneratorConfig(model=str(tmp_path / "no-such-model")))
    with pytest.raises(BackendUnavailable, match="transformers cannot load"):
        g.count_tokens(["x"])


@pytest.mark.slow
@pytest.mark.skipif(
    not (importlib.util.find_spec("gguf") and importlib.util.find_spec("accelerate")),
    reason="loading a GGUF with transformers needs gguf and accelerate",
)
def test_default_is_the_packaged_smollm2_gguf() -> None:
    g = HuggingFaceGenerator(GeneratorConfig(max_tokens=12))
    assert g.model == smollm2_path().name
    assert g.context_window == 4096  # config 4096 < the model's 8192
    d = g.generate(QUESTION, eiffel_hits())
    assert "paris" in d.text.lower()
    assert d.logprobs is not None and len(d.logprobs) == d.completion_tokens


def test_an_answer_past_the_total_timeout_is_an_error(tiny_model: Path) -> None:
    """generator.total_timeout_s bounds a whole in-process answer, as it does for the servers."""
    free = HuggingFaceGenerator(GeneratorConfig(model=str(tiny_model), max_tokens=40))
    assert free.generate(QUESTION, eiffel_hits()).completion_tokens >= 2  # it would go on
    cut = HuggingFaceGenerator(
        GeneratorConfig(model=str(tiny_model), max_tokens=40, total_timeout_s=1e-6)
    )
    with pytest.raises(BackendUnavailable, match="total_timeout_s = 1e-06 s"):
        cut.generate(QUESTION, eiffel_hits())


def test_a_time_budget_cuts_without_an_error(tiny_model: Path) -> None:
    """Unlike generator.total_timeout_s, an answer's time budget ends it quietly."""
    g = HuggingFaceGenerator(GeneratorConfig(model=str(tiny_model), max_tokens=40))
    full = g.generate(QUESTION, eiffel_hits())
    cut = g.generate(QUESTION, eiffel_hits(), time_budget_ms=1e-3)
    assert full.completion_tokens >= 2 and cut.finish_reason == "deadline"
    assert cut.completion_tokens < full.completion_tokens


def test_a_time_budget_counts_the_model_load(
    tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first answer loads the model lazily: that load is spent from its time budget."""
    import time

    from transformers import AutoModelForCausalLM

    load = AutoModelForCausalLM.from_pretrained

    def slow_load(*args, **kwargs):
        time.sleep(1.0)
        return load(*args, **kwargs)

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", slow_load)
    g = HuggingFaceGenerator(GeneratorConfig(model=str(tiny_model), max_tokens=40))
    d = g.generate(QUESTION, eiffel_hits(), time_budget_ms=500)
    assert d.finish_reason == "deadline", d  # the load alone used the budget up
    assert d.completion_tokens <= 2 and d.ms >= 1000
    warm = g.generate(QUESTION, eiffel_hits(), time_budget_ms=5000)
    assert warm.finish_reason in ("stop", "length")  # loaded once; the budget is now the answer's
