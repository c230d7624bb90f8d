"""skorch and fastai, on files their own save code wrote (sample_checkpoints/
make_skorch_samples.py, make_fastai_samples.py), checked against torch's own read of them:
skorch's Checkpoint folder (params.pt, optimizer.pt, criterion.pt, history.json) is read by
content, not taken for an HF Trainer folder for its optimizer.pt, and its history.json is the
epoch record its resume restores; fastai's Learner.save keeps its own optimizer layout (a dict
per parameter, hypers per group), which is the optimizer's state, not leftovers.
"""

from __future__ import annotations

import json
import sys
import types

import pytest
import torch

from .helpers import SAMPLES, run_cli

SKORCH = SAMPLES / "projects" / "skorch"
FASTAI = SAMPLES / "projects" / "fastai"


def cli_json(*args: str) -> tuple[int, dict]:
    done = run_cli(*args, "--json")
    return done.returncode, json.loads(done.stdout)


@pytest.mark.parametrize("folder, params, opt", [("checkpoint", "params.pt", "optimizer.pt"),
                                                  ("save_params", "model.pkl", "opt.pkl")])
def test_skorch_folder_is_read_by_content_with_its_epoch_history(folder, params, opt):
    rc, doc = cli_json("inspect", str(SKORCH / folder))
    assert rc == 0
    assert doc["framework"] == "custom"  # not hf-trainer, whatever optimizer.pt suggests
    weights = torch.load(SKORCH / folder / params, weights_only=True)
    names = [t["name"] for t in doc["tensors"] if t["component"] == "weights"]
    assert names == list(weights)
    state = torch.load(SKORCH / folder / opt, weights_only=True)
    comps = doc["components"]
    assert comps["optimizer"]["status"] == "ok"
    assert comps["optimizer"]["facts"]["params_with_state"] == len(state["state"])
    history = json.loads((SKORCH / folder / "history.json").read_text())
    assert comps["progress"]["status"] == "ok"
    assert comps["progress"]["facts"]["epoch"] == history[-1]["epoch"]
    assert doc["epoch"] == history[-1]["epoch"]


def test_a_checkpoint_n_folder_with_optimizer_pt_is_still_hf(tmp_path):
    for name, framework in (("checkpoint-9", "hf-trainer"), ("checkpoint", "custom")):
        d = tmp_path / name
        d.mkdir()
        torch.save({"w": torch.zeros(2)}, d / "pytorch_model.bin")
        torch.save(torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))]).state_dict(),
                   d / "optimizer.pt")
        rc, doc = cli_json("inspect", str(d))
        assert doc["framework"] == framework, name


@pytest.fixture
def fastcore_l(monkeypatch):
    """fastai's L, as a stand-in class of that name, so torch's own weights_only load reads
    stage1.pth here without fastai (its hypers are an L)."""
    module = types.ModuleType("fastcore.foundation")

    class L:  # noqa: N801 - fastcore's name
        pass

    L.__module__, L.__qualname__ = "fastcore.foundation", "L"
    module.L = L
    monkeypatch.setitem(sys.modules, "fastcore", types.ModuleType("fastcore"))
    monkeypatch.setitem(sys.modules, "fastcore.foundation", module)
    return L


@pytest.mark.parametrize("learner", ["tabular", "custom"])
def test_fastai_learner_save_holds_its_optimizer(learner, fastcore_l):
    path = FASTAI / learner / "models" / "stage1.pth"
    import numpy as np

    # fastai keeps the lr as a numpy float64: numpy's scalar rebuilders, as torch documents
    numpy_scalars = [np._core.multiarray.scalar, np.dtype, type(np.dtype(np.float64))]
    with torch.serialization.safe_globals([fastcore_l, *numpy_scalars]):
        saved = torch.load(path, weights_only=True)
    rc, doc = cli_json("inspect", str(path))
    assert rc == 0
    weights = [t["name"] for t in doc["tensors"] if t["component"] == "weights"]
    assert weights == [f"model.{k}" for k in saved["model"]]
    opt = doc["components"]["optimizer"]
    assert opt["status"] == "ok"
    assert opt["facts"]["params_with_state"] == sum(1 for s in saved["opt"]["state"] if s)
    assert {"grad_avg", "sqr_avg", "step"} <= set(opt["facts"]["state_keys"])
    lr = saved["opt"]["hypers"].items[0]["lr"]
    assert opt["facts"]["param_groups"][0]["lr"] == pytest.approx(float(lr))
    assert {t["component"] for t in doc["tensors"] if t["name"].startswith("opt.")} == {
        "optimizer"}
