"""Popular projects' single-file layouts (FORMATS.md "Single-file projects"), read by content.

Two sets:

* every sample under sample_checkpoints/projects/ (written by the projects' real save code,
  README "Project samples"): framework and project, the seven statuses, step / epoch and the
  verdict, with the expected values read from the files themselves: torch.load(weights_only=True)
  with the allowlists the README lists, or, for the files weights_only refuses, an inert
  unpickler whose find_class hands out record classes instead of importing anything;
* faithful copies, built here, of the layouts the samples lack (Ultralytics, YOLOv5, fairseq,
  Composer, torchtune, detectron2's DefaultTrainer, mmcv 1.x), each named as its section is.

Statuses the files cannot decide alone (what a project's own resume re-derives) follow those
sections, project by project.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import io
import json
import pickle
import random
import shutil
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from ckpt_browser.analysis.opened import open_path
from ckpt_browser.analysis.resume import resume_report, resume_reports
from ckpt_browser.analysis.runs import run_entries
from ckpt_browser.parts.classify import classify
from ckpt_browser.parts.projects import fingerprint
from ckpt_browser.readers.torchfile import read_pickle_file

from .helpers import SAMPLES

PROJECTS = SAMPLES / "projects"
FINE = ("ok", "not-needed")

# --- reading the files independently -----------------------------------------------------------


def safe_load(path: Path, extra=()):
    """torch.load(weights_only=True) with the README's allowlists (numpy RNG, Namespace)."""
    allowed = [np._core.multiarray._reconstruct, np.ndarray, np.dtype,
               type(np.dtype(np.uint32)), argparse.Namespace, *extra]
    with torch.serialization.safe_globals(allowed):
        return torch.load(path, map_location="cpu", weights_only=True)


class Record:
    """What an inert unpickler builds for a class it will not import: the pickle's args and
    state, nothing run."""

    def __init__(self, *args, **kwargs):
        self.args, self.state = args, kwargs or None

    def __setstate__(self, state):
        self.state = state

    def __call__(self, *args, **kwargs):  # builtins.getattr(Record, "min")(...) and the like
        return Record(*args, **kwargs)


def inert_load(path: Path):
    """For the files weights_only=True refuses (README "What weights_only=True refuses"): torch's
    own zip and storage handling, with every global outside torch / collections / numpy (and
    getattr) replaced by a Record subclass of the same name. No project code is imported."""

    class Unpickler(pickle.Unpickler):
        def find_class(self, module, name):
            if module.split(".")[0] in ("torch", "collections", "numpy", "_codecs"):
                return super().find_class(module, name)
            if module in ("builtins", "__builtin__") and name in ("set", "frozenset"):
                return super().find_class(module, name)
            return type(name, (Record,), {"__module__": module, "__qualname__": name})

    mod = types.SimpleNamespace(Unpickler=Unpickler, __name__="inert",
                                load=lambda f, **kw: Unpickler(f, **kw).load())
    return torch.load(path, map_location="cpu", weights_only=False, pickle_module=mod)


def tensors_in(obj) -> list[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in tensors_in(v)]
    if isinstance(obj, (list, tuple)):
        return [t for v in obj for t in tensors_in(v)]
    return []


