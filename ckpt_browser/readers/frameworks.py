"""Which framework wrote a checkpoint, its step, and which files hold which part of the state.

Decided from file and folder names only (FORMATS.md has each framework's names). The only files
opened are tiny text markers: DeepSpeed's `latest`, Megatron's
`latest_checkpointed_iteration.txt` and `metadata.json`. No pickle is touched here.
Each family's rules live in `readers/detection/`; this module picks one.
"""

from __future__ import annotations

import os
from dataclasses import replace

from ckpt_browser.model import ERROR, INFO, WARNING, Problem
from ckpt_browser.readers.checkpoints import newest, step_from_name
from ckpt_browser.readers.detection.common import (
    FRAMEWORKS,
    MAX_MARKER,
    OTHER,
    Detection,
    classify,
    listdir,
    rx,
    with_other,
)
from ckpt_browser.readers.detection.dcp import DCP_FILE, dcp_files, dcp_only
from ckpt_browser.readers.detection.deepspeed import (
    DS_MARKERS,
    DS_MODEL,
    DS_OPTIM,
    deepspeed_root,
    deepspeed_tag,
)
from ckpt_browser.readers.detection.hf import ACCELERATE, TRAINERS, trainer_folder
from ckpt_browser.readers.detection.lightning import LIGHTNING_ROLES, lightning_dir
from ckpt_browser.readers.detection.megatron import (
    MEGATRON_ITER,
    MEGATRON_RANK_DIR,
    MEGATRON_TRACKER,
    megatron_format,
    megatron_iter,
    megatron_root,
)
from ckpt_browser.readers.walk import MAX_DEPTH

__all__ = ["FRAMEWORKS", "MAX_MARKER", "OTHER", "Detection", "dcp_files", "detect", "listdir",
           "step_from_name"]

SAFETENSORS = rx(r"model\.safetensors", r"model-\d+-of-\d+\.safetensors",
                 r"model\.safetensors\.index\.json")

TORCH_WEIGHTS = rx(r"pytorch_model\.bin", r"pytorch_model-\d+-of-\d+\.bin",
                   r"pytorch_model\.bin\.index\.json")


def detect(path: str, depth: int = 0) -> Detection:
    """Say which framework wrote `path` (a checkpoint folder or one file). Never raises for
    odd contents; a missing path gives framework "unknown" with an error problem. `depth`:
    how many run folders were gone through to get here (bounded at walk.MAX_DEPTH)."""
    if os.path.isdir(path):
        return _folder(path, depth)
    if os.path.isfile(path):
        return _single_file(path)
    return Detection(path, path, "unknown",
                     problems=(Problem(ERROR, None, "no such file or folder"),))


def _single_file(path: str) -> Detection:
    root, name = os.path.split(path)
    root = root or "."
    parent = os.path.basename(os.path.abspath(root))
    step, epoch, source = step_from_name(name if name.endswith(".ckpt") else parent)
    if name.endswith(".ckpt"):
        roles: dict[str, tuple[str, ...]] = {k: (name,) for k in LIGHTNING_ROLES}
        return Detection(path, root, "lightning", step, source, epoch, roles=roles)
    if name in ("model_optim_rng.pt", "distrib_optim.pt"):
        grand = os.path.basename(os.path.dirname(os.path.abspath(root)))
        step, epoch, source = step_from_name(grand)
        keys = ("optimizer",) if name == "distrib_optim.pt" else (
            "weights", "optimizer", "scheduler", "rng", "data", "progress", "scaler")
        return Detection(path, root, "megatron", step, source, roles={k: (name,) for k in keys},
                         variant="torch")
    if DS_MODEL.match(name) or DS_OPTIM.match(name):
        return deepspeed_tag(path, root, "", [name], step, source)
    if name.endswith((".safetensors", ".index.json")):
        return Detection(path, root, "safetensors", roles={"weights": (name,)})
    for rule in TRAINERS:
        roles = classify(rule.roles, [name])
        # a lone pytorch_model.bin is no sign of HF; accelerate takes any of its names
        if roles and (rule is ACCELERATE or rule.signature.match(name)):
            return Detection(path, root, rule.framework, step, source, epoch, roles=roles)
    return Detection(path, root, "unknown", roles={OTHER: (name,)})


def _folder(path: str, depth: int) -> Detection:
    names = listdir(path)
    base = os.path.basename(os.path.abspath(path))
    step, epoch, source = step_from_name(base)
    if base.endswith(".ckpt"):
        return lightning_dir(path, names, step, epoch, source)
    if MEGATRON_TRACKER in names:
        return megatron_root(path, names)
    if MEGATRON_ITER.match(base) and megatron_format(path, names):
        return megatron_iter(path, "", names, step, source)
    if MEGATRON_RANK_DIR.match(base) and "model_optim_rng.pt" in names:
        grand = os.path.basename(os.path.dirname(os.path.abspath(path)))
        step, _, source = step_from_name(grand)
        return megatron_iter(path, "", [], step, source, rank_files=names)
    for rule in TRAINERS:
        if any(rule.signature.match(n) for n in names):
            return trainer_folder(rule, path, names, step, epoch, source)
    if any(m in names for m in DS_MARKERS):
        return deepspeed_root(path, names)
    if any(DS_MODEL.match(n) or DS_OPTIM.match(n) for n in names):
        return deepspeed_tag(path, path, "", names, step, source)
    if any(DCP_FILE.match(n) for n in names):
        framework = "torchtitan" if base.startswith("step-") else "dcp"
        return dcp_only(path, names, framework, step, source)
    if base.startswith("step-") and "model.safetensors.index.json" in names:
        return Detection(path, path, "torchtitan", step, source, variant="hf",
                         roles={"weights": tuple(n for n in names if SAFETENSORS.match(n))})
    if any(n.endswith(".safetensors") or n.endswith(".safetensors.index.json") for n in names):
        weights = tuple(n for n in names if n.endswith((".safetensors", ".safetensors.index.json")))
        roles = {"weights": weights}
        return Detection(path, path, "safetensors", step, source, roles=with_other(roles, names))
    torch_weights = tuple(n for n in names if TORCH_WEIGHTS.match(n))
    if torch_weights:  # a model saved by save_pretrained(safe_serialization=False)
        roles = {"weights": torch_weights}
        return Detection(path, path, "torch", step, source, roles=with_other(roles, names))
    problems: tuple[Problem, ...] = ()
    if depth < MAX_DEPTH:
        latest = _latest_child(path, depth)
        if latest is not None:
            return latest
    elif newest(path) is not None:
        problems = (Problem(WARNING, None, f"run folders nested over {MAX_DEPTH} deep: the "
                            f"checkpoints in {base} are not looked into"),)
    return Detection(path, path, "unknown", step, source, epoch,
                     roles={OTHER: tuple(names)} if names else {}, problems=problems)


def _latest_child(path: str, depth: int) -> Detection | None:
    """A run folder holding checkpoint-N / step-N ... folders: open the newest."""
    found = newest(path)
    if found is None:
        return None
    entry, count = found
    opened = detect(entry.path, depth + 1)
    note = Problem(INFO, None, f"{count} checkpoints here; showing {entry.name}, the latest"
                   if count > 1 else f"showing {entry.name}, the only checkpoint here")
    return replace(opened, problems=(note,) + opened.problems)
