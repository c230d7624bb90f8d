#!/usr/bin/env python
"""Regenerate the single-project checkpoints in ``sample_checkpoints/projects/``.

Usage (from any working directory)::

    pip install "torch==2.13.0" numpy safetensors pytorch-ignite mmengine fvcore peft \
        transformers accelerate deepspeed huggingface_hub pyyaml     # pin torch on the same line
    pip install --no-deps timm                                         # timm wants torchvision
    python sample_checkpoints/make_project_samples.py                  # all samples
    python sample_checkpoints/make_project_samples.py nanogpt timm     # only some (names below)

None of these packages is a dependency of ckpt-browser; they are only needed to rebuild the
samples. Each sample is built in its own fresh Python process, then checked with safe loaders
only (``torch.load(weights_only=True)``, with explicit ``torch.serialization.safe_globals``
allowlists where a project needs them, or the static scan
``torch.serialization.get_unsafe_globals_in_checkpoint``). Every output folder is deleted first,
then rebuilt; nothing outside ``sample_checkpoints/projects/`` is touched.

Samples (name -> folder under ``projects/``):

``state-dict``    -> ``state-dict/model.pt``: ``torch.save(model.state_dict())`` (REAL torch).
``tutorial``      -> ``tutorial/model.pt``: the PyTorch recipe "saving and loading a general
                     checkpoint" (pytorch/tutorials@0a7e6866), a FAITHFUL COPY with a shrunk Net.
``custom-run``    -> ``custom-run/ckpt_epoch{1,3}.pt``: a hand-written loop (AdamW, OneCycleLR per
                     batch, ``torch.amp.GradScaler("cpu")``, RNG states), REAL torch.
``nanogpt``       -> ``nanogpt/ckpt.pt``: FAITHFUL COPY of karpathy/nanoGPT@3adf61e1 ``model.py``,
                     ``train.py`` and ``configurator.py``, run as a script (``torch.compile`` with
                     ``backend="eager"``).
``torchvision``   -> ``torchvision-classification/``: FAITHFUL COPY of pytorch/vision
                     ``references/classification/train.py`` + ``utils.py`` checkpoint code.
``timm``          -> ``timm/``: REAL ``timm.utils.CheckpointSaver``/``ModelEmaV2``/``NativeScaler``
                     (timm's own files, imported without ``timm/__init__``: see below).
``ignite``        -> ``ignite/``: REAL ``ignite.handlers.Checkpoint`` + ``DiskSaver`` on a REAL
                     ``create_supervised_trainer`` engine.
``mmengine``      -> ``mmengine/``: REAL mmengine ``Runner`` with ``CheckpointHook``.
``fvcore``        -> ``fvcore/``: REAL ``fvcore.common.checkpoint.Checkpointer`` +
                     ``PeriodicCheckpointer``, driven like detectron2's ``tools/plain_train_net.py``.
``peft``          -> ``peft/checkpoint-4/``: REAL ``transformers.Trainer`` on a peft LoRA model.
``deepspeed-zero3``-> ``deepspeed-zero3/``: REAL DeepSpeed ZeRO-3 from 2 gloo ranks (CPU accelerator).
``torchscript``   -> ``torchscript/model.pt``: REAL ``torch.jit.save(torch.jit.script(...))``.
``export``        -> ``export/model.pt2``: REAL ``torch.export.save(torch.export.export(...))``.
``legacy``        -> ``legacy/checkpoint.pth``: the tutorial dict saved in the pre-zip format.
``whole-module``  -> ``whole-module/model.pt``: ``torch.save(model)`` of ``mynet.TinyNet``.

timm: ``import timm.utils`` needs torchvision (``timm/__init__`` imports ``timm.layers``, and
``timm/utils/model.py`` imports ``torchvision.ops.misc.FrozenBatchNorm2d``), and PyPI's torchvision
does not import beside this torch build. The generator therefore registers ``timm`` and
``timm.utils`` as bare packages (their ``__init__`` files are not run) and imports timm's own
submodules ``timm.utils.checkpoint_saver``, ``cuda``, ``model_ema``, ``distributed``, ``random``,
``summary``, ``metrics``, ``misc`` and ``timm.scheduler`` from the installed wheel, unchanged.
``timm.utils.model`` is the only stand-in: it holds ``unwrap_model`` and ``get_state_dict``, compiled
from the installed ``timm/utils/model.py`` source (the two functions only).

Paths: every path handed to a framework is relative; runs that need a scratch directory
(nanoGPT's ``data/``, mmengine's ``work_dir``, timm's ``output/train``) use a temporary directory
outside the repository and only the checkpoint files are copied out. mmengine gets
``CheckpointHook(out_dir=".")`` (otherwise it records its absolute ``work_dir`` in the checkpoint).
TorchScript debug info and ``torch.export`` stack traces name source files; the generator makes
those names relative (``torch/nn/modules/linear.py``, ``make_project_samples.py``). The script
fails if any written file (or any member of a zip archive) contains the repository path, the home
directory, ``/tmp/``, the Python prefix / site-packages path or the host name.

Verification never calls ``torch.load(weights_only=False)``. Files that need a dangerous global
(mmengine's ``builtins.getattr``) are described with ``_inert_load``, an unpickler that resolves no
global at all. TorchScript and ``torch.export`` archives are opened with ``torch.jit.load`` and
``torch.export.load`` (no Python pickles of arbitrary classes).

Determinism: python ``random``, numpy and torch are seeded, torch runs single-threaded. Two runs
give byte-identical files except ``legacy/checkpoint.pth`` (the pre-zip format names storages by
their memory address, ``str(storage._cdata)``) and ``mmengine/work_dir/epoch_*.pth`` (``meta.time``
and the timestamped ``experiment_name``).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import io
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import types
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROJ = HERE / "projects"
SEED = 1234

FOLDERS = {
    "state-dict": "state-dict",
    "tutorial": "tutorial",
    "custom-run": "custom-run",
    "nanogpt": "nanogpt",
    "torchvision": "torchvision-classification",
    "timm": "timm",
    "ignite": "ignite",
    "mmengine": "mmengine",
    "fvcore": "fvcore",
    "peft": "peft",
    "deepspeed-zero3": "deepspeed-zero3",
    "torchscript": "torchscript",
    "export": "export",
    "legacy": "legacy",
    "whole-module": "whole-module",
}
ORDER = list(FOLDERS)


# --------------------------------------------------------------------------------------
# helpers (the ones both generators need are make_training_samples.py's)
# --------------------------------------------------------------------------------------

from make_training_samples import (  # noqa: E402 - the script's own folder is on sys.path
    _RandomTokens, _check, _deterministic_torch, _free_port, _numpy_safe_globals,
    _seed_everything, _tree,
)



def _numpy_dtype_classes():
    """weights_only also checks the class of each rebuilt numpy dtype (numpy.dtypes.Float64DType, ...),
    which get_unsafe_globals_in_checkpoint does not list: the pickle only names numpy.dtype."""
    import numpy as np

    return [type(np.dtype(t)) for t in (np.float64, np.float32, np.int64, np.int32, np.bool_)]


def _safe_load(path: Path, extra_globals=()):
    import torch

    extra = list(extra_globals)
    if any(getattr(g, "__module__", "").startswith("numpy") for g in extra):
        extra += _numpy_dtype_classes()
    with torch.serialization.safe_globals(_numpy_safe_globals() + extra):
        return torch.load(path, weights_only=True, map_location="cpu")


def _needles() -> list[bytes]:
    needles = {str(HERE), str(HERE.parent), str(Path.home()), "/tmp/", sys.prefix, sys.base_prefix,
               sysconfig.get_paths()["purelib"]}
    host = socket.gethostname()
    if len(host) >= 6:
        needles.add(host)
    return sorted(n.encode() for n in needles if n and n != "/")


def _check_no_abs_paths(root: Path) -> None:
    """Fail if a file, or any member of a zip archive (torch zips compress some records), names a
    host path."""
    needles = _needles()
    for p in sorted(root.rglob("*")):
        if not p.is_file():
            continue
        blobs = [(str(p), p.read_bytes())]
        if zipfile.is_zipfile(p):
            with zipfile.ZipFile(p) as z:
                blobs += [(f"{p}!{n}", z.read(n)) for n in z.namelist()]
        for where, blob in blobs:
            for n in needles:
                if n in blob:
                    sys.exit(f"{where} contains {n!r}")


def _count_tensors(obj) -> int:
    import torch

    if isinstance(obj, torch.Tensor):
        return 1
    if isinstance(obj, dict):
        return sum(_count_tensors(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_count_tensors(v) for v in obj)
    return 0


def _unsafe(path: Path) -> list[str]:
    import torch

    return sorted(torch.serialization.get_unsafe_globals_in_checkpoint(str(path)))


def _inert_load(path: Path):
    """Unpickle a torch zip's data.pkl WITHOUT resolving any global: every class or callable named in
    the pickle becomes an inert record (a dict subclass named after it), and tensors become records of
    `torch._utils._rebuild_tensor_v2` whose args hold the storage id and the shape. Used only to
    describe files that `weights_only=True` refuses because they need a dangerous global such as
    `builtins.getattr`; nothing in the file is ever executed."""
    import pickle

    class Rec(dict):
        name = "?"

        def __init__(self, *args, **kwargs):
            super().__init__()
            self.args = args

        def __setstate__(self, state):
            self.state = state

        def append(self, v):
            self.setdefault("_items", []).append(v)

        def extend(self, vs):
            self.setdefault("_items", []).extend(vs)

        def __repr__(self):
            return f"<{self.name}>"

    classes: dict[str, type] = {}

    class Inert(pickle.Unpickler):
        def find_class(self, module, name):
            dotted = f"{module}.{name}"
            if dotted in ("collections.OrderedDict",):
                import collections

                return collections.OrderedDict
            if dotted not in classes:
                classes[dotted] = type(name, (Rec,), {"name": dotted})
            return classes[dotted]

        def persistent_load(self, pid):
            return ("storage",) + tuple(str(x) for x in pid[1:])

    with zipfile.ZipFile(path) as z:
        pkl = next(n for n in z.namelist() if n.endswith("/data.pkl"))
        return Inert(io.BytesIO(z.read(pkl))).load()


def _count_inert_tensors(obj) -> int:
    if getattr(obj, "name", "") == "torch._utils._rebuild_tensor_v2":
        return 1
    if isinstance(obj, dict):
        return sum(_count_inert_tensors(v) for v in obj.values()) + sum(_count_inert_tensors(v) for v in getattr(obj, "args", ()))
    if isinstance(obj, (list, tuple)):
        return sum(_count_inert_tensors(v) for v in obj)
    return 0


def _resolve(dotted: str):
    mod, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(mod), name)


def _describe(path: Path, obj, unsafe: list[str]) -> None:
    keys = list(obj) if isinstance(obj, dict) else type(obj).__name__
    print(f"  {path.name}: {path.stat().st_size} B, top-level {keys}, {_count_tensors(obj)} tensors, "
          f"unsafe globals {unsafe}")


def _scratch() -> Path:
    """A scratch directory outside the repository (mmengine appends `git rev-parse HEAD` of the
    cwd to its version string, so runs must not happen inside this git checkout)."""
    return Path(tempfile.mkdtemp(prefix="ckpt-project-samples-"))


# --------------------------------------------------------------------------------------
# 1. plain state_dict
# --------------------------------------------------------------------------------------


def build_state_dict(out: Path) -> None:
    import torch
    import torch.nn as nn

    _seed_everything()
    _deterministic_torch()
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 4), torch.randn(8, 2)
    nn.functional.mse_loss(model(x), y).backward()
    opt.step()
    out.mkdir(parents=True)
    os.chdir(out)
    torch.save(model.state_dict(), "model.pt")
    verify_state_dict(out)


def verify_state_dict(out: Path) -> None:
    f = out / "model.pt"
    _check(_unsafe(f) == [], "state-dict unsafe globals")
    sd = _safe_load(f)
    _check(list(sd) == ["0.weight", "0.bias", "2.weight", "2.bias"], f"keys {list(sd)}")
    _check(type(sd).__name__ == "OrderedDict", "OrderedDict")
    _describe(f, sd, [])


# --------------------------------------------------------------------------------------
# 2. PyTorch tutorial "saving and loading a general checkpoint" (+ 14. legacy format)
#    pytorch/tutorials @ 0a7e6866, recipes_source/recipes/saving_and_loading_a_general_checkpoint.py
# --------------------------------------------------------------------------------------


def _tutorial_checkpoint() -> dict:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import torch.optim as optim

    class Net(nn.Module):
        # The recipe's Net with smaller layers (recipe: conv 3->6->16, fc 400->120->84->10,
        # 62,006 parameters; here conv 3->2->4, fc 100->12->8->10, 1,762 parameters).
        def __init__(self):
            super(Net, self).__init__()
            self.conv1 = nn.Conv2d(3, 2, 5)
            self.pool = nn.MaxPool2d(2, 2)
            self.conv2 = nn.Conv2d(2, 4, 5)
            self.fc1 = nn.Linear(4 * 5 * 5, 12)
            self.fc2 = nn.Linear(12, 8)
            self.fc3 = nn.Linear(8, 10)

        def forward(self, x):
            x = self.pool(F.relu(self.conv1(x)))
            x = self.pool(F.relu(self.conv2(x)))
            x = x.flatten(start_dim=1)
            x = F.relu(self.fc1(x))
            x = F.relu(self.fc2(x))
            x = self.fc3(x)
            return x

    _seed_everything()
    _deterministic_torch()
    net = Net()
    optimizer = optim.SGD(net.parameters(), lr=0.001, momentum=0.9)
    # The recipe saves an untrained net; 3 real SGD steps on random 32x32 images are added here
    # so the optimizer state holds momentum buffers.
    g = torch.Generator().manual_seed(SEED)
    for _ in range(3):
        images, labels = torch.randn(4, 3, 32, 32, generator=g), torch.randint(0, 10, (4,), generator=g)
        optimizer.zero_grad()
        loss = F.cross_entropy(net(images), labels)
        loss.backward()
        optimizer.step()

    # Additional information (the recipe's literal values)
    EPOCH = 5
    LOSS = 0.4
    return {
        'epoch': EPOCH,
        'model_state_dict': net.state_dict(),
        'optimizer_state_dict': optimizer.state_dict(),
        'loss': LOSS,
    }


def build_tutorial(out: Path) -> None:
    import torch

    ckpt = _tutorial_checkpoint()
    out.mkdir(parents=True)
    os.chdir(out)
    PATH = "model.pt"
    torch.save(ckpt, PATH)
    verify_tutorial(out / PATH)


def verify_tutorial(f: Path, legacy: bool = False) -> None:
    unsafe = [] if legacy else _unsafe(f)
    _check(unsafe == [], f"tutorial unsafe globals {unsafe}")
    ck = _safe_load(f)
    _check(list(ck) == ["epoch", "model_state_dict", "optimizer_state_dict", "loss"], f"keys {list(ck)}")
    _check(ck["epoch"] == 5 and ck["loss"] == 0.4, "epoch/loss")
    osd = ck["optimizer_state_dict"]
    _check(len(osd["state"]) == 10 and all("momentum_buffer" in s for s in osd["state"].values()), "momentum buffers")
    _check(osd["param_groups"][0]["momentum"] == 0.9 and osd["param_groups"][0]["lr"] == 0.001, "SGD group")
    _describe(f, ck, unsafe)


def build_legacy(out: Path) -> None:
    import torch

    ckpt = _tutorial_checkpoint()
    out.mkdir(parents=True)
    os.chdir(out)
    torch.save(ckpt, "checkpoint.pth", _use_new_zipfile_serialization=False)
    verify_legacy(out)


def verify_legacy(out: Path) -> None:
    f = out / "checkpoint.pth"
    _check(not zipfile.is_zipfile(f), "legacy file must not be a zip")
    with open(f, "rb") as fh:
        _check(fh.read(2) == b"\x80\x02", "legacy files start with a protocol-2 pickle (the magic number)")
    verify_tutorial(f, legacy=True)
    tut = PROJ / FOLDERS["tutorial"] / "model.pt"
    if tut.exists():
        import torch

        a, b = _safe_load(f), _safe_load(tut)
        same = all(torch.equal(a["model_state_dict"][k], b["model_state_dict"][k]) for k in a["model_state_dict"])
        _check(same, "legacy tensors equal tutorial/model.pt")
        print("  tensors identical to tutorial/model.pt")


# --------------------------------------------------------------------------------------
# 3. a custom training loop nobody named
# --------------------------------------------------------------------------------------


def build_custom_run(out: Path) -> None:
    import numpy as np
    import torch
    import torch.nn as nn
    from torch.utils.data import DataLoader, TensorDataset

    _seed_everything()
    _deterministic_torch()
    model = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Linear(16, 3))
    x, y = torch.randn(32, 6), torch.randint(0, 3, (32,))
    loader = DataLoader(TensorDataset(x, y), batch_size=8, shuffle=True)
    epochs = 3
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, epochs=epochs, steps_per_epoch=len(loader))
    scaler = torch.amp.GradScaler("cpu")  # enabled on CPU in torch 2.13
    _check(scaler.is_enabled(), "cpu GradScaler enabled")
    out.mkdir(parents=True)
    os.chdir(out)
    s = 0
    for e in range(1, epochs + 1):
        for xb, yb in loader:
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.float16):
                loss = nn.functional.cross_entropy(model(xb), yb)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            sched.step()
            s += 1
        if e in (1, 3):
            torch.save({
                "model": model.state_dict(),
                "optim": opt.state_dict(),
                "sched": sched.state_dict(),
                "scaler": scaler.state_dict(),
                "rng_state": {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()},
                "epoch": e,
                "global_step": s,
            }, f"ckpt_epoch{e}.pt")
    verify_custom_run(out)


def verify_custom_run(out: Path) -> None:
    names = sorted(p.name for p in out.iterdir())
    _check(names == ["ckpt_epoch1.pt", "ckpt_epoch3.pt"], f"custom-run files {names}")
    for n, (e, s) in zip(names, [(1, 4), (3, 12)]):
        f = out / n
        unsafe = _unsafe(f)
        ck = _safe_load(f)
        _check(list(ck) == ["model", "optim", "sched", "scaler", "rng_state", "epoch", "global_step"], f"keys {list(ck)}")
        _check(ck["epoch"] == e and ck["global_step"] == s, "epoch/global_step")
        _check(set(ck["scaler"]) == {"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"}, "scaler")
        _check(ck["sched"]["last_epoch"] == s and ck["sched"]["total_steps"] == 12, "OneCycleLR steps")
        _describe(f, ck, unsafe)
        print(f"    scaler {ck['scaler']}; sched keys {sorted(ck['sched'])}")


# --------------------------------------------------------------------------------------
# 4. nanoGPT: faithful copies of karpathy/nanoGPT @ 3adf61e1 model.py, train.py, configurator.py
#    Only changes: torch.compile(model, backend="eager") (CPU without a C++ toolchain for
#    inductor), marked "# CHANGED". The files are written to a scratch dir and run as a script.
# --------------------------------------------------------------------------------------

NANOGPT_MODEL_PY = r'''"""
Full definition of a GPT Language Model, all of it in this single file.
References:
1) the official GPT-2 TensorFlow implementation released by OpenAI:
https://github.com/openai/gpt-2/blob/master/src/model.py
2) huggingface/transformers PyTorch implementation:
https://github.com/huggingface/transformers/blob/main/src/transformers/models/gpt2/modeling_gpt2.py
"""

import math
import inspect
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.nn import functional as F

class LayerNorm(nn.Module):
    """ LayerNorm but with an optional bias. PyTorch doesn't support simply bias=False """

    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, input):
        return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)

