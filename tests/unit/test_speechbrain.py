"""speechbrain, on the folders its own Checkpointer wrote (sample_checkpoints/
make_speechbrain_samples.py: Brain.fit, interrupted mid-epoch 3, whose intra-epoch save it
resumes): the text recoverables (counter.ckpt, dataloader-TRAIN.ckpt, brain.ckpt) are read,
not called damaged; every other .ckpt is read by content, whatever the recipe named it.
Ground truth: torch's own weights_only read and the text files themselves.
"""

from __future__ import annotations

import json
import shutil

import torch

from .helpers import SAMPLES, run_cli

SAVE = SAMPLES / "projects" / "speechbrain" / "save"
MID = SAVE / "CKPT+2026-01-01+00-00-12+00"  # epoch 3, step 2 (brain_intra_epoch_ckpt)
END = SAVE / "CKPT+2026-01-01+00-00-10+00"  # the end of epoch 2


def check(path) -> tuple[int, dict]:
    """check's verdict and findings, with inspect's components (their facts) and counters."""
    done = run_cli("check", str(path), "--json")
    doc = json.loads(done.stdout)
    inspected = json.loads(run_cli("inspect", str(path), "--json").stdout)
    doc.update(components=inspected["components"], epoch=inspected["epoch"])
    return done.returncode, doc


def components(doc: dict) -> dict:
    return doc["components"]


def brain(folder) -> dict:
    """brain.ckpt: the three `key: value` lines Brain._save writes with yaml.dump."""
    lines = (folder / "brain.ckpt").read_text().splitlines()
    return {k: float(v) for k, v in (line.split(": ") for line in lines)}


def test_text_recoverables_are_not_damaged():
    done = run_cli("inspect", str(MID), "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["problems"] == []
    by_name = {f["path"]: f for f in doc["files"]}
    for name in ("counter.ckpt", "dataloader-TRAIN.ckpt", "brain.ckpt"):
        assert by_name[name]["error"] is None


def test_mid_epoch_save_resumes_all_but_the_rng():
    rc, doc = check(MID)
    assert rc == 3 and doc["verdict"] == "inexact"  # exit 3: inexact
    comps = components(doc)
    assert [f["component"] for f in doc["findings"] if f["severity"] != "info"] == ["rng"]
    assert {k: c["status"] for k, c in comps.items()} == {
        "weights": "ok", "optimizer": "ok", "scheduler": "ok", "rng": "missing",
        "data": "ok", "progress": "ok", "scaler": "not-needed"}
    # the data position is the text file's batch count; the step is Brain's optimizer_step
    skip = int((MID / "dataloader-TRAIN.ckpt").read_text())
    assert comps["data"]["facts"]["skip_batches"] == skip
    assert doc["step"] == brain(MID)["optimizer_step"]
    opt = torch.load(MID / "optimizer.ckpt", weights_only=True)
    assert doc["step"] == opt["state"][0]["step"].item()
    # counter.ckpt holds the epoch in progress: one fewer is done
    assert doc["epoch"] == int((MID / "counter.ckpt").read_text()) - 1
    assert comps["scheduler"]["files"] == ["lr_annealing.ckpt"]
    sched = torch.load(MID / "lr_annealing.ckpt", weights_only=True)
    assert comps["scheduler"]["facts"]["hyperparam_value"] == sched["hyperparam_value"]


def test_end_of_epoch_save_needs_no_data_position():
    rc, doc = check(END)
    comps = components(doc)
    assert comps["data"]["status"] == "not-needed"
    assert doc["epoch"] == int((END / "counter.ckpt").read_text())
    assert doc["step"] == brain(END)["optimizer_step"]


def test_recoverables_are_read_by_content_not_by_name(tmp_path):
    folder = shutil.copytree(MID, tmp_path / "CKPT+copy")
    (folder / "model.ckpt").rename(folder / "encoder.ckpt")
    (folder / "lr_annealing.ckpt").rename(folder / "noam_annealing.ckpt")
    (folder / "counter.ckpt").rename(folder / "epoch_counter.ckpt")
    rc, doc = check(folder)
    comps = components(doc)
    model = torch.load(MID / "model.ckpt", weights_only=True)
    assert comps["weights"]["files"] == ["encoder.ckpt"]
    assert comps["weights"]["facts"]["tensors"] == len(model)
    assert comps["scheduler"]["files"] == ["noam_annealing.ckpt"]
    assert "epoch_counter.ckpt" in comps["progress"]["files"]


def test_what_is_missing_is_said(tmp_path):
    folder = shutil.copytree(MID, tmp_path / "CKPT+copy")
    for name in ("optimizer.ckpt", "dataloader-TRAIN.ckpt", "counter.ckpt"):
        (folder / name).unlink()
    rc, doc = check(folder)
    comps = components(doc)
    assert {k: comps[k]["status"] for k in ("optimizer", "data", "progress")} == {
        "optimizer": "missing", "data": "missing", "progress": "missing"}
    assert "mid-epoch" in comps["data"]["detail"]


def test_an_lfs_pointer_is_named_and_other_text_stays_damage(tmp_path):
    folder = tmp_path / "release"
    folder.mkdir()
    (folder / "pytorch_model.bin").write_text(
        "version https://git-lfs.github.com/spec/v1\noid sha256:" + "0" * 64 + "\nsize 99\n")
    done = run_cli("inspect", str(folder))
    assert done.returncode == 5 and "Git LFS pointer" in done.stdout
    done = run_cli("inspect", str(folder / "pytorch_model.bin"))
    assert done.returncode == 2 and "Git LFS pointer" in done.stderr
    (folder / "pytorch_model.bin").unlink()
    (folder / "model.pt").write_text("hello\n")
    done = run_cli("inspect", str(folder))
    assert done.returncode == 5 and "named like a torch file" in done.stdout
