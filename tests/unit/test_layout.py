"""`open_layout` / `open_path`: what a path holds, and the index cross-checks."""

from __future__ import annotations

import json
import os
import re
import shutil
import threading

import pytest
import torch

from ckpt_browser.analysis.opened import open_path
from ckpt_browser.errors import CheckpointError, NotACheckpoint, PathNotFound
from ckpt_browser.model import ERROR, INFO, WARNING
from ckpt_browser.producers.layout import open_layout
from ckpt_browser.readers import iter_files

from .helpers import (
    DAMAGED,
    INDEX,
    RELEASE,
    RUN6,
    SHARDS,
    copy_sample,
    reference_map,
    reference_totals,
    save,
    sharded,
    three_shards,
    write_index,
)


def totals_dict(totals) -> dict:
    return {"tensors": totals.tensors, "params": totals.params, "bytes": totals.bytes,
            "by_dtype": {k: {"tensors": v.tensors, "params": v.params, "bytes": v.bytes}
                         for k, v in totals.by_dtype.items()}}


def tensor_map(ckpt) -> dict:
    """name -> (dtype, shape, file) of the safetensors tensors, as ckpt_browser read them."""
    return {t.name: (t.dtype, t.shape, t.file) for f in ckpt.shards for t in f.tensors
            if t.component == "weights"}


def problems(ckpt, severity=None) -> list:
    return [p for p in ckpt.problems if severity is None or p.severity == severity]


def find(ckpt, file, *words, severity=ERROR):
    hits = [p for p in problems(ckpt, severity)
            if p.file == file and all(w in p.message for w in words)]
    assert hits, f"no {severity} on {file} with {words}: {[p.line() for p in ckpt.problems]}"
    return hits[0]


def index_of(folder) -> dict:
    return json.loads((folder / INDEX).read_text())


# --- the real samples ---------------------------------------------------------------------------

@pytest.mark.parametrize("sample", [RUN6, RELEASE], ids=["checkpoint-6", "release"])
def test_sample_folder_reads_like_safe_open(sample):
    ckpt = open_path(str(sample)).checkpoint

    assert ckpt.layout.format == "safetensors-index"
    assert ckpt.layout.shards == SHARDS
    assert set(SHARDS) < set(ckpt.layout.files)  # and the JSON and torch files beside them
    assert ckpt.problems == ()
    assert tensor_map(ckpt) == reference_map(sample, SHARDS)
    # every weight sits in the file the index says it does
    weights = {t.name: t.file for t in ckpt.tensors if t.component == "weights"}
    assert weights == index_of(sample)["weight_map"]


@pytest.mark.parametrize("sample", [RUN6, RELEASE], ids=["checkpoint-6", "release"])
def test_sample_totals_equal_safe_open_and_the_hf_index(sample):
    ckpt = open_path(str(sample)).checkpoint
    ref = reference_totals(sample / f for f in SHARDS)

    assert totals_dict(ckpt.totals) == ref
    meta = index_of(sample)["metadata"]  # written by HF save_pretrained
    assert ckpt.totals.bytes == meta["total_size"]
    assert ckpt.totals.params == meta["total_parameters"]


def test_sample_as_the_index_file():
    path = RUN6 / INDEX
    ckpt = open_path(str(path)).checkpoint
    assert ckpt.layout.format == "safetensors-index"
    assert ckpt.layout.path == str(path)
    assert ckpt.problems == ()
    assert tensor_map(ckpt) == reference_map(RUN6, SHARDS)


@pytest.mark.parametrize("shard", SHARDS)
def test_sample_as_a_single_shard_file(shard):
    ckpt = open_path(str(RUN6 / shard)).checkpoint
    assert ckpt.layout.format == "safetensors"
    assert ckpt.layout.files == (shard,) and ckpt.layout.shards == (shard,)
    assert ckpt.problems == ()
    assert tensor_map(ckpt) == reference_map(RUN6, [shard])
    assert totals_dict(ckpt.totals) == reference_totals([RUN6 / shard])


def test_relative_single_file_path(tmp_path, monkeypatch):
    save(tmp_path / "model.safetensors", {"w": torch.ones(3, 2)})
    monkeypatch.chdir(tmp_path)
    ckpt = open_path("model.safetensors").checkpoint
    assert ckpt.problems == ()
    assert [t.name for t in ckpt.tensors] == ["w"]


