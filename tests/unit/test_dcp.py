"""read_dcp on real torch.distributed.checkpoint output (one process, and two gloo ranks), and
on damaged copies. Expected values come from DCP's own FileSystemReader.read_metadata() and
from torch.load of each blob, on folders these tests wrote.
"""

from __future__ import annotations

import io
import pickle

import pytest
import torch

from ckpt_browser.model import ERROR, INFO, WARNING
from ckpt_browser.readers.dcp import read_dcp
from ckpt_browser.standins import DcpChunk

from .state_helpers import SystemCall, adamw_state, dcp_save, tag, torch_metadata, two_rank_dcp


def state() -> dict:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    return {"model": model.state_dict(), "optimizer": adamw_state(), "step": 12,
            "loss": 0.25, "betas": (0.9, 0.95)}


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dcp") / "step-12"
    return dcp_save(state(), folder)


def copy_of(saved, tmp_path):
    import shutil

    return shutil.copytree(saved, tmp_path / "step-12")


def blob(folder, chunk: DcpChunk) -> bytes:
    with open(folder / chunk.file, "rb") as f:
        f.seek(chunk.offset)
        return f.read(chunk.length)


def by_severity(d, severity) -> list[str]:
    return [p.message for p in d.problems if p.severity == severity]


# -- real checkpoints --------------------------------------------------------------------------

def test_entries_match_dcps_own_reader(saved):
    d = read_dcp(str(saved), "step-12")
    ref = torch_metadata(saved)
    assert (d.folder, d.version, d.problems, d.unsafe) == ("step-12", ref.version, (), ())
    assert list(d.entries) == list(ref.state_dict_metadata)
    where = {(k.fqn, tuple(k.offset) if k.offset is not None else None): v
             for k, v in ref.storage_data.items()}
    for key, md in ref.state_dict_metadata.items():
        e = d.entries[key]
        if hasattr(md, "chunks"):
            assert (e.kind, e.dtype, e.shape) == ("tensor", tag(md.properties.dtype),
                                                  tuple(md.size)), key
            assert [(c.offsets, c.sizes) for c in e.chunks] == \
                [(tuple(c.offsets), tuple(c.sizes)) for c in md.chunks]
            infos = [where[(key, tuple(c.offsets))] for c in md.chunks]
        else:
            assert (e.kind, e.dtype, e.shape) == ("bytes", None, None)
            assert [(c.offsets, c.sizes) for c in e.chunks] == [((), ())]
            infos = [where[(key, None)]]
        assert [(c.file, c.offset, c.length) for c in e.chunks] == \
            [(i.relative_path, i.offset, i.length) for i in infos]


def test_keys_files_and_byte_ranges(saved):
    d = read_dcp(str(saved), "step-12")
    assert {"model.0.weight", "optimizer.state.0.exp_avg", "optimizer.param_groups.0.lr",
            "step", "loss", "betas"} <= set(d.entries)
    assert d.files == {p.name: p.stat().st_size for p in saved.glob("*.distcp")}
    original = state()
    for e in d.entries.values():
        for c in e.chunks:
            assert c.offset + c.length <= d.files[c.file]
            value = torch.load(io.BytesIO(blob(saved, c)), weights_only=True)
            if e.kind == "tensor":
                assert tuple(value.shape) == c.sizes and tag(value.dtype) == e.dtype
    values = {k: torch.load(io.BytesIO(blob(saved, d.entries[k].chunks[0])), weights_only=True)
              for k in ("step", "loss", "betas")}
    assert values == {k: original[k] for k in values}


def test_two_gloo_ranks_write_chunks_into_two_files(tmp_path):
    out = two_rank_dcp(tmp_path)
    d = read_dcp(str(out / "collective"), "collective")
    assert d.problems == () and set(d.files) == {"__0_0.distcp", "__1_0.distcp"}
    w = d.entries["model.w"]
    assert (w.dtype, w.shape) == ("F32", (8, 4))
    assert sorted((c.offsets, c.sizes, c.file) for c in w.chunks) == [
        ((0, 0), (4, 4), "__0_0.distcp"), ((4, 0), (4, 4), "__1_0.distcp")]
    full = torch.cat([torch.load(io.BytesIO(blob(out / "collective", c)), weights_only=True)
                      for c in sorted(w.chunks, key=lambda c: c.offsets)])
    torch.manual_seed(0)
    assert torch.equal(full, torch.randn(8, 4))
    assert d.entries["step"].kind == "bytes"

    per_rank = read_dcp(str(out / "per-rank"), "per-rank")  # use_collectives=False
    assert [p.severity for p in per_rank.problems] == [WARNING]
    assert "merged 2 per-rank files" in per_rank.problems[0].message
    assert sorted(c.offsets for c in per_rank.entries["model.w"].chunks) == [(0, 0), (4, 0)]


# -- unsafe and unusual metadata -----------------------------------------------------------------

def test_unsafe_global_in_metadata_is_reported_not_run(saved, tmp_path):
    folder = copy_of(saved, tmp_path)
    sentinel = tmp_path / "PWNED"
    md = torch_metadata(folder)
    md.planner_data = {"x": SystemCall(f"touch {sentinel}")}
    md.mcore_data = {"sharded": True}  # Megatron adds an attribute of its own
    (folder / ".metadata").write_bytes(pickle.dumps(md, protocol=4))
    d = read_dcp(str(folder), "step-12")
    assert not sentinel.exists()
    assert d.unsafe == ("posix.system",)
    # one error, naming the global: whoever loads this DCP folder the usual way runs it
    assert [(p.severity, "posix.system" in p.message) for p in d.problems] == [("error", True)]
    assert len(d.entries) == len(md.state_dict_metadata)