def holds_rng(obj, depth: int = 0) -> bool:
    """Any RNG state anywhere (FORMATS.md "RNG state"): a uint8 [5056] tensor, numpy's MT19937
    tuple or dict, random.getstate()'s (3, <625 ints>, ...)."""
    if depth > 12:
        return False
    if isinstance(obj, torch.Tensor):
        return obj.dtype == torch.uint8 and tuple(obj.shape) == (5056,)
    if isinstance(obj, tuple) and obj and obj[0] == "MT19937":
        return True
    if isinstance(obj, tuple) and len(obj) == 3 and obj[0] == 3 and len(obj[1]) == 625:
        return True
    if isinstance(obj, dict):
        return "bit_generator" in obj or any(holds_rng(v, depth + 1) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return any(holds_rng(v, depth + 1) for v in obj)
    return False


def initial_lr(opt_sd: dict) -> bool:
    return any("initial_lr" in g for g in opt_sd["param_groups"])


def statuses(ts) -> dict:
    return {k: c.status for k, c in ts.components.items()}


def verdict_for(expected: dict) -> str:
    """The verdict the statuses call for (FORMATS.md "Resume verdict", resume/verdict.py): the
    weights not usable -> broken; the optimizer not usable -> weights-only; anything else lacking
    -> inexact."""
    if expected["weights"] not in FINE:
        return "broken"
    if expected["optimizer"] not in FINE:
        return "weights-only"
    if any(v not in FINE for v in expected.values()):
        return "inexact"
    return "exact"


WEIGHTS_ONLY = {"weights": "ok", "optimizer": "missing", "scheduler": "missing", "rng": "missing",
                "data": "missing", "progress": "missing", "scaler": "not-needed"}


def check(path: Path, framework: str, expected: dict, step=None, epoch=None, project=None):
    ts = open_path(str(path)).training
    assert (ts.framework, ts.step, ts.epoch) == (framework, step, epoch)
    if project is not None:
        assert project in ts.project.lower()
    assert statuses(ts) == expected
    report = resume_report(str(path))
    assert report.verdict == verdict_for(expected)
    return ts, report


def pickled_root(path: Path):
    pf = read_pickle_file(str(path), path.name)
    assert pf.obj is not None and not pf.unsafe
    return pf.obj


# --- the samples ---------------------------------------------------------------------------------

def test_state_dict_sample():
    path = PROJECTS / "state-dict" / "model.pt"
    sd = safe_load(path)
    assert all(isinstance(v, torch.Tensor) for v in sd.values())
    ts, _ = check(path, "torch", WEIGHTS_ONLY)
    facts = ts.components["weights"].facts
    assert (facts["tensors"], facts["params"]) == (len(sd), sum(v.numel() for v in sd.values()))
    assert fingerprint(pickled_root(path)) is None


@pytest.mark.parametrize("path", [PROJECTS / "tutorial" / "model.pt",
                                  PROJECTS / "legacy" / "checkpoint.pth"])
def test_tutorial_samples(path):
    """PyTorch tutorial: {epoch, model_state_dict, optimizer_state_dict, loss}; lacks RNG (and a
    scheduler, which the recipe never had: no initial_lr in its groups)."""
    d = safe_load(path)
    assert set(d) == {"epoch", "model_state_dict", "optimizer_state_dict", "loss"}
    assert not holds_rng(d) and not initial_lr(d["optimizer_state_dict"])
    expected = {"weights": "ok", "optimizer": "ok", "scheduler": "not-needed", "rng": "missing",
                # an epoch counter and no step counter: saved at an epoch boundary, so no
                # position within an epoch is lost (the order is the RNG's, reported above)
                "data": "not-needed", "progress": "ok", "scaler": "not-needed"}
    ts, _ = check(path, "custom", expected, epoch=d["epoch"], project="tutorial")
    c = ts.components
    assert c["weights"].facts["tensors"] == len(d["model_state_dict"])
    assert c["optimizer"].facts["params_with_state"] == len(d["optimizer_state_dict"]["state"])


CUSTOM = PROJECTS / "custom-run"


@pytest.mark.parametrize("name", ["ckpt_epoch1.pt", "ckpt_epoch3.pt"])
def test_custom_run_files(name):
    """README custom-run: model, optim, sched, an enabled CPU GradScaler, RNG, epoch, step."""
    d = safe_load(CUSTOM / name)
    assert holds_rng(d["rng_state"]) and d["scaler"]
    expected = {"weights": "ok", "optimizer": "ok", "scheduler": "ok", "rng": "ok",
                # saved at the end of an epoch with the torch CPU RNG (a shuffling
                # DataLoader draws the next epoch's order from it: FORMATS.md "Data position")
                "data": "not-needed", "progress": "ok", "scaler": "ok"}
    ts, report = check(CUSTOM / name, "custom", expected, step=d["global_step"], epoch=d["epoch"])
    c = ts.components
    assert c["scaler"].facts["scale"] == d["scaler"]["scale"]
    assert c["scheduler"].facts["last_epoch"] == d["sched"]["last_epoch"]
    assert c["optimizer"].facts["step"] == sorted({float(s["step"])
                                                   for s in d["optim"]["state"].values()})
    assert c["rng"].facts["parts"][0]["path"] == "rng_state"
    assert report.verdict == "exact"


def test_custom_run_folder_is_a_timeline():
    steps = {n: safe_load(CUSTOM / n)["global_step"] for n in ("ckpt_epoch1.pt", "ckpt_epoch3.pt")}
    entries = run_entries(str(CUSTOM))
    assert [(e.name, e.step) for e in entries] == sorted(steps.items(), key=lambda kv: -kv[1])
    timeline = resume_reports(str(CUSTOM))
    assert [r.step for r in timeline.reports] == sorted(steps.values(), reverse=True)
    assert all(r.verdict == "exact" for r in timeline.reports)


def test_nanogpt_sample():
    """nanoGPT: model (_orig_mod.*, tied wte / lm_head), AdamW in two groups, iter_num; lacks
    RNG and the GradScaler its float16 dtype needs; the LR is recomputed from iter_num."""
    path = PROJECTS / "nanogpt" / "ckpt.pt"
    d = safe_load(path)
    assert d["config"]["dtype"] == "float16" and not holds_rng(d)
    expected = {"weights": "ok", "optimizer": "ok", "scheduler": "not-needed", "rng": "missing",
                "data": "not-needed", "progress": "ok", "scaler": "missing"}
    ts, report = check(path, "nanogpt", expected, step=d["iter_num"], project="nanogpt")
    w = ts.components["weights"].facts
    assert w["tensors"] == len(d["model"])
    assert [r.get("prefix") for r in w["roots"]] == ["_orig_mod."]
    opt = ts.components["optimizer"].facts
    assert [g["params"] for g in opt["param_groups"]] == [len(g["params"])
                                                          for g in d["optimizer"]["param_groups"]]
    ckpt = open_path(str(path)).checkpoint
    by = {t.name: t for t in ckpt.files[0].tensors}
    wte, head = by["model._orig_mod.transformer.wte.weight"], by["model._orig_mod.lm_head.weight"]
    assert (wte.begin, wte.end) == (head.begin, head.end)  # one storage, two keys
    assert {f.component for f in report.findings if f.severity == "warning"} >= {"rng", "scaler"}


TV = PROJECTS / "torchvision-classification"


@pytest.mark.parametrize("name", ["model_0.pth", "model_1.pth", "checkpoint.pth"])
def test_torchvision_samples(name):
    """torchvision references: model, optimizer, lr_scheduler (SequentialLR), epoch, args,
    model_ema and the {} of a GradScaler that disabled itself (not needed: FORMATS.md "Grad
    scaler state"); lacks RNG."""
    d = safe_load(TV / name)
    assert d["scaler"] == {} and not holds_rng(d)
    expected = {"weights": "ok", "optimizer": "ok", "scheduler": "ok", "rng": "missing",
                "data": "not-needed", "progress": "ok", "scaler": "not-needed"}
    ts, _ = check(TV / name, "torchvision", expected, epoch=d["epoch"], project="torchvision")
    c = ts.components
    assert c["scheduler"].facts["last_epoch"] == d["lr_scheduler"]["last_epoch"]
    assert [r["path"] for r in c["weights"].facts["ema"]] == ["model_ema"]
    assert c["weights"].facts["tensors"] == len(d["model"])


def test_torchvision_folder_newest_first():
    epochs = {n: safe_load(TV / n)["epoch"] for n in ("model_0.pth", "model_1.pth",
                                                      "checkpoint.pth")}
    entries = run_entries(str(TV))
    assert sorted(e.name for e in entries) == sorted(epochs)
    assert [epochs[e.name] for e in entries] == sorted(epochs.values(), reverse=True)


TIMM = PROJECTS / "timm"


@pytest.mark.parametrize("name", ["checkpoint-0.pth.tar", "checkpoint-1.pth.tar", "last.pth.tar",
                                  "recovery-0-2.pth.tar", "recovery-1-2.pth.tar"])
def test_timm_samples(name):
    """timm: the scheduler is re-stepped from the epoch, amp_scaler saved, no RNG; a recovery
    file is written mid-epoch and resuming from it skips the rest of that epoch."""
    d = safe_load(TIMM / name)
    assert d["version"] == 2 and d["amp_scaler"]["scale"] > 0 and not holds_rng(d)
    expected = {"weights": "ok", "optimizer": "ok", "scheduler": "not-needed", "rng": "missing",
                "data": "missing" if name.startswith("recovery-") else "not-needed",
                "progress": "ok", "scaler": "ok"}
    ts, _ = check(TIMM / name, "timm", expected, epoch=d["epoch"], project="timm")
    c = ts.components
    assert c["scaler"].facts["scale"] == d["amp_scaler"]["scale"]
    assert [r["path"] for r in c["weights"].facts["roots"]] == ["state_dict"]
    assert [r["path"] for r in c["weights"].facts["ema"]] == ["state_dict_ema"]


IGNITE = PROJECTS / "ignite"


@pytest.mark.parametrize("name", ["checkpoint_6.pt", "checkpoint_8.pt"])
def test_ignite_samples(name):
    """ignite: {model, optimizer, lr_scheduler, trainer{epoch_length, iteration, max_epochs}};
    the base Engine restarts an epoch's data, so a save inside an epoch loses the position."""
    d = safe_load(IGNITE / name)
    t = d["trainer"]
    mid = t["iteration"] % t["epoch_length"] != 0
    expected = {"weights": "ok", "optimizer": "ok", "scheduler": "ok", "rng": "missing",
                "data": "missing" if mid else "not-needed", "progress": "ok",
                "scaler": "not-needed"}
    # the engine state has no epoch key: only the iteration is a stored counter
    ts, _ = check(IGNITE / name, "ignite", expected, step=t["iteration"], project="ignite")
    assert ts.components["scheduler"].facts["last_epoch"] == d["lr_scheduler"]["last_epoch"]


def test_ignite_single_object_without_a_wrapper_key():
    """ignite: model_8.pt is the bare state_dict."""
    path = IGNITE / "model_8.pt"
    sd = safe_load(path)
    ts, _ = check(path, "torch", WEIGHTS_ONLY)
    assert ts.components["weights"].facts["tensors"] == len(sd)


def test_ignite_folder_newest_first():
    iters = {n: safe_load(IGNITE / n)["trainer"]["iteration"]
             for n in ("checkpoint_6.pt", "checkpoint_8.pt")}
    entries = run_entries(str(IGNITE))
    with_counters = [e.name for e in entries if e.step is not None]
    assert with_counters == sorted(iters, key=lambda n: -iters[n])
    assert resume_reports(str(IGNITE)).reports[0].path.endswith("checkpoint_8.pt")


def test_resume_report_of_a_run_folder_is_its_newest_checkpoint():
    newest = run_entries(str(IGNITE))[0].path
    folder, alone = resume_report(str(IGNITE)), resume_report(newest)
    assert statuses(folder) == statuses(alone)


MMENGINE = PROJECTS / "mmengine" / "work_dir"


@pytest.mark.parametrize("name", ["epoch_1.pth", "epoch_2.pth"])
def test_mmengine_samples(name):
    """mmengine: meta{epoch, iter, seed, mmengine_version}, state_dict, message_hub, optimizer,
    param_schedulers; no RNG (re-seeded); an epoch-based loop resumes at an epoch boundary."""
    d = inert_load(MMENGINE / name)  # weights_only refuses builtins.getattr / HistoryBuffer
    assert "mmengine_version" in d["meta"] and not holds_rng(d)
    assert isinstance(d["param_schedulers"], list) and d["param_schedulers"]
    expected = {"weights": "ok", "optimizer": "ok", "scheduler": "ok", "rng": "missing",
                "data": "not-needed", "progress": "ok", "scaler": "not-needed"}
    ts, _ = check(MMENGINE / name, "mmengine", expected, step=d["meta"]["iter"],
                  epoch=d["meta"]["epoch"], project="mmengine")
    assert ts.components["weights"].facts["tensors"] == len(d["state_dict"])


def test_mmengine_work_dir_newest_first():
    meta = {n: inert_load(MMENGINE / n)["meta"] for n in ("epoch_1.pth", "epoch_2.pth")}
    entries = run_entries(str(MMENGINE))
    assert [e.name for e in entries] == sorted(meta, key=lambda n: -meta[n]["iter"])
    assert [e.step for e in entries] == sorted((m["iter"] for m in meta.values()), reverse=True)


def test_mmengine_run_directory_is_not_damaged():
    from ckpt_browser.cli import main

    out = io.StringIO()
    import contextlib

    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        rc = main(["inspect", str(PROJECTS / "mmengine")])
    assert rc != 5
    ckpt = open_path(str(PROJECTS / "mmengine")).checkpoint
    assert not any("is a folder" in p.message for p in ckpt.problems)


FVCORE = PROJECTS / "fvcore"


@pytest.mark.parametrize("name", ["model_0000001.pth", "model_0000003.pth", "model_final.pth"])
def test_fvcore_samples(name):
    """detectron2 plain_train_net: {model, optimizer, scheduler, iteration}; no RNG (seed_all_rng)
    and the TrainingSampler restarts its stream, so the data position is lost."""
    d = safe_load(FVCORE / name)
    assert set(d) == {"model", "optimizer", "scheduler", "iteration"}
    expected = {"weights": "ok", "optimizer": "ok", "scheduler": "ok", "rng": "missing",
                "data": "missing", "progress": "ok", "scaler": "not-needed"}
    ts, _ = check(FVCORE / name, "detectron2", expected, step=d["iteration"], project="detectron2")
    assert ts.components["scheduler"].facts["last_epoch"] == d["scheduler"]["last_epoch"]


def test_peft_checkpoint():
    """PEFT adapters: HF Trainer folder with an adapter; scaler only if training_args says fp16."""
    folder = PROJECTS / "peft" / "checkpoint-4"
    state = json.loads((folder / "trainer_state.json").read_text())
    args = inert_load(folder / "training_args.bin")  # a pickled TrainingArguments
    assert args.state["fp16"] is False
    assert not (folder / "scaler.pt").exists()
    expected = {"weights": "ok", "optimizer": "ok", "scheduler": "ok", "rng": "ok", "data": "ok",
                "progress": "ok", "scaler": "not-needed"}
    _, report = check(folder, "hf-trainer", expected, step=state["global_step"],
                      epoch=state["epoch"])
    base = json.loads((folder / "adapter_config.json").read_text())["base_model_name_or_path"]
    assert any(base in f.message for f in report.findings if f.component == "weights")


def test_deepspeed_zero3_sample():
    """DeepSpeed: module (placeholders under ZeRO-3), optimizer None (the state is in the optim
    shards), global_steps; no RNG and no data position."""
    folder = PROJECTS / "deepspeed-zero3"
    tag = (folder / "latest").read_text().strip()
    states = safe_load(folder / tag / "zero_pp_rank_0_mp_rank_00_model_states.pt")
    assert states["optimizer"] is None and states["lr_scheduler"] is None
    assert "fp16" not in states["ds_config"] and "bf16" not in states["ds_config"]
    optim = inert_load(folder / tag / "zero_pp_rank_0_mp_rank_00_optim_states.pt")
    inner = optim["optimizer_state_dict"]["optimizer_state_dict"]
    assert not initial_lr(inner)
    expected = {"weights": "ok", "optimizer": "ok", "scheduler": "not-needed", "rng": "missing",
                "data": "missing", "progress": "ok", "scaler": "not-needed"}
    check(folder, "deepspeed", expected, step=states["global_steps"])


@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:DeprecationWarning")
def test_torchscript_and_export_samples_are_weights_only():
    ts_path = PROJECTS / "torchscript" / "model.pt"
    check(ts_path, "torch", WEIGHTS_ONLY)
    want = torch.jit.load(str(ts_path)).state_dict()
    assert open_path(str(ts_path)).training.components["weights"].facts["tensors"] == len(want)
    ex_path = PROJECTS / "export" / "model.pt2"
    check(ex_path, "torch", WEIGHTS_ONLY)
    want = torch.export.load(str(ex_path)).state_dict
    ckpt = open_path(str(ex_path)).checkpoint
    assert {t.name: t.shape for t in ckpt.weights} == {k: tuple(v.shape) for k, v in want.items()}


def test_whole_module_sample():
    """torch.save of a mynet.TinyNet: its class is named, nothing is imported (FORMATS.md
    "Model weights")."""
    path = PROJECTS / "whole-module" / "model.pt"
    obj = inert_load(path)
    cls = f"{type(obj).__module__}.{type(obj).__qualname__}"
    assert cls == "mynet.TinyNet" and "mynet" not in sys.modules
    # its own _parameters / _buffers, and its children (real torch modules, rebuilt by torch)
    n = len(tensors_in(obj.state["_parameters"])) + len(tensors_in(obj.state["_buffers"])) + sum(
        len(child.state_dict()) for child in obj.state["_modules"].values())
    assert n > 0
    ts, _ = check(path, "torch", WEIGHTS_ONLY)
    assert cls in ts.components["weights"].facts["classes"]
    assert ts.components["weights"].facts["tensors"] == n
    assert "mynet" not in sys.modules


# --- faithful copies of the layouts the samples lack -------------------------------------------

def mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3))