class CausalSelfAttention(nn.Module):

    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        # key, query, value projections for all heads, but in a batch
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        # output projection
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        # regularization
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.dropout = config.dropout
        # flash attention make GPU go brrrrr but support is only in PyTorch >= 2.0
        self.flash = hasattr(torch.nn.functional, 'scaled_dot_product_attention')
        if not self.flash:
            print("WARNING: using slow attention. Flash Attention requires PyTorch >= 2.0")
            # causal mask to ensure that attention is only applied to the left in the input sequence
            self.register_buffer("bias", torch.tril(torch.ones(config.block_size, config.block_size))
                                        .view(1, 1, config.block_size, config.block_size))

    def forward(self, x):
        B, T, C = x.size() # batch size, sequence length, embedding dimensionality (n_embd)

        # calculate query, key, values for all heads in batch and move head forward to be the batch dim
        q, k, v  = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) # (B, nh, T, hs)

        # causal self-attention; Self-attend: (B, nh, T, hs) x (B, nh, hs, T) -> (B, nh, T, T)
        if self.flash:
            # efficient attention using Flash Attention CUDA kernels
            y = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=self.dropout if self.training else 0, is_causal=True)
        else:
            # manual implementation of attention
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:,:,:T,:T] == 0, float('-inf'))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C) # re-assemble all head outputs side by side

        # output projection
        y = self.resid_dropout(self.c_proj(y))
        return y

class MLP(nn.Module):

    def __init__(self, config):
        super().__init__()
        self.c_fc    = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu    = nn.GELU()
        self.c_proj  = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        x = self.c_fc(x)
        x = self.gelu(x)
        x = self.c_proj(x)
        x = self.dropout(x)
        return x

class Block(nn.Module):

    def __init__(self, config):
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x

@dataclass
class GPTConfig:
    block_size: int = 1024
    vocab_size: int = 50304 # GPT-2 vocab_size of 50257, padded up to nearest multiple of 64 for efficiency
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    dropout: float = 0.0
    bias: bool = True # True: bias in Linears and LayerNorms, like GPT-2. False: a bit better and faster

class GPT(nn.Module):

    def __init__(self, config):
        super().__init__()
        assert config.vocab_size is not None
        assert config.block_size is not None
        self.config = config

        self.transformer = nn.ModuleDict(dict(
            wte = nn.Embedding(config.vocab_size, config.n_embd),
            wpe = nn.Embedding(config.block_size, config.n_embd),
            drop = nn.Dropout(config.dropout),
            h = nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f = LayerNorm(config.n_embd, bias=config.bias),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        # with weight tying when using torch.compile() some warnings get generated:
        # "UserWarning: functional_call was passed multiple values for tied weights.
        # This behavior is deprecated and will be an error in future versions"
        # not 100% sure what this is, so far seems to be harmless. TODO investigate
        self.transformer.wte.weight = self.lm_head.weight # https://paperswithcode.com/method/weight-tying

        # init all weights
        self.apply(self._init_weights)
        # apply special scaled init to the residual projections, per GPT-2 paper
        for pn, p in self.named_parameters():
            if pn.endswith('c_proj.weight'):
                torch.nn.init.normal_(p, mean=0.0, std=0.02/math.sqrt(2 * config.n_layer))

        # report number of parameters
        print("number of parameters: %.2fM" % (self.get_num_params()/1e6,))

    def get_num_params(self, non_embedding=True):
        """
        Return the number of parameters in the model.
        For non-embedding count (default), the position embeddings get subtracted.
        The token embeddings would too, except due to the parameter sharing these
        params are actually used as weights in the final layer, so we include them.
        """
        n_params = sum(p.numel() for p in self.parameters())
        if non_embedding:
            n_params -= self.transformer.wpe.weight.numel()
        return n_params

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        device = idx.device
        b, t = idx.size()
        assert t <= self.config.block_size, f"Cannot forward sequence of length {t}, block size is only {self.config.block_size}"
        pos = torch.arange(0, t, dtype=torch.long, device=device) # shape (t)

        # forward the GPT model itself
        tok_emb = self.transformer.wte(idx) # token embeddings of shape (b, t, n_embd)
        pos_emb = self.transformer.wpe(pos) # position embeddings of shape (t, n_embd)
        x = self.transformer.drop(tok_emb + pos_emb)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)

        if targets is not None:
            # if we are given some desired targets also calculate the loss
            logits = self.lm_head(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        else:
            # inference-time mini-optimization: only forward the lm_head on the very last position
            logits = self.lm_head(x[:, [-1], :]) # note: using list [-1] to preserve the time dim
            loss = None

        return logits, loss

    def crop_block_size(self, block_size):
        # model surgery to decrease the block size if necessary
        # e.g. we may load the GPT2 pretrained model checkpoint (block size 1024)
        # but want to use a smaller block size for some smaller, simpler model
        assert block_size <= self.config.block_size
        self.config.block_size = block_size
        self.transformer.wpe.weight = nn.Parameter(self.transformer.wpe.weight[:block_size])
        for block in self.transformer.h:
            if hasattr(block.attn, 'bias'):
                block.attn.bias = block.attn.bias[:,:,:block_size,:block_size]

    @classmethod
    def from_pretrained(cls, model_type, override_args=None):
        assert model_type in {'gpt2', 'gpt2-medium', 'gpt2-large', 'gpt2-xl'}
        override_args = override_args or {} # default to empty dict
        # only dropout can be overridden see more notes below
        assert all(k == 'dropout' for k in override_args)
        from transformers import GPT2LMHeadModel
        print("loading weights from pretrained gpt: %s" % model_type)

        # n_layer, n_head and n_embd are determined from model_type
        config_args = {
            'gpt2':         dict(n_layer=12, n_head=12, n_embd=768),  # 124M params
            'gpt2-medium':  dict(n_layer=24, n_head=16, n_embd=1024), # 350M params
            'gpt2-large':   dict(n_layer=36, n_head=20, n_embd=1280), # 774M params
            'gpt2-xl':      dict(n_layer=48, n_head=25, n_embd=1600), # 1558M params
        }[model_type]
        print("forcing vocab_size=50257, block_size=1024, bias=True")
        config_args['vocab_size'] = 50257 # always 50257 for GPT model checkpoints
        config_args['block_size'] = 1024 # always 1024 for GPT model checkpoints
        config_args['bias'] = True # always True for GPT model checkpoints
        # we can override the dropout rate, if desired
        if 'dropout' in override_args:
            print(f"overriding dropout rate to {override_args['dropout']}")
            config_args['dropout'] = override_args['dropout']
        # create a from-scratch initialized minGPT model
        config = GPTConfig(**config_args)
        model = GPT(config)
        sd = model.state_dict()
        sd_keys = sd.keys()
        sd_keys = [k for k in sd_keys if not k.endswith('.attn.bias')] # discard this mask / buffer, not a param

        # init a huggingface/transformers model
        model_hf = GPT2LMHeadModel.from_pretrained(model_type)
        sd_hf = model_hf.state_dict()

        # copy while ensuring all of the parameters are aligned and match in names and shapes
        sd_keys_hf = sd_hf.keys()
        sd_keys_hf = [k for k in sd_keys_hf if not k.endswith('.attn.masked_bias')] # ignore these, just a buffer
        sd_keys_hf = [k for k in sd_keys_hf if not k.endswith('.attn.bias')] # same, just the mask (buffer)
        transposed = ['attn.c_attn.weight', 'attn.c_proj.weight', 'mlp.c_fc.weight', 'mlp.c_proj.weight']
        # basically the openai checkpoints use a "Conv1D" module, but we only want to use a vanilla Linear
        # this means that we have to transpose these weights when we import them
        assert len(sd_keys_hf) == len(sd_keys), f"mismatched keys: {len(sd_keys_hf)} != {len(sd_keys)}"
        for k in sd_keys_hf:
            if any(k.endswith(w) for w in transposed):
                # special treatment for the Conv1D weights we need to transpose
                assert sd_hf[k].shape[::-1] == sd[k].shape
                with torch.no_grad():
                    sd[k].copy_(sd_hf[k].t())
            else:
                # vanilla copy over the other parameters
                assert sd_hf[k].shape == sd[k].shape
                with torch.no_grad():
                    sd[k].copy_(sd_hf[k])

        return model

    def configure_optimizers(self, weight_decay, learning_rate, betas, device_type):
        # start with all of the candidate parameters
        param_dict = {pn: p for pn, p in self.named_parameters()}
        # filter out those that do not require grad
        param_dict = {pn: p for pn, p in param_dict.items() if p.requires_grad}
        # create optim groups. Any parameters that is 2D will be weight decayed, otherwise no.
        # i.e. all weight tensors in matmuls + embeddings decay, all biases and layernorms don't.
        decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
        nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
        optim_groups = [
            {'params': decay_params, 'weight_decay': weight_decay},
            {'params': nodecay_params, 'weight_decay': 0.0}
        ]
        num_decay_params = sum(p.numel() for p in decay_params)
        num_nodecay_params = sum(p.numel() for p in nodecay_params)
        print(f"num decayed parameter tensors: {len(decay_params)}, with {num_decay_params:,} parameters")
        print(f"num non-decayed parameter tensors: {len(nodecay_params)}, with {num_nodecay_params:,} parameters")
        # Create AdamW optimizer and use the fused version if it is available
        fused_available = 'fused' in inspect.signature(torch.optim.AdamW).parameters
        use_fused = fused_available and device_type == 'cuda'
        extra_args = dict(fused=True) if use_fused else dict()
        optimizer = torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas, **extra_args)
        print(f"using fused AdamW: {use_fused}")

        return optimizer

    def estimate_mfu(self, fwdbwd_per_iter, dt):
        """ estimate model flops utilization (MFU) in units of A100 bfloat16 peak FLOPS """
        # first estimate the number of flops we do per iteration.
        # see PaLM paper Appendix B as ref: https://arxiv.org/abs/2204.02311
        N = self.get_num_params()
        cfg = self.config
        L, H, Q, T = cfg.n_layer, cfg.n_head, cfg.n_embd//cfg.n_head, cfg.block_size
        flops_per_token = 6*N + 12*L*H*Q*T
        flops_per_fwdbwd = flops_per_token * T
        flops_per_iter = flops_per_fwdbwd * fwdbwd_per_iter
        # express our flops throughput as ratio of A100 bfloat16 peak flops
        flops_achieved = flops_per_iter * (1.0/dt) # per second
        flops_promised = 312e12 # A100 GPU bfloat16 peak flops is 312 TFLOPS
        mfu = flops_achieved / flops_promised
        return mfu

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
        """
        Take a conditioning sequence of indices idx (LongTensor of shape (b,t)) and complete
        the sequence max_new_tokens times, feeding the predictions back into the model each time.
        Most likely you'll want to make sure to be in model.eval() mode of operation for this.
        """
        for _ in range(max_new_tokens):
            # if the sequence context is growing too long we must crop it at block_size
            idx_cond = idx if idx.size(1) <= self.config.block_size else idx[:, -self.config.block_size:]
            # forward the model to get the logits for the index in the sequence
            logits, _ = self(idx_cond)
            # pluck the logits at the final step and scale by desired temperature
            logits = logits[:, -1, :] / temperature
            # optionally crop the logits to only the top k options
            if top_k is not None:
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float('Inf')
            # apply softmax to convert logits to (normalized) probabilities
            probs = F.softmax(logits, dim=-1)
            # sample from the distribution
            idx_next = torch.multinomial(probs, num_samples=1)
            # append sampled index to the running sequence
            idx = torch.cat((idx, idx_next), dim=1)

        return idx
'''

NANOGPT_CONFIGURATOR_PY = r'''"""
Poor Man's Configurator. Probably a terrible idea. Example usage:
$ python train.py config/override_file.py --batch_size=32
this will first run config/override_file.py, then override batch_size to 32

The code in this file will be run as follows from e.g. train.py:
>>> exec(open('configurator.py').read())

So it's not a Python module, it's just shuttling this code away from train.py
The code in this script then overrides the globals()

I know people are not going to love this, I just really dislike configuration
complexity and having to prepend config. to every single variable. If someone
comes up with a better simple Python solution I am all ears.
"""

import sys
from ast import literal_eval

for arg in sys.argv[1:]:
    if '=' not in arg:
        # assume it's the name of a config file
        assert not arg.startswith('--')
        config_file = arg
        print(f"Overriding config with {config_file}:")
        with open(config_file) as f:
            print(f.read())
        exec(open(config_file).read())
    else:
        # assume it's a --key=value argument
        assert arg.startswith('--')
        key, val = arg.split('=')
        key = key[2:]
        if key in globals():
            try:
                # attempt to eval it it (e.g. if bool, number, or etc)
                attempt = literal_eval(val)
            except (SyntaxError, ValueError):
                # if that goes wrong, just use the string
                attempt = val
            # ensure the types match ok
            assert type(attempt) == type(globals()[key])
            # cross fingers
            print(f"Overriding: {key} = {attempt}")
            globals()[key] = attempt
        else:
            raise ValueError(f"Unknown config key: {key}")
'''

NANOGPT_TRAIN_PY = r'''"""
This training script can be run both on a single gpu in debug mode,
and also in a larger training run with distributed data parallel (ddp).

To run on a single GPU, example:
$ python train.py --batch_size=32 --compile=False

To run with DDP on 4 gpus on 1 node, example:
$ torchrun --standalone --nproc_per_node=4 train.py

To run with DDP on 4 gpus across 2 nodes, example:
- Run on the first (master) node with example IP 123.456.123.456:
$ torchrun --nproc_per_node=8 --nnodes=2 --node_rank=0 --master_addr=123.456.123.456 --master_port=1234 train.py
- Run on the worker node:
$ torchrun --nproc_per_node=8 --nnodes=2 --node_rank=1 --master_addr=123.456.123.456 --master_port=1234 train.py
(If your cluster does not have Infiniband interconnect prepend NCCL_IB_DISABLE=1)
"""

import os
import time
import math
import pickle
from contextlib import nullcontext

import numpy as np
import torch
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.distributed import init_process_group, destroy_process_group

from model import GPTConfig, GPT

# -----------------------------------------------------------------------------
# default config values designed to train a gpt2 (124M) on OpenWebText
# I/O
out_dir = 'out'
eval_interval = 2000
log_interval = 1
eval_iters = 200
eval_only = False # if True, script exits right after the first eval
always_save_checkpoint = True # if True, always save a checkpoint after each eval
init_from = 'scratch' # 'scratch' or 'resume' or 'gpt2*'
# wandb logging
wandb_log = False # disabled by default
wandb_project = 'owt'
wandb_run_name = 'gpt2' # 'run' + str(time.time())
# data
dataset = 'openwebtext'
gradient_accumulation_steps = 5 * 8 # used to simulate larger batch sizes
batch_size = 12 # if gradient_accumulation_steps > 1, this is the micro-batch size
block_size = 1024
# model
n_layer = 12
n_head = 12
n_embd = 768
dropout = 0.0 # for pretraining 0 is good, for finetuning try 0.1+
bias = False # do we use bias inside LayerNorm and Linear layers?
# adamw optimizer
learning_rate = 6e-4 # max learning rate
max_iters = 600000 # total number of training iterations
weight_decay = 1e-1
beta1 = 0.9
beta2 = 0.95
grad_clip = 1.0 # clip gradients at this value, or disable if == 0.0
# learning rate decay settings
decay_lr = True # whether to decay the learning rate
warmup_iters = 2000 # how many steps to warm up for
lr_decay_iters = 600000 # should be ~= max_iters per Chinchilla
min_lr = 6e-5 # minimum learning rate, should be ~= learning_rate/10 per Chinchilla
# DDP settings
backend = 'nccl' # 'nccl', 'gloo', etc.
# system
device = 'cuda' # examples: 'cpu', 'cuda', 'cuda:0', 'cuda:1' etc., or try 'mps' on macbooks
dtype = 'bfloat16' if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else 'float16' # 'float32', 'bfloat16', or 'float16', the latter will auto implement a GradScaler
compile = True # use PyTorch 2.0 to compile the model to be faster
# -----------------------------------------------------------------------------
config_keys = [k for k,v in globals().items() if not k.startswith('_') and isinstance(v, (int, float, bool, str))]
exec(open('configurator.py').read()) # overrides from command line or config file
config = {k: globals()[k] for k in config_keys} # will be useful for logging
# -----------------------------------------------------------------------------

# various inits, derived attributes, I/O setup
ddp = int(os.environ.get('RANK', -1)) != -1 # is this a ddp run?
if ddp:
    init_process_group(backend=backend)
    ddp_rank = int(os.environ['RANK'])
    ddp_local_rank = int(os.environ['LOCAL_RANK'])
    ddp_world_size = int(os.environ['WORLD_SIZE'])
    device = f'cuda:{ddp_local_rank}'
    torch.cuda.set_device(device)
    master_process = ddp_rank == 0 # this process will do logging, checkpointing etc.
    seed_offset = ddp_rank # each process gets a different seed
    # world_size number of processes will be training simultaneously, so we can scale
    # down the desired gradient accumulation iterations per process proportionally
    assert gradient_accumulation_steps % ddp_world_size == 0
    gradient_accumulation_steps //= ddp_world_size
else:
    # if not ddp, we are running on a single gpu, and one process
    master_process = True
    seed_offset = 0
    ddp_world_size = 1
tokens_per_iter = gradient_accumulation_steps * ddp_world_size * batch_size * block_size
print(f"tokens per iteration will be: {tokens_per_iter:,}")

if master_process:
    os.makedirs(out_dir, exist_ok=True)
torch.manual_seed(1337 + seed_offset)
torch.backends.cuda.matmul.allow_tf32 = True # allow tf32 on matmul
torch.backends.cudnn.allow_tf32 = True # allow tf32 on cudnn
device_type = 'cuda' if 'cuda' in device else 'cpu' # for later use in torch.autocast
# note: float16 data type will automatically use a GradScaler
ptdtype = {'float32': torch.float32, 'bfloat16': torch.bfloat16, 'float16': torch.float16}[dtype]
ctx = nullcontext() if device_type == 'cpu' else torch.amp.autocast(device_type=device_type, dtype=ptdtype)

# poor man's data loader
data_dir = os.path.join('data', dataset)
def get_batch(split):
    # We recreate np.memmap every batch to avoid a memory leak, as per
    # https://stackoverflow.com/questions/45132940/numpy-memmap-memory-usage-want-to-iterate-once/61472122#61472122
    if split == 'train':
        data = np.memmap(os.path.join(data_dir, 'train.bin'), dtype=np.uint16, mode='r')
    else:
        data = np.memmap(os.path.join(data_dir, 'val.bin'), dtype=np.uint16, mode='r')
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([torch.from_numpy((data[i:i+block_size]).astype(np.int64)) for i in ix])
    y = torch.stack([torch.from_numpy((data[i+1:i+1+block_size]).astype(np.int64)) for i in ix])
    if device_type == 'cuda':
        # pin arrays x,y, which allows us to move them to GPU asynchronously (non_blocking=True)
        x, y = x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
    else:
        x, y = x.to(device), y.to(device)
    return x, y

# init these up here, can override if init_from='resume' (i.e. from a checkpoint)
iter_num = 0
best_val_loss = 1e9

# attempt to derive vocab_size from the dataset
meta_path = os.path.join(data_dir, 'meta.pkl')
meta_vocab_size = None
if os.path.exists(meta_path):
    with open(meta_path, 'rb') as f:
        meta = pickle.load(f)
    meta_vocab_size = meta['vocab_size']
    print(f"found vocab_size = {meta_vocab_size} (inside {meta_path})")

# model init
model_args = dict(n_layer=n_layer, n_head=n_head, n_embd=n_embd, block_size=block_size,
                  bias=bias, vocab_size=None, dropout=dropout) # start with model_args from command line
if init_from == 'scratch':
    # init a new model from scratch
    print("Initializing a new model from scratch")
    # determine the vocab size we'll use for from-scratch training
    if meta_vocab_size is None:
        print("defaulting to vocab_size of GPT-2 to 50304 (50257 rounded up for efficiency)")
    model_args['vocab_size'] = meta_vocab_size if meta_vocab_size is not None else 50304
    gptconf = GPTConfig(**model_args)
    model = GPT(gptconf)
elif init_from == 'resume':
    print(f"Resuming training from {out_dir}")
    # resume training from a checkpoint.
    ckpt_path = os.path.join(out_dir, 'ckpt.pt')
    checkpoint = torch.load(ckpt_path, map_location=device)
    checkpoint_model_args = checkpoint['model_args']
    # force these config attributes to be equal otherwise we can't even resume training
    # the rest of the attributes (e.g. dropout) can stay as desired from command line
    for k in ['n_layer', 'n_head', 'n_embd', 'block_size', 'bias', 'vocab_size']:
        model_args[k] = checkpoint_model_args[k]
    # create the model
    gptconf = GPTConfig(**model_args)
    model = GPT(gptconf)
    state_dict = checkpoint['model']
    # fix the keys of the state dictionary :(
    # honestly no idea how checkpoints sometimes get this prefix, have to debug more
    unwanted_prefix = '_orig_mod.'
    for k,v in list(state_dict.items()):
        if k.startswith(unwanted_prefix):
            state_dict[k[len(unwanted_prefix):]] = state_dict.pop(k)
    model.load_state_dict(state_dict)
    iter_num = checkpoint['iter_num']
    best_val_loss = checkpoint['best_val_loss']
elif init_from.startswith('gpt2'):
    print(f"Initializing from OpenAI GPT-2 weights: {init_from}")
    # initialize from OpenAI GPT-2 weights
    override_args = dict(dropout=dropout)
    model = GPT.from_pretrained(init_from, override_args)
    # read off the created config params, so we can store them into checkpoint correctly
    for k in ['n_layer', 'n_head', 'n_embd', 'block_size', 'bias', 'vocab_size']:
        model_args[k] = getattr(model.config, k)
# crop down the model block size if desired, using model surgery
if block_size < model.config.block_size:
    model.crop_block_size(block_size)
    model_args['block_size'] = block_size # so that the checkpoint will have the right value
model.to(device)

# initialize a GradScaler. If enabled=False scaler is a no-op
scaler = torch.cuda.amp.GradScaler(enabled=(dtype == 'float16'))

# optimizer
optimizer = model.configure_optimizers(weight_decay, learning_rate, (beta1, beta2), device_type)
if init_from == 'resume':
    optimizer.load_state_dict(checkpoint['optimizer'])
checkpoint = None # free up memory

# compile the model
if compile:
    print("compiling the model... (takes a ~minute)")
    unoptimized_model = model
    model = torch.compile(model, backend="eager") # requires PyTorch 2.0  # CHANGED: backend="eager" (CPU, no inductor toolchain)

# wrap model into DDP container
if ddp:
    model = DDP(model, device_ids=[ddp_local_rank])

# helps estimate an arbitrarily accurate loss over either split using many batches
@torch.no_grad()
def estimate_loss():
    out = {}
    model.eval()
    for split in ['train', 'val']:
        losses = torch.zeros(eval_iters)
        for k in range(eval_iters):
            X, Y = get_batch(split)
            with ctx:
                logits, loss = model(X, Y)
            losses[k] = loss.item()
        out[split] = losses.mean()
    model.train()
    return out

# learning rate decay scheduler (cosine with warmup)
def get_lr(it):
    # 1) linear warmup for warmup_iters steps
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    # 2) if it > lr_decay_iters, return min learning rate
    if it > lr_decay_iters:
        return min_lr
    # 3) in between, use cosine decay down to min learning rate
    decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    assert 0 <= decay_ratio <= 1
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio)) # coeff ranges 0..1
    return min_lr + coeff * (learning_rate - min_lr)

