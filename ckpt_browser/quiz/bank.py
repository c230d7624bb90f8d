"""The question bank: `bank.json` beside this module (format in FORMAT.md), read and checked.

Every problem is one line naming the file and the question, like the checkpoint readers' errors.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from ckpt_browser.errors import CheckpointError
from ckpt_browser.readers.regular import read_small

BANK_PATH = Path(__file__).with_name("bank.json")
MAX_BANK_BYTES = 4 * 1024 * 1024  # a few hundred questions are ~200 KB
LANGS = ("en", "vi")
TOPICS = frozenset({"sharding", "index", "safetensors", "dcp", "optimizer", "scheduler", "rng",
                    "data", "progress", "scaler", "world-size", "weights-only", "verify", "diff"})
SOURCES = frozenset({"seed", "bank"})  # generated questions are made in memory, never stored
N_OPTIONS = 4


class BankError(CheckpointError):
    """The question bank cannot be used (exit code 2, one line)."""


@dataclass(frozen=True)
class Text:
    """One language's wording of a question."""

    question: str
    options: tuple[str, ...]  # stored order; `Question.answer` indexes it
    why: tuple[str, ...]  # one per option: why it is right or wrong
    explanation: str

    def to_dict(self) -> dict:
        return {"question": self.question, "options": list(self.options), "why": list(self.why),
                "explanation": self.explanation}


@dataclass(frozen=True)
class Question:
    id: str
    topic: str
    source: str  # "seed" | "bank" | "generated"
    answer: int  # index of the correct option, same in every language
    en: Text
    vi: Text

    def text(self, lang: str) -> Text:
        return self.vi if lang == "vi" else self.en

    def to_dict(self) -> dict:
        return {"id": self.id, "topic": self.topic, "source": self.source, "answer": self.answer,
                "en": self.en.to_dict(), "vi": self.vi.to_dict()}


def load_bank(path: str | os.PathLike | None = None) -> list[Question]:
    """The questions in `path` (default: the packaged bank.json), validated."""
    path = Path(path) if path is not None else BANK_PATH
    try:
        size = path.stat().st_size
        if size > MAX_BANK_BYTES:
            raise BankError(path, f"question bank is {size:,} bytes; the limit is "
                            f"{MAX_BANK_BYTES:,}")
        doc = json.loads(read_small(str(path), MAX_BANK_BYTES).decode("utf-8"))
    except FileNotFoundError:
        raise BankError(path, "question bank not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise BankError(path, f"cannot read the question bank: {e}") from None
    except json.JSONDecodeError as e:
        raise BankError(path, f"not valid JSON at line {e.lineno}, column {e.colno}: "
                        f"{e.msg}") from None
    return parse_bank(doc, str(path))


def parse_bank(doc: object, where: str = "bank") -> list[Question]:
    if not isinstance(doc, dict) or not isinstance(doc.get("questions"), list):
        raise BankError(where, 'expected {"version": 1, "questions": [...]}')
    if doc.get("version") != 1:
        raise BankError(where, f"unsupported bank version {doc.get('version')!r} (expected 1)")
    questions, seen = [], set()
    for n, item in enumerate(doc["questions"]):
        q = parse_question(item, f"{where}: question {n + 1}")
        if q.id in seen:
            raise BankError(where, f"question id {q.id!r} appears twice")
        seen.add(q.id)
        questions.append(q)
    if not questions:
        raise BankError(where, "the bank holds no questions")
    return questions


def parse_question(item: object, where: str) -> Question:
    if not isinstance(item, dict):
        raise BankError(where, "expected an object")
    qid = item.get("id")
    if not isinstance(qid, str) or not qid.strip():
        raise BankError(where, "missing a non-empty string 'id'")
    where = f"{where} ({qid})"
    topic, source, answer = item.get("topic"), item.get("source", "bank"), item.get("answer")
    if topic not in TOPICS:
        raise BankError(where, f"topic {topic!r} is not one of {', '.join(sorted(TOPICS))}")
    if source not in SOURCES:
        raise BankError(where, f"source {source!r} is not 'seed' or 'bank'")
    if type(answer) is not int or not 0 <= answer < N_OPTIONS:
        raise BankError(where, f"answer must be 0-3, not {answer!r}")
    en, vi = (_text(item.get(lang), f"{where}: {lang}") for lang in LANGS)
    return Question(qid, topic, source, answer, en, vi)


def _text(obj: object, where: str) -> Text:
    if not isinstance(obj, dict):
        raise BankError(where, "missing")
    question, explanation = obj.get("question"), obj.get("explanation")
    for name, value in (("question", question), ("explanation", explanation)):
        if not isinstance(value, str) or not value.strip():
            raise BankError(where, f"'{name}' must be non-empty text")
    options, why = obj.get("options"), obj.get("why")
    for name, value in (("options", options), ("why", why)):
        if (not isinstance(value, list) or len(value) != N_OPTIONS
                or not all(isinstance(v, str) and v.strip() for v in value)):
            raise BankError(where, f"'{name}' must be {N_OPTIONS} non-empty texts")
    if len({o.strip().casefold() for o in options}) != N_OPTIONS:
        raise BankError(where, "two options say the same thing")
    return Text(question, tuple(options), tuple(why), explanation)


def export_doc(questions: list[Question]) -> dict:
    """The bank as FORMAT.md describes it: what `quiz --export json` prints."""
    return {"version": 1, "questions": [q.to_dict() for q in questions]}
