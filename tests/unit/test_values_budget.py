"""One budget for values work (values.budget): bytes and tensors per run, and per file at most
twice what it holds on disk plus an extra, decided before any byte is read.

Each test counts the work done (bytes the value reader asks the disk for, files stat'ed), never
the time: a hostile file that once made `stats` or `diff --values` read for minutes is now
refused after reading nothing, with one line naming what raises the cap.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace

import pytest
import torch

from ckpt_browser import limits
from ckpt_browser.cli import main
from ckpt_browser.values import budget as budget_module
from ckpt_browser.values import read as values_read
from ckpt_browser.values.budget import plan
from ckpt_browser.values.locate import TensorLoc

from .helpers import craft, entry
from .values_helpers import CKPT3, CKPT6, RELEASE, locs

MiB = 2**20


def run(capsys, *args) -> tuple[int, str, str]:
    code = main([*map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def reads(monkeypatch) -> list[int]:
    """Bytes each preadv of tensor values asked for (values.read reads only through it)."""
    asked: list[int] = []
    real = os.preadv

    def counting(fd, buffers, offset, *rest):
        asked.append(sum(len(b) for b in buffers))
        return real(fd, buffers, offset, *rest)

    monkeypatch.setattr(values_read.os, "preadv", counting)
    return asked


def lower(monkeypatch, **caps) -> None:
    monkeypatch.setattr(limits, "LIMITS", replace(limits.LIMITS, **caps))


def sparse_shard(path, nbytes: int, held: int | None = None):
    """One F32 tensor `w` of `nbytes` in a safetensors file that is all holes past its header
    (or that ends after `held` bytes of data)."""
    header = json.dumps({"w": entry("F32", [nbytes // 4], 0, nbytes)}).encode()
    header += b" " * (-len(header) % 8)
    craft(path, header)
    os.truncate(path, 8 + len(header) + (nbytes if held is None else held))
    return path


# -- the per-file rule -----------------------------------------------------------------------

def test_a_sparse_shard_is_not_read(tmp_path, capsys, reads):
    """160 MiB of holes: before, stats read all of it (an 8 GiB one took 67 s)."""
    path = sparse_shard(tmp_path / "model.safetensors", 160 * MiB)
    code, out, err = run(capsys, "stats", path, "--json")
    doc = json.loads(out)
    assert code == 2 and doc["tensors"] == [] and doc["not_read"]["tensors"] == ["w"]
    assert err.count("\n") == 1 and str(path) in err
    assert "values of 1 tensor (160.0 MiB) not read: they would read 160.0 MiB from " \
           "model.safetensors, which holds 4.0 KiB on disk" in err
    assert sum(reads) == 0


def test_views_of_one_storage_read_it_at_most_twice_plus_the_extra(tmp_path, capsys, reads):
    """100 views of one 1 MiB storage ask for 100 MiB: the first ones up to the file's
    allowance are read, the rest listed, and no more than the allowance is read."""
    base = torch.arange(MiB // 4, dtype=torch.float32)
    torch.save({f"v{i}": base.view(-1) for i in range(100)}, tmp_path / "views.pt")
    code, out, err = run(capsys, "stats", tmp_path / "views.pt", "--json")
    doc = json.loads(out)
    allowance = 2 * os.stat(tmp_path / "views.pt").st_size + limits.LIMITS.file_extra_bytes
    read = len(doc["tensors"])
    assert code == 2 and read == allowance // MiB and read + len(doc["not_read"]["tensors"]) == 100
    assert sum(reads) <= allowance
    assert "they would read" in doc["not_read"]["message"] and "views.pt" in err


def test_a_view_that_repeats_one_element(tmp_path, capsys, reads):
    """A stride-0 view of 2**26 elements over one stored element (256 MiB of work from 4 bytes)."""
    torch.save({"x": torch.zeros(1).expand(2**14, 2**12)}, tmp_path / "x.pt")
    code, out, err = run(capsys, "stats", tmp_path / "x.pt")
    assert code == 2 and "values of 1 tensor (256.0 MiB) not read" in err
    assert "views repeating elements" in err and "x.pt" in out
    assert sum(reads) == 0


def test_a_piece_past_the_end_of_its_file_fails_before_reading(tmp_path, capsys, reads):
    """The header claims 64 MiB, the file holds 32 MiB of them: the read fails at once, as the
    damage it is, instead of reading 32 MiB first."""
    path = sparse_shard(tmp_path / "model.safetensors", 64 * MiB, held=32 * MiB)
    code, out, err = run(capsys, "stats", path)
    assert code == 5 and "truncated?" in out and "values unreadable" in out
    assert sum(reads) == 0


# -- the budget: bytes and tensors -----------------------------------------------------------

def test_over_the_tensor_budget_nothing_is_read_and_every_tensor_is_listed(capsys, reads,
                                                                        monkeypatch):
    lower(monkeypatch, values_tensors=5)
    code, out, err = run(capsys, "stats", RELEASE, "--json")
    doc = json.loads(out)
    assert code == 2 and doc["tensors"] == [] and len(doc["not_read"]["tensors"]) == 21
    assert err == (f"ckpt-browser: {RELEASE}: values of 21 tensors (104.6 KiB) not read: over "
                   "the values budget of 5 tensors (CKPT_BROWSER_MAX_VALUES_TENSORS raises "
                   "it)\n")
    assert reads == []


def test_the_tensor_count_is_decided_without_looking_at_any_file(monkeypatch):
    items = [(loc,) for loc in locs(RELEASE).values()]
    lower(monkeypatch, values_tensors=20)
    looked = []
    monkeypatch.setattr(budget_module.os, "stat", lambda p, *a, **k: looked.append(p))
    got = plan(items)
    assert got.admitted == [] and len(got.over_budget) == 21 and looked == []


def test_the_variables_raise_the_budget(monkeypatch):
    assert limits.Limits.from_env({"CKPT_BROWSER_MAX_VALUES_TENSORS": "21",
                                   "CKPT_BROWSER_MAX_VALUES_BYTES": "1_000_000"}) == replace(
        limits.Limits(), values_tensors=21, values_bytes=1_000_000)
    items = [(loc,) for loc in locs(RELEASE).values()]
    lower(monkeypatch, values_tensors=21)
    assert len(plan(items).admitted) == 21
    assert plan(items, max_bytes=100_000).message() == (
        "values of 21 tensors (104.6 KiB) not read: over the values budget of 97.7 KiB "
        "(CKPT_BROWSER_MAX_VALUES_BYTES raises it)")


def test_a_tensor_that_cannot_be_read_costs_nothing():
    """A tensor that claims 16 EiB on a missing storage is an error when read, not a budget
    overrun that would hide every other tensor."""
    good = locs(RELEASE)["model.norm.weight"]
    huge = TensorLoc("huge", "F32", (2**62,), "optimizer.pt", "optimizer",
                     problem="storage data/9 was not found in the file")
    got = plan([(good,), (huge,)])
    assert got.admitted == [(good,), (huge,)] and got.message() is None


# -- diff --values and the message everywhere ------------------------------------------------

def test_diff_values_lists_the_pairs_left_out(capsys, reads, monkeypatch):
    run(capsys, "diff", CKPT3, CKPT6, "--json")
    counters = list(reads)  # the optimizer's step counters, read with or without --values
    lower(monkeypatch, values_tensors=3)
    code, out, err = run(capsys, "diff", CKPT3, CKPT6, "--values", "--json")
    doc = json.loads(out)
    rows = doc["tensors"] + doc["state"]["tensors"]
    left = [r for r in rows if (r.get("error") or "").startswith(
        "not read: over the values budget of 3 tensors (CKPT_BROWSER_MAX_VALUES_TENSORS")]
    assert code == 2 and len(left) > 3 and reads[len(counters):] == counters
    said = [n for n in doc["notes"] if n.startswith(f"values of {len(left)} tensors")]
    assert said and err == f"ckpt-browser: {said[0]}\n"
    assert all(r["status"] != "values_changed" for r in left)


# -- memory: a block is a block, however long a row ------------------------------------------

def test_chunks_split_along_columns_come_in_blocks_of_block_elements(tmp_path, monkeypatch):
    """A DCP tensor chunked along its second dimension is assembled a few rows at a time; a
    row of 2**26 elements went to stats whole (a 512 MiB float64 copy, then another for the
    deviations). Here rows of 4,096 elements with blocks of 1,024."""
    import numpy as np

    from ckpt_browser.values.locate import Piece
    from ckpt_browser.values.read import iter_blocks

    left, right = np.arange(0, 2 * 2048, dtype="<f4"), np.arange(5000, 5000 + 2 * 2048,
                                                                   dtype="<f4")
    path = tmp_path / "__0_0.distcp"
    path.write_bytes(left.tobytes() + right.tobytes())
    n = left.nbytes
    loc = TensorLoc("w", "F32", (2, 4096), ".metadata", "weights",
                    (Piece(str(path), 0, n, (0, 0), (2, 2048)),
                     Piece(str(path), n, n, (0, 2048), (2, 2048))))
    lower(monkeypatch, block_elements=1024)
    blocks = list(iter_blocks(loc))
    assert max(b.size for b in blocks) == 1024
    want = np.concatenate([left.reshape(2, 2048), right.reshape(2, 2048)], axis=1).reshape(-1)
    assert np.array_equal(np.concatenate(blocks), want)


def test_a_view_is_gathered_a_block_at_a_time(tmp_path):
    """One stored row of 4,096 repeated 2**14 times (strides (0, 1), torch's expand): its first
    block costs a block, not a copy of the whole view (reshape(-1) copied 256 MiB before the
    first block; within a big file's allowance such a view could be gigabytes)."""
    import tracemalloc

    import numpy as np

    from ckpt_browser.values.locate import Piece
    from ckpt_browser.values.read import iter_blocks

    path = tmp_path / "x.bin"
    path.write_bytes(np.arange(4096, dtype="<f4").tobytes())
    loc = TensorLoc("x", "F32", (2**14, 4096), "x.bin", "other",
                    (Piece(str(path), 0, 4 * 4096, (0, 0), (2**14, 4096)),), (0, 1))
    tracemalloc.start()
    try:
        first = next(iter_blocks(loc))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert first.size == limits.LIMITS.block_elements
    assert np.array_equal(first, np.tile(np.arange(4096, dtype="<f4"), first.size // 4096))
    assert peak < 32 * MiB
