"""Every content signature of FORMATS.md "State by content", checked against objects made by the
REAL classes: a tiny model trained for a step or two, its real state_dicts torch.save'd into
tmp_path under ordinary and unusual key names (and nested two levels deep).

For each file: `classify` finds the right kind at the right path, `open_path` tags every
tensor under that path with the component, and `training_state` gives the right status and
facts. Expected values come from the torch / numpy objects themselves (what torch put in the
state_dict), never from ckpt_browser's own output.
"""

from __future__ import annotations

import argparse
import functools
import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from ckpt_browser.analysis.opened import open_path
from ckpt_browser.analysis.resume import resume_report
from ckpt_browser.parts.classify import classify, component_at
from ckpt_browser.readers.torchfile import read_pickle_file

from .helpers import run_cli

optim = torch.optim
S = torch.optim.lr_scheduler

# --- helpers: real objects in, independent expectations out --------------------------------------


def mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))


def train(model: nn.Module, opt, steps: int = 2) -> None:
    """Real optimizer steps (with a closure, which every torch optimizer accepts, LBFGS needs)."""
    x = torch.randn(5, 3, generator=torch.Generator().manual_seed(1))

    def closure():
        opt.zero_grad()
        loss = model(x).pow(2).sum()
        loss.backward()
        return loss

    for _ in range(steps):
        opt.step(closure)


def nest(keys: tuple, value) -> dict:
    """{"a": {"b": value}} for keys ("a", "b")."""
    for k in reversed(keys):
        value = {k: value}
    return value


def save(tmp_path: Path, obj, name: str = "ckpt.pt") -> Path:
    path = tmp_path / name
    torch.save(obj, path)
    return path


def tensor_paths(obj, prefix: str = "") -> list[str]:
    """Dotted paths of the tensors inside a real torch object tree (dict / list / tuple)."""
    if isinstance(obj, torch.Tensor):
        return [prefix]
    if isinstance(obj, dict):
        items = list(obj.items())
    elif isinstance(obj, (list, tuple)):
        items = list(enumerate(obj))
    else:
        return []
    out = []
    for k, v in items:
        out += tensor_paths(v, f"{prefix}.{k}" if prefix else str(k))
    return out


def parts(path: Path):
    pf = read_pickle_file(str(path), path.name)
    assert pf.obj is not None and pf.unsafe == (), (pf.problems, pf.unsafe)
    return pf, classify(pf.obj)


def kinds_at(found) -> list[tuple[str, str]]:
    return [(f.kind, f.path) for f in found]


def tags(path: Path) -> dict[str, str]:
    ckpt = open_path(str(path)).checkpoint
    assert len(ckpt.files) == 1
    return {t.name: t.component for t in ckpt.files[0].tensors}


def assert_tagged(path: Path, saved: dict, kind: str, where: str) -> None:
    """Every tensor the real object holds is listed; those under `where` have component `kind`."""
    got = tags(path)
    assert set(got) == set(tensor_paths(saved)), "the tensor inventory is not what torch saved"
    inside = [p for p in tensor_paths(saved) if p == where or p.startswith(where + ".")]
    assert inside, f"nothing under {where!r}"
    assert {p: got[p] for p in inside} == {p: kind for p in inside}


def status(ts, kind: str) -> str:
    return ts.components[kind].status


def findings(report, component: str, severity: str | None = None) -> list:
    return [f for f in report.findings if f.component == component
            and (severity is None or f.severity == severity)]


def step_values(sd: dict) -> list[float]:
    """The optimizer's own step counts, as torch stored them (0-d tensor, or a number)."""
    steps = {float(s["step"]) for s in sd["state"].values() if "step" in s}
    return sorted(steps)


# --- optimizers (FORMATS.md "Optimizer state") ---------------------------------------------------

