"""DCP checkpoints are read by content: checkpoints written here by the real
torch.distributed.checkpoint.save (one process, no process group), holding a real model's
state_dict, a real AdamW's state after a step (get_state_dict, as FSDP and the DCP tutorial
do), a real LR scheduler's state_dict and torch.get_rng_state(), under the keys people use.
What a user sees is asserted: the training components (open_path, inspect --json) and the
component of each tensor in the listing.
"""

from __future__ import annotations

import json

import pytest
import torch
from torch.distributed.checkpoint.state_dict import get_state_dict
from torch.distributed.checkpoint.stateful import Stateful

from ckpt_browser.analysis.opened import open_path
from ckpt_browser.cli import main
from ckpt_browser.readers.dcp import read_dcp
from ckpt_browser.standins import DcpCheckpoint, DcpEntry

from .state_helpers import dcp_save

PARAMS = 4  # two Linear layers: two weights, two biases


def trained():
    """A model, its AdamW after one step, and a StepLR after one step."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=10)
    model(torch.randn(3, 4)).pow(2).sum().backward()
    opt.step()
    sched.step()
    return model, opt, sched


class AppState(Stateful):
    """The DCP tutorial's wrapper: dcp.save calls its state_dict()."""

    def __init__(self, model, opt):
        self.model, self.opt = model, opt

    def state_dict(self):
        model, optim = get_state_dict(self.model, self.opt)
        return {"model": model, "optim": optim}

    def load_state_dict(self, state_dict):  # pragma: no cover - never loaded here
        raise NotImplementedError


@pytest.fixture(scope="module")
def own_keys(tmp_path_factory):
    """model, optim, sched, rng and step at the top level."""
    model, opt, sched = trained()
    msd, osd = get_state_dict(model, opt)
    state = {"model": msd, "optim": osd, "sched": sched.state_dict(),
             "rng": torch.get_rng_state(), "step": 7}
    return str(dcp_save(state, tmp_path_factory.mktemp("dcp") / "own"))


@pytest.fixture(scope="module")
def tutorial(tmp_path_factory):
    """The DCP tutorial's {"app": AppState}, with the scheduler and RNG beside it in app."""
    model, opt, sched = trained()
    state = {"app": AppState(model, opt)}
    folder = dcp_save(state, tmp_path_factory.mktemp("dcp") / "tutorial")
    app = {"app": {**state["app"].state_dict(), "scheduler": sched.state_dict(),
                   "rng_state": torch.get_rng_state()}}
    return str(dcp_save(app, folder.parent / "tutorial-rng"))


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """dcp.save({"model": ..., "optimizer": ...}): read as before."""
    model, opt, _ = trained()
    msd, osd = get_state_dict(model, opt)
    return str(dcp_save({"model": msd, "optimizer": osd},
                        tmp_path_factory.mktemp("dcp") / "plain"))


def components(path: str) -> dict:
    return open_path(path).training.components


def tensor_kinds(path: str) -> dict[str, str]:
    return {t.name: t.component for f in open_path(path).checkpoint.files for t in f.tensors}


def inspect_json(path: str, capsys) -> dict:
    assert main(["inspect", "--json", path]) == 0
    return json.loads(capsys.readouterr().out)


# -- keys of one's own --------------------------------------------------------------------------

def test_rng_tensor_under_its_own_key_is_rng_not_a_weight(own_keys):
    kinds = tensor_kinds(own_keys)
    assert kinds["rng"] == "rng"
    weights = sorted(k for k, v in kinds.items() if v == "weights")
    assert weights == ["model.0.bias", "model.0.weight", "model.2.bias", "model.2.weight"]
    assert {v for k, v in kinds.items() if k.startswith("optim.")} == {"optimizer"}


def test_every_part_found_under_its_own_key(own_keys):
    c = components(own_keys)
    assert {k: c[k].status for k in c} == {
        "weights": "ok", "optimizer": "ok", "scheduler": "ok", "rng": "ok",
        "data": "missing", "progress": "ok", "scaler": "not-needed"}
    assert c["weights"].facts["tensors"] == PARAMS
    assert c["optimizer"].facts["params_with_state"] == PARAMS
    assert c["optimizer"].facts["state_keys"] == ["exp_avg", "exp_avg_sq", "step"]
    assert c["scheduler"].facts["keys"]["last_epoch"] == 1  # decoded from its DCP item
    assert c["scheduler"].facts["keys"]["step_size"] == 10
    assert c["rng"].facts["keys"] == ["rng"]
    assert "torch cpu" in c["rng"].detail
    assert open_path(own_keys).training.step == 7


