"""A big DCP .metadata read by the C unpickler in a child (readers/dcp_fast.py): the same
reading as the restricted unpickler's on every real DCP sample and on a 1 MB+ .metadata that
torch's own dcp.save wrote; anything the child cannot finish cleanly (a crash on a tuple nested
a million deep, a global it refuses) is read the safe way and reported as before.
"""

from __future__ import annotations

import pickle

import pytest
import torch

from ckpt_browser.readers import dcp_fast
from ckpt_browser.readers.dcp import read_dcp

from .helpers import SAMPLES
from .state_helpers import SystemCall, dcp_save, torch_metadata

DCP_SAMPLES = ["torchtitan-run/checkpoint/step-10", "dcp-ranks/ranks-2", "dcp-ranks/ranks-4",
               "megatron-core/run/iter_0000002"]


def both_ways(folder, monkeypatch):
    """read_dcp through the child (every size) and through the restricted unpickler only."""
    calls = []
    real = dcp_fast.read_fast

    def spy(data, name):
        got = real(data, name)
        calls.append(got is not None)
        return got

    monkeypatch.setattr(dcp_fast, "read_fast", spy)
    monkeypatch.setattr(dcp_fast, "FAST_MIN", 0)
    fast = read_dcp(str(folder), "x")
    monkeypatch.setenv("CKPT_BROWSER_DCP_FAST", "0")
    safe = read_dcp(str(folder), "x")
    monkeypatch.delenv("CKPT_BROWSER_DCP_FAST")
    return fast, safe, calls


@pytest.mark.parametrize("sample", DCP_SAMPLES)
def test_the_child_reads_every_sample_as_the_safe_path_does(sample, monkeypatch):
    folder = SAMPLES / sample
    assert (folder / ".metadata").is_file()
    fast, safe, calls = both_ways(folder, monkeypatch)
    assert calls == [True]  # the child finished, and its reading was used
    assert fast == safe
    assert len(fast.entries) == len(torch_metadata(folder).state_dict_metadata)


def test_a_megabyte_metadata_from_dcp_save(tmp_path, monkeypatch):
    state = {f"layers.{i // 8}.w{i % 8}": torch.full((2, 3), float(i)) for i in range(6000)}
    state["step"] = 7  # a bytes entry
    folder = dcp_save(state, tmp_path / "big")
    assert (folder / ".metadata").stat().st_size >= dcp_fast.FAST_MIN  # the child's by size
    fast, safe, calls = both_ways(folder, monkeypatch)
    assert calls == [True] and fast == safe
    md = torch_metadata(folder).state_dict_metadata
    assert {k: e.shape for k, e in fast.entries.items() if e.kind == "tensor"} == \
        {k: tuple(m.size) for k, m in md.items() if hasattr(m, "size")}


def test_a_crash_in_the_child_is_read_the_safe_way(tmp_path, monkeypatch):
    # a dict whose key is a tuple nested 1.2 million deep: the C unpickler's hashing of it
    # overflows the C stack (CPython 3.11 segfaults); the child dies, this process does not
    deep = b"\x80\x04}(" + b")" + b"\x85" * 1_200_000 + b"K\x01u."
    (tmp_path / ".metadata").write_bytes(deep)
    assert dcp_fast.read_fast(deep, ".metadata") is None
    fast, safe, calls = both_ways(tmp_path, monkeypatch)
    assert calls == [False]
    assert fast == safe and fast.problems
    assert any(p.severity == "error" for p in fast.problems)


def test_a_global_the_child_refuses_is_reported_by_the_safe_path(tmp_path, monkeypatch):
    folder = dcp_save({f"w{i}": torch.zeros(2) for i in range(3)}, tmp_path / "ck")
    sentinel = tmp_path / "PWNED"
    md = torch_metadata(folder)
    md.planner_data = {"x": SystemCall(f"touch {sentinel}")}
    (folder / ".metadata").write_bytes(pickle.dumps(md, protocol=4))
    fast, safe, calls = both_ways(folder, monkeypatch)
    assert calls == [False] and not sentinel.exists()
    assert fast == safe and fast.unsafe == ("posix.system",)
