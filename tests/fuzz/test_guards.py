"""The fuzz properties are not vacuous: each guard catches what it is there to catch."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from . import guards, harness
from .cases import Case, load
from .guards import Hang, Usage, broken, watch


def test_a_write_anywhere_is_caught(tmp_path):
    usage = Usage()
    with watch(usage, memory=False):
        (tmp_path / "new.txt").write_text("x")
        os.mkdir(tmp_path / "sub")
    kinds = [kind for kind, _ in broken(usage)]
    assert kinds == ["writes", "writes"], usage.events


def test_reading_is_not_a_write(tmp_path):
    (tmp_path / "f").write_bytes(b"abc")
    usage = Usage()
    with watch(usage, memory=False):
        (tmp_path / "f").read_bytes()
        os.listdir(tmp_path)
    assert broken(usage) == []


def test_running_a_program_is_caught():
    usage = Usage()
    with watch(usage, memory=False):
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    assert any("subprocess.Popen" in e for e in usage.events)


def test_memory_over_the_limit_is_caught(monkeypatch):
    monkeypatch.setattr(guards, "MEMORY_LIMIT", 1_000_000)
    usage = Usage()
    with watch(usage):
        block = bytearray(3_000_000)
    del block
    assert [kind for kind, _ in broken(usage)] == ["limits"]


def test_a_hang_is_stopped(monkeypatch):
    monkeypatch.setattr(guards, "HANG_LIMIT", 0.2)
    with pytest.raises(Hang, match="wall clock"):
        with watch(Usage(), memory=False):
            time.sleep(5)


def test_an_endless_loop_is_stopped(monkeypatch):
    monkeypatch.setattr(guards, "TIME_LIMIT", 0.1)
    with pytest.raises(Hang, match="of CPU"):
        with watch(Usage(), memory=False):
            while True:
                pass


def test_an_undocumented_exception_is_reported(monkeypatch):
    def boom(entry, case):
        raise KeyError("x")

    calls = (harness.Call("read_header", boom, harness.NEVER),)
    monkeypatch.setitem(harness.READER_CALLS, "safetensors", calls)
    case = Case.of("safetensors", {"model.safetensors": b"\x02" + b"\0" * 7 + b"{}"})
    failures = harness.check(case, cli=())
    assert [(f.call, f.kind) for f in failures] == [("read_header", "exception")]
    assert failures[0].where == ""  # only ckpt_browser frames are named


def test_a_case_round_trips_through_a_regression_file(tmp_path):
    one = Case.of("torch", {"last.ckpt": b"PK\x03\x04"})
    many = Case.of("dcp", {"step-1/.metadata": b"\x80\x02.", "step-1/__0_0.distcp": b""})
    for case in (one, many):
        assert load(case.save(tmp_path)) == case
    assert one.entry == "last.ckpt" and many.entry == "step-1"
