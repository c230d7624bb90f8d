"""Which parameter each optimizer id stands for (parts.mapping), checked against
real torch optimizers' state_dict() saved with torch.save beside the model's state dict: the
truth is torch's own numbering, the parameters of param_groups in group order."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from ckpt_browser.analysis.opened import open_path
from ckpt_browser.parts.mapping import name_ids
from tests.tui.conftest import SAMPLES


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Embedding(10, 4)
        self.norm = nn.LayerNorm(4)
        self.proj = nn.Linear(4, 4)
        self.head = nn.Linear(4, 3)

    def forward(self, x):
        return self.head(self.proj(self.norm(self.embed(x))))


def step(model: nn.Module, opt) -> None:
    opt.zero_grad()
    model(torch.tensor([1, 2, 3])).pow(2).sum().backward()
    opt.step()


def truth(model: nn.Module, opt) -> dict[str, str]:
    """torch's numbering: id i is the i-th parameter of the param groups, in group order."""
    name = {id(p): n for n, p in model.named_parameters()}
    params = [p for g in opt.param_groups for p in g["params"]]
    return {str(i): name[id(p)] for i, p in enumerate(params)}


def optimizer_facts(tmp_path: Path, model: nn.Module, opt) -> dict:
    path = tmp_path / "ckpt.pt"
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": 1}, path)
    return open_path(str(path)).training.components["optimizer"].facts


def test_adam_over_a_module_names_every_id_by_order(tmp_path):
    model = Net()
    opt = torch.optim.Adam(model.parameters())
    step(model, opt)
    facts = optimizer_facts(tmp_path, model, opt)
    assert facts["param_names"] == truth(model, opt)
    assert facts["ids"].startswith("named by order")
    assert facts["path"] == "optimizer" and facts["file"] == "ckpt.pt"


def test_a_frozen_parameter_leaves_ids_only_and_says_so(tmp_path):
    model = Net()
    model.embed.weight.requires_grad_(False)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad])
    step(model, opt)
    facts = optimizer_facts(tmp_path, model, opt)
    assert "param_names" not in facts
    assert facts["ids"] == ("ids only: 6 ids, 7 weights tensors; buffers or frozen params make "
                            "the mapping uncertain.")


def test_known_buffers_are_left_out_unknown_ones_make_it_uncertain(tmp_path):
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
    opt = torch.optim.Adam(model.parameters())
    model.train()
    opt.zero_grad()
    model(torch.randn(5, 3)).sum().backward()
    opt.step()
    facts = optimizer_facts(tmp_path, model, opt)  # running_mean/var, num_batches_tracked
    assert facts["param_names"] == truth(model, opt)

    model.register_buffer("scale", torch.ones(2))  # a float buffer nothing names
    facts = optimizer_facts(tmp_path, model, opt)
    assert "param_names" not in facts and "7 weights tensors" in facts["ids"]


def test_two_param_groups_decay_and_no_decay_merge_back_one_way(tmp_path):
    """HF Trainer's split: 2-D weights with decay, biases and norms without, each group in
    named_parameters() order."""
    model = Net()
    named = list(model.named_parameters())
    decay = [p for n, p in named if p.dim() >= 2]
    rest = [p for n, p in named if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                             {"params": rest, "weight_decay": 0.0}])
    step(model, opt)
    facts = optimizer_facts(tmp_path, model, opt)
    want = truth(model, opt)
    assert want["0"] == "embed.weight" and want["3"] == "norm.weight"  # not model order
    assert facts["param_names"] == want
    assert facts["ids"].startswith("named by merging the 2 param groups")


def test_two_groups_whose_shapes_allow_two_merges_stay_ids(tmp_path):
    """Two 4x4 weights, the groups listing them against the model's order: two merges fit
    the shapes, so nothing is named (the plain concatenation would have named them wrongly)."""
    model = nn.Sequential(nn.Linear(4, 4, bias=False), nn.Linear(4, 4, bias=False))
    opt = torch.optim.Adam([{"params": [model[1].weight]}, {"params": [model[0].weight]}])
    opt.zero_grad()
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
    facts = optimizer_facts(tmp_path, model, opt)
    assert truth(model, opt) == {"0": "1.weight", "1": "0.weight"}
    assert "param_names" not in facts and facts["ids"].startswith("ids only: the shapes allow")


def test_state_keyed_by_name_is_not_renamed(tmp_path):
    """torch.distributed.checkpoint.state_dict keys the state by parameter name itself."""
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

    model = Net()
    opt = torch.optim.Adam(model.parameters())
    step(model, opt)
    sd = get_optimizer_state_dict(model, opt)
    assert set(sd["state"]) == {n for n, _ in model.named_parameters()}
    path = tmp_path / "ckpt.pt"
    torch.save({"model": model.state_dict(), "optimizer": sd, "step": 1}, path)
    facts = open_path(str(path)).training.components["optimizer"].facts
    assert facts["ids"] == "the optimizer state is keyed by parameter name."
    assert "param_names" not in facts
    assert name_ids({"state": {}, "param_groups": [{"params": ["w"]}]}, []).certain


def test_safetensors_weights_keep_no_parameter_order():
    """HF Trainer's optimizer.pt beside safetensors shards: the headers list names sorted."""
    state = open_path(str(SAMPLES / "tiny-llama-run" / "checkpoint-6")).training
    facts = state.components["optimizer"].facts
    assert "param_names" not in facts
    assert facts["ids"].startswith("ids only: the weights are in safetensors files")