def step(model: nn.Module, opt, n: int = 1, x=None) -> None:
    x = torch.randn(2, 4) if x is None else x
    for _ in range(n):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()


def package(tmp_path: Path, files: dict[str, str]) -> Path:
    """Write a throw-away package (files: relative path -> source) and return its root."""
    root = tmp_path / "pkg"
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


class on_path:
    """Import a throw-away package while saving; leave sys.path and sys.modules as found."""

    def __init__(self, root: Path, top: str):
        self.root, self.top = str(root), top

    def __enter__(self):
        sys.path.insert(0, self.root)
        return self

    def __exit__(self, *exc):
        sys.path.remove(self.root)
        for name in [m for m in sys.modules if m == self.top or m.startswith(self.top + ".")]:
            del sys.modules[name]


def fp16_optimizer_state(sd: dict) -> dict:
    """ultralytics/utils/torch_utils.py convert_optimizer_state_dict_to_fp16: every float32 state
    tensor except "step" cast to half."""
    for state in sd["state"].values():
        for k, v in state.items():
            if k != "step" and isinstance(v, torch.Tensor) and v.dtype is torch.float32:
                state[k] = v.half()
    return sd


ULTRALYTICS_TASKS = """
import torch.nn as nn


class DetectionModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.SiLU())

    def forward(self, x):
        return self.model(x)
"""