def test_shards_without_an_index_are_a_safetensors_folder(tmp_path):
    folder = copy_sample(RUN6, tmp_path / "noindex", skip=(INDEX,))
    ckpt = open_path(str(folder)).checkpoint
    assert ckpt.layout.format == "safetensors-folder"
    assert ckpt.layout.index is None
    assert ckpt.problems == ()
    assert tensor_map(ckpt) == reference_map(RUN6, SHARDS)


def test_folder_with_one_safetensors_file(tmp_path):
    save(tmp_path / "model.safetensors", {"w": torch.ones(2)})
    (tmp_path / "config.json").write_text("{}")
    ckpt = open_path(str(tmp_path)).checkpoint
    assert ckpt.layout.format == "safetensors"
    assert ckpt.layout.shards == ("model.safetensors",)
    assert ckpt.layout.files == ("config.json", "model.safetensors")
    assert [f.format for f in ckpt.files] == ["json", "safetensors"]


def test_safetensors_file_without_the_extension_is_recognised(tmp_path):
    path = save(tmp_path / "weights", {"w": torch.ones(2, 2)})
    ckpt = open_path(str(path)).checkpoint
    assert ckpt.layout.format == "safetensors"
    assert tensor_map(ckpt) == {"w": ("F32", (2, 2), "weights")}


# --- paths that are not checkpoints -------------------------------------------------------------

def test_missing_path(tmp_path):
    with pytest.raises(PathNotFound) as e:
        open_layout(str(tmp_path / "nope"))
    assert "no such file" in str(e.value) and "nope" in str(e.value)


def test_empty_folder(tmp_path):
    with pytest.raises(NotACheckpoint) as e:
        open_layout(str(tmp_path))
    assert "empty" in e.value.problem and str(tmp_path) in str(e.value)


