"""The cases of the issue that moved ckpt-browser to reading files by content, each with its
right answer: a plain state dict, the PyTorch tutorial's checkpoint under any name, a custom
loop, a Lightning file renamed, hostile pickles under harmless names, diff, junk and truncated
files, a folder of epochs, DCP ranks, ZeRO-3 placeholders and the text summary's tensor count.

Expected values come from torch (the state_dicts, torch.load(weights_only=True), DCP metadata)
and from the documented verdict rules, not from ckpt-browser's own output.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pickle
import random
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from ckpt_browser.cli import main

from .helpers import SAMPLES, run_cli

FINE = ("ok", "not-needed")
EXIT = {"exact": 0, "inexact": 3, "weights-only": 4, "broken": 5}  # `check --help`


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(args))
    return rc, out.getvalue(), err.getvalue()


def check_json(path: Path):
    rc, out, err = cli("check", str(path), "--json")
    return rc, json.loads(out), err


def inspect_json(path: Path):
    rc, out, err = cli("inspect", "--json", str(path))
    return rc, json.loads(out), err


def statuses(doc: dict) -> dict:
    return {k: v["status"] for k, v in doc["components"].items()}


def safe_load(path: Path):
    with torch.serialization.safe_globals([np._core.multiarray._reconstruct, np.ndarray, np.dtype,
                                           type(np.dtype(np.uint32))]):
        return torch.load(path, map_location="cpu", weights_only=True)


def net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def one_step(model: nn.Module, opt) -> None:
    opt.zero_grad()
    model(torch.randn(3, 4)).sum().backward()
    opt.step()


# --- a plain state dict ---------------------------------------------------------------------------

def test_a_saved_state_dict_is_weights_only_never_broken(tmp_path):
    model = net()
    sd = model.state_dict()
    path = tmp_path / "model.pt"
    torch.save(sd, path)
    rc, doc, _ = inspect_json(path)
    assert rc == 0
    assert doc["format"] == "torch"
    assert {t["name"]: (tuple(t["shape"]), t["component"]) for t in doc["tensors"]} == {
        k: (tuple(v.shape), "weights") for k, v in sd.items()}
    assert len(doc["tensors"]) == len(sd) == 4
    rc, doc, _ = check_json(path)
    assert (rc, doc["verdict"]) == (EXIT["weights-only"], "weights-only")
    assert doc["components"]["weights"]["status"] == "ok"


# --- the PyTorch tutorial checkpoint, under any name ------------------------------------------

def tutorial_checkpoint(path: Path) -> dict:
    """pytorch/tutorials recipes_source/recipes/saving_and_loading_a_general_checkpoint.py:
    SGD(lr=0.001, momentum=0.9) and {"epoch", "model_state_dict", "optimizer_state_dict",
    "loss"} (FORMATS.md "PyTorch tutorial"), on a smaller net."""
    model = net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9)
    one_step(model, optimizer)
    EPOCH, LOSS = 5, 0.4
    torch.save({"epoch": EPOCH, "model_state_dict": model.state_dict(),
                "optimizer_state_dict": optimizer.state_dict(), "loss": LOSS}, path)
    return {"epoch": EPOCH}


def test_the_tutorial_checkpoint_is_inexact_under_any_name(tmp_path):
    original = tmp_path / "model.pt"
    tutorial_checkpoint(original)
    rc, doc, _ = check_json(original)
    # FORMATS.md "PyTorch tutorial": it lacks the RNG; a warning, so training continues but not
    # bit for bit
    assert (rc, doc["verdict"]) == (EXIT["inexact"], "inexact")
    assert doc["components"]["rng"]["status"] == "missing"
    assert any(f["component"] == "rng" and f["severity"] == "warning" for f in doc["findings"])
    for k in ("weights", "optimizer", "progress"):
        assert doc["components"][k]["status"] == "ok", k
    for name in ("pytorch_model.bin", "model.ckpt", "weights.tar"):
        copy = tmp_path / name
        shutil.copy(original, copy)
        rc2, doc2, _ = check_json(copy)
        assert (rc2, doc2["verdict"]) == (rc, doc["verdict"]), name
        assert statuses(doc2) == statuses(doc), name
        assert doc2["step"] == doc["step"]
        for kind, c in doc["components"].items():  # the same sentences, about the other name
            assert doc2["components"][kind]["detail"] == c["detail"].replace("model.pt", name)


# --- a custom loop --------------------------------------------------------------------------------

def custom_loop_file(path: Path, with_rng: bool = True) -> int:
    model = net()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10)  # no overflow, no skipped step
    steps = 3
    for _ in range(steps):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16):
            loss = model(torch.randn(3, 4)).float().sum()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        sched.step()
    assert {float(s["step"]) for s in opt.state_dict()["state"].values()} == {float(steps)}
    ckpt = {"model": model.state_dict(), "optimizer": opt.state_dict(),
            "scheduler": sched.state_dict(), "scaler": scaler.state_dict(), "step": steps}
    if with_rng:
        ckpt["rng"] = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(),
                       "python": random.getstate()}
    torch.save(ckpt, path)
    return steps


def test_a_custom_loop_with_everything_is_exact(tmp_path):
    path = tmp_path / "train_state.pt"
    steps = custom_loop_file(path)
    rc, doc, _ = check_json(path)
    assert doc["step"] == steps
    assert all(s in FINE for s in statuses(doc).values()), statuses(doc)
    # all seven saved and the counters agree: nothing is lost on resume
    assert (rc, doc["verdict"]) == (EXIT["exact"], "exact")


def test_a_custom_loop_without_rng_names_what_is_missing(tmp_path):
    path = tmp_path / "train_state.pt"
    custom_loop_file(path, with_rng=False)
    rc, doc, _ = check_json(path)
    assert doc["verdict"] == "inexact" and rc == EXIT["inexact"]
    lacking = {k for k, s in statuses(doc).items() if s not in FINE}
    assert "rng" in lacking and not lacking & {"weights", "optimizer"}
    named = {f["component"] for f in doc["findings"] if f["severity"] != "info"}
    assert lacking <= named


# --- Lightning, renamed ---------------------------------------------------------------------------

def test_a_lightning_ckpt_renamed_is_still_lightning(tmp_path):
    src = SAMPLES / "lightning" / "last.ckpt"
    assert "pytorch-lightning_version" in safe_load(src)
    _, want, _ = check_json(src)
    assert want["format"] == "lightning"
    for name in ("model.ckpt", "model.pt"):
        shutil.copy(src, tmp_path / name)
        rc, got, _ = check_json(tmp_path / name)
        assert got["format"] == "lightning", name
        assert statuses(got) == statuses(want), name
        assert (got["verdict"], got["step"]) == (want["verdict"], want["step"])
        assert rc == EXIT[want["verdict"]]


# --- hostile pickles under harmless names ---------------------------------------------------------

class Hostile:
    def __reduce__(self):
        return (os.system, ("touch PWNED",))


def hostile(path: Path) -> Path:
    with open(path, "wb") as f:
        pickle.dump(Hostile(), f)
    return path


def test_a_hostile_pickle_is_named_and_never_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = hostile(tmp_path / "downloaded.pt")
    rc, _, err = cli("inspect", str(path))
    assert rc == 5 and "downloaded.pt" in err
    rc, doc, _ = check_json(path)
    assert doc["verdict"] != "exact" and rc != 0
    proc = run_cli("check", "downloaded.pt", cwd=tmp_path)  # a fresh process, same answer
    assert proc.returncode == rc
    assert not (tmp_path / "PWNED").exists()


def test_hostile_pickles_inside_an_hf_like_folder(tmp_path, monkeypatch):
    from safetensors.torch import save_file

    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "tiny-model"
    folder.mkdir()
    save_file(net().state_dict(), str(folder / "model.safetensors"))
    names = ("README.md", "config.json", "notes.txt")
    for name in names:
        hostile(folder / name)
    rc, doc, err = inspect_json(folder)
    assert rc == 5 and err
    text = json.dumps(doc["problems"])
    assert all(name in text for name in names)
    rc, doc, _ = check_json(folder)
    assert doc["verdict"] != "exact" and rc != 0
    assert all(any(name in f["message"] or f["file"] == name for f in doc["findings"])
               for name in names)
    assert not (tmp_path / "PWNED").exists() and not (folder / "PWNED").exists()


# --- diff -----------------------------------------------------------------------------------------

def test_diff_of_a_state_dict_and_a_training_dict_differs(tmp_path):
    torch.manual_seed(0)
    lin = nn.Linear(3, 4)
    assert tuple(lin.weight.shape) == (4, 3)
    opt = torch.optim.Adam(lin.parameters())
    lin(torch.randn(2, 3)).sum().backward()
    opt.step()
    # the same weights on both sides: only the training state makes them differ
    torch.save(lin.state_dict(), tmp_path / "a.pt")
    torch.save({"model": lin.state_dict(), "optimizer": opt.state_dict(), "epoch": 1,
                "rng": torch.get_rng_state()}, tmp_path / "b.pt")
    rc, _, _ = cli("diff", str(tmp_path / "a.pt"), str(tmp_path / "b.pt"))
    assert rc == 1
    shutil.copy(tmp_path / "a.pt", tmp_path / "a2.pt")
    rc, _, _ = cli("diff", str(tmp_path / "a.pt"), str(tmp_path / "a2.pt"))
    assert rc == 0
    rc, _, _ = cli("diff", "--values", str(tmp_path / "a.pt"), str(tmp_path / "a2.pt"))
    assert rc == 0


# --- junk and damage ------------------------------------------------------------------------------

def test_random_bytes_are_not_a_checkpoint(tmp_path):
    data = random.Random(0).randbytes(5000)
    assert data[:1] not in (b"\x80", b"{", b"P") and data[:2] != b"PK"
    path = tmp_path / "a.bin"
    path.write_bytes(data)
    for command in (["check", str(path)], ["inspect", str(path)]):
        rc, out, err = cli(*command)
        assert rc == 2, command
        assert len(err.strip().splitlines()) == 1 and "a.bin" in err


def test_a_torch_file_cut_in_half_is_damaged(tmp_path):
    path = tmp_path / "whole.pt"
    tutorial_checkpoint(path)
    raw = path.read_bytes()
    cut = tmp_path / "half.pt"
    cut.write_bytes(raw[: len(raw) // 2])
    rc, _, err = cli("inspect", str(cut))
    assert rc == 5 and "half.pt" in err
    rc, out, _ = cli("check", str(cut))
    assert rc == 5


# --- folders of checkpoints -----------------------------------------------------------------------

def test_a_folder_of_epochs_is_checked_at_the_newest(tmp_path):
    model = net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for epoch in (1, 3):
        one_step(model, opt)
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": epoch,
                    "rng": torch.get_rng_state()}, tmp_path / f"ckpt_epoch{epoch}.pt")
    rc, docs, _ = check_json(tmp_path)
    assert rc != 5 and all(d["verdict"] != "broken" for d in docs)
    assert docs[0]["path"].endswith("ckpt_epoch3.pt")
    assert rc == EXIT[docs[0]["verdict"]]
    rc, doc, _ = inspect_json(tmp_path)
    assert doc["epoch"] == 3


def test_dcp_ranks_are_not_broken():
    rc, out, _ = cli("check", str(SAMPLES / "dcp-ranks"), "--json")
    docs = json.loads(out)
    docs = docs if isinstance(docs, list) else [docs]
    assert rc != 5 and docs
    assert all(d["verdict"] != "broken" for d in docs)


def test_zero3_weights_are_listed_at_their_real_shapes():
    folder = SAMPLES / "projects" / "deepspeed-zero3"
    tag = (folder / "latest").read_text().strip()
    states = torch.load(folder / tag / "zero_pp_rank_0_mp_rank_00_model_states.pt",
                        map_location="cpu", weights_only=True)
    assert all(t.numel() == 0 for t in states["module"].values())  # placeholders
    want = {f"module.{k}": tuple(v) for g in states["param_shapes"] for k, v in g.items()}
    rc, doc, _ = inspect_json(folder)
    assert rc == 0
    got = {t["name"]: tuple(t["shape"]) for t in doc["tensors"] if t["component"] == "weights"}
    assert got == want
    assert all(0 not in shape for shape in got.values())
    assert doc["totals"]["params"] == sum(int(np.prod(s)) for s in want.values())



def test_zero3_placeholders_are_alike_on_every_rank_and_counted_once():
    folder = SAMPLES / "projects" / "deepspeed-zero3"
    tag = (folder / "latest").read_text().strip()
    ranks = sorted(p.name for p in (folder / tag).glob("zero_pp_rank_*_model_states.pt"))
    assert len(ranks) == 2
    rc, doc, _ = inspect_json(folder)
    assert rc == 0
    rows = [t for t in doc["tensors"] if t["file"].endswith("_model_states.pt")]
    by_file: dict[str, list] = {}
    for t in rows:
        by_file.setdefault(t["file"].rsplit("/", 1)[-1], []).append(t)
    assert sorted(by_file) == ranks
    # every rank's copy: weights, a placeholder, no bytes located in the file
    for file_rows in by_file.values():
        assert {(t["component"], t.get("placeholder"), t["offsets"]) for t in file_rows} == \
            {("weights", True, None)}
    assert [t["name"] for t in by_file[ranks[0]]] == [t["name"] for t in by_file[ranks[1]]]
    # the totals count each parameter once, not once per rank
    assert doc["totals"]["tensors"] == len(by_file[ranks[0]])
    # stats on one says where its values are, which is not damage
    rc, out, err = cli("stats", str(folder), "module.fc1.weight")
    assert rc == 0, err
    assert [ln.split()[0] for ln in out.splitlines() if not ln.startswith(" ")] == \
        ["module.fc1.weight"]
    assert "values not in this file" in out and "optim_states" in out
    assert "could not be read" not in err

# --- the text summary counts the weights ----------------------------------------------------------

def summary_tensors(path: Path) -> int:
    rc, out, _ = cli("inspect", str(path))
    assert rc == 0
    m = re.search(r"^tensors\s+([\d,]+)", out, re.M)
    assert m, out[:500]
    return int(m.group(1).replace(",", ""))


def test_the_summary_tensors_line_counts_the_weights(tmp_path):
    lightning = SAMPLES / "lightning" / "last.ckpt"
    assert summary_tensors(lightning) == len(safe_load(lightning)["state_dict"]) > 0

    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    step = SAMPLES / "torchtitan-run" / "checkpoint" / "step-10"
    meta = FileSystemReader(str(step)).read_metadata().state_dict_metadata
    others = ("optimizer.", "lr_scheduler.", "dataloader.", "train_state.")
    model = [k for k, v in meta.items()
             if isinstance(v, TensorStorageMetadata) and not k.startswith(others)]
    assert summary_tensors(step) == len(model) > 0

    path = tmp_path / "model.pt"
    sd = net().state_dict()
    torch.save(sd, path)
    assert summary_tensors(path) == len(sd)
    tutorial = tmp_path / "tutorial.pt"
    tutorial_checkpoint(tutorial)  # the weights, not the optimizer's momentum buffers
    assert summary_tensors(tutorial) == len(net().state_dict())


@pytest.mark.parametrize("name", ["ckpt.pt", "weights.bin", "state.tar"])
def test_the_tensors_of_a_training_dict_are_tagged_whatever_the_name(tmp_path, name):
    path = tmp_path / name
    custom_loop_file(path)
    rc, doc, _ = inspect_json(path)
    assert rc == 0
    by = {t["name"]: t["component"] for t in doc["tensors"]}
    d = safe_load(path)
    assert {k for k, v in by.items() if v == "weights"} == {f"model.{k}" for k in d["model"]}
    assert {k for k, v in by.items() if v == "optimizer"} == {
        f"optimizer.state.{i}.{k}" for i, s in d["optimizer"]["state"].items() for k in s}
    assert by["rng.torch"] == "rng"