OPTIMIZERS = {
    "SGD": lambda p: optim.SGD(p, lr=0.1),
    "SGD-momentum": lambda p: optim.SGD(p, lr=0.1, momentum=0.9),
    "Adam": lambda p: optim.Adam(p, lr=1e-3),
    "AdamW-amsgrad": lambda p: optim.AdamW(p, lr=1e-3, amsgrad=True),
    "Adagrad": lambda p: optim.Adagrad(p),
    "RMSprop-centered-momentum": lambda p: optim.RMSprop(p, centered=True, momentum=0.9),
    "Adadelta": lambda p: optim.Adadelta(p),
    "Adamax": lambda p: optim.Adamax(p),
    "NAdam": lambda p: optim.NAdam(p),
    "RAdam": lambda p: optim.RAdam(p),
    "ASGD": lambda p: optim.ASGD(p),
    "Rprop": lambda p: optim.Rprop(p),
    "Adafactor": lambda p: optim.Adafactor(p),
    "LBFGS": lambda p: optim.LBFGS(p, history_size=3, max_iter=3),
}
# the per-parameter state keys torch 2.13 writes (checked against the real object first)
STATE_KEYS = {
    "SGD": set(), "SGD-momentum": {"momentum_buffer"},
    "Adam": {"step", "exp_avg", "exp_avg_sq"},
    "AdamW-amsgrad": {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"},
    "Adagrad": {"step", "sum"},
    "RMSprop-centered-momentum": {"step", "square_avg", "momentum_buffer", "grad_avg"},
    "Adadelta": {"step", "square_avg", "acc_delta"},
    "Adamax": {"step", "exp_avg", "exp_inf"},
    "NAdam": {"step", "mu_product", "exp_avg", "exp_avg_sq"},
    "RAdam": {"step", "exp_avg", "exp_avg_sq"},
    "ASGD": {"step", "eta", "mu", "ax"},
    "Rprop": {"step", "prev", "step_size"},
    "Adafactor": {"step", "row_var", "col_var", "variance"},  # variance: 1-D (unfactored) params
    "LBFGS": {"func_evals", "n_iter", "d", "t", "old_dirs", "old_stps", "ro", "H_diag",
              "prev_flat_grad", "prev_loss", "al"},
}
OPT_LAYOUTS = {
    "optimizer": ("optimizer",),
    "opt": ("opt",),
    "my_optim": ("my_optim",),
    "nested": ("training", "inner", "state_of_the_solver"),
}


@pytest.mark.parametrize("layout", list(OPT_LAYOUTS))
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_optimizer_state_dicts_are_found_under_any_key(tmp_path, name, layout):
    model = mlp()
    opt = OPTIMIZERS[name](model.parameters())
    train(model, opt)
    sd = opt.state_dict()
    keys = set().union(*(set(s) for s in sd["state"].values())) if sd["state"] else set()
    assert keys == STATE_KEYS[name], "torch changed its state keys: update STATE_KEYS"
    where = ".".join(OPT_LAYOUTS[layout])
    saved = {"model": model.state_dict(), **nest(OPT_LAYOUTS[layout], sd)}
    path = save(tmp_path, saved)

    _, found = parts(path)
    assert ("optimizer", where) in kinds_at(found)
    assert [f.kind for f in found].count("optimizer") == 1
    assert ("weights", "model") in kinds_at(found)
    if sd["state"]:
        assert_tagged(path, saved, "optimizer", where)
    assert_tagged(path, saved, "weights", "model")

    opt_c = open_path(str(path)).training.components["optimizer"]
    assert opt_c.status == "ok"
    facts = opt_c.facts
    assert facts["path"] == where
    assert facts["params"] == sum(len(g["params"]) for g in sd["param_groups"])
    assert facts["params_with_state"] == len(sd["state"])
    assert facts["state_keys"] == sorted(keys)
    assert facts["step"] == step_values(sd)
    assert len(facts["param_groups"]) == len(sd["param_groups"])


def test_sgd_without_momentum_alone_is_still_an_optimizer(tmp_path):
    """plain SGD keeps no state ({}), but its param groups are there: a standalone
    optimizer.pt, and the same nested under an odd name."""
    model = mlp()
    opt = optim.SGD(model.parameters(), lr=0.1)
    train(model, opt)
    sd = opt.state_dict()
    assert sd["state"] == {}
    for name, saved, where in (("optimizer.pt", sd, ""),
                               ("ckpt.pt", {"run": {"solver": sd}}, "run.solver")):
        path = save(tmp_path, saved, name)
        _, found = parts(path)
        assert kinds_at(found) == [("optimizer", where)]
        c = open_path(str(path)).training.components["optimizer"]
        assert c.status == "ok"
        assert (c.facts["params"], c.facts["params_with_state"]) == (4, 0)
        assert c.facts["param_groups"][0]["lr"] == sd["param_groups"][0]["lr"]


def test_lazily_missing_state_is_reported_but_not_an_error(tmp_path):
    """Lazy state: only the params that got a gradient have state (keys [2, 3])."""
    model = mlp()
    opt = optim.Adam(model.parameters())
    model[0].requires_grad_(False)
    train(model, opt, steps=1)
    model[0].requires_grad_(True)
    sd = opt.state_dict()
    assert sorted(sd["state"]) == [2, 3] and sd["param_groups"][0]["params"] == [0, 1, 2, 3]
    path = save(tmp_path, {"model": model.state_dict(), "opt": sd, "global_step": 1,
                           "rng": torch.get_rng_state()})
    ts = open_path(str(path)).training
    facts = ts.components["optimizer"].facts
    assert ts.components["optimizer"].status == "ok"
    assert (facts["params"], facts["params_with_state"]) == (4, 2)
    assert facts["exp_avg"]["shapes"] == {str(k): list(v["exp_avg"].shape)
                                          for k, v in sd["state"].items()}
    report = resume_report(str(path))
    assert findings(report, "optimizer"), "the missing state is not mentioned"
    assert not findings(report, "optimizer", "error")
    assert report.verdict not in ("broken", "weights-only")


def test_fqn_keyed_optimizer_state_from_get_optimizer_state_dict(tmp_path):
    """torch.distributed.checkpoint.state_dict keys the state by parameter name."""
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

    model = mlp()
    opt = optim.AdamW(model.parameters())
    train(model, opt)
    try:
        sd = get_optimizer_state_dict(model, opt)
    except (RuntimeError, ValueError) as e:  # pragma: no cover - depends on the torch build
        pytest.skip(f"torch refuses get_optimizer_state_dict without a process group: {e}")
    names = [n for n, _ in model.named_parameters()]
    assert list(sd["state"]) == names
    path = save(tmp_path, {"weights": model.state_dict(), "my_optim": sd})
    _, found = parts(path)
    assert ("optimizer", "my_optim") in kinds_at(found)
    assert_tagged(path, {"weights": model.state_dict(), "my_optim": sd}, "optimizer", "my_optim")
    c = open_path(str(path)).training.components["optimizer"]
    assert c.status == "ok"
    assert (c.facts["params"], c.facts["params_with_state"]) == (len(names), len(names))
    assert c.facts["step"] == step_values(sd)
    assert c.facts["exp_avg"]["shapes"] == {n: list(sd["state"][n]["exp_avg"].shape)
                                            for n in names}


# --- schedulers (FORMATS.md "LR scheduler state") ------------------------------------------------

def _warmup(step: int, n: int) -> float:
    return min(1.0, (step + 1) / n)


SCHEDULERS = {
    "StepLR": lambda o: S.StepLR(o, step_size=2),
    "MultiStepLR": lambda o: S.MultiStepLR(o, milestones=[1, 3]),
    "LambdaLR-lambda": lambda o: S.LambdaLR(o, lambda s: 0.9 ** s),
    "LambdaLR-partial": lambda o: S.LambdaLR(o, functools.partial(_warmup, n=3)),
    "CosineAnnealingLR": lambda o: S.CosineAnnealingLR(o, T_max=5),
    "CosineAnnealingWarmRestarts": lambda o: S.CosineAnnealingWarmRestarts(o, T_0=2),
    "LinearLR": lambda o: S.LinearLR(o),
    "ConstantLR": lambda o: S.ConstantLR(o),
    "PolynomialLR": lambda o: S.PolynomialLR(o),
    "ExponentialLR": lambda o: S.ExponentialLR(o, gamma=0.9),
    "CyclicLR": lambda o: S.CyclicLR(o, base_lr=0.01, max_lr=0.1),
    "OneCycleLR": lambda o: S.OneCycleLR(o, max_lr=0.1, total_steps=10),
    "SequentialLR": lambda o: S.SequentialLR(o, [S.LinearLR(o), S.ExponentialLR(o, 0.9)], [2]),
    "ChainedScheduler": lambda o: S.ChainedScheduler([S.ConstantLR(o), S.ExponentialLR(o, 0.9)]),
    "ReduceLROnPlateau": lambda o: S.ReduceLROnPlateau(o),
}
SCHED_LAYOUTS = {"lr_scheduler": ("lr_scheduler",), "sched": ("sched",),
                 "odd": ("my_schedule",), "nested": ("train", "extras", "lrs")}


@pytest.mark.parametrize("layout", list(SCHED_LAYOUTS))
@pytest.mark.parametrize("name", list(SCHEDULERS))
def test_scheduler_state_dicts_are_found_under_any_key(tmp_path, name, layout):
    model = mlp()
    opt = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    sched = SCHEDULERS[name](opt)
    for _ in range(3):
        train(model, opt, steps=1)
        sched.step(1.0) if name == "ReduceLROnPlateau" else sched.step()
    sd = sched.state_dict()
    where = ".".join(SCHED_LAYOUTS[layout])
    saved = {"model": model.state_dict(), "optimizer": opt.state_dict(),
             **nest(SCHED_LAYOUTS[layout], sd)}
    path = save(tmp_path, saved)
    _, found = parts(path)  # no code reference anywhere in a torch 2.13 scheduler
    assert ("scheduler", where) in kinds_at(found)
    assert [f.kind for f in found].count("scheduler") == 1, "a child scheduler counted twice"
    c = open_path(str(path)).training.components["scheduler"]
    assert c.status == "ok"
    for key in ("last_epoch", "_last_lr", "base_lrs", "_step_count"):
        if key in sd:
            assert c.facts[key] == sd[key], key
    if "lr_lambdas" in sd:  # [None] for a lambda, [{}] for a partial: one per group either way
        assert c.facts["lr_lambdas"] == len(sd["lr_lambdas"]) == 1


def test_no_scheduler_without_initial_lr_is_not_needed(tmp_path):
    model = mlp()
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    train(model, opt)
    assert "initial_lr" not in opt.state_dict()["param_groups"][0]
    path = save(tmp_path, {"model": model.state_dict(), "optimizer": opt.state_dict()})
    assert status(open_path(str(path)).training, "scheduler") == "not-needed"


def test_no_scheduler_but_initial_lr_in_the_groups_is_missing(tmp_path):
    """Any torch scheduler's constructor sets initial_lr: the run had one, it was not saved."""
    model = mlp()
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = S.StepLR(opt, step_size=1)
    train(model, opt)
    sched.step()
    assert "initial_lr" in opt.state_dict()["param_groups"][0]
    path = save(tmp_path, {"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 1})
    ts = open_path(str(path)).training
    assert status(ts, "scheduler") == "missing"
    report = resume_report(str(path))
    assert findings(report, "scheduler", "warning")
    assert report.verdict == "inexact"


# --- GradScaler (FORMATS.md "Grad scaler state") -------------------------------------------------

def scaled_run():
    model = mlp()
    opt = optim.AdamW(model.parameters())
    scaler = torch.amp.GradScaler("cpu")
    x = torch.randn(5, 3)
    for _ in range(2):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16):
            loss = model(x).float().pow(2).sum()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    return model, opt, scaler


@pytest.mark.parametrize("keys", [("scaler",), ("my_amp_state",), ("amp", "inner", "blob")])
def test_enabled_grad_scaler(tmp_path, keys):
    model, opt, scaler = scaled_run()
    sd = scaler.state_dict()
    assert set(sd) == {"scale", "growth_factor", "backoff_factor", "growth_interval",
                       "_growth_tracker"}
    path = save(tmp_path, {"model": model.state_dict(), "optimizer": opt.state_dict(),
                           **nest(keys, sd)})
    _, found = parts(path)
    assert ("scaler", ".".join(keys)) in kinds_at(found)
    c = open_path(str(path)).training.components["scaler"]
    assert c.status == "ok"
    assert c.facts["scale"] == sd["scale"]
    assert c.facts["_growth_tracker"] == sd["_growth_tracker"]


def test_disabled_grad_scaler_is_not_needed(tmp_path):
    model, opt, _ = scaled_run()
    sd = torch.amp.GradScaler("cpu", enabled=False).state_dict()
    assert sd == {}
    path = save(tmp_path, {"model": model.state_dict(), "optimizer": opt.state_dict(),
                           "scaler": sd})
    _, found = parts(path)
    assert ("scaler", "scaler") in kinds_at(found)
    assert status(open_path(str(path)).training, "scaler") == "not-needed"


@pytest.mark.parametrize("settings", [
    {"args": argparse.Namespace(fp16=True, lr=0.1)},
    {"config": {"dtype": "float16", "batch_size": 4}},
    {"hparams": {"amp": True}},
])
def test_fp16_evidence_without_a_scaler_is_missing(tmp_path, settings):
    """fp16 in the saved args and no scaler record: the loss scale restarts."""
    model = mlp()
    opt = optim.AdamW(model.parameters())
    train(model, opt)
    path = save(tmp_path, {"model": model.state_dict(), "optimizer": opt.state_dict(), **settings})
    assert status(open_path(str(path)).training, "scaler") == "missing"
    assert findings(resume_report(str(path)), "scaler", "warning")


# --- RNG (FORMATS.md "RNG state") ----------------------------------------------------------------

def rng_states() -> dict:
    """name -> (state, what the library calls its generator, restores the torch CPU RNG?)"""
    py = random.getstate()
    assert py[0] == 3 and len(py[1]) == 625
    legacy = np.random.get_state()
    assert legacy[0] == "MT19937" and legacy[1].shape == (624,)
    new = np.random.get_state(legacy=False)
    pcg = np.random.default_rng(0).bit_generator.state
    cpu = torch.get_rng_state()
    gen = torch.Generator().get_state()
    assert cpu.dtype == gen.dtype == torch.uint8 and cpu.shape == gen.shape == (5056,)
    return {
        "torch.get_rng_state": (cpu, "torch cpu", True),
        "Generator.get_state": (gen, "torch cpu", True),
        "np.random.get_state": (legacy, "legacy", False),
        "np.random.get_state(legacy=False)": (new, new["bit_generator"], False),
        "default_rng.bit_generator.state": (pcg, pcg["bit_generator"], False),
        "random.getstate": (py, "python", False),
    }


RNG_LAYOUTS = {"odd": ("bits_of_luck",), "nested": ("loop", "seeds", "gen_state")}


@pytest.mark.parametrize("layout", list(RNG_LAYOUTS))
@pytest.mark.parametrize("source", list(rng_states()))
def test_rng_states_by_shape_under_any_name(tmp_path, source, layout):
    state, label, cpu = rng_states()[source]
    model = mlp()
    opt = optim.SGD(model.parameters(), lr=0.1)
    keys = RNG_LAYOUTS[layout]
    saved = {"model": model.state_dict(), "optimizer": opt.state_dict(), **nest(keys, state),
             "global_step": 0}
    path = save(tmp_path, saved)
    _, found = parts(path)
    where = ".".join(keys)
    rng = [f for f in found if f.kind == "rng"]
    # the part is the state itself, or a container that holds nothing but it
    assert len(rng) == 1 and rng[0].path and (where == rng[0].path
                                              or where.startswith(rng[0].path + "."))
    if isinstance(state, torch.Tensor):
        assert_tagged(path, saved, "rng", where)
    c = open_path(str(path)).training.components["rng"]
    assert any(label.lower() in g.lower() for g in c.facts["generators"]), c.facts
    if cpu:
        assert c.status == "ok"
    else:
        assert c.status == "incomplete"
        assert c.facts["missing_generators"] == ["torch cpu"]


def test_all_generators_together_and_per_rank_lists(tmp_path):
    model = mlp()
    opt = optim.SGD(model.parameters(), lr=0.1)
    every = {name: s for name, (s, _, _) in rng_states().items()}
    path = save(tmp_path, {"model": model.state_dict(), "optimizer": opt.state_dict(),
                           "randomness": every})
    ts = open_path(str(path)).training
    assert status(ts, "rng") == "ok"
    assert len(ts.components["rng"].facts["generators"]) == 5  # torch cpu counted once
    per_rank = [{"python": random.getstate(), "numpy": np.random.get_state(),
                 "torch": torch.get_rng_state()} for _ in range(2)]  # Composer / Megatron shape
    path = save(tmp_path, {"model": model.state_dict(), "optimizer": opt.state_dict(),
                           "rank_rngs": per_rank}, "ranks.pt")
    _, found = parts(path)
    assert ("rng", "rank_rngs") in kinds_at(found)
    ts = open_path(str(path)).training
    assert status(ts, "rng") == "ok"
    assert ts.ranks == len(per_rank)


def test_rng_without_the_torch_cpu_generator_is_incomplete(tmp_path):
    model = mlp()
    opt = optim.SGD(model.parameters(), lr=0.1)
    path = save(tmp_path, {"model": model.state_dict(), "optimizer": opt.state_dict(),
                           "rng": {"numpy": np.random.get_state(), "python": random.getstate()}})
    ts = open_path(str(path)).training
    assert status(ts, "rng") == "incomplete"
    assert ts.components["rng"].facts["missing_generators"] == ["torch cpu"]
    assert findings(resume_report(str(path)), "rng", "warning")


def test_a_counter_beside_an_rng_state_is_still_a_counter(tmp_path):
    model = mlp()
    opt = optim.SGD(model.parameters(), lr=0.1)
    path = save(tmp_path, {"model": model.state_dict(), "optimizer": opt.state_dict(),
                           "trainer_state": {"rng": torch.get_rng_state(), "epoch": 3}})
    ts = open_path(str(path)).training
    assert status(ts, "rng") == "ok"
    assert status(ts, "progress") == "ok"
    assert ts.epoch == 3


# --- data position (FORMATS.md "Data position") --------------------------------------------------

def stateful_dataloader_state() -> dict:
    # torchdata stateful_dataloader.py, _StatefulSingleProcessDataLoaderIter.state_dict(): these
    # nine keys; the index sampler states as FORMATS.md "Data position" gives them
    # (RandomSampler -> {yielded, generator}, BatchSampler -> {samples_yielded, ...}).
    return {"_index_sampler_state": {"samples_yielded": 8,
                                     "sampler_iter_state": {"generator": torch.Generator()
                                                            .get_state(), "yielded": 8}},
            "_sampler_iter_state": None, "_sampler_iter_yielded": 2, "_num_yielded": 2,
            "_IterableDataset_len_called": None, "_shared_seed": None, "fetcher_state": None,
            "dataset_state": None, "_iterator_finished": False}


def hf_iterable_dataset_state() -> dict:
    # datasets src/datasets/iterable_dataset.py: IterableDataset.state_dict() is
    # {"examples_iterable": ex_iterable._init_state_dict(), "epoch": epoch}; a map() wrapper
    # (MappedExamplesIterable) adds previous_state, batch_idx, num_chunks_since_previous_state,
    # cropped_chunk_length, num_examples_since_previous_state, previous_state_example_idx
    leaf = {"shard_idx": 1, "shard_example_idx": 3, "type": "ExamplesIterable"}
    return {"examples_iterable": {"examples_iterable": leaf, "previous_state": None,
                                  "batch_idx": 0, "num_chunks_since_previous_state": 0,
                                  "cropped_chunk_length": 0,
                                  "num_examples_since_previous_state": 3,
                                  "previous_state_example_idx": 0,
                                  "type": "MappedExamplesIterable"},
            "epoch": 0}


def streaming_state() -> dict:
    # mosaicml/streaming streaming/base/dataset.py StreamingDataset.state_dict(num_samples,
    # from_beginning): sample_in_epoch counts samples over all ranks
    return {"epoch": 0, "sample_in_epoch": 16, "num_canonical_nodes": 1, "shuffle_seed": 9176,
            "initial_physical_nodes": 1}


def fairseq_iterator_state() -> dict:
    # fairseq/data/iterators.py EpochBatchIterator.state_dict()
    return {"version": 2, "epoch": 1, "iterations_in_epoch": 3, "shuffle": True}


DATA = {"StatefulDataLoader": stateful_dataloader_state, "datasets": hf_iterable_dataset_state,
        "streaming": streaming_state, "fairseq": fairseq_iterator_state}
DATA_LAYOUTS = {"plain": ("dataloader",), "odd": ("where_we_were",),
                "nested": ("extra", "loaders", "train")}


@pytest.mark.parametrize("layout", list(DATA_LAYOUTS))
@pytest.mark.parametrize("source", list(DATA))
def test_data_positions_by_their_key_sets(tmp_path, source, layout):
    model = mlp()
    opt = optim.AdamW(model.parameters())
    train(model, opt, steps=3)
    keys = DATA_LAYOUTS[layout]
    state = DATA[source]()
    saved = {"model": model.state_dict(), "optimizer": opt.state_dict(),
             "rng": torch.get_rng_state(), "global_step": 3, **nest(keys, state)}
    path = save(tmp_path, saved)
    _, found = parts(path)
    assert ("data", ".".join(keys)) in kinds_at(found)
    assert [f.kind for f in found].count("data") == 1
    if tensor_paths(state):
        assert_tagged(path, saved, "data", ".".join(keys))
    ts = open_path(str(path)).training
    c = ts.components["data"]
    assert c.status == "ok" and c.facts["stored"] is True
    assert ts.step == 3  # a counter inside the data state is not the run's step


def test_mid_epoch_counter_without_data_state_is_missing(tmp_path):
    model = mlp()
    opt = optim.AdamW(model.parameters())
    train(model, opt, steps=3)
    path = save(tmp_path, {"model": model.state_dict(), "optimizer": opt.state_dict(),
                           "rng": torch.get_rng_state(), "epoch": 1, "batch_idx": 5,
                           "global_step": 3})
    ts = open_path(str(path)).training
    assert status(ts, "data") == "missing"
    assert ts.components["data"].facts["stored"] is False
    assert findings(resume_report(str(path)), "data", "warning")
    # the same at batch_idx 0 (an epoch boundary, the RNG saved): nothing is lost
    path = save(tmp_path, {"model": model.state_dict(), "optimizer": opt.state_dict(),
                           "rng": torch.get_rng_state(), "epoch": 1, "batch_idx": 0,
                           "global_step": 3}, "boundary.pt")
    assert status(open_path(str(path)).training, "data") != "missing"


# --- counters (FORMATS.md "Progress counters") ---------------------------------------------------

COUNTERS = [  # (name, unit)
    ("iter_num", "step"), ("global_step", "step"), ("num_updates", "step"),
    ("steps_run", "step"), ("epoch", "epoch"), ("epochs_run", "epoch"),
    ("iteration", "step"),
]


@pytest.mark.parametrize("name,unit", COUNTERS)
def test_counters_by_name(tmp_path, name, unit):
    """The same custom loop file, its counter under each name: the same answer."""
    model = mlp()
    opt = optim.AdamW(model.parameters())
    train(model, opt, steps=3)
    sd = opt.state_dict()
    n = int(max(step_values(sd)))
    path = save(tmp_path, {"model": model.state_dict(), "optimizer": sd,
                           "rng_state": torch.get_rng_state(), name: n})
    _, found = parts(path)
    assert ("progress", name) in kinds_at(found)
    ts = open_path(str(path)).training
    assert (ts.step, ts.epoch) == ((n, None) if unit == "step" else (None, n))
    assert ts.framework == "custom"
    assert {k: c.status for k, c in ts.components.items()} == {
        "weights": "ok", "optimizer": "ok", "scheduler": "not-needed", "rng": "ok",
        "data": "not-needed", "progress": "ok", "scaler": "not-needed"}
    assert resume_report(str(path)).verdict == "exact"


def test_step_comes_from_the_step_counter_not_the_epoch_or_batch(tmp_path):
    model = mlp()
    opt = optim.AdamW(model.parameters())
    train(model, opt, steps=3)
    path = save(tmp_path, {"model": model.state_dict(), "optimizer": opt.state_dict(),
                           "rng": torch.get_rng_state(),
                           "progress": {"epoch": 1, "batch_idx": 0, "global_step": 3,
                                        "samples_seen": 15}})
    ts = open_path(str(path)).training
    assert (ts.step, ts.epoch) == (3, 1)
    assert ts.components["progress"].facts["step_from"] == "progress.global_step"


def test_a_counter_that_disagrees_with_adams_step_is_a_warning(tmp_path):
    model = mlp()
    opt = optim.Adam(model.parameters())
    train(model, opt, steps=3)
    sd = opt.state_dict()
    assert step_values(sd) == [3.0]
    path = save(tmp_path, {"model": model.state_dict(), "optimizer": sd,
                           "rng": torch.get_rng_state(), "global_step": 50})
    report = resume_report(str(path))
    assert findings(report, "progress", "warning")
    assert report.verdict == "inexact"
    # agreeing counters: no such warning
    path = save(tmp_path, {"model": model.state_dict(), "optimizer": sd,
                           "rng": torch.get_rng_state(), "global_step": 3}, "agree.pt")
    assert not findings(resume_report(str(path)), "progress", "warning")


def test_a_file_name_whose_number_disagrees_with_the_counters_is_a_warning(tmp_path):
    model = mlp()
    opt = optim.Adam(model.parameters())
    train(model, opt, steps=3)
    saved = {"model": model.state_dict(), "optimizer": opt.state_dict(),
             "rng": torch.get_rng_state(), "global_step": 3}
    report = resume_report(str(save(tmp_path, saved, "ckpt_step100.pt")))
    assert any("100" in f.message for f in findings(report, "progress", "warning"))
    report = resume_report(str(save(tmp_path, saved, "ckpt_step3.pt")))
    assert not findings(report, "progress", "warning")


# --- weights (FORMATS.md "Model weights") --------------------------------------------------------

def bn_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))