# logging
if wandb_log and master_process:
    import wandb
    wandb.init(project=wandb_project, name=wandb_run_name, config=config)

# training loop
X, Y = get_batch('train') # fetch the very first batch
t0 = time.time()
local_iter_num = 0 # number of iterations in the lifetime of this process
raw_model = model.module if ddp else model # unwrap DDP container if needed
running_mfu = -1.0
while True:

    # determine and set the learning rate for this iteration
    lr = get_lr(iter_num) if decay_lr else learning_rate
    for param_group in optimizer.param_groups:
        param_group['lr'] = lr

    # evaluate the loss on train/val sets and write checkpoints
    if iter_num % eval_interval == 0 and master_process:
        losses = estimate_loss()
        print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
        if wandb_log:
            wandb.log({
                "iter": iter_num,
                "train/loss": losses['train'],
                "val/loss": losses['val'],
                "lr": lr,
                "mfu": running_mfu*100, # convert to percentage
            })
        if losses['val'] < best_val_loss or always_save_checkpoint:
            best_val_loss = losses['val']
            if iter_num > 0:
                checkpoint = {
                    'model': raw_model.state_dict(),
                    'optimizer': optimizer.state_dict(),
                    'model_args': model_args,
                    'iter_num': iter_num,
                    'best_val_loss': best_val_loss,
                    'config': config,
                }
                print(f"saving checkpoint to {out_dir}")
                torch.save(checkpoint, os.path.join(out_dir, 'ckpt.pt'))
    if iter_num == 0 and eval_only:
        break

    # forward backward update, with optional gradient accumulation to simulate larger batch size
    # and using the GradScaler if data type is float16
    for micro_step in range(gradient_accumulation_steps):
        if ddp:
            # in DDP training we only need to sync gradients at the last micro step.
            # the official way to do this is with model.no_sync() context manager, but
            # I really dislike that this bloats the code and forces us to repeat code
            # looking at the source of that context manager, it just toggles this variable
            model.require_backward_grad_sync = (micro_step == gradient_accumulation_steps - 1)
        with ctx:
            logits, loss = model(X, Y)
            loss = loss / gradient_accumulation_steps # scale the loss to account for gradient accumulation
        # immediately async prefetch next batch while model is doing the forward pass on the GPU
        X, Y = get_batch('train')
        # backward pass, with gradient scaling if training in fp16
        scaler.scale(loss).backward()
    # clip the gradient
    if grad_clip != 0.0:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    # step the optimizer and scaler if training in fp16
    scaler.step(optimizer)
    scaler.update()
    # flush the gradients as soon as we can, no need for this memory anymore
    optimizer.zero_grad(set_to_none=True)

    # timing and logging
    t1 = time.time()
    dt = t1 - t0
    t0 = t1
    if iter_num % log_interval == 0 and master_process:
        # get loss as float. note: this is a CPU-GPU sync point
        # scale up to undo the division above, approximating the true total loss (exact would have been a sum)
        lossf = loss.item() * gradient_accumulation_steps
        if local_iter_num >= 5: # let the training loop settle a bit
            mfu = raw_model.estimate_mfu(batch_size * gradient_accumulation_steps, dt)
            running_mfu = mfu if running_mfu == -1.0 else 0.9*running_mfu + 0.1*mfu
        print(f"iter {iter_num}: loss {lossf:.4f}, time {dt*1000:.2f}ms, mfu {running_mfu*100:.2f}%")
    iter_num += 1
    local_iter_num += 1

    # termination conditions
    if iter_num > max_iters:
        break

if ddp:
    destroy_process_group()