def ultralytics_last(tmp_path: Path) -> tuple[Path, dict]:
    """Ultralytics BaseTrainer.save_model (stored copy 00016300): model None, ema a pickled half
    DetectionModel from ultralytics.nn.tasks, fp16-cast optimizer, scaler, train_args ..."""
    root = package(tmp_path, {"ultralytics/__init__.py": "", "ultralytics/nn/__init__.py": "",
                              "ultralytics/nn/tasks.py": ULTRALYTICS_TASKS})
    weights = tmp_path / "runs" / "train" / "weights"
    weights.mkdir(parents=True)
    with on_path(root, "ultralytics"):
        from ultralytics.nn.tasks import DetectionModel  # noqa: PLC0415 - the throw-away package

        torch.manual_seed(0)
        model = DetectionModel()
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.937, nesterov=True)
        step(model, opt, x=torch.randn(1, 3, 8, 8))
        ema = copy.deepcopy(model)
        scaler = torch.amp.GradScaler("cpu")
        ckpt = {"epoch": 3, "best_fitness": np.float64(0.5), "model": None,
                "ema": copy.deepcopy(ema).half(), "updates": 12,
                "optimizer": fp16_optimizer_state(copy.deepcopy(opt.state_dict())),
                "scaler": scaler.state_dict(),
                "train_args": {"model": "yolo11n.yaml", "data": "coco8.yaml", "epochs": 10,
                               "batch": 16, "imgsz": 640, "amp": True, "seed": 0},
                "train_metrics": {"metrics/mAP50(B)": 0.1, "fitness": 0.5},
                "train_results": {"epoch": [1, 2, 3]}, "date": "2026-01-01T00:00:00",
                "version": "8.3.210",
                "git": {"root": None, "branch": None, "commit": None, "message": None,
                        "origin": None},
                "license": "AGPL-3.0 (https://ultralytics.com/license)",
                "docs": "https://docs.ultralytics.com"}
        buffer = io.BytesIO()  # serialised once, written with write_bytes
        torch.save(ckpt, buffer)
        (weights / "last.pt").write_bytes(buffer.getvalue())
        stripped = dict(ckpt)  # strip_optimizer, at the end of training
        stripped.update(epoch=-1, optimizer=None, ema=None, updates=None, scaler=None,
                        best_fitness=None, model=copy.deepcopy(ema).half())
        torch.save(stripped, weights / "best.pt")
    return weights, ckpt


