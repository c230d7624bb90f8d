"""A small question bank built per test (the packaged bank.json is data written elsewhere)."""

from __future__ import annotations

import json
from pathlib import Path

from ckpt_browser.quiz.bank import parse_bank


def bank_doc(n: int = 6) -> dict:
    def text(lang: str, i: int) -> dict:
        return {"question": f"{lang} question {i}?",
                "options": [f"{lang} option {i}.{k}" for k in range(4)],
                "why": [f"{lang} why {i}.{k}" for k in range(4)],
                "explanation": f"{lang} explanation {i}"}

    return {"version": 1, "questions": [
        {"id": f"q{i}", "topic": "sharding", "source": "bank", "answer": i % 4,
         "en": text("en", i), "vi": text("vi", i)} for i in range(n)]}


def bank(n: int = 6):
    return parse_bank(bank_doc(n))


def write_bank(folder: Path, n: int = 6) -> Path:
    path = folder / "bank.json"
    path.write_text(json.dumps(bank_doc(n)), encoding="utf-8")
    return path
