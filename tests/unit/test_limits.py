"""The caps: one `Limits` object, its variables, and the README's table rendered from it."""

from __future__ import annotations

import dataclasses
import io
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest

import ckpt_browser
from ckpt_browser import limits
from ckpt_browser.limits import Limits, readme_table
from ckpt_browser.readers.pickle_safe import unpickle

REPO = Path(__file__).resolve().parents[2]
FIELDS = dataclasses.fields(Limits)


def readme_limits_table() -> str:
    """The first table under the README's "## Limits" heading."""
    text = (REPO / "README.md").read_text()
    section = text.split("\n## Limits\n", 1)[1].split("\n## ", 1)[0]
    lines = section.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return "\n".join(lines[start:end]) + "\n"


def test_the_readme_table_is_rendered_from_limits():
    assert readme_limits_table() == readme_table(), (
        "README.md's Limits table differs from ckpt_browser.limits.Limits: paste "
        "`python -c 'from ckpt_browser.limits import readme_table; print(readme_table())'`")


def test_every_field_has_a_default_a_meaning_and_a_variable_named_after_it():
    for f in FIELDS:
        assert type(f.default) is int and f.default > 0, f.name
        assert f.metadata["help"], f.name
        env = f.metadata["env"]
        assert env is None or env == f"CKPT_BROWSER_MAX_{f.name.upper()}", f.name
    assert sum(f.metadata["env"] is not None for f in FIELDS) == 16


def test_defaults_without_variables():
    assert Limits.from_env({}) == Limits()
    assert Limits().pickle_bytes == 64 * 2**20 and Limits().depth == 100


@pytest.mark.parametrize("text, want", [
    ("1000", 1000), ("200_000_000", 200_000_000), (" 42 ", 42), ("1", 1),
    ("", None), ("junk", None), ("0", None), ("-5", None), ("1e6", None), ("2.5", None),
    ("0x100", None), ("_", None), ("\u00b2", None),
])
def test_from_env_takes_a_positive_whole_number_else_the_default(text, want):
    for f in FIELDS:
        if f.metadata["env"] is None:
            continue
        got = getattr(Limits.from_env({f.metadata["env"]: text}), f.name)
        assert got == (f.default if want is None else want), (f.name, text)


def test_from_env_changes_only_the_cap_named(monkeypatch):
    monkeypatch.setenv("CKPT_BROWSER_MAX_PICKLE_OPS", "123")
    got = Limits.from_env()
    assert got == dataclasses.replace(Limits(), pickle_ops=123)


def test_fixed_caps_have_no_variable():
    names = {f"CKPT_BROWSER_MAX_{f.name.upper()}": "7" for f in FIELDS}
    got = Limits.from_env(names)
    for f in FIELDS:
        assert getattr(got, f.name) == (7 if f.metadata["env"] else f.default), f.name
    with pytest.raises(ValueError, match="fixed"):
        limits.env("int_digits")
    assert limits.env("pickle_bytes") == "CKPT_BROWSER_MAX_PICKLE_BYTES"


def test_LIMITS_is_read_from_the_environment_at_import():
    env = {**os.environ, "CKPT_BROWSER_MAX_DEPTH": "1_234", "CKPT_BROWSER_MAX_PATHS": "no"}
    out = subprocess.run([sys.executable, "-c", "from ckpt_browser.limits import LIMITS; "
                          "print(LIMITS.depth, LIMITS.paths)"], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == ["1234", str(Limits().paths)]


def test_every_variable_named_anywhere_is_a_cap():
    """A message or the README naming CKPT_BROWSER_MAX_<something> that no field has would
    send a user to a variable that does nothing."""
    known = {f.metadata["env"] for f in FIELDS} - {None}
    texts = [p.read_text() for p in Path(ckpt_browser.__file__).parent.rglob("*.py")]
    texts.append((REPO / "README.md").read_text())
    named = {m for t in texts for m in re.findall(r"CKPT_BROWSER_MAX_[A-Z_]*[A-Z]", t)}
    assert named <= known, named - known


def test_a_lowered_cap_takes_effect_and_names_its_own_variable(monkeypatch):
    data = pickle.dumps(list(range(5000)), 2)
    monkeypatch.setattr(limits, "LIMITS", dataclasses.replace(
        limits.LIMITS, pickle_ops=1000, dcp_metadata_ops=2000))
    got = unpickle(io.BytesIO(data), "f.pkl")
    assert [p.message for p in got.problems] == [
        "pickle runs more than 1,000 opcodes (CKPT_BROWSER_MAX_PICKLE_OPS raises it)"]
    got = unpickle(io.BytesIO(data), ".metadata", storage_ids=None, ops="dcp_metadata_ops")
    assert [p.message for p in got.problems] == [
        "pickle runs more than 2,000 opcodes (CKPT_BROWSER_MAX_DCP_METADATA_OPS raises it)"]
