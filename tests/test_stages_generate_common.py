"""``estimate_tokens``, the count for servers without a local tokenizer, against SmolLM2's real
tokenizer (a small, English-heavy 49k vocabulary: the worst common case)."""

from __future__ import annotations

import base64
import hashlib
import inspect
import random
import string
from collections.abc import Iterator
from typing import Any

import pytest
from fathom.stages.generate import common
from fathom.stages.generate.common import estimate_tokens
from fathom.tests.support.generate_support import smollm2_path

ENGLISH = (
    "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. It "
    "is named after the engineer Gustave Eiffel, whose company designed and built the tower from "
    "1887 to 1889. Locally nicknamed 'La dame de fer', it was constructed as the centrepiece of "
    "the 1889 World's Fair, and to crown the centennial anniversary of the French Revolution. "
    "Although initially criticised by some of France's leading artists and intellectuals for its "
    "design, it has since become a global cultural icon of France and one of the most "
    "recognisable structures in the world. The tower received 5,889,000 visitors in 2022. When a "
    "retrieval system answers a question, it first searches an index for the passages most "
    "likely to contain the answer, then asks a language model to write a short reply that cites "
    "them. Reliability matters more than speed: a wrong citation misleads the reader, and an "
    "answer without sources cannot be checked. Responsibilities, internationalization and "
    "characteristically uncomfortable circumstances notwithstanding, the committee approved it.\n"
)


def _texts() -> dict[str, str]:
    rng = random.Random(0)
    low, letters = string.ascii_lowercase, string.ascii_letters

    def word(alphabet: str, n: int) -> str:
        return "".join(rng.choice(alphabet) for _ in range(n))

    return {
        "english prose": ENGLISH * 3,
        "english lower case": ENGLISH.lower() * 2,
        "english upper case": ENGLISH.upper(),
        "pangram": "The quick brown fox jumps over the lazy dog. " * 20,
        "python code": inspect.getsource(random),
        "numbers": " ".join(
            f"{rng.randint(0, 10**6):,}.{rng.randint(0, 99):02d}" for _ in range(150)
        ),
        "dna": word("ACGT", 1500),
        "dna lower case": word("acgt", 1500),
        "random lowercase words": " ".join(word(low, 12) for _ in range(80)),
        "random long words": " ".join(word(low, 40) for _ in range(20)),
        "random short words": " ".join(word(low, rng.randint(2, 6)) for _ in range(150)),
        "random uppercase words": " ".join(word(string.ascii_uppercase, 10) for _ in range(80)),
        "random mixed case": " ".join(word(letters, 10) for _ in range(80)),
        "camelCase identifiers": "getHTTPResponseCodeFromXMLParserFactoryInstance "
        "parseJSONWebTokenClaims XMLHttpRequest " * 15,
        "german compounds": (
            "Donaudampfschifffahrtsgesellschaftskapitänsmütze "
            "Rindfleischetikettierungsüberwachungsaufgabenübertragungsgesetz "
            "Grundstücksverkehrsgenehmigungszuständigkeitsübertragungsverordnung "
            "Kraftfahrzeughaftpflichtversicherung Arbeitsunfähigkeitsbescheinigung "
        )
        * 8,
        "german prose": (
            "Die Gesellschaft beschloss, die Verantwortlichkeiten neu zu verteilen. Der "
            "Geschäftsführer erläuterte die Überwachungsaufgaben und die Zuständigkeiten der "
            "Behörden für Grundstücksangelegenheiten. Änderungen treten nächste Woche in Kraft. "
        )
        * 6,
        "lorem ipsum": (
            "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor "
            "incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud "
            "exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat. "
        )
        * 4,
        "finnish": (
            "Eiffel-torni on Pariisissa sijaitseva rautaristikkotorni, joka rakennettiin vuoden "
            "maailmannäyttelyä varten. Se on kaupungin tunnetuin nähtävyys ja yksi maailman "
            "tunnistettavimmista rakennelmista. "
        )
        * 4,
        "french": "La tour Eiffel est une tour de fer puddlé de trois cents mètres de hauteur "
        "située à Paris, à l'extrémité nord-ouest du parc du Champ-de-Mars. " * 4,
        "turkish": "Eyfel Kulesi, Paris'te bulunan demir örgü bir kuledir. Şehrin en tanınmış "
        "yapılarından biridir ve dünyanın en çok ziyaret edilen anıtlarından birisidir. " * 4,
        "urls": " ".join(
            f"https://{word(low, 8)}.example.com/api/v{rng.randint(1, 9)}/"
            f"{word(letters + string.digits, 16)}?id={rng.randint(0, 10**9)}&q=search+term"
            for _ in range(30)
        ),
        "hex hashes": " ".join(hashlib.sha256(str(i).encode()).hexdigest() for i in range(30)),
        "base64": base64.b64encode(bytes(rng.randrange(256) for _ in range(900))).decode(),
        "russian": "Эйфелева башня — металлическая башня в центре Парижа, самая узнаваемая его "
        "архитектурная достопримечательность. " * 6,
        "chinese": "埃菲尔铁塔是位于法国巴黎战神广场上的镂空结构铁塔，高三百米，天线高二十四米。"
        * 8,
        "japanese": "エッフェル塔は、フランスの首都パリの象徴的な名所となっている塔である。" * 8,
        "korean": "에펠탑은 프랑스 파리의 샹드마르스 공원에 있는 철탑이다. " * 8,
        "arabic": "برج إيفل هو برج حديدي يقع في باريس، فرنسا، وهو من أشهر المعالم في العالم. " * 6,
        "hindi": "एफिल टॉवर पेरिस में स्थित एक लोहे का टॉवर है और यह दुनिया के सबसे प्रसिद्ध "
        "स्थलों में से एक है। " * 5,
        "greek": "Ο Πύργος του Άιφελ είναι σιδερένιος πύργος στο Παρίσι της Γαλλίας. " * 8,
        "emoji": "Great job 🎉🎉 see you soon 👋🏽 ❤️ 🚀✨ " * 20,
        "markdown table": "| id | name | value |\n|---:|:-----|------:|\n"
        + "".join(f"| {i} | item-{i} | {i * 3.5:.2f} |\n" for i in range(60)),
        "whitespace": "word\t\t  \n\n\n    " * 50,
        "punctuation": "!?.,;:()[]{}<>/\\|@#$%^&*-_=+~`'\"" * 20,
    }