'''

NANOGPT_ARGV = [
    "--dataset=random_tokens", "--device=cpu", "--n_layer=2", "--n_head=2", "--n_embd=16",
    "--block_size=16", "--batch_size=4", "--gradient_accumulation_steps=1", "--dropout=0.0",
    "--max_iters=4", "--eval_interval=2", "--eval_iters=2", "--log_interval=1",
    "--learning_rate=1e-3", "--warmup_iters=1", "--lr_decay_iters=4", "--min_lr=1e-4",
]
NANOGPT_VOCAB = 64


def build_nanogpt(out: Path) -> None:
    import pickle

    import numpy as np

    work = _scratch()
    try:
        (work / "model.py").write_text(NANOGPT_MODEL_PY)
        (work / "train.py").write_text(NANOGPT_TRAIN_PY)
        (work / "configurator.py").write_text(NANOGPT_CONFIGURATOR_PY)
        data = work / "data" / "random_tokens"
        data.mkdir(parents=True)
        rng = np.random.default_rng(SEED)  # stands in for data/shakespeare_char/prepare.py output
        rng.integers(0, NANOGPT_VOCAB, 2048, dtype=np.uint16).tofile(data / "train.bin")
        rng.integers(0, NANOGPT_VOCAB, 512, dtype=np.uint16).tofile(data / "val.bin")
        chars = [chr(ord("0") + i) for i in range(NANOGPT_VOCAB)]
        with open(data / "meta.pkl", "wb") as f:
            pickle.dump({"vocab_size": NANOGPT_VOCAB, "itos": dict(enumerate(chars)),
                         "stoi": {c: i for i, c in enumerate(chars)}}, f)
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONHASHSEED="0")
        env.pop("RANK", None)
        subprocess.run([sys.executable, "train.py", *NANOGPT_ARGV], check=True, cwd=work, env=env)
        out.mkdir(parents=True)
        shutil.copyfile(work / "out" / "ckpt.pt", out / "ckpt.pt")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    verify_nanogpt(out)


def verify_nanogpt(out: Path) -> None:
    f = out / "ckpt.pt"
    unsafe = _unsafe(f)
    _check(unsafe == [], f"nanogpt unsafe {unsafe}")
    ck = _safe_load(f)
    _check(list(ck) == ["model", "optimizer", "model_args", "iter_num", "best_val_loss", "config"], f"keys {list(ck)}")
    sd = ck["model"]
    _check(all(k.startswith("_orig_mod.") for k in sd), "compiled keys carry _orig_mod.")
    wte, head = sd["_orig_mod.transformer.wte.weight"], sd["_orig_mod.lm_head.weight"]
    _check(wte.untyped_storage().data_ptr() == head.untyped_storage().data_ptr(), "wte/lm_head share one storage")
    _check(ck["iter_num"] == 4 and ck["best_val_loss"].dim() == 0, "iter_num / best_val_loss 0-d tensor")
    _check(len(ck["optimizer"]["param_groups"]) == 2, "two AdamW groups")
    _check(ck["model_args"] == dict(n_layer=2, n_head=2, n_embd=16, block_size=16, bias=False,
                                    vocab_size=NANOGPT_VOCAB, dropout=0.0), f"model_args {ck['model_args']}")
    _check(ck["config"]["out_dir"] == "out" and ck["config"]["compile"] is True, "config")
    _describe(f, ck, unsafe)
    print(f"    model keys {len(sd)}; params {sum(t.numel() for k, t in sd.items() if not k.endswith('lm_head.weight'))}; "
          f"config ({len(ck['config'])} keys) {ck['config']}")
    print(f"    optimizer groups {[ (len(g['params']), g['weight_decay']) for g in ck['optimizer']['param_groups']]}, "
          f"best_val_loss {ck['best_val_loss']}")


# --------------------------------------------------------------------------------------
# 5. torchvision references/classification: faithful copy of the checkpoint code of
#    pytorch/vision references/classification/train.py (+ utils.py), main branch layout
#    (stored copy 017e9b99 predates the `scaler` entry added by vision PR #4923).
# --------------------------------------------------------------------------------------


def _tv_get_args_parser(add_help=True):
    import argparse

    parser = argparse.ArgumentParser(description="PyTorch Classification Training", add_help=add_help)

    parser.add_argument("--data-path", default="/datasets01/imagenet_full_size/061417/", type=str, help="dataset path")
    parser.add_argument("--model", default="resnet18", type=str, help="model name")
    parser.add_argument("--device", default="cuda", type=str, help="device (Use cuda or cpu Default: cuda)")
    parser.add_argument(
        "-b", "--batch-size", default=32, type=int, help="images per gpu, the total batch size is $NGPU x batch_size"
    )
    parser.add_argument("--epochs", default=90, type=int, metavar="N", help="number of total epochs to run")
    parser.add_argument(
        "-j", "--workers", default=16, type=int, metavar="N", help="number of data loading workers (default: 16)"
    )
    parser.add_argument("--opt", default="sgd", type=str, help="optimizer")
    parser.add_argument("--lr", default=0.1, type=float, help="initial learning rate")
    parser.add_argument("--momentum", default=0.9, type=float, metavar="M", help="momentum")
    parser.add_argument(
        "--wd",
        "--weight-decay",
        default=1e-4,
        type=float,
        metavar="W",
        help="weight decay (default: 1e-4)",
        dest="weight_decay",
    )
    parser.add_argument(
        "--norm-weight-decay",
        default=None,
        type=float,
        help="weight decay for Normalization layers (default: None, same value as --wd)",
    )
    parser.add_argument(
        "--bias-weight-decay",
        default=None,
        type=float,
        help="weight decay for bias parameters of all layers (default: None, same value as --wd)",
    )
    parser.add_argument(
        "--transformer-embedding-decay",
        default=None,
        type=float,
        help="weight decay for embedding parameters for vision transformer models (default: None, same value as --wd)",
    )
    parser.add_argument(
        "--label-smoothing", default=0.0, type=float, help="label smoothing (default: 0.0)", dest="label_smoothing"
    )
    parser.add_argument("--mixup-alpha", default=0.0, type=float, help="mixup alpha (default: 0.0)")
    parser.add_argument("--cutmix-alpha", default=0.0, type=float, help="cutmix alpha (default: 0.0)")
    parser.add_argument("--lr-scheduler", default="steplr", type=str, help="the lr scheduler (default: steplr)")
    parser.add_argument("--lr-warmup-epochs", default=0, type=int, help="the number of epochs to warmup (default: 0)")
    parser.add_argument(
        "--lr-warmup-method", default="constant", type=str, help="the warmup method (default: constant)"
    )
    parser.add_argument("--lr-warmup-decay", default=0.01, type=float, help="the decay for lr")
    parser.add_argument("--lr-step-size", default=30, type=int, help="decrease lr every step-size epochs")
    parser.add_argument("--lr-gamma", default=0.1, type=float, help="decrease lr by a factor of lr-gamma")
    parser.add_argument("--lr-min", default=0.0, type=float, help="minimum lr of lr schedule (default: 0.0)")
    parser.add_argument("--print-freq", default=10, type=int, help="print frequency")
    parser.add_argument("--output-dir", default=".", type=str, help="path to save outputs")
    parser.add_argument("--resume", default="", type=str, help="path of checkpoint")
    parser.add_argument("--start-epoch", default=0, type=int, metavar="N", help="start epoch")
    parser.add_argument(
        "--cache-dataset",
        dest="cache_dataset",
        help="Cache the datasets for quicker initialization. It also serializes the transforms",
        action="store_true",
    )
    parser.add_argument(
        "--sync-bn",
        dest="sync_bn",
        help="Use sync batch norm",
        action="store_true",
    )
    parser.add_argument(
        "--test-only",
        dest="test_only",
        help="Only test the model",
        action="store_true",
    )
    parser.add_argument("--auto-augment", default=None, type=str, help="auto augment policy (default: None)")
    parser.add_argument("--ra-magnitude", default=9, type=int, help="magnitude of auto augment policy")
    parser.add_argument("--augmix-severity", default=3, type=int, help="severity of augmix policy")
    parser.add_argument("--random-erase", default=0.0, type=float, help="random erasing probability (default: 0.0)")

    # Mixed precision training parameters
    parser.add_argument("--amp", action="store_true", help="Use torch.cuda.amp for mixed precision training")

    # distributed training parameters
    parser.add_argument("--world-size", default=1, type=int, help="number of distributed processes")
    parser.add_argument("--dist-url", default="env://", type=str, help="url used to set up distributed training")
    parser.add_argument(
        "--model-ema", action="store_true", help="enable tracking Exponential Moving Average of model parameters"
    )
    parser.add_argument(
        "--model-ema-steps",
        type=int,
        default=32,
        help="the number of iterations that controls how often to update the EMA model (default: 32)",
    )
    parser.add_argument(
        "--model-ema-decay",
        type=float,
        default=0.99998,
        help="decay factor for Exponential Moving Average of model parameters (default: 0.99998)",
    )
    parser.add_argument(
        "--use-deterministic-algorithms", action="store_true", help="Forces the use of deterministic algorithms only."
    )
    parser.add_argument(
        "--interpolation", default="bilinear", type=str, help="the interpolation method (default: bilinear)"
    )
    parser.add_argument(
        "--val-resize-size", default=256, type=int, help="the resize size used for validation (default: 256)"
    )
    parser.add_argument(
        "--val-crop-size", default=224, type=int, help="the central crop size used for validation (default: 224)"
    )
    parser.add_argument(
        "--train-crop-size", default=224, type=int, help="the random crop size used for training (default: 224)"
    )
    parser.add_argument("--clip-grad-norm", default=None, type=float, help="the maximum gradient norm (default None)")
    parser.add_argument("--ra-sampler", action="store_true", help="whether to use Repeated Augmentation in training")
    parser.add_argument(
        "--ra-reps", default=3, type=int, help="number of repetitions for Repeated Augmentation (default: 3)"
    )
    parser.add_argument("--weights", default=None, type=str, help="the weights enum name to load")
    parser.add_argument("--backend", default="PIL", type=str.lower, help="PIL or tensor - case insensitive")
    parser.add_argument("--use-v2", action="store_true", help="Use V2 transforms")
    return parser


TV_ARGV = [
    "--data-path", "data", "--model", "tinycnn", "--device", "cpu", "-b", "4", "--epochs", "2", "-j", "0",
    "--opt", "sgd", "--lr", "0.1", "--lr-scheduler", "cosineannealinglr", "--lr-warmup-epochs", "1",
    "--lr-warmup-method", "linear", "--model-ema", "--model-ema-steps", "1", "--amp", "--output-dir", ".",
    "--print-freq", "1", "--use-deterministic-algorithms",
]


def build_torchvision(out: Path) -> None:
    import time

    import torch
    import torch.utils.data
    from torch import nn

    # ---- references/classification/utils.py (the parts train.py's checkpointing uses) ----
    class ExponentialMovingAverage(torch.optim.swa_utils.AveragedModel):
        """Maintains moving averages of model parameters using an exponential decay.
        ``ema_avg = decay * avg_model_param + (1 - decay) * model_param``
        `torch.optim.swa_utils.AveragedModel <https://pytorch.org/docs/stable/optim.html#custom-averaging-strategies>`_
        is used to compute the EMA.
        """

        def __init__(self, model, decay, device="cpu"):
            def ema_avg(avg_model_param, model_param, num_averaged):
                return decay * avg_model_param + (1 - decay) * model_param

            super().__init__(model, device, ema_avg, use_buffers=True)

    def mkdir(path):
        os.makedirs(path, exist_ok=True)

    def is_main_process():
        return not torch.distributed.is_initialized() or torch.distributed.get_rank() == 0

    def save_on_master(*args, **kwargs):
        if is_main_process():
            torch.save(*args, **kwargs)

    def init_distributed_mode(args):
        if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
            raise RuntimeError("single-process sample")
        elif "SLURM_PROCID" in os.environ:
            raise RuntimeError("single-process sample")
        elif hasattr(args, "rank"):
            pass
        else:
            print("Not using distributed mode")
            args.distributed = False
            return

    def set_weight_decay(model, weight_decay, norm_weight_decay=None, norm_classes=None, custom_keys_weight_decay=None):
        if not norm_classes:
            norm_classes = [
                torch.nn.modules.batchnorm._BatchNorm,
                torch.nn.LayerNorm,
                torch.nn.GroupNorm,
                torch.nn.modules.instancenorm._InstanceNorm,
                torch.nn.LocalResponseNorm,
            ]
        norm_classes = tuple(norm_classes)

        params = {
            "other": [],
            "norm": [],
        }
        params_weight_decay = {
            "other": weight_decay,
            "norm": norm_weight_decay,
        }
        custom_keys = []
        if custom_keys_weight_decay is not None:
            for key, weight_decay in custom_keys_weight_decay:
                params[key] = []
                params_weight_decay[key] = weight_decay
                custom_keys.append(key)

        def _add_params(module, prefix=""):
            for name, p in module.named_parameters(recurse=False):
                if not p.requires_grad:
                    continue
                is_custom_key = False
                for key in custom_keys:
                    target_name = f"{prefix}.{name}" if prefix != "" and "." in key else name
                    if key == target_name:
                        params[key].append(p)
                        is_custom_key = True
                        break
                if not is_custom_key:
                    if norm_weight_decay is not None and isinstance(module, norm_classes):
                        params["norm"].append(p)
                    else:
                        params["other"].append(p)

            for child_name, child_module in module.named_children():
                child_prefix = f"{prefix}.{child_name}" if prefix != "" else child_name
                _add_params(child_module, prefix=child_prefix)

        _add_params(model)

        param_groups = []
        for key in params:
            if len(params[key]) > 0:
                param_groups.append({"params": params[key], "weight_decay": params_weight_decay[key]})
        return param_groups

    # ---- a tiny CNN instead of torchvision.models.get_model(args.model) ----
    class TinyCNN(nn.Module):
        def __init__(self, num_classes):
            super().__init__()
            self.features = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU())
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(4, num_classes)

        def forward(self, x):
            return self.fc(torch.flatten(self.avgpool(self.features(x)), 1))

    # ---- references/classification/train.py ----
    def train_one_epoch(model, criterion, optimizer, data_loader, device, epoch, args, model_ema=None, scaler=None):
        model.train()
        header = f"Epoch: [{epoch}]"
        for i, (image, target) in enumerate(data_loader):
            start_time = time.time()
            image, target = image.to(device), target.to(device)
            with torch.cuda.amp.autocast(enabled=scaler is not None):
                output = model(image)
                loss = criterion(output, target)

            optimizer.zero_grad()
            if scaler is not None:
                scaler.scale(loss).backward()
                if args.clip_grad_norm is not None:
                    # we should unscale the gradients of optimizer's assigned params if do gradient clipping
                    scaler.unscale_(optimizer)
                    nn.utils.clip_grad_norm_(model.parameters(), args.clip_grad_norm)
                scaler.step(optimizer)
                scaler.update()
            else:
                loss.backward()
                if args.clip_grad_norm is not None:
                    nn.utils.clip_grad_norm_(model.parameters(), args.clip_grad_norm)
                optimizer.step()

            if model_ema and i % args.model_ema_steps == 0:
                model_ema.update_parameters(model)
                if epoch < args.lr_warmup_epochs:
                    # Reset ema buffer to keep copying weights during warmup period
                    model_ema.n_averaged.fill_(0)
            if i % args.print_freq == 0:
                print(f"{header} [{i}] loss {loss.item():.4f} lr {optimizer.param_groups[0]['lr']:.5f} "
                      f"({time.time() - start_time:.3f}s)")

    def evaluate(model, criterion, data_loader, device, log_suffix=""):
        model.eval()
        correct = total = 0
        with torch.inference_mode():
            for image, target in data_loader:
                output = model(image.to(device))
                correct += (output.argmax(1) == target.to(device)).sum().item()
                total += target.numel()
        print(f"Test: {log_suffix} Acc@1 {100.0 * correct / total:.3f}")

    def main(args):
        if args.output_dir:
            mkdir(args.output_dir)

        init_distributed_mode(args)
        print(args)

        device = torch.device(args.device)

        if args.use_deterministic_algorithms:
            torch.backends.cudnn.benchmark = False
            torch.use_deterministic_algorithms(True)
        else:
            torch.backends.cudnn.benchmark = True

        # random tensors instead of load_data(ImageFolder); same samplers as the non-distributed path
        g = torch.Generator().manual_seed(SEED)
        num_classes = 3
        dataset = torch.utils.data.TensorDataset(torch.randn(16, 3, 8, 8, generator=g), torch.randint(0, num_classes, (16,), generator=g))
        dataset_test = torch.utils.data.TensorDataset(torch.randn(8, 3, 8, 8, generator=g), torch.randint(0, num_classes, (8,), generator=g))
        train_sampler = torch.utils.data.RandomSampler(dataset)
        test_sampler = torch.utils.data.SequentialSampler(dataset_test)
        data_loader = torch.utils.data.DataLoader(
            dataset, batch_size=args.batch_size, sampler=train_sampler, num_workers=args.workers, pin_memory=True,
        )
        data_loader_test = torch.utils.data.DataLoader(
            dataset_test, batch_size=args.batch_size, sampler=test_sampler, num_workers=args.workers, pin_memory=True
        )

        print("Creating model")
        model = TinyCNN(num_classes=num_classes)
        model.to(device)

        criterion = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)

        custom_keys_weight_decay = []
        if args.bias_weight_decay is not None:
            custom_keys_weight_decay.append(("bias", args.bias_weight_decay))
        if args.transformer_embedding_decay is not None:
            for key in ["class_token", "position_embedding", "relative_position_bias_table"]:
                custom_keys_weight_decay.append((key, args.transformer_embedding_decay))
        parameters = set_weight_decay(
            model,
            args.weight_decay,
            norm_weight_decay=args.norm_weight_decay,
            custom_keys_weight_decay=custom_keys_weight_decay if len(custom_keys_weight_decay) > 0 else None,
        )

        opt_name = args.opt.lower()
        if opt_name.startswith("sgd"):
            optimizer = torch.optim.SGD(
                parameters,
                lr=args.lr,
                momentum=args.momentum,
                weight_decay=args.weight_decay,
                nesterov="nesterov" in opt_name,
            )
        else:
            raise RuntimeError(f"Invalid optimizer {args.opt}. This copy keeps only SGD.")

        scaler = torch.cuda.amp.GradScaler() if args.amp else None

        args.lr_scheduler = args.lr_scheduler.lower()
        if args.lr_scheduler == "steplr":
            main_lr_scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=args.lr_step_size, gamma=args.lr_gamma)
        elif args.lr_scheduler == "cosineannealinglr":
            main_lr_scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(
                optimizer, T_max=args.epochs - args.lr_warmup_epochs, eta_min=args.lr_min
            )
        elif args.lr_scheduler == "exponentiallr":
            main_lr_scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=args.lr_gamma)
        else:
            raise RuntimeError(
                f"Invalid lr scheduler '{args.lr_scheduler}'. Only StepLR, CosineAnnealingLR and ExponentialLR "
                "are supported."
            )

        if args.lr_warmup_epochs > 0:
            if args.lr_warmup_method == "linear":
                warmup_lr_scheduler = torch.optim.lr_scheduler.LinearLR(
                    optimizer, start_factor=args.lr_warmup_decay, total_iters=args.lr_warmup_epochs
                )
            elif args.lr_warmup_method == "constant":
                warmup_lr_scheduler = torch.optim.lr_scheduler.ConstantLR(
                    optimizer, factor=args.lr_warmup_decay, total_iters=args.lr_warmup_epochs
                )
            else:
                raise RuntimeError(
                    f"Invalid warmup lr method '{args.lr_warmup_method}'. Only linear and constant are supported."
                )
            lr_scheduler = torch.optim.lr_scheduler.SequentialLR(
                optimizer, schedulers=[warmup_lr_scheduler, main_lr_scheduler], milestones=[args.lr_warmup_epochs]
            )
        else:
            lr_scheduler = main_lr_scheduler

        model_without_ddp = model

        model_ema = None
        if args.model_ema:
            # Decay adjustment that aims to keep the decay independent of other hyper-parameters originally proposed at:
            # https://github.com/facebookresearch/pycls/blob/f8cd9627/pycls/core/net.py#L123
            #
            # total_ema_updates = (Dataset_size / n_GPUs) * epochs / (batch_size_per_gpu * EMA_steps)
            # We consider constant = Dataset_size for a given dataset/setup and omit it. Thus:
            # adjust = 1 / total_ema_updates ~= n_GPUs * batch_size_per_gpu * EMA_steps / epochs
            adjust = args.world_size * args.batch_size * args.model_ema_steps / args.epochs
            alpha = 1.0 - args.model_ema_decay
            alpha = min(1.0, alpha * adjust)
            model_ema = ExponentialMovingAverage(model_without_ddp, device=device, decay=1.0 - alpha)

        print("Start training")
        for epoch in range(args.start_epoch, args.epochs):
            train_one_epoch(model, criterion, optimizer, data_loader, device, epoch, args, model_ema, scaler)
            lr_scheduler.step()
            evaluate(model, criterion, data_loader_test, device=device)
            if model_ema:
                evaluate(model_ema, criterion, data_loader_test, device=device, log_suffix="EMA")
            if args.output_dir:
                checkpoint = {
                    "model": model_without_ddp.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "lr_scheduler": lr_scheduler.state_dict(),
                    "epoch": epoch,
                    "args": args,
                }
                if model_ema:
                    checkpoint["model_ema"] = model_ema.state_dict()
                if scaler:
                    checkpoint["scaler"] = scaler.state_dict()
                save_on_master(checkpoint, os.path.join(args.output_dir, f"model_{epoch}.pth"))
                save_on_master(checkpoint, os.path.join(args.output_dir, "checkpoint.pth"))

    _seed_everything()
    _deterministic_torch()
    args = _tv_get_args_parser().parse_args(TV_ARGV)
    out.mkdir(parents=True)
    os.chdir(out)
    main(args)
    verify_torchvision(out)


def verify_torchvision(out: Path) -> None:
    names = sorted(p.name for p in out.iterdir())
    _check(names == ["checkpoint.pth", "model_0.pth", "model_1.pth"], f"torchvision files {names}")
    a, b = _safe_load(out / "checkpoint.pth", [argparse.Namespace]), _safe_load(out / "model_1.pth", [argparse.Namespace])
    _check(all(a["model"][k].equal(b["model"][k]) for k in a["model"]) and a["epoch"] == b["epoch"] == 1,
           "checkpoint.pth holds the same state as model_1.pth (only the zip's internal archive name differs)")
    for n in names:
        f = out / n
        unsafe = _unsafe(f)
        _check(unsafe == ["argparse.Namespace"], f"{n} unsafe {unsafe}")
        ck = _safe_load(f, [argparse.Namespace])
        _check(list(ck) == ["model", "optimizer", "lr_scheduler", "epoch", "args", "model_ema", "scaler"], f"keys {list(ck)}")
        _check(ck["scaler"] == {}, f"scaler {ck['scaler']} (torch.cuda.amp.GradScaler disabled without CUDA)")
        _check("n_averaged" in ck["model_ema"] and all(k == "n_averaged" or k.startswith("module.") for k in ck["model_ema"]), "EMA keys")
        _check(ck["args"].output_dir == "." and ck["args"].data_path == "data" and ck["args"].distributed is False, "args")
        _check("_schedulers" in ck["lr_scheduler"] and len(ck["lr_scheduler"]["_schedulers"]) == 2, "SequentialLR")
        _describe(f, ck, unsafe)
        if n != "checkpoint.pth":
            print(f"    epoch {ck['epoch']}, model_ema n_averaged {ck['model_ema']['n_averaged']}, "
                  f"lr_scheduler keys {sorted(ck['lr_scheduler'])}, last_lr {ck['lr_scheduler'].get('_last_lr')}, "
                  f"args: {len(vars(ck['args']))} fields")
    print(f"    model keys {list(_safe_load(out / 'model_1.pth', [argparse.Namespace])['model'])}")


# --------------------------------------------------------------------------------------
# 6. timm: the real timm.utils code (see module docstring), driven like timm's train.py
#    (huggingface/pytorch-image-models train.py @ 2aabaef0, the stored copy)
# --------------------------------------------------------------------------------------


def _timm_utils():
    """Import timm's own utils/scheduler submodules without running timm/__init__.py (which needs
    torchvision). Returns the `timm.utils` package object, filled like timm/utils/__init__.py."""
    spec = importlib.util.find_spec("timm")
    _check(spec is not None and spec.origin is not None, "timm is installed (pip install --no-deps timm)")
    root = Path(spec.origin).parent
    for name, path in (("timm", root), ("timm.utils", root / "utils")):
        m = types.ModuleType(name)
        m.__path__ = [str(path)]
        m.__package__ = name
        m.__file__ = str(path / "__init__.py")
        sys.modules[name] = m
    # timm/utils/model.py imports torchvision at the top; compile only its two checkpoint helpers.
    model_src = (root / "utils" / "model.py").read_text()
    tree = ast.parse(model_src)
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in ("unwrap_model", "get_state_dict")]
    _check(len(funcs) == 2, "unwrap_model/get_state_dict found in timm/utils/model.py")
    shim = types.ModuleType("timm.utils.model")
    shim.__package__ = "timm.utils"
    from timm.utils.model_ema import ModelEma  # noqa: F401  (real file)

    shim.ModelEma = ModelEma
    exec(compile(ast.Module(body=funcs, type_ignores=[]), str(root / "utils" / "model.py"), "exec"), shim.__dict__)
    sys.modules["timm.utils.model"] = shim
    utils = sys.modules["timm.utils"]
    utils.model = shim
    for sub, names in (
        ("checkpoint_saver", ["CheckpointSaver"]),
        ("cuda", ["NativeScaler", "ApexScaler"]),
        ("clip_grad", ["dispatch_clip_grad"]),
        ("model_ema", ["ModelEma", "ModelEmaV2", "ModelEmaV3"]),
        ("distributed", ["init_distributed_device", "is_primary", "reduce_tensor", "distribute_bn"]),
        ("random", ["random_seed"]),
        ("summary", ["get_outdir", "update_summary"]),
        ("metrics", ["AverageMeter", "accuracy"]),
        ("misc", ["ParseKwargs"]),
        ("model", ["unwrap_model", "get_state_dict"]),
    ):
        mod = importlib.import_module(f"timm.utils.{sub}")
        for n in names:
            setattr(utils, n, getattr(mod, n))
    return utils


def _timm_parser(utils):
    """train.py's argument parser (huggingface/pytorch-image-models train.py @ 2aabaef0), plus
    `--device` (added to train.py later; timm 1.0.31's init_distributed_device reads it)."""
    config_parser = parser = argparse.ArgumentParser(description='Training Config', add_help=False)
    parser.add_argument('-c', '--config', default='', type=str, metavar='FILE',
                        help='YAML config file specifying default arguments')

    parser = argparse.ArgumentParser(description='PyTorch ImageNet Training')

    # Dataset parameters
    group = parser.add_argument_group('Dataset parameters')
    # Keep this argument outside the dataset group because it is positional.
    parser.add_argument('data', nargs='?', metavar='DIR', const=None,
                        help='path to dataset (positional is *deprecated*, use --data-dir)')
    parser.add_argument('--data-dir', metavar='DIR',
                        help='path to dataset (root dir)')
    parser.add_argument('--dataset', metavar='NAME', default='',
                        help='dataset type + name ("<type>/<name>") (default: ImageFolder or ImageTar if empty)')
    group.add_argument('--train-split', metavar='NAME', default='train',
                       help='dataset train split (default: train)')
    group.add_argument('--val-split', metavar='NAME', default='validation',
                       help='dataset validation split (default: validation)')
    group.add_argument('--dataset-download', action='store_true', default=False,
                       help='Allow download of dataset for torch/ and tfds/ datasets that support it.')
    group.add_argument('--class-map', default='', type=str, metavar='FILENAME',
                       help='path to class to idx mapping file (default: "")')

    # Model parameters
    group = parser.add_argument_group('Model parameters')
    group.add_argument('--model', default='resnet50', type=str, metavar='MODEL',
                       help='Name of model to train (default: "resnet50")')
    group.add_argument('--pretrained', action='store_true', default=False,
                       help='Start with pretrained version of specified network (if avail)')
    group.add_argument('--initial-checkpoint', default='', type=str, metavar='PATH',
                       help='Initialize model from this checkpoint (default: none)')
    group.add_argument('--resume', default='', type=str, metavar='PATH',
                       help='Resume full model and optimizer state from checkpoint (default: none)')
    group.add_argument('--no-resume-opt', action='store_true', default=False,
                       help='prevent resume of optimizer state when resuming model')
    group.add_argument('--num-classes', type=int, default=None, metavar='N',
                       help='number of label classes (Model default if None)')
    group.add_argument('--gp', default=None, type=str, metavar='POOL',
                       help='Global pool type, one of (fast, avg, max, avgmax, avgmaxc). Model default if None.')
    group.add_argument('--img-size', type=int, default=None, metavar='N',
                       help='Image size (default: None => model default)')
    group.add_argument('--in-chans', type=int, default=None, metavar='N',
                       help='Image input channels (default: None => 3)')
    group.add_argument('--input-size', default=None, nargs=3, type=int,
                       metavar='N N N',
                       help='Input all image dimensions (d h w, e.g. --input-size 3 224 224), uses model default if empty')
    group.add_argument('--crop-pct', default=None, type=float,
                       metavar='N', help='Input image center crop percent (for validation only)')
    group.add_argument('--mean', type=float, nargs='+', default=None, metavar='MEAN',
                       help='Override mean pixel value of dataset')
    group.add_argument('--std', type=float, nargs='+', default=None, metavar='STD',
                       help='Override std deviation of dataset')
    group.add_argument('--interpolation', default='', type=str, metavar='NAME',
                       help='Image resize interpolation type (overrides model)')
    group.add_argument('-b', '--batch-size', type=int, default=128, metavar='N',
                       help='Input batch size for training (default: 128)')
    group.add_argument('-vb', '--validation-batch-size', type=int, default=None, metavar='N',
                       help='Validation batch size override (default: None)')
    group.add_argument('--channels-last', action='store_true', default=False,
                       help='Use channels_last memory layout')
    group.add_argument('--fuser', default='', type=str,
                       help="Select jit fuser. One of ('', 'te', 'old', 'nvfuser')")
    group.add_argument('--grad-accum-steps', type=int, default=1, metavar='N',
                       help='The number of steps to accumulate gradients (default: 1)')
    group.add_argument('--grad-checkpointing', action='store_true', default=False,
                       help='Enable gradient checkpointing through model blocks/stages')
    group.add_argument('--fast-norm', default=False, action='store_true',
                       help='enable experimental fast-norm')
    group.add_argument('--model-kwargs', nargs='*', default={}, action=utils.ParseKwargs)
    group.add_argument('--head-init-scale', default=None, type=float,
                       help='Head initialization scale')
    group.add_argument('--head-init-bias', default=None, type=float,
                       help='Head initialization bias value')

    # scripting / codegen
    scripting_group = group.add_mutually_exclusive_group()
    scripting_group.add_argument('--torchscript', dest='torchscript', action='store_true',
                                 help='torch.jit.script the full model')
    scripting_group.add_argument('--torchcompile', nargs='?', type=str, default=None, const='inductor',
                                 help="Enable compilation w/ specified backend (default: inductor).")

    # Optimizer parameters
    group = parser.add_argument_group('Optimizer parameters')
    group.add_argument('--opt', default='sgd', type=str, metavar='OPTIMIZER',
                       help='Optimizer (default: "sgd")')
    group.add_argument('--opt-eps', default=None, type=float, metavar='EPSILON',
                       help='Optimizer Epsilon (default: None, use opt default)')
    group.add_argument('--opt-betas', default=None, type=float, nargs='+', metavar='BETA',
                       help='Optimizer Betas (default: None, use opt default)')
    group.add_argument('--momentum', type=float, default=0.9, metavar='M',
                       help='Optimizer momentum (default: 0.9)')
    group.add_argument('--weight-decay', type=float, default=2e-5,
                       help='weight decay (default: 2e-5)')
    group.add_argument('--clip-grad', type=float, default=None, metavar='NORM',
                       help='Clip gradient norm (default: None, no clipping)')
    group.add_argument('--clip-mode', type=str, default='norm',
                       help='Gradient clipping mode. One of ("norm", "value", "agc")')
    group.add_argument('--layer-decay', type=float, default=None,
                       help='layer-wise learning rate decay (default: None)')
    group.add_argument('--opt-kwargs', nargs='*', default={}, action=utils.ParseKwargs)

    # Learning rate schedule parameters
    group = parser.add_argument_group('Learning rate schedule parameters')
    group.add_argument('--sched', type=str, default='cosine', metavar='SCHEDULER',
                       help='LR scheduler (default: "step"')
    group.add_argument('--sched-on-updates', action='store_true', default=False,
                       help='Apply LR scheduler step on update instead of epoch end.')
    group.add_argument('--lr', type=float, default=None, metavar='LR',
                       help='learning rate, overrides lr-base if set (default: None)')
    group.add_argument('--lr-base', type=float, default=0.1, metavar='LR',
                       help='base learning rate: lr = lr_base * global_batch_size / base_size')
    group.add_argument('--lr-base-size', type=int, default=256, metavar='DIV',
                       help='base learning rate batch size (divisor, default: 256).')
    group.add_argument('--lr-base-scale', type=str, default='', metavar='SCALE',
                       help='base learning rate vs batch_size scaling ("linear", "sqrt", based on opt if empty)')
    group.add_argument('--lr-noise', type=float, nargs='+', default=None, metavar='pct, pct',
                       help='learning rate noise on/off epoch percentages')
    group.add_argument('--lr-noise-pct', type=float, default=0.67, metavar='PERCENT',
                       help='learning rate noise limit percent (default: 0.67)')
    group.add_argument('--lr-noise-std', type=float, default=1.0, metavar='STDDEV',
                       help='learning rate noise std-dev (default: 1.0)')
    group.add_argument('--lr-cycle-mul', type=float, default=1.0, metavar='MULT',
                       help='learning rate cycle len multiplier (default: 1.0)')
    group.add_argument('--lr-cycle-decay', type=float, default=0.5, metavar='MULT',
                       help='amount to decay each learning rate cycle (default: 0.5)')
    group.add_argument('--lr-cycle-limit', type=int, default=1, metavar='N',
                       help='learning rate cycle limit, cycles enabled if > 1')
    group.add_argument('--lr-k-decay', type=float, default=1.0,
                       help='learning rate k-decay for cosine/poly (default: 1.0)')
    group.add_argument('--warmup-lr', type=float, default=1e-5, metavar='LR',
                       help='warmup learning rate (default: 1e-5)')
    group.add_argument('--min-lr', type=float, default=0, metavar='LR',
                       help='lower lr bound for cyclic schedulers that hit 0 (default: 0)')
    group.add_argument('--epochs', type=int, default=300, metavar='N',
                       help='number of epochs to train (default: 300)')
    group.add_argument('--epoch-repeats', type=float, default=0., metavar='N',
                       help='epoch repeat multiplier (number of times to repeat dataset epoch per train epoch).')
    group.add_argument('--start-epoch', default=None, type=int, metavar='N',
                       help='manual epoch number (useful on restarts)')
    group.add_argument('--decay-milestones', default=[90, 180, 270], type=int, nargs='+', metavar="MILESTONES",
                       help='list of decay epoch indices for multistep lr. must be increasing')
    group.add_argument('--decay-epochs', type=float, default=90, metavar='N',
                       help='epoch interval to decay LR')
    group.add_argument('--warmup-epochs', type=int, default=5, metavar='N',
                       help='epochs to warmup LR, if scheduler supports')
    group.add_argument('--warmup-prefix', action='store_true', default=False,
                       help='Exclude warmup period from decay schedule.'),
    group.add_argument('--cooldown-epochs', type=int, default=0, metavar='N',
                       help='epochs to cooldown LR at min_lr, after cyclic schedule ends')
    group.add_argument('--patience-epochs', type=int, default=10, metavar='N',
                       help='patience epochs for Plateau LR scheduler (default: 10)')
    group.add_argument('--decay-rate', '--dr', type=float, default=0.1, metavar='RATE',
                       help='LR decay rate (default: 0.1)')

    # Augmentation & regularization parameters
    group = parser.add_argument_group('Augmentation and regularization parameters')
    group.add_argument('--no-aug', action='store_true', default=False,
                       help='Disable all training augmentation, override other train aug args')
    group.add_argument('--scale', type=float, nargs='+', default=[0.08, 1.0], metavar='PCT',
                       help='Random resize scale (default: 0.08 1.0)')
    group.add_argument('--ratio', type=float, nargs='+', default=[3. / 4., 4. / 3.], metavar='RATIO',
                       help='Random resize aspect ratio (default: 0.75 1.33)')
    group.add_argument('--hflip', type=float, default=0.5,
                       help='Horizontal flip training aug probability')
    group.add_argument('--vflip', type=float, default=0.,
                       help='Vertical flip training aug probability')
    group.add_argument('--color-jitter', type=float, default=0.4, metavar='PCT',
                       help='Color jitter factor (default: 0.4)')
    group.add_argument('--aa', type=str, default=None, metavar='NAME',
                       help='Use AutoAugment policy. "v0" or "original". (default: None)'),
    group.add_argument('--aug-repeats', type=float, default=0,
                       help='Number of augmentation repetitions (distributed training only) (default: 0)')
    group.add_argument('--aug-splits', type=int, default=0,
                       help='Number of augmentation splits (default: 0, valid: 0 or >=2)')
    group.add_argument('--jsd-loss', action='store_true', default=False,
                       help='Enable Jensen-Shannon Divergence + CE loss. Use with `--aug-splits`.')
    group.add_argument('--bce-loss', action='store_true', default=False,
                       help='Enable BCE loss w/ Mixup/CutMix use.')
    group.add_argument('--bce-target-thresh', type=float, default=None,
                       help='Threshold for binarizing softened BCE targets (default: None, disabled)')
    group.add_argument('--reprob', type=float, default=0., metavar='PCT',
                       help='Random erase prob (default: 0.)')
    group.add_argument('--remode', type=str, default='pixel',
                       help='Random erase mode (default: "pixel")')
    group.add_argument('--recount', type=int, default=1,
                       help='Random erase count (default: 1)')
    group.add_argument('--resplit', action='store_true', default=False,
                       help='Do not random erase first (clean) augmentation split')
    group.add_argument('--mixup', type=float, default=0.0,
                       help='mixup alpha, mixup enabled if > 0. (default: 0.)')
    group.add_argument('--cutmix', type=float, default=0.0,
                       help='cutmix alpha, cutmix enabled if > 0. (default: 0.)')
    group.add_argument('--cutmix-minmax', type=float, nargs='+', default=None,
                       help='cutmix min/max ratio, overrides alpha and enables cutmix if set (default: None)')
    group.add_argument('--mixup-prob', type=float, default=1.0,
                       help='Probability of performing mixup or cutmix when either/both is enabled')
    group.add_argument('--mixup-switch-prob', type=float, default=0.5,
                       help='Probability of switching to cutmix when both mixup and cutmix enabled')
    group.add_argument('--mixup-mode', type=str, default='batch',
                       help='How to apply mixup/cutmix params. Per "batch", "pair", or "elem"')
    group.add_argument('--mixup-off-epoch', default=0, type=int, metavar='N',
                       help='Turn off mixup after this epoch, disabled if 0 (default: 0)')
    group.add_argument('--smoothing', type=float, default=0.1,
                       help='Label smoothing (default: 0.1)')
    group.add_argument('--train-interpolation', type=str, default='random',
                       help='Training interpolation (random, bilinear, bicubic default: "random")')
    group.add_argument('--drop', type=float, default=0.0, metavar='PCT',
                       help='Dropout rate (default: 0.)')
    group.add_argument('--drop-connect', type=float, default=None, metavar='PCT',
                       help='Drop connect rate, DEPRECATED, use drop-path (default: None)')
    group.add_argument('--drop-path', type=float, default=None, metavar='PCT',
                       help='Drop path rate (default: None)')
    group.add_argument('--drop-block', type=float, default=None, metavar='PCT',
                       help='Drop block rate (default: None)')

    # Batch norm parameters (only works with gen_efficientnet based models currently)
    group = parser.add_argument_group('Batch norm parameters', 'Only works with gen_efficientnet based models currently.')
    group.add_argument('--bn-momentum', type=float, default=None,
                       help='BatchNorm momentum override (if not None)')
    group.add_argument('--bn-eps', type=float, default=None,
                       help='BatchNorm epsilon override (if not None)')
    group.add_argument('--sync-bn', action='store_true',
                       help='Enable NVIDIA Apex or Torch synchronized BatchNorm.')
    group.add_argument('--dist-bn', type=str, default='reduce',
                       help='Distribute BatchNorm stats between nodes after each epoch ("broadcast", "reduce", or "")')
    group.add_argument('--split-bn', action='store_true',
                       help='Enable separate BN layers per augmentation split.')

    # Model Exponential Moving Average
    group = parser.add_argument_group('Model exponential moving average parameters')
    group.add_argument('--model-ema', action='store_true', default=False,
                       help='Enable tracking moving average of model weights')
    group.add_argument('--model-ema-force-cpu', action='store_true', default=False,
                       help='Force ema to be tracked on CPU, rank=0 node only. Disables EMA validation.')
    group.add_argument('--model-ema-decay', type=float, default=0.9998,
                       help='decay factor for model weights moving average (default: 0.9998)')

    # Misc
    group = parser.add_argument_group('Miscellaneous parameters')
    group.add_argument('--seed', type=int, default=42, metavar='S',
                       help='random seed (default: 42)')
    group.add_argument('--worker-seeding', type=str, default='all',
                       help='worker seed mode (default: all)')
    group.add_argument('--log-interval', type=int, default=50, metavar='N',
                       help='how many batches to wait before logging training status')
    group.add_argument('--recovery-interval', type=int, default=0, metavar='N',
                       help='how many batches to wait before writing recovery checkpoint')
    group.add_argument('--checkpoint-hist', type=int, default=10, metavar='N',
                       help='number of checkpoints to keep (default: 10)')
    group.add_argument('-j', '--workers', type=int, default=4, metavar='N',
                       help='how many training processes to use (default: 4)')
    group.add_argument('--save-images', action='store_true', default=False,
                       help='save images of input bathes every log interval for debugging')
    group.add_argument('--amp', action='store_true', default=False,
                       help='use NVIDIA Apex AMP or Native AMP for mixed precision training')
    group.add_argument('--amp-dtype', default='float16', type=str,
                       help='lower precision AMP dtype (default: float16)')
    group.add_argument('--amp-impl', default='native', type=str,
                       help='AMP impl to use, "native" or "apex" (default: native)')
    group.add_argument('--no-ddp-bb', action='store_true', default=False,
                       help='Force broadcast buffers for native DDP to off.')
    group.add_argument('--synchronize-step', action='store_true', default=False,
                       help='torch.cuda.synchronize() end of each step')
    group.add_argument('--pin-mem', action='store_true', default=False,
                       help='Pin CPU memory in DataLoader for more efficient (sometimes) transfer to GPU.')
    group.add_argument('--no-prefetcher', action='store_true', default=False,
                       help='disable fast prefetcher')
    group.add_argument('--output', default='', type=str, metavar='PATH',
                       help='path to output folder (default: none, current dir)')
    group.add_argument('--experiment', default='', type=str, metavar='NAME',
                       help='name of train experiment, name of sub-folder for output')
    group.add_argument('--eval-metric', default='top1', type=str, metavar='EVAL_METRIC',
                       help='Best metric (default: "top1"')
    group.add_argument('--tta', type=int, default=0, metavar='N',
                       help='Test/inference time augmentation (oversampling) factor. 0=None (default: 0)')
    group.add_argument("--local_rank", default=0, type=int)
    group.add_argument('--use-multi-epochs-loader', action='store_true', default=False,
                       help='use the multi-epochs-loader to save time at the beginning of every epoch')
    group.add_argument('--log-wandb', action='store_true', default=False,
                       help='log training and validation metrics to wandb')
    group.add_argument('--device', default='cuda', type=str,  # later train.py; see docstring
                       help="Device (accelerator) to use.")
    return config_parser, parser


TIMM_ARGV = [
    "--data-dir", "data", "--model", "tinynet", "--num-classes", "5", "--img-size", "8",
    "-b", "4", "--epochs", "2", "--opt", "sgd", "--lr", "0.05", "--weight-decay", "2e-5",
    "--sched", "cosine", "--warmup-epochs", "0", "--smoothing", "0.0", "--model-ema",
    "--model-ema-decay", "0.9", "--amp", "--recovery-interval", "3", "--checkpoint-hist", "10",
    "--no-prefetcher", "-j", "0", "--log-interval", "1", "--output", "output/train",
    "--experiment", "tinynet-run", "--device", "cpu",
]
TIMM_RUN_DIR = Path("output/train/tinynet-run")


def build_timm(out: Path) -> None:
    from collections import OrderedDict
    from contextlib import suppress
    from functools import partial

    import torch
    import torch.nn as nn

    utils = _timm_utils()
    from timm.scheduler import create_scheduler_v2, scheduler_kwargs  # real timm.scheduler
    from timm.utils import NativeScaler

    class TinyNet(nn.Module):
        """A tiny CNN instead of create_model(args.model)."""

        def __init__(self, num_classes=5, in_chans=3):
            super().__init__()
            self.num_classes = num_classes
            self.conv_stem = nn.Conv2d(in_chans, 4, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(4)
            self.act1 = nn.ReLU()
            self.global_pool = nn.AdaptiveAvgPool2d(1)
            self.classifier = nn.Linear(4, num_classes)

        def forward(self, x):
            x = self.act1(self.bn1(self.conv_stem(x)))
            return self.classifier(self.global_pool(x).flatten(1))

    def param_groups_weight_decay(model, weight_decay=1e-5, no_weight_decay_list=()):
        # timm/optim/_param_groups.py (timm.optim needs torchvision through timm.models)
        no_weight_decay_list = set(no_weight_decay_list)
        decay = []
        no_decay = []
        for name, param in model.named_parameters():
            if not param.requires_grad:
                continue
            if param.ndim <= 1 or name.endswith(".bias") or name in no_weight_decay_list:
                no_decay.append(param)
            else:
                decay.append(param)
        return [
            {'params': no_decay, 'weight_decay': 0.},
            {'params': decay, 'weight_decay': weight_decay}]

    def create_optimizer_v2(model, opt, lr, weight_decay, momentum):
        # timm's factory for opt='sgd' with filter_bias_and_bn=True: two groups, then
        # torch.optim.SGD(momentum=..., nesterov=True) with the top-level weight_decay set to 0.
        assert opt == 'sgd'
        parameters = param_groups_weight_decay(model, weight_decay)
        return torch.optim.SGD(parameters, lr=lr, momentum=momentum, nesterov=True, weight_decay=0.)

    # ---- train.py: _parse_args / main / train_one_epoch / validate ----
    config_parser, parser = _timm_parser(utils)
    args_config, remaining = config_parser.parse_known_args(TIMM_ARGV)
    args = parser.parse_args(remaining)

    args.prefetcher = not args.no_prefetcher
    args.grad_accum_steps = max(1, args.grad_accum_steps)
    device = utils.init_distributed_device(args)
    assert args.rank >= 0

    use_amp = None
    amp_dtype = torch.float16
    if args.amp:
        use_amp = 'native'
        assert args.amp_dtype in ('float16', 'bfloat16')
        if args.amp_dtype == 'bfloat16':
            amp_dtype = torch.bfloat16

    utils.random_seed(args.seed, args.rank)
    _deterministic_torch()

    model = TinyNet(num_classes=args.num_classes)
    model.to(device=device)

    optimizer = create_optimizer_v2(model, opt=args.opt, lr=args.lr, weight_decay=args.weight_decay, momentum=args.momentum)

    amp_autocast = suppress  # do nothing
    loss_scaler = None
    if use_amp == 'native':
        amp_autocast = partial(torch.autocast, device_type=device.type, dtype=amp_dtype)
        if device.type in ('cuda', 'cpu') and amp_dtype == torch.float16:  # CHANGED: train.py: device.type == 'cuda'
            # loss scaler only used for float16 (half) dtype, bfloat16 does not need it
            loss_scaler = NativeScaler(device=device.type)

    model_ema = None
    if args.model_ema:
        model_ema = utils.ModelEmaV2(
            model, decay=args.model_ema_decay, device='cpu' if args.model_ema_force_cpu else None)

    g = torch.Generator().manual_seed(SEED)
    size = args.img_size
    ds_train = torch.utils.data.TensorDataset(torch.randn(16, 3, size, size, generator=g), torch.randint(0, args.num_classes, (16,), generator=g))
    ds_eval = torch.utils.data.TensorDataset(torch.randn(8, 3, size, size, generator=g), torch.randint(0, args.num_classes, (8,), generator=g))
    loader_train = torch.utils.data.DataLoader(ds_train, batch_size=args.batch_size, shuffle=True, num_workers=args.workers,
                                               generator=torch.Generator().manual_seed(args.seed))
    loader_eval = torch.utils.data.DataLoader(ds_eval, batch_size=args.validation_batch_size or args.batch_size)

    train_loss_fn = nn.CrossEntropyLoss().to(device=device)  # args.smoothing == 0
    validate_loss_fn = nn.CrossEntropyLoss().to(device=device)

    updates_per_epoch = (len(loader_train) + args.grad_accum_steps - 1) // args.grad_accum_steps
    lr_scheduler, num_epochs = create_scheduler_v2(
        optimizer,
        **scheduler_kwargs(args),
        updates_per_epoch=updates_per_epoch,
    )

    def train_one_epoch(epoch, model, loader, optimizer, loss_fn, args, device, lr_scheduler=None, saver=None,
                        amp_autocast=suppress, loss_scaler=None, model_ema=None):
        losses_m = utils.AverageMeter()
        model.train()
        accum_steps = args.grad_accum_steps
        updates_per_epoch = (len(loader) + accum_steps - 1) // accum_steps
        num_updates = epoch * updates_per_epoch
        last_batch_idx = len(loader) - 1
        optimizer.zero_grad()
        for batch_idx, (input, target) in enumerate(loader):
            last_batch = batch_idx == last_batch_idx
            need_update = last_batch or (batch_idx + 1) % accum_steps == 0
            update_idx = batch_idx // accum_steps
            input, target = input.to(device), target.to(device)

            with amp_autocast():
                output = model(input)
                loss = loss_fn(output, target)
            if loss_scaler is not None:
                loss_scaler(
                    loss,
                    optimizer,
                    clip_grad=args.clip_grad,
                    clip_mode=args.clip_mode,
                    parameters=model.parameters(),  # timm.models.model_parameters(model, exclude_head=False)
                    create_graph=False,
                    need_update=need_update,
                )
            else:
                loss.backward()
                if need_update:
                    optimizer.step()
            losses_m.update(loss.item() * accum_steps, input.size(0))
            if not need_update:
                continue

            num_updates += 1
            optimizer.zero_grad()
            if model_ema is not None:
                model_ema.update(model)

            if update_idx % args.log_interval == 0:
                lrl = [param_group['lr'] for param_group in optimizer.param_groups]
                print(f'Train: {epoch} [{update_idx:>4d}/{updates_per_epoch}]  Loss: {losses_m.val:#.3g}  '
                      f'LR: {sum(lrl) / len(lrl):.3e}')

            if saver is not None and args.recovery_interval and (
                    (update_idx + 1) % args.recovery_interval == 0):
                saver.save_recovery(epoch, batch_idx=update_idx)

            if lr_scheduler is not None:
                lr_scheduler.step_update(num_updates=num_updates, metric=losses_m.avg)
        return OrderedDict([('loss', losses_m.avg)])

    def validate(model, loader, loss_fn, args, device, amp_autocast=suppress, log_suffix=''):
        losses_m, top1_m, top5_m = utils.AverageMeter(), utils.AverageMeter(), utils.AverageMeter()
        model.eval()
        with torch.no_grad():
            for input, target in loader:
                with amp_autocast():
                    output = model(input.to(device))
                    loss = loss_fn(output, target.to(device))
                acc1, acc5 = utils.accuracy(output, target, topk=(1, 5))
                losses_m.update(loss.item(), input.size(0))
                top1_m.update(acc1.item(), output.size(0))
                top5_m.update(acc5.item(), output.size(0))
        print(f'Test{log_suffix}: Loss {losses_m.avg:.4f} Acc@1 {top1_m.avg:.3f}')
        return OrderedDict([('loss', losses_m.avg), ('top1', top1_m.avg), ('top5', top5_m.avg)])

    work = _scratch()
    try:
        os.chdir(work)  # train.py's output/train/<experiment> lives in a scratch dir
        eval_metric = args.eval_metric
        best_metric = None
        saver = None
        output_dir = None
        if utils.is_primary(args):
            exp_name = args.experiment
            output_dir = utils.get_outdir(args.output if args.output else './output/train', exp_name)
            decreasing = True if eval_metric == 'loss' else False
            saver = utils.CheckpointSaver(
                model=model,
                optimizer=optimizer,
                args=args,
                model_ema=model_ema,
                amp_scaler=loss_scaler,
                checkpoint_dir=output_dir,
                recovery_dir=output_dir,
                decreasing=decreasing,
                max_history=args.checkpoint_hist
            )
        _check(Path(output_dir) == TIMM_RUN_DIR, f"output dir {output_dir}")
        for epoch in range(0, num_epochs):
            train_metrics = train_one_epoch(
                epoch, model, loader_train, optimizer, train_loss_fn, args, device,
                lr_scheduler=lr_scheduler, saver=saver, amp_autocast=amp_autocast,
                loss_scaler=loss_scaler, model_ema=model_ema)
            eval_metrics = validate(model, loader_eval, validate_loss_fn, args, device, amp_autocast=amp_autocast)
            if model_ema is not None and not args.model_ema_force_cpu:
                ema_eval_metrics = validate(model_ema.module, loader_eval, validate_loss_fn, args, device,
                                            amp_autocast=amp_autocast, log_suffix=' (EMA)')
                eval_metrics = ema_eval_metrics
            if saver is not None:
                # save proper checkpoint with eval metric
                save_metric = eval_metrics[eval_metric]
                best_metric, best_epoch = saver.save_checkpoint(epoch, metric=save_metric)
            if lr_scheduler is not None:
                # step LR for next epoch
                lr_scheduler.step(epoch + 1, eval_metrics[eval_metric])
            del train_metrics
        run = work / TIMM_RUN_DIR
        written = sorted(p.name for p in run.iterdir())
        print(f"  timm wrote {written}; best metric {best_metric} (epoch {best_epoch})")
        inodes = {p.name: p.stat().st_ino for p in run.iterdir()}
        _check(inodes["last.pth.tar"] == inodes["checkpoint-1.pth.tar"], "last is a hard link of checkpoint-1")
        _check(inodes["model_best.pth.tar"] == inodes[f"checkpoint-{best_epoch}.pth.tar"], "model_best is a hard link")
        out.mkdir(parents=True)
        for n in written:
            if n == "model_best.pth.tar":
                continue  # only a hard link of checkpoint-{best_epoch}; git cannot keep hard links
            shutil.copyfile(run / n, out / n)  # copying breaks the hard links
    finally:
        os.chdir(HERE)
        shutil.rmtree(work, ignore_errors=True)
    print(f"  model_best.pth.tar (dropped) was a hard link of checkpoint-{best_epoch}.pth.tar")
    verify_timm(out)


def verify_timm(out: Path) -> None:
    names = sorted(p.name for p in out.iterdir())
    _check({"last.pth.tar", "checkpoint-0.pth.tar", "checkpoint-1.pth.tar"} <= set(names), f"timm files {names}")
    _check(any(n.startswith("recovery-") for n in names), "a recovery file")
    _check((out / "last.pth.tar").read_bytes() == (out / "checkpoint-1.pth.tar").read_bytes(), "last == checkpoint-1")
    for n in names:
        f = out / n
        unsafe = _unsafe(f)
        _check(unsafe == ["argparse.Namespace"], f"{n} unsafe {unsafe}")
        ck = _safe_load(f, [argparse.Namespace])
        _check(ck["version"] == 2 and ck["arch"] == "tinynet", "version/arch")
        _check({"epoch", "arch", "optimizer", "version", "args", "amp_scaler", "state_dict", "state_dict_ema", "saver"} <= set(ck), f"keys {list(ck)}")
        _check(ck["args"].output == "output/train" and ck["args"].data_dir == "data", "relative args")
        _describe(f, ck, unsafe)
        print(f"    epoch {ck['epoch']}, metric {ck.get('metric')}, amp_scaler {ck['amp_scaler']}, saver {ck['saver']}, "
              f"args {len(vars(ck['args']))} fields")


# --------------------------------------------------------------------------------------
# 7. pytorch-ignite Checkpoint + DiskSaver (real)
# --------------------------------------------------------------------------------------


def build_ignite(out: Path) -> None:
    import torch
    import torch.nn as nn
    from ignite.engine import Events, create_supervised_trainer
    from ignite.handlers import Checkpoint, DiskSaver

    _seed_everything()
    _deterministic_torch()
    model = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    lr_scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    g = torch.Generator().manual_seed(SEED)
    data = torch.utils.data.TensorDataset(torch.randn(16, 5, generator=g), torch.randint(0, 2, (16,), generator=g))
    loader = torch.utils.data.DataLoader(data, batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(SEED))
    trainer = create_supervised_trainer(model, optimizer, nn.CrossEntropyLoss(), device="cpu")
    trainer.add_event_handler(Events.EPOCH_COMPLETED, lambda engine: lr_scheduler.step())

    out.mkdir(parents=True)
    os.chdir(out)
    to_save = {"model": model, "optimizer": optimizer, "lr_scheduler": lr_scheduler, "trainer": trainer}
    handler = Checkpoint(to_save, DiskSaver(".", require_empty=False), n_saved=2)
    trainer.add_event_handler(Events.ITERATION_COMPLETED(every=2), handler)
    # a second handler with a single entry: ignite writes the bare state_dict, named after the key
    model_only = Checkpoint({"model": model}, DiskSaver(".", require_empty=False), n_saved=1)
    trainer.add_event_handler(Events.COMPLETED, model_only)
    trainer.run(loader, max_epochs=2)
    print(f"  last_checkpoint {handler.last_checkpoint}, model-only {model_only.last_checkpoint}")
    verify_ignite(out)


def verify_ignite(out: Path) -> None:
    names = sorted(p.name for p in out.iterdir())
    _check(names == ["checkpoint_6.pt", "checkpoint_8.pt", "model_8.pt"], f"ignite files {names}")
    for n in names:
        f = out / n
        unsafe = _unsafe(f)
        _check(unsafe == [], f"{n} unsafe {unsafe}")
        ck = _safe_load(f)
        if n.startswith("checkpoint_"):
            _check(list(ck) == ["model", "optimizer", "lr_scheduler", "trainer"], f"keys {list(ck)}")
            it = int(n[len("checkpoint_"):-3])
            _check(ck["trainer"]["iteration"] == it and ck["trainer"]["epoch_length"] == 4, f"trainer {ck['trainer']}")
            print(f"    {n}: trainer {ck['trainer']}, lr_scheduler last_epoch {ck['lr_scheduler']['last_epoch']}")
        else:
            _check(list(ck) == ["0.weight", "0.bias", "2.weight", "2.bias"], "bare state_dict")
        _describe(f, ck, unsafe)


# --------------------------------------------------------------------------------------
# 8. mmengine Runner (real)
# --------------------------------------------------------------------------------------


def build_mmengine(out: Path) -> None:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from mmengine.model import BaseModel
    from mmengine.registry import DATASETS, MODELS
    from mmengine.runner import Runner

    @MODELS.register_module()
    class TinyClassifier(BaseModel):
        def __init__(self, in_features=4, num_classes=3):
            super().__init__()
            self.fc1 = nn.Linear(in_features, 8)
            self.fc2 = nn.Linear(8, num_classes)

        def forward(self, inputs, labels, mode="tensor"):
            logits = self.fc2(F.relu(self.fc1(inputs)))
            if mode == "loss":
                return {"loss": F.cross_entropy(logits, labels)}
            return logits

    @DATASETS.register_module()
    class TinyDataset(torch.utils.data.Dataset):
        metainfo = dict(classes=("a", "b", "c"))

        def __init__(self, n=16):
            g = torch.Generator().manual_seed(SEED)
            self.x, self.y = torch.randn(n, 4, generator=g), torch.randint(0, 3, (n,), generator=g)

        def __len__(self):
            return len(self.x)

        def __getitem__(self, i):
            return dict(inputs=self.x[i], labels=self.y[i])

    _deterministic_torch()
    cfg = dict(
        model=dict(type="TinyClassifier"),
        work_dir="work_dir",
        train_dataloader=dict(
            dataset=dict(type="TinyDataset"),
            sampler=dict(type="DefaultSampler", shuffle=True),
            batch_size=4,
            num_workers=0,
            collate_fn=dict(type="default_collate"),
        ),
        train_cfg=dict(by_epoch=True, max_epochs=2),
        optim_wrapper=dict(optimizer=dict(type="SGD", lr=0.01, momentum=0.9, weight_decay=1e-4)),
        param_scheduler=dict(type="MultiStepLR", by_epoch=True, milestones=[1], gamma=0.1),
        # out_dir: mmengine makes work_dir absolute, and CheckpointHook then records the absolute
        # checkpoint path (message_hub.runtime_info.last_ckpt, last_checkpoint). With a relative
        # out_dir it saves to out_dir/<basename of work_dir>/ = ./work_dir/, a relative path.
        default_hooks=dict(checkpoint=dict(type="CheckpointHook", interval=1, out_dir=".")),
        randomness=dict(seed=SEED),
        env_cfg=dict(cudnn_benchmark=False, dist_cfg=dict(backend="gloo")),
        launcher="none",
    )
    work = _scratch()
    try:
        os.chdir(work)  # outside the git checkout: mmengine_version = __version__ + `git rev-parse HEAD`
        runner = Runner.from_cfg(cfg)
        runner.train()
        wd = work / "work_dir"
        written = sorted(p.name for p in wd.iterdir())
        print(f"  mmengine wrote {written}")
        last = (wd / "last_checkpoint").read_text()
        print(f"  last_checkpoint holds {'an absolute path' if os.path.isabs(last) else repr(last)}")
        # keep the run's layout (cwd/work_dir/...), so last_checkpoint's relative path resolves
        (out / "work_dir").mkdir(parents=True)
        for n in ("epoch_1.pth", "epoch_2.pth"):
            shutil.copyfile(wd / n, out / "work_dir" / n)
        if not os.path.isabs(last) and str(work) not in last:
            shutil.copyfile(wd / "last_checkpoint", out / "work_dir" / "last_checkpoint")
    finally:
        os.chdir(HERE)
        shutil.rmtree(work, ignore_errors=True)
    verify_mmengine(out)


def verify_mmengine(out: Path) -> None:
    _check(sorted(p.name for p in out.iterdir()) == ["work_dir"], "mmengine/work_dir/")
    out = out / "work_dir"
    names = sorted(p.name for p in out.iterdir())
    _check({"epoch_1.pth", "epoch_2.pth"} <= set(names), f"mmengine files {names}")
    if "last_checkpoint" in names:
        last = (out / "last_checkpoint").read_text()
        print(f"  last_checkpoint = {last!r}")
        _check((out.parent / last).resolve() == (out / "epoch_2.pth").resolve(), "last_checkpoint resolves from mmengine/")
    for n in ("epoch_1.pth", "epoch_2.pth"):
        f = out / n
        unsafe = _unsafe(f)
        # HistoryBuffer.statistics_methods holds bound methods, pickled as getattr(HistoryBuffer, 'min'):
        # loading needs builtins.getattr, which must never be allowlisted. Describe with the inert unpickler.
        _check("builtins.getattr" in unsafe, f"mmengine unsafe {unsafe}")
        ck = _inert_load(f)
        _check(list(ck) == ["meta", "state_dict", "message_hub", "optimizer", "param_schedulers"], f"keys {list(ck)}")
        _check(ck["meta"]["epoch"] == int(n[6]), "meta.epoch")
        print(f"  {n}: {f.stat().st_size} B, top-level {list(ck)}, {_count_inert_tensors(ck)} tensors, unsafe globals {unsafe}")
        meta = {k: (v if k != "cfg" else f"<{len(v)} chars of config text>") for k, v in ck["meta"].items()}
        print(f"    meta {meta}")
        mh = ck["message_hub"]
        print(f"    message_hub keys {list(mh)}: log_scalars {dict(mh['log_scalars'])}, "
              f"runtime_info { {k: (v if k != 'cfg' else '<config text>') for k, v in mh['runtime_info'].items()} }")
        print(f"    optimizer keys {list(ck['optimizer'])}, param_schedulers {ck['param_schedulers']}")


# --------------------------------------------------------------------------------------
# 9. fvcore Checkpointer + PeriodicCheckpointer, as detectron2 tools/plain_train_net.py uses them
# --------------------------------------------------------------------------------------


def build_fvcore(out: Path) -> None:
    import torch
    import torch.nn as nn
    from fvcore.common.checkpoint import Checkpointer, PeriodicCheckpointer

    _seed_everything()
    _deterministic_torch()
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[2], gamma=0.1)
    out.mkdir(parents=True)
    os.chdir(out)
    checkpointer = Checkpointer(model, ".", optimizer=optimizer, scheduler=scheduler)
    max_iter = 4
    start_iter = checkpointer.resume_or_load("", resume=True).get("iteration", -1) + 1
    periodic_checkpointer = PeriodicCheckpointer(checkpointer, period=2, max_iter=max_iter)
    g = torch.Generator().manual_seed(SEED)
    for iteration in range(start_iter, max_iter):
        x, y = torch.randn(4, 6, generator=g), torch.randint(0, 3, (4,), generator=g)
        losses = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        losses.backward()
        optimizer.step()
        scheduler.step()
        periodic_checkpointer.step(iteration)
    verify_fvcore(out)


def verify_fvcore(out: Path) -> None:
    names = sorted(p.name for p in out.iterdir())
    _check(names == ["last_checkpoint", "model_0000001.pth", "model_0000003.pth", "model_final.pth"], f"fvcore files {names}")
    last = (out / "last_checkpoint").read_text()
    _check(last == "model_final.pth", f"last_checkpoint {last!r}")
    print(f"  last_checkpoint = {last!r}")
    for n, it in (("model_0000001.pth", 1), ("model_0000003.pth", 3), ("model_final.pth", 3)):
        f = out / n
        unsafe = _unsafe(f)
        _check(unsafe == [], f"{n} unsafe {unsafe}")
        ck = _safe_load(f)
        _check(list(ck) == ["model", "optimizer", "scheduler", "iteration"] and ck["iteration"] == it, f"{n} keys {list(ck)}")
        _describe(f, ck, unsafe)
        print(f"    iteration {ck['iteration']}, scheduler {ck['scheduler']}")


# --------------------------------------------------------------------------------------
# 10. peft LoRA under transformers.Trainer (real)
# --------------------------------------------------------------------------------------


def build_peft(out: Path) -> None:
    import inspect

    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments, default_data_collator

    _seed_everything()
    _deterministic_torch()
    cfg = LlamaConfig(
        vocab_size=32, hidden_size=8, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, head_dim=4, max_position_embeddings=32, tie_word_embeddings=False,
        bos_token_id=1, eos_token_id=2, pad_token_id=0, dtype="float32",
    )
    cfg.name_or_path = "tiny-llama"  # a plain hub-style id, never a local path
    base = LlamaForCausalLM(cfg)
    base.to(torch.float32)
    base.name_or_path = "tiny-llama"
    lora = LoraConfig(r=2, lora_alpha=4, lora_dropout=0.0, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
    model = get_peft_model(base, lora)
    model.print_trainable_parameters()
    data = _RandomTokens(16, 8, cfg.vocab_size, SEED)
    kw = dict(
        output_dir=FOLDERS["peft"],  # relative to PROJ (cwd)
        max_steps=4, save_steps=4, save_strategy="steps", per_device_train_batch_size=4,
        logging_strategy="steps", logging_steps=1, learning_rate=1e-3, weight_decay=0.01, optim="adamw_torch",
        lr_scheduler_type="linear", warmup_steps=1, seed=SEED, data_seed=SEED, report_to=[], use_cpu=True,
        dataloader_num_workers=0, disable_tqdm=True,
    )
    if "save_safetensors" in inspect.signature(TrainingArguments.__init__).parameters:
        kw["save_safetensors"] = True
    Trainer(model=model, args=TrainingArguments(**kw), train_dataset=data, data_collator=default_data_collator).train()
    verify_peft(out)


def verify_peft(out: Path) -> None:
    from safetensors import safe_open

    _check(sorted(p.name for p in out.iterdir()) == ["checkpoint-4"], f"peft content {sorted(p.name for p in out.iterdir())}")
    ck = out / "checkpoint-4"
    names = sorted(p.name for p in ck.iterdir())
    print(f"  files {names}")
    for n in ["adapter_model.safetensors", "adapter_config.json", "optimizer.pt", "scheduler.pt", "rng_state.pth",
              "trainer_state.json", "training_args.bin"]:
        _check(n in names, f"peft: missing {n}")
    _check("model.safetensors" not in names, "no full weights")
    with safe_open(str(ck / "adapter_model.safetensors"), framework="pt") as f:
        keys = sorted(f.keys())
        shapes = {k: list(f.get_slice(k).get_shape()) for k in keys}
        meta = f.metadata()
    print(f"  adapter_model.safetensors: {len(keys)} tensors {shapes}, metadata {meta}")
    acfg = json.loads((ck / "adapter_config.json").read_text())
    _check(acfg["base_model_name_or_path"] == "tiny-llama" and acfg["r"] == 2, "adapter_config")
    _check(sorted(acfg["target_modules"]) == ["q_proj", "v_proj"], "target modules")
    print(f"  adapter_config.json: { {k: acfg[k] for k in ('base_model_name_or_path', 'peft_type', 'task_type', 'r', 'lora_alpha', 'target_modules', 'revision')} }")
    opt = _safe_load(ck / "optimizer.pt")
    _check(set(opt) == {"state", "param_groups"} and len(opt["state"]) == 4, f"optimizer covers the 4 adapter tensors: {len(opt['state'])}")
    print(f"  optimizer.pt: {len(opt['state'])} params in state, groups {[len(g['params']) for g in opt['param_groups']]}")
    for n in ("optimizer.pt", "scheduler.pt", "rng_state.pth"):
        obj = _safe_load(ck / n)  # rng_state.pth needs the numpy allowlist (included)
        print(f"  {n}: {(ck / n).stat().st_size} B, keys {list(obj)}, {_count_tensors(obj)} tensors, unsafe globals {_unsafe(ck / n)}")
    unsafe = _unsafe(ck / "training_args.bin")  # a pickled TrainingArguments: weights_only refuses it
    _check("transformers.training_args.TrainingArguments" in unsafe, "training_args.bin")
    print(f"  training_args.bin: {(ck / 'training_args.bin').stat().st_size} B, refused; unsafe globals {unsafe}")
    state = json.loads((ck / "trainer_state.json").read_text())
    _check(state["global_step"] == 4, "global_step")
    print(f"  trainer_state: global_step {state['global_step']}, epoch {state['epoch']}")


# --------------------------------------------------------------------------------------
# 11. DeepSpeed ZeRO-3 (real, 2 ranks, CPU accelerator, fp32)
# --------------------------------------------------------------------------------------

DS_WORLD = 2
DS_STEPS = 2


def _ds3_config() -> dict:
    return {
        "train_micro_batch_size_per_gpu": 2,
        "gradient_accumulation_steps": 1,
        "steps_per_print": 1000,
        "zero_optimization": {"stage": 3},
        "zero_allow_untested_optimizer": True,
        "wall_clock_breakdown": False,
    }


def _ds3_worker(rank: int, world: int, port: int) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
        LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world), DS_ACCELERATOR="cpu",
    )
    import torch

    _deterministic_torch()
    import deepspeed

    class TinyMLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(8, 16)
            self.fc2 = torch.nn.Linear(16, 4)

        def forward(self, x):
            return self.fc2(torch.relu(self.fc1(x)))

    torch.manual_seed(SEED)
    model = TinyMLP()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    deepspeed.init_distributed(dist_backend="gloo")
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=_ds3_config())
    g = torch.Generator().manual_seed(SEED + rank)
    for _ in range(DS_STEPS):
        x, y = torch.randn(2, 8, generator=g), torch.randn(2, 4, generator=g)
        loss = torch.nn.functional.mse_loss(engine(x), y)
        engine.backward(loss)
        engine.step()
    engine.save_checkpoint(FOLDERS["deepspeed-zero3"])  # relative to PROJ (cwd)
    torch.distributed.barrier()


def build_deepspeed_zero3(out: Path) -> None:
    import torch.multiprocessing as mp

    os.environ["DS_ACCELERATOR"] = "cpu"
    mp.spawn(_ds3_worker, args=(DS_WORLD, _free_port()), nprocs=DS_WORLD, join=True)
    verify_deepspeed_zero3(out)


def verify_deepspeed_zero3(out: Path) -> None:
    os.environ["DS_ACCELERATOR"] = "cpu"
    top = sorted(p.name for p in out.iterdir())
    print(f"  top level {top}")
    _check((out / "latest").read_text() == f"global_step{DS_STEPS}", "latest")
    tag = out / f"global_step{DS_STEPS}"
    names = sorted(p.name for p in tag.iterdir())
    print(f"  {tag.name}/ {names}")
    ms_files = [n for n in names if n.endswith("model_states.pt")]
    os_files = [n for n in names if n.endswith("optim_states.pt")]
    _check(len(ms_files) == DS_WORLD and len(os_files) == DS_WORLD, f"one model_states and one optim_states per rank: {names}")
    for n in ms_files + os_files:
        f = tag / n
        unsafe = _unsafe(f)
        ck = _safe_load(f, [_resolve(u) for u in unsafe])
        _describe(f, ck, unsafe)
        if n in ms_files:
            mod = ck["module"]
            _check(all(t.numel() == 0 for t in mod.values()), "ZeRO-3 module tensors are 0-element placeholders")
            shapes = {k: list(v) for grp in ck["param_shapes"] for k, v in grp.items()}
            print(f"    module {{{', '.join(f'{k}: {list(t.shape)}' for k, t in mod.items())}}}; param_shapes {shapes}")
            print(f"    global_steps {ck['global_steps']}, global_samples {ck['global_samples']}, dp_world_size "
                  f"{ck['dp_world_size']}, optimizer {ck['optimizer']}, lr_scheduler {ck['lr_scheduler']}, "
                  f"ds_version {ck['ds_version']}")
            _check(shapes["fc1.weight"] == [16, 8], "param_shapes records the real shapes")
        else:
            osd = ck["optimizer_state_dict"]
            print(f"    optimizer_state_dict keys {sorted(osd)}; zero_stage {osd.get('zero_stage')!r}, partition_count {osd.get('partition_count')}")


# --------------------------------------------------------------------------------------
# 12. TorchScript, 13. torch.export, 15. whole-module pickle
# --------------------------------------------------------------------------------------


def _relative_source_paths() -> None:
    """TorchScript debug info and torch.export stack traces record the absolute path of every source
    file involved (torch's own files in site-packages and this generator). Make torch see those
    paths relative: site-packages files as 'torch/nn/modules/linear.py', this file as its name."""
    import torch._sources as srcs

    roots = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], str(HERE)}, key=len, reverse=True)

    def rel(path):
        for r in roots:
            if path and path.startswith(r + os.sep):
                return path[len(r) + 1:]
        return path

    orig = srcs.get_source_lines_and_file

    def get_source_lines_and_file(obj, error_msg=None):
        lines, lineno, filename = orig(obj, error_msg)
        return lines, lineno, rel(filename)

    srcs.get_source_lines_and_file = get_source_lines_and_file
    import torch.jit.frontend as frontend

    if hasattr(frontend, "get_source_lines_and_file"):
        frontend.get_source_lines_and_file = get_source_lines_and_file
    return rel


def build_torchscript(out: Path) -> None:
    import torch
    import torch.nn as nn

    _relative_source_paths()
    _seed_everything()
    _deterministic_torch()
    scripted = torch.jit.script(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)))
    out.mkdir(parents=True)
    os.chdir(out)
    torch.jit.save(scripted, "model.pt")
    verify_torchscript(out)


def verify_torchscript(out: Path) -> None:
    import torch

    f = out / "model.pt"
    with zipfile.ZipFile(f) as z:
        members = z.namelist()
    _check("model/constants.pkl" in members and any(m.startswith("model/code/") for m in members), "TorchScript layout")
    print(f"  zip members {members}")
    try:
        unsafe = _unsafe(f)
    except ValueError as e:  # "Expected input to be a checkpoint returned by torch.save but got a torchscript checkpoint"
        unsafe = f"ValueError: {e}"
    print(f"  get_unsafe_globals_in_checkpoint: {unsafe}")
    try:
        torch.load(f, weights_only=True)
        refused = "loaded?!"
    except Exception as e:  # torch.load refuses TorchScript archives with weights_only=True
        refused = f"{type(e).__name__}: {str(e).splitlines()[0]}"
    print(f"  torch.load(weights_only=True): {refused}")
    m = torch.jit.load(str(f))  # TorchScript's own loader (no arbitrary Python unpickling)
    print(f"  torch.jit.load: {type(m).__name__}, state_dict {list(m.state_dict())}")


def build_export(out: Path) -> None:
    import torch
    import torch.nn as nn

    rel = _relative_source_paths()

    class TinyExport(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(4, 8)
            self.fc2 = nn.Linear(8, 2)
            self.register_buffer("scale", torch.full((2,), 0.5))

        def forward(self, x):
            return self.fc2(torch.relu(self.fc1(x))) * self.scale

    _seed_everything()
    _deterministic_torch()
    ep = torch.export.export(TinyExport(), (torch.randn(3, 4),))
    import re

    pat = re.compile(r'File "([^"]+)"')
    for node in ep.graph_module.graph.nodes:  # stack traces name absolute source files: make them relative
        st = node.meta.get("stack_trace")
        if st:
            node.meta["stack_trace"] = pat.sub(lambda m: f'File "{rel(m.group(1))}"', st)
    out.mkdir(parents=True)
    os.chdir(out)
    torch.export.save(ep, "model.pt2")
    verify_export(out)


def verify_export(out: Path) -> None:
    import torch

    f = out / "model.pt2"
    with zipfile.ZipFile(f) as z:
        members = z.namelist()
    print(f"  zip members {members}")
    try:
        torch.load(f, weights_only=True)
        refused = "loaded"
    except Exception as e:
        refused = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
    print(f"  torch.load(weights_only=True): {refused}")
    ep = torch.export.load(str(f))
    print(f"  torch.export.load: state_dict {[(k, list(v.shape)) for k, v in ep.state_dict.items()]}, "
          f"constants {list(ep.constants)}, graph nodes {len(ep.graph.nodes)}")


MYNET_SRC = '''\
"""A small user module: torch.save(model) pickles a reference to mynet.TinyNet."""
import torch
import torch.nn as nn


