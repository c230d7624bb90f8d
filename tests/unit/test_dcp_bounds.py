"""DCP metadata costs what its size implies: shared references cannot multiply its chunks, the
tiling check is near-linear, per-rank files merge in linear time, and non-tensor items are
decoded a bounded number of times. Work is counted (calls, comparisons), never timed.

Hostile metadata is written opcode by opcode with the malicious corpus's helpers (no torch).
"""

from __future__ import annotations

import builtins
import itertools
import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckpt_browser.analysis.resume import tiling
from ckpt_browser.analysis.resume.tiling import tiling_problem
from ckpt_browser.parts.files import StateFiles
from ckpt_browser.readers.dcp import read_dcp
from ckpt_browser.standins import DcpChunk
from tests.malicious.make_corpus import (
    _MD,
    TITAN_ITEMS,
    Build,
    Call,
    G,
    Get,
    NewObj,
    Put,
    dcp_folder,
    dcp_metadata,
    dcp_tensor_blob,
    tensor_md,
)

from .helpers import SAMPLES


def shared_chunks(folder: Path, tensors: int, per: int) -> Path:
    """`tensors` entries that all name one memoised list of `per` chunks: tensors x per chunks
    in a few KB (BINPUT / BINGET), each tensor tiling its shape [per] exactly."""
    size = [Put(190, G("torch", "Size"))]
    cls = [Put(191, G(_MD, "ChunkStorageMetadata"))]
    one = [Put(192, Call(Get(190), ((1,),)))]

    def chunk(i: int) -> Build:
        return Build(NewObj(cls.pop() if cls else Get(191)),
                     {"offsets": Call(size.pop() if size else Get(190), ((i,),)),
                      "sizes": one.pop() if one else Get(192)})

    chunks = Put(200, [chunk(i) for i in range(per)])
    first = tensor_md((per,), [])  # TensorStorageMetadata with properties and size
    first.state["chunks"] = chunks
    items = {"t0": Put(201, first)}
    for t in range(1, tensors):
        items[f"t{t}"] = Get(201)
    folder.mkdir(parents=True)
    (folder / ".metadata").write_bytes(dcp_metadata(items, {}))
    (folder / "__0_0.distcp").write_bytes(dcp_tensor_blob())
    return folder


# -- shared references ------------------------------------------------------------------------

def test_a_million_chunks_from_a_few_kilobytes_are_refused_in_one_line(tmp_path):
    """1,000 tensors naming one list of 1,000 chunks: before, the reader built a million
    chunks (10 s, and 160 MB of inspect --json)."""
    folder = shared_chunks(tmp_path / "step-1", 1000, 1000)
    size = (folder / ".metadata").stat().st_size
    assert size < 100_000
    d = read_dcp(str(folder), "step-1")
    errors = [p for p in d.problems if p.severity == "error"]
    assert [p.message for p in errors] == [
        f"names 1,000,000 chunks in {size:,} bytes: the same chunks referenced again and again "
        "(torch writes each one apart, in over 16 bytes); not read"]
    assert errors[0].file == "step-1/.metadata" and d.entries == {}


def test_a_few_shared_chunks_are_still_read(tmp_path):
    """Under FREE_CHUNKS the ratio is not asked: a small file reads as before."""
    d = read_dcp(str(shared_chunks(tmp_path / "step-1", 10, 100)), "step-1")
    assert len(d.entries) == 10 and all(len(e.chunks) == 100 for e in d.entries.values())


# -- the tiling check -------------------------------------------------------------------------

def brute(shape, boxes) -> bool:
    """Every element covered exactly once, element by element (small shapes only)."""
    seen: dict = {}
    for o, s in boxes:
        if any(a + b > d for a, b, d in zip(o, s, shape)):
            return False
        for p in itertools.product(*(range(a, a + b) for a, b in zip(o, s))):
            seen[p] = seen.get(p, 0) + 1
    return len(seen) == _numel(shape) and all(v == 1 for v in seen.values())


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def chunks(boxes) -> tuple[DcpChunk, ...]:
    return tuple(DcpChunk(tuple(o), tuple(s), "__0_0.distcp", 0, 1) for o, s in boxes)