def test_metadata_of_another_kind(tmp_path):
    (tmp_path / ".metadata").write_bytes(pickle.dumps({"not": "metadata"}))
    d = read_dcp(str(tmp_path), "")
    assert by_severity(d, ERROR) == ["not DCP metadata: the pickle holds {'not': 'metadata'}"]
    (tmp_path / ".metadata").write_text("hello")
    assert by_severity(read_dcp(str(tmp_path), ""), ERROR)[0].startswith("cannot unpickle")


# -- damaged checkpoints ---------------------------------------------------------------------

def test_missing_metadata(saved, tmp_path):
    folder = copy_of(saved, tmp_path)
    (folder / ".metadata").unlink()
    d = read_dcp(str(folder), "step-12")
    assert [(p.severity, p.file, p.message) for p in d.problems] == [
        (ERROR, "step-12/.metadata", "incomplete: no .metadata (DCP writes it last)")]
    assert d.entries == {} and set(d.files) == {"__0_0.distcp"}
    (folder / ".metadata.tmp").write_bytes(b"\x80\x04")
    assert read_dcp(str(folder), "step-12").problems[0].message == (
        "incomplete: no .metadata (DCP writes it last); found .metadata.tmp: the save stopped "
        "while writing it")


@pytest.mark.parametrize("keep", [0, 2, 100, -1])
def test_truncated_metadata(saved, tmp_path, keep):
    folder = copy_of(saved, tmp_path)
    data = (folder / ".metadata").read_bytes()
    (folder / ".metadata").write_bytes(data[:keep] if keep >= 0 else data[:-1])
    d = read_dcp(str(folder), "step-12")
    assert d.entries == {}
    expected = "empty .metadata (the save was interrupted?)" if keep == 0 else \
        "pickle ends early (truncated?)"
    assert [(p.file, p.message) for p in d.problems] == [("step-12/.metadata", expected)]


def test_rank_file_shorter_than_its_byte_ranges(saved, tmp_path):
    folder = copy_of(saved, tmp_path)
    rank = folder / "__0_0.distcp"
    with open(rank, "r+b") as f:
        f.truncate(5000)
    d = read_dcp(str(folder), "step-12")
    first = min((c.offset, e.key, c) for e in d.entries.values() for c in e.chunks
                if c.offset + c.length > 5000)
    beyond = sum(c.offset + c.length > 5000 for e in d.entries.values() for c in e.chunks)
    _, key, c = first
    assert by_severity(d, ERROR) == [
        f"__0_0.distcp is 5,000 bytes but the metadata places {key} at {c.offset:,}-"
        f"{c.offset + c.length:,} (and {beyond - 1:,} more ranges past the end)"]
    assert d.problems[0].file == "step-12/__0_0.distcp"


def test_missing_rank_file_and_a_stray_one(saved, tmp_path):
    folder = copy_of(saved, tmp_path)
    (folder / "__0_0.distcp").rename(folder / "__7_0.distcp")
    d = read_dcp(str(folder), "")
    n = sum(len(e.chunks) for e in d.entries.values())
    assert [(p.severity, p.file, p.message) for p in d.problems] == [
        (ERROR, "__0_0.distcp", f"missing: the metadata places {n:,} item(s) in __0_0.distcp, "
                                "which does not exist"),
        (INFO, "__7_0.distcp", "not named by the metadata (left over from another save?)")]


def test_damaged_metadata_never_raises(saved, tmp_path):
    import random

    folder = copy_of(saved, tmp_path)
    original = (folder / ".metadata").read_bytes()
    rnd = random.Random(2)
    for _ in range(200):
        data = bytearray(original)
        for _ in range(rnd.randrange(1, 5)):
            pos = rnd.randrange(len(data))
            if rnd.random() < 0.7:
                data[pos] = rnd.randrange(256)
            else:
                del data[pos:pos + rnd.randrange(1, 100)]
        (folder / ".metadata").write_bytes(data)
        read_dcp(str(folder), "step-12")  # must not raise


def test_folder_that_cannot_be_listed(tmp_path):
    d = read_dcp(str(tmp_path / "nope"), "nope")
    assert d.problems[0].severity == ERROR
    assert d.problems[0].message.startswith("cannot list the DCP folder")


def test_many_zero_dim_tensors_are_not_taken_for_a_pickle_bomb(tmp_path):
    """Every optimizer `step` is a 0-dim tensor, so .metadata pickles torch.Size([]) once per
    parameter; each rebuilds into the one empty tuple, which must not count as nesting deeper
    each time (60 layers of AdamW read as a pickle bomb, and the checkpoint as damaged)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model = torch.nn.Sequential(*(torch.nn.Linear(2, 2) for _ in range(60)))
    opt = torch.optim.AdamW(model.parameters())
    model(torch.randn(1, 2)).sum().backward()
    opt.step()
    weights, optim = get_state_dict(model, opt)
    dcp.save({"model": weights, "optim": optim}, checkpoint_id=str(tmp_path / "ck"),
             no_dist=True)
    d = read_dcp(str(tmp_path / "ck"), "ck")
    assert by_severity(d, ERROR) == [] and by_severity(d, WARNING) == []
    steps = [k for k in d.entries if k.endswith(".step")]
    assert len(steps) == 120 and all(d.entries[k].shape == () for k in steps)