def weights_component(path: Path):
    return open_path(str(path)).training.components["weights"]


def numel(sd: dict) -> int:
    return sum(v.numel() for v in sd.values())


@pytest.mark.parametrize("keys", [(), ("model",), ("net",), ("checkpoint", "weights_of_model")])
def test_a_flat_state_dict_anywhere(tmp_path, keys):
    sd = bn_model().state_dict()
    saved = nest(keys, sd) if keys else sd
    path = save(tmp_path, saved)
    where = ".".join(keys)
    _, found = parts(path)
    assert kinds_at(found) == [("weights", where)]
    got = tags(path)
    assert got == {p: "weights" for p in tensor_paths(saved)}
    c = weights_component(path)
    assert c.status == "ok"
    assert (c.facts["tensors"], c.facts["params"]) == (len(sd), numel(sd))


def test_batchnorm_buffers_are_weights(tmp_path):
    sd = bn_model().state_dict()
    assert {"1.running_mean", "1.running_var", "1.num_batches_tracked"} <= set(sd)
    path = save(tmp_path, sd)
    ckpt = open_path(str(path)).checkpoint
    by_name = {t.name: t for t in ckpt.files[0].tensors}
    for k in ("1.running_mean", "1.running_var", "1.num_batches_tracked"):
        assert by_name[k].component == "weights"
        assert by_name[k].shape == tuple(sd[k].shape)
    assert by_name["1.num_batches_tracked"].dtype == "I64"
    assert ckpt.totals.tensors == len(sd)