class TinyNet(nn.Module):
    def __init__(self, d_in=4, hidden=6, d_out=2):
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(hidden, d_out)
        self.register_buffer("num_batches", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))
'''


def _import_mynet():
    if "mynet" in sys.modules:
        return sys.modules["mynet"]
    mod = types.ModuleType("mynet")
    mod.__file__ = "mynet.py"
    exec(compile(MYNET_SRC, "mynet.py", "exec"), mod.__dict__)
    sys.modules["mynet"] = mod
    return mod


def build_whole_module(out: Path) -> None:
    import torch

    mynet = _import_mynet()
    _seed_everything()
    _deterministic_torch()
    model = mynet.TinyNet()
    out.mkdir(parents=True)
    os.chdir(out)
    torch.save(model, "model.pt")
    verify_whole_module(out)


def verify_whole_module(out: Path) -> None:
    import torch

    f = out / "model.pt"
    unsafe = _unsafe(f)
    print(f"  unsafe globals {unsafe}")
    _check("mynet.TinyNet" in unsafe, "mynet.TinyNet named in the pickle")
    try:
        torch.load(f, weights_only=True)
        _check(False, "weights_only must refuse a whole-module pickle")
    except Exception as e:
        print(f"  torch.load(weights_only=True) refuses: {type(e).__name__}")
    _import_mynet()
    m = _safe_load(f, [_resolve(u) for u in unsafe])  # explicit allowlist of exactly those globals
    print(f"  with the allowlist: {type(m).__module__}.{type(m).__name__}, state_dict {list(m.state_dict())}")
    print(f"  {f.name}: {f.stat().st_size} B")


# --------------------------------------------------------------------------------------

BUILDERS = {
    "state-dict": build_state_dict,
    "tutorial": build_tutorial,
    "custom-run": build_custom_run,
    "nanogpt": build_nanogpt,
    "torchvision": build_torchvision,
    "timm": build_timm,
    "ignite": build_ignite,
    "mmengine": build_mmengine,
    "fvcore": build_fvcore,
    "peft": build_peft,
    "deepspeed-zero3": build_deepspeed_zero3,
    "torchscript": build_torchscript,
    "export": build_export,
    "legacy": build_legacy,
    "whole-module": build_whole_module,
}


def _build_one(name: str) -> None:
    PROJ.mkdir(exist_ok=True)
    os.chdir(PROJ)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    out = PROJ / FOLDERS[name]
    shutil.rmtree(out, ignore_errors=True)
    BUILDERS[name](out)
    os.chdir(PROJ)
    _check_no_abs_paths(out)


def _summary(names: list[str]) -> None:
    rows = []
    for n in names:
        root = PROJ / FOLDERS[n]
        for rel in _tree(root):
            rows.append((FOLDERS[n] + "/", rel, (root / rel).stat().st_size))
    w1 = max([len("sample")] + [len(r[0]) for r in rows])
    w2 = max(len(r[1]) for r in rows)
    print(f"\n{'sample':<{w1}}  {'file':<{w2}}  {'bytes':>9}")
    for s, f, b in rows:
        print(f"{s:<{w1}}  {f:<{w2}}  {b:>9}")
    total = sum(r[2] for r in rows)
    print(f"{'total':<{w1}}  {str(len(rows)) + ' files':<{w2}}  {total:>9}")
    print(f"\n{'sample':<{w1}}  {'files':>5}  {'bytes':>9}")
    for n in names:
        mine = [r for r in rows if r[0] == FOLDERS[n] + "/"]
        print(f"{FOLDERS[n] + '/':<{w1}}  {len(mine):>5}  {sum(r[2] for r in mine):>9}")
    print(f"{'total':<{w1}}  {len(rows):>5}  {total:>9}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help=f"samples to build (default: all): {', '.join(ORDER)}")
    parser.add_argument("--build", help=argparse.SUPPRESS)
    ns = parser.parse_args()
    unknown = [n for n in ns.names if n not in FOLDERS]
    if unknown:
        parser.error(f"unknown sample(s) {unknown}; choose from {ORDER}")
    if ns.build:
        _build_one(ns.build)
        return
    names = [n for n in ORDER if n in ns.names] if ns.names else ORDER
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONHASHSEED="0")
    PROJ.mkdir(exist_ok=True)
    for n in names:
        print(f"=== {n} -> projects/{FOLDERS[n]}/", flush=True)
        subprocess.run([sys.executable, str(Path(__file__).resolve()), "--build", n], check=True, cwd=PROJ, env=env)
    _summary(names)


if __name__ == "__main__":
    main()