def test_ultralytics_last_pt(tmp_path):
    weights, ckpt = ultralytics_last(tmp_path)
    path = weights / "last.pt"
    assert "ultralytics" not in sys.modules
    found = {(f.kind, f.path) for f in classify(pickled_root(path))}
    assert ("ema", "ema") in found and not any(k == "weights" for k, _ in found)
    # Ultralytics: no raw weights (EMA only), no RNG; schedule and data restart at the epoch
    expected = {"weights": "ok", "optimizer": "ok", "scheduler": "not-needed", "rng": "missing",
                "data": "not-needed", "progress": "ok", "scaler": "ok"}
    ts, report = check(path, "ultralytics", expected, epoch=ckpt["epoch"], project="ultralytics")
    w = ts.components["weights"].facts
    assert w["roots"] == [] and "ultralytics.nn.tasks.DetectionModel" in w["classes"]
    assert any(f.severity == "warning" and f.component == "weights" for f in report.findings)
    assert ts.components["scaler"].facts["scale"] == ckpt["scaler"]["scale"]
    moments = [t for t in open_path(str(path)).checkpoint.files[0].tensors
               if t.component == "optimizer"]
    want = {k: v.dtype for s in ckpt["optimizer"]["state"].values() for k, v in s.items()}
    assert want["momentum_buffer"] is torch.float16
    assert {t.dtype for t in moments} == {"F16"}
    assert "ultralytics" not in sys.modules


def test_ultralytics_stripped_final_is_weights_only(tmp_path):
    weights, _ = ultralytics_last(tmp_path)
    path = weights / "best.pt"
    d = pickled_root(path)
    assert d["epoch"] == -1 and d["optimizer"] is None
    ts = open_path(str(path)).training
    assert ts.framework == "ultralytics"
    assert ts.components["weights"].status == "ok"
    assert ts.components["optimizer"].status == "missing"
    report = resume_report(str(path))
    assert report.verdict == "weights-only"


YOLOV5_COMMON = """
import torch.nn as nn


class Conv(nn.Module):
    def __init__(self, c1, c2):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, 3, bias=False)
        self.bn = nn.BatchNorm2d(c2)
        self.act = nn.SiLU()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))
"""
YOLOV5_YOLO = """
import torch.nn as nn
from models.common import Conv


class DetectionModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = nn.Sequential(Conv(3, 4), nn.Conv2d(4, 2, 1))

    def forward(self, x):
        return self.model(x)
"""