def test_generator_and_discriminator(tmp_path):
    torch.manual_seed(0)
    g, d = nn.Linear(3, 4).state_dict(), nn.Linear(4, 1).state_dict()
    path = save(tmp_path, {"generator": g, "discriminator": d})
    _, found = parts(path)
    assert sorted(kinds_at(found)) == [("weights", "discriminator"), ("weights", "generator")]
    c = weights_component(path)
    assert sorted(r["path"] for r in c.facts["roots"]) == ["discriminator", "generator"]
    assert c.facts["params"] == numel(g) + numel(d)


@pytest.mark.parametrize("wrap,prefix", [
    (nn.DataParallel, "module."),
    (lambda m: torch.compile(m, backend="eager"), "_orig_mod."),
])
def test_wrapper_prefixes(tmp_path, wrap, prefix):
    """A wrapper's prefix: every key starts with the wrapper's attribute name."""
    model = bn_model()
    sd = wrap(model).state_dict()
    assert all(k.startswith(prefix) for k in sd)
    path = save(tmp_path, {"model": sd})
    c = weights_component(path)
    assert c.status == "ok"
    assert [r.get("prefix") for r in c.facts["roots"]] == [prefix]
    assert c.facts["tensors"] == len(sd)


def test_averaged_model_under_model_ema_is_the_ema(tmp_path):
    model = bn_model()
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(4, 3)).sum().backward()
    opt.step()
    ema = torch.optim.swa_utils.AveragedModel(model)
    ema.update_parameters(model)
    ema_sd = ema.state_dict()
    assert "n_averaged" in ema_sd and all(k.startswith("module.") for k in ema_sd
                                           if k != "n_averaged")
    saved = {"model": model.state_dict(), "model_ema": ema_sd, "optimizer": opt.state_dict(),
             "epoch": 1}
    path = save(tmp_path, saved)
    _, found = parts(path)
    assert ("ema", "model_ema") in kinds_at(found)
    assert [f.kind for f in found].count("weights") == 1
    assert_tagged(path, saved, "ema", "model_ema")
    ckpt = open_path(str(path)).checkpoint
    assert ckpt.totals.tensors == len(model.state_dict())  # the EMA is not a second model
    c = weights_component(path)
    assert [r["path"] for r in c.facts["roots"]] == ["model"]
    assert [r["path"] for r in c.facts["ema"]] == ["model_ema"]
    report = resume_report(str(path))
    assert not findings(report, "weights", "warning")


