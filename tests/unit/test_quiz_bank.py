"""The shipped quiz bank (`ckpt_browser/quiz/bank.json`) is complete, bilingual and consistent.

Format: `ckpt_browser/quiz/FORMAT.md`. The bank is data, loaded from inside the package so the
test also proves it ships with it.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from importlib.resources import files

import pytest

TOPICS = {"sharding", "index", "safetensors", "dcp", "optimizer", "scheduler", "rng", "data",
          "progress", "scaler", "world-size", "weights-only", "verify", "diff"}
LANGS = ("en", "vi")
FIELDS = {"question", "options", "why", "explanation"}

# Key phrases of the seed questions' correct answers (case-insensitive). Each must appear in the
# correct option and in no other option of the same question.
SEED_KEYS = {
    "seed-1": {"en": ["too large"], "vi": ["quá lớn"]},
    "seed-2": {"en": ["optimizer", "scheduler", "RNG", "data-loader"],
               "vi": ["optimizer", "scheduler", "RNG", "data loader"]},
    "seed-3": {"en": ["from scratch"], "vi": ["từ đầu"]},
    "seed-4": {"en": ["local", "metadata"], "vi": ["cục bộ", "metadata"]},
    "seed-5": {"en": ["maps each parameter name"], "vi": ["tên tham số"]},
    "seed-6": {"en": ["safetensors"], "vi": ["safetensors"]},
    "seed-7": {"en": ["loading the model weights"], "vi": ["nạp trọng số"]},
    "seed-8": {"en": ["loads correctly"], "vi": ["nạp đúng"]},
}

# Machine-translation slips from the original seed quiz: "seat belt" for safetensors, "physical
# weight" for model weights, and a literal "inspection point" for checkpoint.
FORBIDDEN_VI = ["dây an toàn", "trọng lượng", "điểm kiểm tra"]

VI_LETTERS = set("àáảãạăằắẳẵặâầấẩẫậèéẻẽẹêềếểễệìíỉĩịòóỏõọôồốổỗộơờớởỡợ"
                 "ùúủũụưừứửữựỳýỷỹỵđ")
# Words that never occur in Vietnamese prose ("do", "can" and "be" do, so they are not listed).
EN_FUNCTION_WORDS = {"the", "and", "is", "are", "of", "with", "from", "that", "this", "which",
                     "what", "only", "when", "not", "for", "by", "it", "should", "does", "you",
                     "your", "its", "their", "because", "wrong", "right"}

RIGHT = {"en": "Right", "vi": "Đúng"}
WRONG = {"en": "Wrong", "vi": "Sai"}


def load_bank() -> dict:
    raw = (files("ckpt_browser.quiz") / "bank.json").read_bytes()
    return json.loads(raw.decode("utf-8"))


BANK = load_bank()
QUESTIONS = BANK["questions"]
BY_ID = {q["id"]: q for q in QUESTIONS}


def texts(block: dict) -> list[str]:
    return [block["question"], block["explanation"], *block["options"], *block["why"]]


def has_vi_letters(s: str) -> bool:
    return any(c in VI_LETTERS for c in s.lower())


def english_function_words(s: str) -> set[str]:
    """English function words in running text, ignoring code-like tokens (file names, keys)."""
    found = set()
    for token in s.split():
        if re.search(r"[._/\\0-9`{}\[\]=()\"]", token):
            continue
        word = token.strip(",:;!?'…").lower()
        if word in EN_FUNCTION_WORDS:
            found.add(word)
    return found


def ids(question: dict) -> str:
    return question["id"]


def test_top_level_shape():
    assert BANK["version"] == 1
    assert set(BANK) == {"version", "questions"}
    assert isinstance(QUESTIONS, list)


def test_ids_unique_and_enough_questions():
    counts = Counter(q["id"] for q in QUESTIONS)
    assert [i for i, n in counts.items() if n > 1] == []
    assert len(QUESTIONS) >= 32
    assert sum(q["source"] == "bank" for q in QUESTIONS) >= 24


def test_exactly_the_eight_seeds():
    seeds = {q["id"] for q in QUESTIONS if q["source"] == "seed"}
    assert seeds == {f"seed-{i}" for i in range(1, 9)}
    for q in QUESTIONS:
        assert q["source"] in {"seed", "bank"}
        if q["source"] == "bank":
            assert q["id"].startswith("bank-"), q["id"]


def test_every_topic_is_allowed_and_covered():
    used = {q["topic"] for q in QUESTIONS}
    assert used <= TOPICS, used - TOPICS
    assert used == TOPICS, f"no question on {TOPICS - used}"


def test_correct_answer_positions_vary():
    positions = Counter(q["answer"] for q in QUESTIONS)
    assert set(positions) == {0, 1, 2, 3}
    assert max(positions.values()) <= 0.4 * len(QUESTIONS)


@pytest.mark.parametrize("q", QUESTIONS, ids=ids)
def test_question_complete_in_both_languages(q):
    assert set(q) == {"id", "topic", "source", "answer", "en", "vi"}
    assert type(q["answer"]) is int and 0 <= q["answer"] <= 3
    for lang in LANGS:
        block = q[lang]
        assert set(block) == FIELDS, (lang, set(block))
        assert len(block["options"]) == 4 and len(block["why"]) == 4
        for s in texts(block):
            assert isinstance(s, str) and s.strip(), (lang, s)
            assert s == s.strip(), (lang, s)
        normalised = [o.strip().lower() for o in block["options"]]
        assert len(set(normalised)) == 4, (lang, block["options"])


@pytest.mark.parametrize("q", QUESTIONS, ids=ids)
def test_whys_agree_with_the_answer(q):
    """The why of the correct option says it is right; every other why says it is wrong."""
    for lang in LANGS:
        for i, why in enumerate(q[lang]["why"]):
            expected = RIGHT[lang] if i == q["answer"] else WRONG[lang]
            assert why.startswith(expected + ":"), (lang, i, why)


@pytest.mark.parametrize("q", QUESTIONS, ids=ids)
def test_vietnamese_is_translated(q):
    en, vi = q["en"], q["vi"]
    assert vi["question"] != en["question"]
    assert vi["explanation"] != en["explanation"]
    for a, b in zip(en["why"], vi["why"]):
        assert a != b
    for s in [vi["question"], vi["explanation"], *vi["why"]]:
        assert has_vi_letters(s), s
        assert english_function_words(s) == set(), (s, english_function_words(s))
    for a, b in zip(en["options"], vi["options"]):
        if a == b:
            # Only bare technical terms or numbers may be shared ("safetensors", "MP3",
            # "HF Trainer").
            assert len(b.split()) <= 2, b
        else:
            assert english_function_words(b) == set(), (b, english_function_words(b))
    # Numbers and technical options may match, but most options must read as Vietnamese.
    assert (sum(has_vi_letters(o) for o in vi["options"]) >= 2
            or q["topic"] in {"safetensors", "rng"})


@pytest.mark.parametrize("q", QUESTIONS, ids=ids)
def test_english_is_english(q):
    for s in texts(q["en"]):
        assert not has_vi_letters(s), s


def test_no_mistranslation_slips():
    for q in QUESTIONS:
        for s in texts(q["vi"]) + texts(q["en"]):
            for bad in FORBIDDEN_VI:
                assert bad not in s.lower(), (q["id"], bad, s)


@pytest.mark.parametrize("seed_id", sorted(SEED_KEYS))
def test_seed_answers_are_the_expected_ones(seed_id):
    q = BY_ID[seed_id]
    for lang in LANGS:
        options = [o.lower() for o in q[lang]["options"]]
        for phrase in SEED_KEYS[seed_id][lang]:
            p = phrase.lower()
            assert p in options[q["answer"]], (lang, phrase, options[q["answer"]])
            others = [o for i, o in enumerate(options) if i != q["answer"]]
            assert not any(p in o for o in others), (lang, phrase, others)


def test_seed_six_is_safetensors_in_both_languages():
    q = BY_ID["seed-6"]
    assert q["en"]["options"][q["answer"]] == "safetensors"
    assert q["vi"]["options"][q["answer"]] == "safetensors"


def test_options_keep_the_same_meaning_order_across_languages():
    """Sessions shuffle both languages with one permutation, so option i must be the same option
    in en and vi. Numbers written in either convention (1,048,576 / 1.048.576) must agree."""
    for q in QUESTIONS:
        for a, b in zip(q["en"]["options"], q["vi"]["options"]):
            da, db = re.sub(r"\D", "", a), re.sub(r"\D", "", b)
            if da and db and re.fullmatch(r"[\d,. ]+", a):
                assert da == db, (q["id"], a, b)


def test_bank_file_is_pretty_utf8_json():
    raw = (files("ckpt_browser.quiz") / "bank.json").read_text(encoding="utf-8")
    assert raw.startswith("{\n  \"version\": 1")
    assert "\\u" not in raw, "write UTF-8, not \\u escapes"