TEXTS = _texts()


@pytest.fixture(scope="module")
def vocab() -> Iterator[Any]:
    """SmolLM2's tokenizer alone (vocab_only: no weights, loads in milliseconds)."""
    llama_cpp = pytest.importorskip("llama_cpp")
    vocab = llama_cpp.Llama(model_path=str(smollm2_path()), vocab_only=True, verbose=False)
    yield vocab
    vocab.close()


def real_tokens(vocab: Any, text: str) -> int:
    return len(vocab.tokenize(text.encode("utf-8"), add_bos=False, special=False))


@pytest.mark.parametrize("kind", list(TEXTS))
def test_the_estimate_is_never_under_the_real_count(vocab: Any, kind: str) -> None:
    text = TEXTS[kind]
    assert estimate_tokens(text) >= real_tokens(vocab, text), kind


@pytest.mark.parametrize("kind", ["english prose", "english lower case"])
def test_ordinary_english_is_not_overcounted_much(vocab: Any, kind: str) -> None:
    text = TEXTS[kind]
    assert estimate_tokens(text) <= 1.6 * real_tokens(vocab, text)


def test_letter_runs_cost_more_when_they_look_less_like_english() -> None:
    assert estimate_tokens("") == 0 and estimate_tokens("the") == 2  # 1 × 1.12, rounded up
    english, random_letters = "international", "qxzvkwjfpbhgm"
    assert estimate_tokens(random_letters) >= 2 * estimate_tokens(english)
    assert common._letters_cost("HTTP") == 3.0  # upper case: 0.75 a letter
    parts = common._CASE_PART.findall("getHTTPResponseCode")
    assert parts == ["get", "HTTP", "Response", "Code"]