def yolov5_last(tmp_path: Path) -> tuple[Path, dict]:
    """YOLOv5 train.py: model and ema are whole half modules (models.yolo.DetectionModel),
    the SGD in YOLOv5's three groups (biases, weights with decay, BN weights), opt = vars(opt);
    no scaler."""
    root = package(tmp_path, {"models/__init__.py": "", "models/common.py": YOLOV5_COMMON,
                              "models/yolo.py": YOLOV5_YOLO})
    with on_path(root, "models"):
        from models.yolo import DetectionModel  # noqa: PLC0415

        torch.manual_seed(0)
        model = DetectionModel()
        g = [], [], []  # smart_optimizer
        for v in model.modules():
            for p_name, p in v.named_parameters(recurse=False):
                if p_name == "bias":
                    g[2].append(p)
                elif p_name == "weight" and isinstance(v, nn.BatchNorm2d):
                    g[1].append(p)
                else:
                    g[0].append(p)
        opt = torch.optim.SGD(g[2], lr=0.01, momentum=0.937, nesterov=True)
        opt.add_param_group({"params": g[0], "weight_decay": 0.0005})
        opt.add_param_group({"params": g[1], "weight_decay": 0.0})
        step(model, opt, x=torch.randn(1, 3, 8, 8))
        ema = copy.deepcopy(model)
        ckpt = {"epoch": 2, "best_fitness": np.array([0.25]),
                "model": copy.deepcopy(model).half(), "ema": copy.deepcopy(ema).half(),
                "updates": 8, "optimizer": opt.state_dict(),
                "opt": {"weights": "yolov5s.pt", "cfg": "", "data": "coco128.yaml",
                        "hyp": {"lr0": 0.01, "momentum": 0.937}, "epochs": 3, "batch_size": 16,
                        "imgsz": 640, "optimizer": "SGD", "seed": 0, "save_dir": "runs/train/exp"},
                "git": {"remote": None, "branch": None, "commit": None},
                "date": "2026-01-01T00:00:00"}
        path = tmp_path / "last.pt"
        torch.save(ckpt, path)
        stripped = dict(ckpt)
        stripped.update(epoch=-1, optimizer=None, ema=None, updates=None)
        torch.save(stripped, tmp_path / "best.pt")
    return path, ckpt


def test_yolov5_last_pt(tmp_path):
    path, ckpt = yolov5_last(tmp_path)
    found = {(f.kind, f.path) for f in classify(pickled_root(path))}
    assert {("weights", "model"), ("ema", "ema"), ("optimizer", "optimizer")} <= found
    ts = open_path(str(path)).training
    assert (ts.framework, ts.epoch) == ("yolov5", ckpt["epoch"])
    s = statuses(ts)
    assert (s["weights"], s["optimizer"], s["rng"], s["progress"]) == ("ok", "ok", "missing", "ok")
    w = ts.components["weights"].facts
    assert "models.yolo.DetectionModel" in w["classes"] and len(w["ema"]) == 1
    opt = ts.components["optimizer"].facts
    groups = ckpt["optimizer"]["param_groups"]
    assert [g["params"] for g in opt["param_groups"]] == [len(g["params"]) for g in groups]
    assert resume_report(str(path)).verdict == "inexact"
    assert "models" not in sys.modules


def test_yolov5_lacks_its_scaler(tmp_path):
    path, ckpt = yolov5_last(tmp_path)
    assert "scaler" not in ckpt
    weights = open_path(str(path)).checkpoint.weights
    floats = {t.dtype for t in weights if t.dtype.startswith(("F", "BF"))}
    assert floats == {"F16"}  # .half() modules: fp16 evidence
    ts = open_path(str(path)).training
    assert ts.components["scaler"].status == "missing"


def test_yolov5_stripped_final_is_weights_only(tmp_path):
    yolov5_last(tmp_path)
    report = resume_report(str(tmp_path / "best.pt"))
    assert report.verdict == "weights-only"
    assert report.components["optimizer"].status == "missing"


def fairseq_checkpoint(tmp_path: Path, fp16: bool = True) -> tuple[Path, dict]:
    """fairseq: Trainer.state_dict + checkpoint_utils.save_checkpoint (3d262bb2): args None,
    cfg a plain dict, optimizer_history[-1]{lr_scheduler_state, num_updates}, extra_state
    {train_iterator, ...}, last_optimizer_state (FP16Optimizer adds loss_scale)."""
    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=5e-4, betas=(0.9, 0.98))
    step(model, opt, n=3)
    osd = opt.state_dict()
    if fp16:
        osd["loss_scale"] = 128.0
    ckpt = {"args": None,
            "cfg": {"_name": None,
                    "common": {"fp16": fp16, "seed": 1, "log_interval": 100},
                    "optimization": {"max_update": 100, "update_freq": [1], "lr": [0.0005]},
                    "dataset": {"max_tokens": 4096, "batch_size": None},
                    "checkpoint": {"save_dir": "checkpoints", "no_save_optimizer_state": False},
                    "optimizer": {"_name": "adam", "adam_betas": "(0.9, 0.98)"},
                    "lr_scheduler": {"_name": "inverse_sqrt", "warmup_updates": 4000}},
            "model": model.state_dict(), "criterion": None,
            "optimizer_history": [{"criterion_name": "CrossEntropyCriterion",
                                   "optimizer_name": "FP16Optimizer" if fp16 else "FairseqAdam",
                                   "lr_scheduler_state": {"best": 3.5}, "num_updates": 3}],
            "task_state": {},
            "extra_state": {"metrics": {}, "previous_training_time": 12.5,
                            "train_iterator": {"version": 2, "epoch": 1,
                                               "iterations_in_epoch": 3, "shuffle": True},
                            "val_loss": 3.5, "best": 3.5},
            "last_optimizer_state": osd}
    (tmp_path / "checkpoints").mkdir()
    path = tmp_path / "checkpoints" / "checkpoint_last.pt"
    torch.save(ckpt, path)
    return path, ckpt