def test_text_file(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("these are not weights, but they are long enough\n")
    with pytest.raises(NotACheckpoint) as e:
        open_layout(str(path))
    assert "not a checkpoint" in e.value.problem and "notes.txt" in str(e.value)


def test_torch_file_opens_with_no_safetensors_weights():
    # a torch file is one file to read by its content, not refused
    layout = open_layout(str(RUN6 / "optimizer.pt"))
    assert layout.format == "files" and layout.files == ("optimizer.pt",) and layout.shards == ()


def test_folder_with_only_torch_files_opens_without_weights(tmp_path):
    for name in ("optimizer.pt", "scheduler.pt", "rng_state.pth", "trainer_state.json"):
        shutil.copy(RUN6 / name, tmp_path / name)
    layout = open_layout(str(tmp_path))
    assert layout.format == "files" and layout.shards == ()
    assert layout.files == ("optimizer.pt", "rng_state.pth", "scheduler.pt", "trainer_state.json")


def test_unknown_folder_is_listed_not_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    layout = open_layout(str(tmp_path))
    assert layout.format == "files" and layout.files == ("notes.txt",)


def test_folder_that_cannot_be_listed(tmp_path, monkeypatch):
    def deny(path):
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(os, "scandir", deny)
    with pytest.raises(CheckpointError) as e:
        open_layout(str(tmp_path))
    assert "permission denied" in e.value.problem


# --- the damaged sample --------------------------------------------------------------------------

def test_damaged_sample_names_the_missing_and_the_truncated_shard():
    ckpt = open_path(str(DAMAGED)).checkpoint
    s1, s2, s3 = SHARDS
    wm = index_of(DAMAGED)["weight_map"]

    assert ckpt.damaged
    find(ckpt, s1, "truncated", "100 missing")
    find(ckpt, s2, "does not exist")
    lost = find(ckpt, s2, "index maps 9 tensors", "none can be read").message
    expected_lost = {k for k, v in wm.items() if v == s2}
    shown = set(re.findall(r"model\.[\w.]+", lost))
    more = re.search(r"and (\d+) more", lost)
    assert shown and shown <= expected_lost
    assert len(shown) + (int(more.group(1)) if more else 0) == 9
    # the readable shards are all there: the truncated one's header and the intact one
    assert tensor_map(ckpt) == reference_map(RELEASE, [s1, s3])
    assert not any(p.file == s3 for p in ckpt.problems)


# --- index cross-checks, each on its own ---------------------------------------------------------

def test_synthetic_three_shards_are_clean(tmp_path):
    folder = three_shards(tmp_path)
    ckpt = open_path(str(folder)).checkpoint
    assert ckpt.problems == ()
    assert totals_dict(ckpt.totals) == reference_totals(sorted(folder.glob("*.safetensors")))


def test_index_names_a_missing_file(tmp_path):
    folder = three_shards(tmp_path)
    (folder / "model-00002-of-00003.safetensors").unlink()
    ckpt = open_path(str(folder)).checkpoint
    find(ckpt, "model-00002-of-00003.safetensors", "does not exist")
    find(ckpt, "model-00002-of-00003.safetensors", "1 tensors", "b.weight")
    assert set(tensor_map(ckpt)) == {"a.weight", "a.bias", "c.weight", "c.mask"}


def test_tensor_in_index_missing_from_its_shard(tmp_path):
    folder = three_shards(tmp_path)
    wm = index_of(folder)["weight_map"] | {"a.ghost": "model-00001-of-00003.safetensors"}
    write_index(folder, wm)
    ckpt = open_path(str(folder)).checkpoint
    p = find(ckpt, "model-00001-of-00003.safetensors", "a.ghost", "not in the file")
    assert [q for q in ckpt.problems if q.severity == ERROR] == [p]


def test_tensor_in_shard_not_in_index(tmp_path):
    folder = three_shards(tmp_path)
    wm = index_of(folder)["weight_map"]
    del wm["c.mask"]
    write_index(folder, wm)
    ckpt = open_path(str(folder)).checkpoint
    find(ckpt, "model-00003-of-00003.safetensors", "c.mask", "not mapped", severity=WARNING)
    assert not ckpt.damaged


def test_name_in_two_shards_with_index(tmp_path):
    folder = sharded(tmp_path, {
        "model-00001-of-00002.safetensors": {"x": torch.ones(2), "shared": torch.ones(3)},
        "model-00002-of-00002.safetensors": {"y": torch.ones(2), "shared": torch.zeros(3)},
    })
    ckpt = open_path(str(folder)).checkpoint
    p = find(ckpt, "model-00002-of-00002.safetensors", "shared", "model-00001-of-00002.safetensors")
    assert "also appear" in p.message
    assert ckpt.damaged


def test_name_in_two_shards_without_index(tmp_path):
    folder = sharded(tmp_path, {
        "part-1.safetensors": {"x": torch.ones(2), "shared": torch.ones(3)},
        "part-2.safetensors": {"y": torch.ones(2), "shared": torch.zeros(3)},
    }, index=False)
    ckpt = open_path(str(folder)).checkpoint
    assert ckpt.layout.format == "safetensors-folder"
    find(ckpt, "part-2.safetensors", "shared", "part-1.safetensors")


def test_total_size_mismatch(tmp_path):
    folder = three_shards(tmp_path)
    right = index_of(folder)["metadata"]["total_size"]
    write_index(folder, index_of(folder)["weight_map"], total_size=right + 1000)
    ckpt = open_path(str(folder)).checkpoint
    p = find(ckpt, INDEX, "total_size", severity=WARNING)
    assert f"{right + 1000:,}" in p.message and f"{right:,}" in p.message


def test_orphan_shard_not_named_by_the_index(tmp_path):
    folder = three_shards(tmp_path)
    save(folder / "model-00004-of-00004.safetensors", {"stray": torch.ones(1)})
    ckpt = open_path(str(folder)).checkpoint
    find(ckpt, "model-00004-of-00004.safetensors", "not named by", severity=WARNING)
    assert "stray" not in tensor_map(ckpt)  # loaders ignore it, so do we


def test_single_file_beside_the_index_is_a_warning(tmp_path):
    # transformers loads model.safetensors first and never looks at the index
    folder = three_shards(tmp_path)
    save(folder / "model.safetensors", {"other": torch.ones(1)})
    ckpt = open_path(str(folder)).checkpoint
    find(ckpt, "model.safetensors", "ignores the index", severity=WARNING)
    assert not ckpt.damaged


def test_index_naming_a_file_outside_the_folder(tmp_path):
    folder = three_shards(tmp_path / "ckpt")
    save(tmp_path / "x.safetensors", {"evil": torch.ones(1)})
    wm = index_of(folder)["weight_map"] | {"evil": "../x.safetensors"}
    write_index(folder, wm)
    ckpt = open_path(str(folder)).checkpoint
    find(ckpt, INDEX, "../x.safetensors", "outside")
    assert "evil" not in tensor_map(ckpt)
    assert "../x.safetensors" not in ckpt.layout.files


def test_index_mapping_to_an_empty_file_name(tmp_path):
    folder = three_shards(tmp_path / "ckpt")
    write_index(folder, index_of(folder)["weight_map"] | {"lost": ""})
    ckpt = open_path(str(folder)).checkpoint
    find(ckpt, INDEX, "empty file name")
    assert all(p.file for p in ckpt.problems)  # every problem names a file
    assert "" not in ckpt.layout.files


def test_broken_index_json_still_shows_the_shards(tmp_path):
    folder = copy_sample(RUN6, tmp_path / "c")
    (folder / INDEX).write_text('{"metadata": {"total_size": 1}, "weight_map": {')
    ckpt = open_path(str(folder)).checkpoint
    find(ckpt, INDEX, "not valid JSON", "3 .safetensors files")
    assert tensor_map(ckpt) == reference_map(RUN6, SHARDS)


@pytest.mark.parametrize("doc", ['["a", "b"]', '{"metadata": {}}', '{"weight_map": {"a": 5}}'],
                         ids=["list", "no weight_map", "weight_map to a number"])
def test_index_without_a_usable_weight_map_still_shows_the_shards(tmp_path, doc):
    folder = copy_sample(RUN6, tmp_path / "c")
    (folder / INDEX).write_text(doc)
    ckpt = open_path(str(folder)).checkpoint
    assert any(p.file == INDEX and p.severity == ERROR for p in ckpt.problems)
    assert tensor_map(ckpt) == reference_map(RUN6, SHARDS)


def test_index_pointing_at_bin_files(tmp_path):
    write_index(tmp_path, {"a": "pytorch_model-00001-of-00002.bin",
                           "b": "pytorch_model-00002-of-00002.bin"})
    for target in (tmp_path, tmp_path / INDEX):
        layout = open_layout(str(target))
        assert layout.format == "files" and layout.shards == ()


def test_one_bad_shard_does_not_stop_the_others(tmp_path):
    folder = copy_sample(RUN6, tmp_path / "c")
    bad = folder / SHARDS[1]
    raw = bytearray(bad.read_bytes())
    raw[8:12] = b"\xff\xff\xff\xff"  # wreck the JSON header, keep the length
    bad.write_bytes(bytes(raw))
    ckpt = open_path(str(folder)).checkpoint
    find(ckpt, SHARDS[1], "UTF-8")
    assert tensor_map(ckpt) == reference_map(RUN6, [SHARDS[0], SHARDS[2]])
    ok = [s for s in ckpt.shards if s.name != SHARDS[1]]
    assert all(s.ok for s in ok) and len(ok) == 2


def test_two_indexes_in_a_folder_prefer_model_index(tmp_path):
    folder = copy_sample(RUN6, tmp_path / "c")
    write_index(folder, {"x": "other-00001-of-00001.safetensors"},
                name="other.safetensors.index.json")
    ckpt = open_path(str(folder)).checkpoint
    assert ckpt.layout.index.name == INDEX
    find(ckpt, INDEX, "other.safetensors.index.json", severity=INFO)
    assert tensor_map(ckpt) == reference_map(RUN6, SHARDS)


# --- batches and cancel --------------------------------------------------------------------------

def test_iter_files_yields_batches_and_stops_when_cancelled():
    layout = open_layout(str(RUN6))
    batches = list(iter_files(layout, batch=2))
    assert all(len(b) == 2 for b in batches[:-1]) and 1 <= len(batches[-1]) <= 2
    names = [s.name for b in batches for s in b]
    assert names[:3] == list(SHARDS)  # the shards first: they are the tree's skeleton
    assert sorted(names) == sorted(layout.files)

    cancel = threading.Event()
    cancel.set()
    assert list(iter_files(layout, cancel)) == []