@st.composite
def chunk_maps(draw):
    """A grid split of a small shape, then perhaps one chunk dropped, doubled, grown or moved."""
    dims = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 5)) for _ in range(dims))
    cuts = [sorted(set(draw(st.lists(st.integers(1, max(d - 1, 1)), max_size=3))) - {d})
            for d in shape]
    edges = [[0, *c, d] for c, d in zip(cuts, shape)]
    boxes = [tuple(zip(*cell)) for cell in itertools.product(
        *([(a, b - a) for a, b in zip(e, e[1:])] for e in edges))]
    boxes = [list(b) for b in boxes]
    change = draw(st.sampled_from(["none", "drop", "double", "grow", "move"]))
    i = draw(st.integers(0, len(boxes) - 1))
    o, s = list(boxes[i][0]), list(boxes[i][1])
    if change == "drop":
        boxes.pop(i)
    elif change == "double":
        boxes.append([tuple(o), tuple(s)])
    elif change in ("grow", "move"):
        k = draw(st.integers(0, dims - 1))
        if change == "grow" and o[k] + s[k] < shape[k]:
            s[k] += 1
        elif change == "move" and o[k] > 0:
            o[k] -= 1
        boxes[i] = [tuple(o), tuple(s)]
    return shape, [tuple(b) for b in boxes]


@settings(max_examples=300, deadline=None)
@given(chunk_maps())
def test_the_corner_count_agrees_with_counting_every_element(case):
    shape, boxes = case
    assert (tiling_problem(shape, chunks(boxes)) is None) == brute(shape, boxes)


def test_numpy_and_plain_corner_counts_agree(monkeypatch):
    rng = random.Random(7)
    for _ in range(200):
        shape = tuple(rng.randint(1, 6) for _ in range(rng.randint(1, 3)))
        boxes = [(tuple(rng.randrange(d) for d in shape),
                  tuple(rng.randint(1, 3) for _ in shape)) for _ in range(rng.randint(1, 6))]
        plain = tiling_problem(shape, chunks(boxes))
        monkeypatch.setattr(tiling, "SMALL", 0)
        assert tiling_problem(shape, chunks(boxes)) == plain
        monkeypatch.setattr(tiling, "SMALL", 4096)


@pytest.fixture
def comparisons(monkeypatch) -> list[int]:
    """How many times the overlap search runs."""
    calls: list[int] = []
    real = tiling._overlap

    def counted(boxes):
        calls.append(len(boxes))
        return real(boxes)

    monkeypatch.setattr(tiling, "_overlap", counted)
    return calls


def test_a_grid_that_tiles_is_not_searched_for_overlaps(comparisons):
    """A 300 x 300 grid of chunks: the old sweep compared each chunk with a row of 300 open
    ones (27 million comparisons); the corners decide it."""
    n = 300
    grid = [((i, j), (1, 1)) for i in range(n) for j in range(n)]
    assert tiling_problem((n, n), chunks(grid)) is None
    assert comparisons == []


def test_the_overlap_search_gives_up_within_its_budget(monkeypatch):
    monkeypatch.setattr(tiling, "OVERLAP_WORK", 10_000)
    n = 300
    grid = [((i, j), (1, 1)) for i in range(n) for j in range(n)]
    seen = []
    real = builtins.all

    def counted(it):
        seen.append(1)
        return real(it)

    monkeypatch.setattr(tiling, "all", counted, raising=False)
    assert tiling_problem((n, n), chunks(grid[:-1])) == (
        "its chunks cover 89,999 of its 90,000 elements, a gap of 1")
    assert len(seen) <= 10_000
    moved = grid[:-1] + [((n - 2, n - 1), (2, 1))]  # the last chunk grown over its neighbour
    assert tiling_problem((n, n), chunks(moved)) == (
        "its 90,000 chunks cover 90,001 elements where it has 90,000: some overlap")