def test_fairseq_checkpoint_last(tmp_path):
    """fairseq: nothing missing (RNG reseeded with seed + num_updates every update)."""
    path, ckpt = fairseq_checkpoint(tmp_path)
    expected = {"weights": "ok", "optimizer": "ok", "scheduler": "ok", "rng": "not-needed",
                "data": "ok", "progress": "ok", "scaler": "ok"}
    ts, report = check(path, "fairseq", expected,
                       step=ckpt["optimizer_history"][-1]["num_updates"], project="fairseq")
    assert ts.components["scaler"].facts["loss_scale"] == ckpt["last_optimizer_state"]["loss_scale"]
    assert ts.components["data"].facts["state"]["iterations_in_epoch"] == 3
    assert report.verdict == "exact"


def composer_checkpoint(tmp_path: Path) -> tuple[Path, dict]:
    """Composer: {"state": State.state_dict(), "rng": [per-rank dicts]}; FQN-keyed optimizers
    (get_optimizer_state_dict), schedulers by qualname, Timestamp.state_dict() (with its
    timedeltas, composer/core/time.py), rank_zero_seed, dataset_state{train: StreamingDataset
    state}."""
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

    model = mlp()
    opt = torch.optim.AdamW(model.parameters())
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    for _ in range(3):
        step(model, opt)
        sched.step()
    wct = datetime.timedelta(seconds=5)
    timestamp = {"iteration": 0, "epoch": 1, "batch": 3, "sample": 6, "token": 0,
                 "epoch_in_iteration": 1, "token_in_iteration": 0, "batch_in_epoch": 0,
                 "sample_in_epoch": 0, "token_in_epoch": 0, "total_wct": wct,
                 "iteration_wct": wct, "epoch_wct": wct, "batch_wct": wct}
    ckpt = {"state": {"model": model.state_dict(),
                      "optimizers": {"AdamW": get_optimizer_state_dict(model, opt)},
                      "schedulers": {"LambdaLR": sched.state_dict()},
                      "algorithms": [], "callbacks": {}, "scaler": {},
                      "timestamp": timestamp, "rank_zero_seed": 42, "train_metrics": {},
                      "eval_metrics": {}, "run_name": "tiny-run",
                      "dataset_state": {"train": {"epoch": 1, "sample_in_epoch": 0,
                                                  "num_canonical_nodes": 1, "shuffle_seed": 9176,
                                                  "initial_physical_nodes": 1}, "eval": {}},
                      "integrations": {},
                      "metadata": {"torch_version": torch.__version__, "device": "cpu",
                                   "precision": "fp32", "world_size": 1,
                                   "device_train_microbatch_size": 2,
                                   "train_dataloader_batch_size": 2}},
            "rng": [{"python": random.getstate(), "numpy": np.random.get_state(),
                     "torch": torch.get_rng_state()}]}
    path = tmp_path / "ep1-ba3-rank0.pt"
    torch.save(ckpt, path)
    return path, ckpt


def test_composer_checkpoint(tmp_path):
    """Composer: close to complete."""
    path, ckpt = composer_checkpoint(tmp_path)
    assert fingerprint(pickled_root(path)).name == "composer"
    expected = {"weights": "ok", "optimizer": "ok", "scheduler": "ok", "rng": "ok", "data": "ok",
                # state.scaler {} : a disabled GradScaler (fp32 precision)
                "progress": "ok", "scaler": "not-needed"}
    ts, report = check(path, "composer", expected, step=ckpt["state"]["timestamp"]["batch"],
                       epoch=ckpt["state"]["timestamp"]["epoch"])
    assert ts.components["rng"].facts["parts"][0]["path"] == "rng"
    names = [n for n, _ in mlp().named_parameters()]
    assert sorted(ts.components["optimizer"].facts["exp_avg"]["shapes"]) == sorted(names)
    assert report.verdict == "exact"


def torchtune_recipe_state(tmp_path: Path) -> tuple[Path, dict, nn.Module]:
    """torchtune: recipe_state.pt = {optimizer, seed, epochs_run, total_epochs, max_steps_per_epoch,
    steps_run, total_training_steps, dataloader, val_dataloader}; the weights go elsewhere."""
    model = mlp()
    opt = torch.optim.AdamW(model.parameters())
    step(model, opt, n=3)
    loader = {"_index_sampler_state": None, "_sampler_iter_state": {"samples_yielded": 6},
              "_sampler_iter_yielded": 3, "_num_yielded": 3, "_IterableDataset_len_called": None,
              "_shared_seed": None, "fetcher_state": None, "dataset_state": None,
              "_iterator_finished": False}
    state = {"optimizer": opt.state_dict(), "seed": 1234, "epochs_run": 1, "total_epochs": 2,
             "max_steps_per_epoch": None, "steps_run": 3, "total_training_steps": 6,
             "dataloader": loader, "val_dataloader": copy.deepcopy(loader)}
    folder = tmp_path / "epoch_0"
    folder.mkdir()
    path = folder / "recipe_state.pt"
    torch.save(state, path)
    return path, state, model