def test_ema_only_is_a_warning(tmp_path):
    """Only the EMA saved, the raw weights not (FORMATS.md "Resume verdict")."""
    model = bn_model()
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    ema = torch.optim.swa_utils.AveragedModel(model)
    path = save(tmp_path, {"model_ema": ema.state_dict(), "optimizer": opt.state_dict(),
                           "epoch": 1, "rng": torch.get_rng_state()})
    c = weights_component(path)
    assert c.status == "ok" and c.facts["roots"] == [] and c.facts["ema"]
    report = resume_report(str(path))
    assert findings(report, "weights", "warning")
    assert report.verdict == "inexact"


def test_whole_module_pickle(tmp_path):
    """torch.save(model): a class record whose tensors sit in _parameters / _buffers /
    _modules, listed under the names model.state_dict() gives them, in its order."""
    model = bn_model()
    path = save(tmp_path, model)
    assert tags(path) == {name: "weights" for name in model.state_dict()}
    names = [t.name for t in open_path(str(path)).checkpoint.files[0].tensors]
    assert names == list(model.state_dict())
    c = weights_component(path)
    cls = f"{type(model).__module__}.{type(model).__qualname__}"
    assert cls in c.facts["classes"]
    assert c.facts["params"] == numel(model.state_dict())
    report = resume_report(str(path))
    assert report.verdict == "weights-only"
    assert any(cls in f.message for f in findings(report, "weights"))


