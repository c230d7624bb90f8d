"""One vocabulary: every verdict, status and severity the model allows has its words here,
and no other module restates a verdict's meaning."""

from __future__ import annotations

import typing
from pathlib import Path

import ckpt_browser
from ckpt_browser.model import VERDICTS, Severity, Status, Verdict
from ckpt_browser.report import words


def test_every_allowed_value_has_its_words():
    assert set(typing.get_args(Verdict)) == set(VERDICTS)
    assert set(words.VERDICT_MEANING) == set(words.VERDICT_STYLE) == set(VERDICTS)
    assert set(words.STATUS_VI) == set(words.STATUS_STYLE) == set(typing.get_args(Status))
    assert set(words.SEVERITY_STYLE) == set(typing.get_args(Severity))
    assert all(en and vi and en != vi for en, vi in words.VERDICT_MEANING.values())


def test_no_other_module_restates_a_verdict():
    root = Path(ckpt_browser.__file__).parent
    found = [str(p.relative_to(root)) for p in root.rglob("*.py") if p.name != "words.py"
             and any(en in p.read_text() for en, _ in words.VERDICT_MEANING.values())]
    assert found == []


def test_numbers():
    assert words.short_number(0.123456) == "0.1235" and words.short_number(None) == "n/a"
    assert words.full_number(0.99999971) == "0.9999997"  # not rounded up to 1
    assert words.short_number(12345) == words.full_number(12345) == "12,345"
    assert words.count(7_241_000) == "7.2M" and words.size(107_110) == "104.6 KiB"
    assert words.json_float(float("nan")) is None and words.json_float(1.5) == 1.5
