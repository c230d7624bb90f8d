"""Inputs found by mutating the samples and the corpus controls (README "Safety": the inputs
that still hung or crashed): each made a command crash, print a stray line or do work that grows
faster than the input. Each test fails on the code before its fix."""

from __future__ import annotations

import json
import os
import shutil
import struct
import warnings

import pytest
import torch

from ckpt_browser.analysis.opened import open_path
from ckpt_browser.cli import main

from .component_helpers import ACCELERATE, DEEPSPEED, HF_MULTIRANK, MEGATRON, safe_load_with
from .helpers import RELEASE, RUN6, SAMPLES, craft, entry


def run(capsys, *args) -> tuple[int, str, str]:
    code = main([*map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "internal error" not in err and "Traceback" not in err, err
    return lines[0]


# -- a zip record that claims a compression it does not have -----------------------------

def _claim_method(path, member: bytes, method: int) -> None:
    """Set the compression method of `member` in its central directory entry and its local
    header (the bytes stay as they are: stored)."""
    data = bytearray(path.read_bytes())
    at = data.find(b"PK\x01\x02")
    while at >= 0:
        n = struct.unpack_from("<H", data, at + 28)[0]
        if data[at + 46:at + 46 + n].endswith(member):
            struct.pack_into("<H", data, at + 10, method)
            local = struct.unpack_from("<I", data, at + 42)[0]
            struct.pack_into("<H", data, local + 8, method)
            break
        at = data.find(b"PK\x01\x02", at + 4)
    else:
        raise AssertionError(f"{member!r} not in {path}")
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("method", [8, 12])  # deflate, bzip2
def test_a_stored_pickle_claiming_compression_is_damage_not_a_crash(tmp_path, capsys, method):
    folder = shutil.copytree(RUN6, tmp_path / "checkpoint-6")
    _claim_method(folder / "scheduler.pt", b"/data.pkl", method)
    code, _, err = run(capsys, "inspect", folder)
    line = one_line(err)  # was: internal error: error: Error -3 while decompressing data
    assert code == 5 and "first: scheduler.pt: " in line and "cannot be decompressed" in line
    code, out, err = run(capsys, "check", "--json", folder)
    assert code in (3, 4) and json.loads(out)["verdict"] != "broken" and not err


# -- values: a signalling NaN ------------------------------------------------------------

def test_a_signalling_nan_is_counted_without_a_warning(tmp_path, capsys):
    values = struct.pack("<3I", 0x7F800001, 0x3F800000, 0xFF800001)  # sNaN, 1.0, -sNaN
    craft(tmp_path / "model.safetensors", {"w": entry("F32", [3], 0, 12)}, values)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's "invalid value encountered in cast"
        code, out, err = run(capsys, "stats", "--json", tmp_path / "model.safetensors")
    assert (code, err) == (0, "")
    doc = json.loads(out)["tensors"][0]
    assert (doc["nan"], doc["finite"], doc["min"]) == (2, 1, 1.0)


# -- an index naming more shard files than a folder is listed with ---------------------

def test_an_index_naming_too_many_files_is_refused_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("ckpt_browser.readers.index.MAX_ENTRIES", 1_000)
    folder = shutil.copytree(RELEASE, tmp_path / "release")
    doc = json.loads((folder / "model.safetensors.index.json").read_text())
    doc["weight_map"].update({f"extra.{i}": f"x-{i:05d}.safetensors" for i in range(1_000)})
    (folder / "model.safetensors.index.json").write_text(json.dumps(doc))
    code, out, err = run(capsys, "inspect", "--json", folder)
    line = one_line(err)
    assert code == 5 and "index names 1,003 shard files" in line
    files = [f["path"] for f in json.loads(out)["files"]]
    assert len(files) < 10  # not a missing file each: the folder's own files instead


# -- rank numbers in file names and world sizes in pickles --------------------------------

def test_a_rank_number_of_a_million_is_counted_not_listed(tmp_path):
    folder = shutil.copytree(HF_MULTIRANK, tmp_path / "checkpoint-4")
    shutil.copy(folder / "rng_state_1.pth", folder / "rng_state_999999.pth")
    rng = open_path(str(folder)).training.components["rng"]
    assert rng.status == "incomplete"
    assert rng.facts["missing_ranks"][:3] == [2, 3, 4]
    assert len(rng.facts["missing_ranks"]) <= 1_000  # was all 999,997 of them
    assert rng.facts["missing_rank_count"] == 999_997
    assert "and 999,989 more" in rng.detail


def test_a_rank_number_of_thirty_digits_answers(tmp_path, capsys):
    folder = shutil.copytree(HF_MULTIRANK, tmp_path / "checkpoint-4")
    shutil.copy(folder / "rng_state_1.pth", folder / f"rng_state_{10**30}.pth")
    code, out, err = run(capsys, "check", "--json", folder)  # was a MemoryError, or no end
    assert code == 3 and not err
    doc = json.loads(out)
    assert doc["ranks"] == 10**30 + 1
    said = [f["message"] for f in doc["findings"] if "more RNG files" in f["message"]]
    assert said == [f"{10**30 - 2 - 8:,} more RNG files are missing (ranks 10 on)."]


def test_a_deepspeed_world_size_of_ten_to_the_thirty(tmp_path):
    run_folder = shutil.copytree(DEEPSPEED, tmp_path / "ds")
    states = run_folder / "global_step4" / "mp_rank_00_model_states.pt"
    ms = torch.load(states, weights_only=True)
    ms["dp_world_size"] = 10**30
    torch.save(ms, states)
    opt = open_path(str(run_folder)).training.components["optimizer"]  # was range(10**30)
    assert opt.status == "incomplete"
    assert opt.facts["missing_ranks"][:2] == [2, 3]
    assert opt.facts["missing_rank_count"] == 10**30 - 2
    assert "ranks 2, 3, 4, 5, 6, 7, 8, 9 and" in opt.detail


def test_rank_gaps_list_the_first_and_count_all():
    from ckpt_browser.parts.rng import MAX_MISSING, gaps

    assert gaps([]) == ([], 0)
    assert gaps([0, 1, 2]) == ([], 0)
    assert gaps([0, 2, 5]) == ([1, 3, 4], 3)
    assert gaps([1], world=4) == ([0, 2, 3], 3)
    listed, count = gaps([0, 10**6])
    assert listed == list(range(1, MAX_MISSING + 1)) and count == 10**6 - 1


# -- accelerate with two optimizers ---------------------------------------------------------

def test_accelerate_with_two_optimizers(tmp_path, capsys):
    folder = shutil.copytree(ACCELERATE, tmp_path / "step_4")
    shutil.copy(folder / "optimizer.bin", folder / "optimizer_1.bin")  # save_state of two
    opt = open_path(str(folder)).training.components["optimizer"]  # was a TypeError
    assert opt.status == "ok" and opt.files == ("optimizer.bin", "optimizer_1.bin")
    assert opt.facts["files"] == 2
    code, out, err = run(capsys, "check", folder)
    assert code == 3 and not err and "optimizer  ok" in out


# -- a run folder of thousands of checkpoints ---------------------------------------------

def test_check_on_a_run_folder_checks_the_newest_and_lists_the_rest(tmp_path, capsys,
                                                                      monkeypatch):
    from ckpt_browser.analysis import resume

    monkeypatch.setattr(resume, "CHECKED", 3, raising=False)
    checked = []
    real = resume.resume_report
    monkeypatch.setattr(resume, "resume_report",
                        lambda path, *a: checked.append(path) or real(path, *a))
    run_folder = tmp_path / "run"
    for step in range(1, 6):
        shutil.copytree(RUN6, run_folder / f"checkpoint-{step}")
    code, out, err = run(capsys, "check", run_folder)  # 10,000 of them took minutes
    assert code == 0 and not err
    assert out.startswith("checkpoint-5 (the newest of 5) is EXACT")
    assert "  and 2 older: checkpoint-2 and older are not checked, only the newest 3 are" in out
    assert [os.path.basename(p) for p in checked] == ["checkpoint-5", "checkpoint-4",
                                                      "checkpoint-3"]
    code, out, err = run(capsys, "check", "--json", run_folder)
    assert code == 0 and len(json.loads(out)) == 3
    assert "checkpoint-2 and older are not checked" in one_line(err)


# -- tensor names with many dots, and many modules ------------------------------------------

def _names_shard(path, names: list[str]) -> None:
    craft(path, {n: entry("F32", [1], 4 * i, 4 * i + 4) for i, n in enumerate(names)},
          b"\0" * (4 * len(names)))


def test_a_name_of_thousands_of_dots_makes_a_bounded_module_tree():
    from ckpt_browser.analysis.modules import build_modules, leaf_name
    from ckpt_browser.model import TensorInfo

    deep = ".".join(["a"] * 5_000)
    root = build_modules([TensorInfo(f"{deep}.{i}", "F32", (1,), "m", 0, 4, 1)
                          for i in range(3)])
    node, depth = root, 0
    while node.children:  # one chain: every name shares its first 32 parts
        (node,) = node.children.values()
        depth += 1
    assert depth == 32  # was 5,000 nodes, each holding its whole dotted path
    assert node.path == ".".join(["a"] * 32)
    assert [leaf_name(t.name) for t in node.tensors] == [
        ".".join(["a"] * (5_000 - 32)) + f".{i}" for i in range(3)]
    assert leaf_name("model.layers.0.weight") == "weight"


def test_the_quiz_adds_up_each_module_once(tmp_path, monkeypatch):
    from ckpt_browser.analysis.modules import ModuleNode
    from ckpt_browser.quiz.generated import questions_for

    names = [f"block{i}.sub{j}.w" for i in range(300) for j in range(i % 5 + 1)]
    _names_shard(tmp_path / "model.safetensors", names)
    walked = []
    monkeypatch.setattr(ModuleNode, "totals", property(lambda m: walked.append(m)))
    # was the Totals of each of 1,200 modules
    questions = questions_for(open_path(str(tmp_path)), seed=1)
    params = [q for q in questions if q.id.startswith("gen-params-")]
    assert params and not walked
    for q in params:
        module = q.id.removeprefix("gen-params-")
        want = sum(n.startswith(module + ".") for n in names)
        assert q.en.options[q.answer] == f"{want:,}"


# -- wrong types at a key ---------------------------------------------------------------------

@pytest.mark.parametrize("value", [10**30, float("nan"), True, "tensor"])
def test_megatron_rng_state_that_is_not_a_list_is_damaged(tmp_path, capsys, value):
    import argparse

    run_folder = shutil.copytree(MEGATRON, tmp_path / "megatron")
    f = run_folder / "iter_0000004" / "mp_rank_00" / "model_optim_rng.pt"
    sd = safe_load_with(f, [argparse.Namespace])
    sd["rng_state"] = torch.zeros(2) if value == "tensor" else value
    torch.save(sd, f)
    rng = open_path(str(run_folder)).training.components["rng"]  # was a TypeError
    assert rng.status == "damaged" and "not a list of RNG states" in rng.detail
    code, _, err = run(capsys, "check", run_folder)
    assert code == 3 and not err


# -- thousands of files besides the shards --------------------------------------------------

def _lower(monkeypatch, **caps) -> None:
    from dataclasses import replace

    from ckpt_browser import limits

    monkeypatch.setattr(limits, "LIMITS", replace(limits.LIMITS, **caps))


def test_per_rank_files_past_the_limit_are_listed_not_read(tmp_path, capsys, monkeypatch):
    from ckpt_browser.readers import torchfile

    folder = shutil.copytree(HF_MULTIRANK, tmp_path / "checkpoint-4")
    for r in range(2, 8):  # 5,000 of them took 10 s, 100,000 would take minutes
        shutil.copy(folder / "rng_state_1.pth", folder / f"rng_state_{r}.pth")
    _lower(monkeypatch, rank_files=3)
    read = []
    real = torchfile.read_pickle_file
    monkeypatch.setattr(torchfile, "read_pickle_file",
                        lambda path, name, *a: read.append(name) or real(path, name, *a))
    code, out, err = run(capsys, "inspect", "--json", folder)
    assert code == 0 and not err
    assert sorted(n for n in read if n.startswith("rng_state")) == [
        "rng_state_0.pth", "rng_state_1.pth", "rng_state_2.pth"]  # was all 8
    files = {f["path"]: f for f in json.loads(out)["files"]}
    assert files["rng_state_7.pth"]["size"] == (folder / "rng_state_7.pth").stat().st_size
    said = [p["message"] for p in json.loads(out)["problems"] if p["file"] == "rng_state_3.pth"]
    assert said and "only the first 3 per-rank files" in said[0]
    assert "CKPT_BROWSER_MAX_RANK_FILES" in said[0]


def test_files_past_the_other_files_limit_are_listed_not_read(tmp_path, capsys, monkeypatch):
    from ckpt_browser.readers import load

    shutil.copy(RUN6 / "optimizer.pt", tmp_path / "optimizer.pt")
    for i in range(10):
        (tmp_path / f"notes-{i}.bin").write_bytes(b"\x80\x04K\x01.")  # a pickle of 1
    _lower(monkeypatch, other_files=4)
    read = []
    real = load.read_file
    monkeypatch.setattr(load, "read_file", lambda root, name, **k: read.append(name) or
                        real(root, name, **k))
    code, out, err = run(capsys, "inspect", "--json", tmp_path)
    assert code == 0 and not err
    assert len(read) == 4  # was 11
    doc = json.loads(out)
    assert len(doc["files"]) == 11
    said = [p["message"] for p in doc["problems"] if "files besides the shards" in p["message"]]
    assert len(said) == 1 and "CKPT_BROWSER_MAX_OTHER_FILES" in said[0]


def test_a_run_folder_of_many_files_is_looked_into_within_its_bound(tmp_path, monkeypatch):
    from ckpt_browser.analysis import runs

    for i in range(20):
        (tmp_path / f"x{i}.bin").write_bytes(b"junk")
    looked = []
    real = runs._kind
    monkeypatch.setattr(runs, "_kind", lambda path: looked.append(path) or real(path))
    monkeypatch.setattr(runs, "MAX_FILES", 5)
    assert runs.run_entries(str(tmp_path)) == []
    assert len(looked) <= 5  # was every file of the folder, 100,000 of them twice


def test_quiz_from_a_folder_of_single_file_checkpoints_reads_the_newest(tmp_path, capsys,
                                                                          monkeypatch):
    from ckpt_browser.analysis import opened as opener

    run_folder = shutil.copytree(SAMPLES / "projects" / "custom-run", tmp_path / "run")
    opened = []
    real = opener.open_layout
    monkeypatch.setattr(opener, "open_layout", lambda path: opened.append(path) or real(path))
    code, out, err = run(capsys, "quiz", "--export", "json", "--from", run_folder)
    assert code == 0 and not err
    # as inspect does: the newest (ckpt_epoch3.pt), not the folder read as one checkpoint of
    # every file (a folder of 5,000 timm checkpoints took 17 s)
    assert opened == [str(run_folder / "ckpt_epoch3.pt")]


def test_a_run_folder_is_walked_once_while_unchanged(tmp_path, capsys, monkeypatch):
    from ckpt_browser.producers import timeline

    run_folder = tmp_path / "run"
    for step in range(1, 6):
        shutil.copytree(RUN6, run_folder / f"checkpoint-{step}")
    looked = []  # each walk looks into every checkpoint folder for links back
    real = timeline.only_loops
    monkeypatch.setattr(timeline, "only_loops",
                        lambda folder: looked.append(folder) or real(folder))
    code, _, err = run(capsys, "check", run_folder)
    assert code == 0 and not err
    # was a walk per checkpoint checked and more (45 looks here): with 10,000 checkpoints,
    # each of the 50 checked walked all 10,000 (11 s of CPU)
    assert len(looked) == 5
    (run_folder / "checkpoint-9").mkdir()  # a change: walked again
    shutil.copy(RUN6 / "model-00001-of-00003.safetensors", run_folder / "checkpoint-9")
    code, out, _ = run(capsys, "check", run_folder)
    assert len(looked) == 5 + 6 and out.startswith("checkpoint-9 ")


def test_a_remembered_walk_keeps_the_folder_as_it_was_named(tmp_path, monkeypatch):
    """The walk remembered for `run` (relative) is not handed to `/abs/run`: its entries'
    paths were relative to another cwd (the browser then could not open them)."""
    from ckpt_browser.producers.recognise import find_checkpoints

    for step in (1, 2):
        shutil.copytree(RUN6, tmp_path / "run" / f"checkpoint-{step}")
    monkeypatch.chdir(tmp_path)
    assert [e.path for e in find_checkpoints("run")] == ["run/checkpoint-2", "run/checkpoint-1"]
    absolute = [e.path for e in find_checkpoints(str(tmp_path / "run"))]
    assert absolute == [str(tmp_path / "run" / "checkpoint-2"),
                        str(tmp_path / "run" / "checkpoint-1")]
    monkeypatch.chdir(tmp_path / "run")
    assert [e.path for e in find_checkpoints("checkpoint-2/..")][0].startswith("checkpoint-2/..")
