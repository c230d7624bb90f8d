"""MosaicML Composer, on the files its own Trainer wrote (sample_checkpoints/
make_composer_samples.py, which resumes ep1 with Composer's load_path): the step is the
Timestamp's batch count (its state_dict under the class name), the ComposerModel's own
`module.` prefix is not a wrapper to strip, and latest-rank0.pt, a link to the newest file,
is not a checkpoint of its own. Ground truth: torch's own weights_only read of the files.
"""

from __future__ import annotations

import codecs
import datetime
import json

import numpy as np
import torch

from .helpers import SAMPLES, run_cli

RUN = SAMPLES / "projects" / "composer" / "run"
# what a Composer checkpoint pickles beside tensors: timedeltas in the Timestamp, the torch
# version in the metadata, numpy arrays in the RNG state
SAFE = [datetime.timedelta, torch.torch_version.TorchVersion, np._core.multiarray._reconstruct,
        np.ndarray, np.dtype, type(np.dtype(np.uint32)), codecs.encode]


def saved(name: str) -> dict:
    with torch.serialization.safe_globals(SAFE):
        return torch.load(RUN / name, weights_only=True)


def cli_json(*args: str) -> tuple[int, dict | list]:
    done = run_cli(*args, "--json")
    return done.returncode, json.loads(done.stdout)


def test_step_and_epoch_are_the_timestamp_s_batch_and_epoch():
    for name in ("ep1-ba4-rank0.pt", "ep2-ba8-rank0.pt"):
        ts = saved(name)["state"]["timestamp"]["Timestamp"]
        rc, doc = cli_json("inspect", str(RUN / name))
        assert rc == 0
        assert (doc["framework"], doc["step"], doc["epoch"]) == (
            "composer", ts["batch"], ts["epoch"])
        opt = doc["components"]["optimizer"]["facts"]
        assert opt["step"] == [ts["batch"]]  # Adam's step agrees: no lagging-counter finding


def test_composer_resume_has_all_it_needs():
    rc, doc = cli_json("check", str(RUN / "ep1-ba4-rank0.pt"))
    assert rc == 0 and doc["verdict"] == "exact", doc["findings"]
    weights = doc["components"]["weights"]["detail"]
    assert "module." in weights and "must strip" not in weights
    names = list(saved("ep1-ba4-rank0.pt")["state"]["model"])
    rc, doc = cli_json("inspect", str(RUN / "ep1-ba4-rank0.pt"))
    assert [t["name"] for t in doc["tensors"] if t["component"] == "weights"] == [
        f"state.model.{n}" for n in names]


def test_the_latest_link_is_the_newest_checkpoint_not_a_third():
    assert (RUN / "latest-rank0.pt").is_symlink()
    rc, docs = cli_json("check", str(RUN))  # one document per checkpoint, newest first
    assert [d["path"].rsplit("/", 1)[-1] for d in docs] == ["ep2-ba8-rank0.pt",
                                                            "ep1-ba4-rank0.pt"]