# -- per-rank metadata and items -----------------------------------------------------------------

def test_per_rank_metadata_files_merge_each_offset_once(tmp_path):
    folder = tmp_path / "step-1"
    folder.mkdir()
    for rank in range(3):
        own = [((2 * rank,), (2,))] + ([((0,), (2,))] if rank else [])  # rank 1, 2 repeat 0
        meta = dcp_metadata({"w": tensor_md((6,), own)}, {})
        (folder / f"__{rank}.metadata").write_bytes(meta)
    d = read_dcp(str(folder), "")
    assert [c.offsets for c in d.entries["w"].chunks] == [(0,), (2,), (4,)]
    assert tiling_problem(d.entries["w"].shape, d.entries["w"].chunks) is None


def test_items_are_decoded_a_bounded_number_of_times(tmp_path, monkeypatch):
    """1,500 train_state items in one blob: decoded once, not 1,500 times; 1,500 items in their
    own blobs: the first 1,000 decoded (the rest named, and a warning says so)."""
    from ckpt_browser.analysis.components import training_state
    from ckpt_browser.analysis.opened import open_path

    decoded = []
    real = StateFiles.dcp_value
    monkeypatch.setattr(StateFiles, "dcp_value",
                        lambda self, rel, e: decoded.append(e.key) or real(self, rel, e))
    values = {**TITAN_ITEMS, **{f"train_state.k{i}": i for i in range(1500)}}
    meta, rank = dcp_folder(values)
    step = tmp_path / "step-1"
    step.mkdir()
    (step / ".metadata").write_bytes(meta)
    (step / "__0_0.distcp").write_bytes(rank)
    ts = training_state(open_path(str(step)).checkpoint)
    said = [p.message for p in ts.problems if "were decoded" in p.message]
    assert said == ["1,502 items under train_state.*: only 1,000 were decoded (the shallowest "
                    "keys); the others are listed by name only"]
    assert len([k for k in decoded if k.startswith("train_state.")]) == 1000
    assert ts.components["progress"].facts["step"] == 1  # train_state.step is decoded first


def test_a_titan_sample_is_read_as_before():
    ts_folder = SAMPLES / "torchtitan-run" / "checkpoint" / "step-10"
    d = read_dcp(str(ts_folder), "")
    assert d.entries and not [p for p in d.problems if p.severity == "error"]
    assert all(tiling_problem(e.shape, e.chunks) is None for e in d.entries.values()
               if e.kind == "tensor")


def test_diff_decodes_a_bounded_number_of_dcp_learning_rates(tmp_path, monkeypatch, capsys):
    """1,500 per-parameter lr items, each in its own blob: diff decoded up to 10,000 of them per
    side (about 1 ms each) and said nothing of the rest; now 1,000, and a note."""
    from ckpt_browser.cli import main

    decoded = []
    real = StateFiles.dcp_value
    monkeypatch.setattr(StateFiles, "dcp_value",
                        lambda self, rel, e: decoded.append(e.key) or real(self, rel, e))
    values = {**TITAN_ITEMS, **{f"optimizer.param_groups.layers.{i}.weight.lr": 0.001 * (i % 3)
                                for i in range(1500)}}
    meta, rank = dcp_folder(values)
    for name in ("a", "b"):
        step = tmp_path / name / "step-1"
        step.mkdir(parents=True)
        (step / ".metadata").write_bytes(meta)
        (step / "__0_0.distcp").write_bytes(rank)
    main(["diff", str(tmp_path / "a" / "step-1"), str(tmp_path / "b" / "step-1"), "--json"])
    notes = json.loads(capsys.readouterr().out)["state"]["notes"]
    lr = [k for k in decoded if k.endswith(".lr")]
    assert len(lr) == 2 * 1000
    assert "A (step 1): 500 more DCP param-group lr items were not decoded (only 1,000 are)." \
        in notes