def test_torchtune_recipe_state_alone_has_no_weights(tmp_path):
    path, state, _ = torchtune_recipe_state(tmp_path)
    expected = {"weights": "missing", "optimizer": "ok",
                "scheduler": "missing",  # rebuilt from global_step, internals differ
                "rng": "missing",  # only the seed
                "data": "ok", "progress": "ok", "scaler": "not-needed"}
    ts, report = check(path, "torchtune", expected, step=state["steps_run"],
                       epoch=state["epochs_run"], project="torchtune")
    assert report.verdict == "broken"  # this file alone holds nothing to load


def test_torchtune_epoch_folder_with_its_weights(tmp_path):
    from safetensors.torch import save_file

    path, state, model = torchtune_recipe_state(tmp_path)
    save_file(model.state_dict(), str(path.parent / "model-00001-of-00001.safetensors"))
    expected = {"weights": "ok", "optimizer": "ok", "scheduler": "missing", "rng": "missing",
                "data": "ok", "progress": "ok", "scaler": "not-needed"}
    check(path.parent, "torchtune", expected, step=state["steps_run"], epoch=state["epochs_run"])


def test_detectron2_default_trainer(tmp_path):
    """detectron2 DefaultTrainer: {model, trainer{iteration, hooks{LRScheduler}, _trainer{iteration,
    optimizer, grad_scaler}}, iteration}, written by fvcore's Checkpointer as
    model_{iteration:07d}.pth; the LRMultiplier saves only base_lrs and last_epoch."""
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)  # detectron2's default
    step(model, opt, n=3)
    it = 99
    ckpt = {"model": model.state_dict(),
            "trainer": {"iteration": it,
                        "hooks": {"LRScheduler": {"base_lrs": [0.02], "last_epoch": it + 1}},
                        "_trainer": {"iteration": it, "optimizer": opt.state_dict(),
                                     "grad_scaler": torch.amp.GradScaler("cpu").state_dict()}},
            "iteration": it}
    path = tmp_path / f"model_{it:07d}.pth"
    torch.save(ckpt, path)
    found = {(f.kind, f.path) for f in classify(pickled_root(path))}
    assert {("scheduler", "trainer.hooks.LRScheduler"), ("optimizer", "trainer._trainer.optimizer"),
            ("scaler", "trainer._trainer.grad_scaler")} <= found
    expected = {"weights": "ok", "optimizer": "ok", "scheduler": "ok", "rng": "missing",
                "data": "missing", "progress": "ok", "scaler": "ok"}
    ts, _ = check(path, "detectron2", expected, step=it, project="detectron2")
    assert ts.components["scheduler"].facts["last_epoch"] == it + 1


def test_mmcv_1x_checkpoint(tmp_path):
    """B table mmcv 1.x: meta{mmcv_version, time, epoch, iter, config, CLASSES}, state_dict,
    optimizer (mmcv/runner/checkpoint.py save_checkpoint); no scheduler state, no RNG."""
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for g in opt.param_groups:  # LrUpdaterHook.before_run
        g.setdefault("initial_lr", g["lr"])
    step(model, opt, n=2)
    ckpt = {"meta": {"mmcv_version": "1.7.2", "time": "Thu Jan  1 00:00:00 2026", "epoch": 2,
                     "iter": 8, "config": "model = dict(type='Tiny')", "CLASSES": ("a", "b")},
            "state_dict": model.state_dict(), "optimizer": opt.state_dict()}
    path = tmp_path / "epoch_2.pth"
    torch.save(ckpt, path)
    ts = open_path(str(path)).training
    meta = ckpt["meta"]
    assert (ts.framework, ts.step, ts.epoch) == ("mmcv", meta["iter"], meta["epoch"])
    s = statuses(ts)
    assert (s["weights"], s["optimizer"], s["rng"], s["progress"]) == ("ok", "ok", "missing", "ok")
    assert s["scheduler"] != "ok" and s["scaler"] == "not-needed"
    assert resume_report(str(path)).verdict == "inexact"


def test_a_lightning_checkpoint_is_read_by_lightning_whatever_the_file_is_called(tmp_path):
    src = SAMPLES / "lightning" / "last.ckpt"
    assert "pytorch-lightning_version" in safe_load(src)
    for name in ("weights.pt", "state.bin"):
        shutil.copy(src, tmp_path / name)
        assert open_path(str(tmp_path / name)).training.framework == "lightning"
    assert open_path(str(PROJECTS / "tutorial" / "model.pt")).training.framework != "lightning"


# --- a folder of one run's single files --------------------------------------------------------

def test_a_folder_of_renamed_single_files_is_ordered_by_their_counters(tmp_path):
    """The custom-run files under other projects' names: the order comes from the counters
    inside, not from the numbers in the names."""
    early, late = CUSTOM / "ckpt_epoch1.pt", CUSTOM / "ckpt_epoch3.pt"
    d_early, d_late = safe_load(early), safe_load(late)
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(early, run / "model_5.pth")  # its name says 5, it holds step 4
    shutil.copy(late, run / "checkpoint-3.pth.tar")  # its name says 3, it holds step 12
    shutil.copy(late, run / "checkpoint.pth")
    entries = run_entries(str(run))
    assert {e.name for e in entries} == {"model_5.pth", "checkpoint-3.pth.tar", "checkpoint.pth"}
    assert entries[-1].name == "model_5.pth"
    assert [e.step for e in entries] == [d_late["global_step"]] * 2 + [d_early["global_step"]]
    timeline = resume_reports(str(run))
    assert [r.step for r in timeline.reports] == [e.step for e in entries]
    assert timeline.newest_exact is not None
    assert timeline.newest_exact.step == d_late["global_step"]