def test_a_whole_module_is_compared_and_read_by_its_state_dict_names(tmp_path):
    """diff pairs torch.save(model) with torch.save(model.state_dict()) tensor by tensor,
    and stats takes the name diff prints."""
    model = bn_model()
    whole = save(tmp_path, model, "whole.pt")
    sd = save(tmp_path, model.state_dict(), "sd.pt")
    result = run_cli("diff", str(whole), str(sd), "--values", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    doc = json.loads(result.stdout)
    rows = {t["name"]: t["status"] for t in doc["tensors"]}
    assert rows == {name: "unchanged" for name in model.state_dict()}
    weight = model.state_dict()["0.weight"]
    stats = json.loads(run_cli("stats", str(whole), "0.weight", "--json").stdout)["tensors"][0]
    assert (stats["min"], stats["max"]) == (weight.min().item(), weight.max().item())


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(5, 3)
        self.head = nn.Linear(3, 5, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, x):
        return self.head(self.emb(x))


def test_tied_weights_two_keys_one_storage(tmp_path):
    torch.manual_seed(0)
    model = Tied()
    opt = optim.AdamW(model.parameters())
    model(torch.tensor([1, 2])).sum().backward()
    opt.step()
    sd = model.state_dict()
    assert sd["emb.weight"].data_ptr() == sd["head.weight"].data_ptr()
    params = list(model.parameters())  # one parameter, counted once
    path = save(tmp_path, {"model": sd, "optimizer": opt.state_dict(), "step": 1})
    ckpt = open_path(str(path)).checkpoint
    by_name = {t.name: t for t in ckpt.files[0].tensors}
    a, b = by_name["model.emb.weight"], by_name["model.head.weight"]
    assert (a.component, b.component) == ("weights", "weights")
    assert (a.begin, a.end) == (b.begin, b.end)  # the same bytes
    c = open_path(str(path)).training.components["optimizer"]
    assert c.facts["params"] == len(params) == 1
    assert c.facts["param_names"] == {"0": "emb.weight"}
    assert not findings(resume_report(str(path)), "optimizer", "error")


def test_component_at_takes_the_innermost_part(tmp_path):
    model = mlp()
    opt = optim.Adam(model.parameters())
    train(model, opt, steps=1)
    path = save(tmp_path, {"bundle": {"model": model.state_dict(), "optim": opt.state_dict()}})
    _, found = parts(path)
    assert component_at(found, "bundle.model.0.weight") == "weights"
    assert component_at(found, "bundle.optim.state.0.exp_avg") == "optimizer"
    assert component_at(found, "bundle.nothing") == "other"