def test_inspect_json_shows_it(own_keys, capsys):
    doc = inspect_json(own_keys, capsys)
    status = {k: v["status"] for k, v in doc["components"].items()}
    assert status["optimizer"] == status["scheduler"] == status["rng"] == "ok"
    assert doc["step"] == 7
    by = doc["totals"]["by_component"]
    assert by["weights"]["tensors"] == PARAMS
    assert by["rng"] == {"tensors": 1, "params": 5056, "bytes": 5056}
    assert by["optimizer"]["tensors"] == 3 * PARAMS
    rows = {t["name"]: t["component"] for t in doc["tensors"]}
    assert rows["rng"] == "rng" and rows["optim.state.0.weight.exp_avg"] == "optimizer"


def test_parts_are_kept_on_the_metadata_file(own_keys):
    meta = next(f for f in open_path(own_keys).checkpoint.files if f.format == "dcp-metadata")
    assert {(p.kind, p.path) for p in meta.parts} == {
        ("weights", "model"), ("optimizer", "optim"), ("scheduler", "sched"), ("rng", "rng"),
        ("progress", "step")}


# -- the DCP tutorial's AppState ----------------------------------------------------------------

def test_tutorial_app_state(tutorial):
    c = components(tutorial)
    assert c["optimizer"].status == "ok", c["optimizer"].detail
    assert c["optimizer"].facts["params_with_state"] == PARAMS
    assert c["weights"].facts["tensors"] == PARAMS
    assert c["scheduler"].status == "ok" and "app.scheduler." in c["scheduler"].detail
    assert c["rng"].status == "ok" and c["rng"].facts["keys"] == ["app.rng_state"]
    kinds = tensor_kinds(tutorial)
    assert kinds["app.rng_state"] == "rng"
    assert kinds["app.model.0.weight"] == "weights"
    assert kinds["app.optim.state.2.bias.exp_avg_sq"] == "optimizer"


# -- what worked before still does --------------------------------------------------------------

def test_plain_model_and_optimizer_as_before(plain):
    c = components(plain)
    assert c["weights"].detail == f"{PARAMS} model tensors in DCP (1 rank file)."
    assert c["optimizer"].detail == (f"DCP holds optimizer state for {PARAMS} parameters "
                                     "(exp_avg, exp_avg_sq, step), reshardable to another "
                                     "number of ranks.")
    assert c["rng"].detail == "DCP stores no RNG state unless the training script adds it."
    assert c["scheduler"].status == "missing"


def test_whole_model_state_dict_is_weights(tmp_path):
    model, _, _ = trained()
    path = str(dcp_save(model.state_dict(), tmp_path / "m"))
    assert set(tensor_kinds(path).values()) == {"weights"}
    c = components(path)
    assert c["weights"].facts["tensors"] == PARAMS and c["optimizer"].status == "missing"


# -- the skeleton -------------------------------------------------------------------------------

def test_skeleton_keeps_plain_tensor_subtrees_flat(own_keys):
    from ckpt_browser.parts.tag import dcp_skeleton

    sk = dcp_skeleton(read_dcp(own_keys, ""))
    assert sorted(sk["model"]) == ["0.bias", "0.weight", "2.bias", "2.weight"]
    assert sorted(sk["optim"]["state"]) == [f"{n}.{k}" for n in ("0.bias", "0.weight",
                                                                  "2.bias", "2.weight")
                                            for k in ("exp_avg", "exp_avg_sq", "step")]
    assert set(sk["optim"]["param_groups"]["0"]) >= {"lr", "params", "betas"}


def test_skeleton_of_many_keys_and_clashes():
    from ckpt_browser.parts.tag import dcp_parts, dcp_skeleton

    entries = {f"model.layers.{i}.w": DcpEntry(f"model.layers.{i}.w", "tensor", "F32", (2,))
               for i in range(100_000)}
    entries["model"] = DcpEntry("model", "bytes")  # a leaf where a subtree is: the first wins
    deep = "x." * 200 + "y"
    entries[deep] = DcpEntry(deep, "bytes")
    d = DcpCheckpoint("", entries)
    sk = dcp_skeleton(d)
    assert len(sk["model"]) == 100_000 and sk["model"]["layers.5.w"].shape == (2,)
    node = sk
    for _ in range(200):
        node = node["x"]
    assert "y" in node
    assert {(p.kind, p.path) for p in dcp_parts(d)} == {("weights", "model")}  # depth capped
