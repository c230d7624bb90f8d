"""What the HF Trainer and accelerate share: the same folder layout with other file names, so
one rule each (hf_trainer.py, accelerate.py) read by the code here.

Both may nest FSDP DCP folders and a DeepSpeed tag folder (FORMATS.md "HF Trainer",
"accelerate").

Where both keep weights and optimizer (`weights_sources`, `optimizer_sources`): plain
files, an FSDP DCP folder, or a nested DeepSpeed tag.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from ckpt_browser.model import Component, Problem
from ckpt_browser.parts.common import leaf, missing, under
from ckpt_browser.parts.files import StateFiles
from ckpt_browser.parts.optimizer import optimizer_from_dcp, optimizer_from_pickles
from ckpt_browser.parts.weights import weights_component
from ckpt_browser.producers import deepspeed
from ckpt_browser.producers.base import (
    OTHER,
    Detection,
    Seen,
    add,
    dangling,
    isdir,
    listdir,
    match_roles,
    newest_name,
    read_marker,
    with_other,
)
from ckpt_browser.producers.dcp import dcp_files, is_dcp
from ckpt_browser.producers.deepspeed import DS_MODEL, DeepSpeedParts, ds_optimizer, ds_weights


@dataclass(frozen=True)
class TrainerRule:
    framework: str
    roles: dict[str, re.Pattern]
    signature: re.Pattern  # any one of these names says this framework wrote the folder
    ds_tags: re.Pattern  # the DeepSpeed tag folders it nests
    adapters: bool = False  # PEFT saves one adapter folder per adapter name
    folder_epoch: bool = True  # HF takes its epoch from trainer_state.json, not the name

    def signed(self, seen: Seen) -> bool:
        return any(self.signature.match(n) for n in seen.names)

    def roles_of(self, seen: Seen) -> Detection:
        if seen.is_file:
            return Detection(seen.path, seen.root, self.framework, seen.step, seen.source,
                             seen.epoch, roles=match_roles(self.roles, seen.names))
        return trainer_folder(self, seen)


def trainer_folder(rule: TrainerRule, seen: Seen) -> Detection:
    path, names = seen.path, seen.names
    roles = match_roles(rule.roles, names)
    if rule.adapters:
        for sub in names:
            if os.path.isfile(os.path.join(path, sub, "adapter_model.safetensors")):
                add(roles, "weights", [f"{sub}/adapter_model.safetensors"])
    dcp: list[str] = []
    variant = _fsdp_dirs(path, names, roles, dcp)
    ds_variant, problems = _nested_deepspeed(path, names, roles, rule.ds_tags)
    roles = with_other(roles, [n for n in names if not isdir(path, n)])
    return Detection(path, path, rule.framework, seen.step, seen.source,
                     seen.epoch if rule.folder_epoch else None, ds_variant or variant, roles,
                     tuple(dcp), problems=tuple(problems))


def _fsdp_dirs(path: str, names: list[str], roles: dict, dcp: list[str]) -> str:
    variant = ""
    for n in names:
        if not isdir(path, n) or not is_dcp(os.path.join(path, n)):
            continue
        if re.match(r"^pytorch_model_fsdp_\d+$", n):
            add(roles, "weights", dcp_files(path, n))
        elif re.match(r"^optimizer_\d+$", n):
            add(roles, "optimizer", dcp_files(path, n))
        else:
            continue
        dcp.append(n)
        variant = "fsdp"
    if any(re.match(r"^pytorch_model_fsdp", n) for n in names):
        variant = "fsdp"
    return variant


def _nested_deepspeed(path: str, names: list[str], roles: dict, tag_rx: re.Pattern) -> tuple:
    problems: list[Problem] = []
    tags = [n for n in names if tag_rx.match(n) and isdir(path, n)]
    if "latest" in names:
        tag, problem = read_marker(path, "latest")
        if problem:
            problems.append(problem)
        elif tag not in tags:
            problems.append(dangling("latest", tag))
        if tag in tags:
            tags = [tag]
    if not tags:
        return "", problems
    tag = newest_name(tags, deepspeed.STEPS)
    inner = deepspeed.deepspeed_tag(os.path.join(path, tag), path, tag,
                                    listdir(os.path.join(path, tag)), None, "")
    for role, files in inner.roles.items():
        if role != OTHER:
            add(roles, role, files)
    add(roles, OTHER, [n for n in ("latest", "zero_to_fp32.py") if n in names])
    return "deepspeed", problems + list(inner.problems)


# --- where the weights and the optimizer are ---------------------------------------------


def weights_sources(fs: StateFiles, det: Detection, ds: DeepSpeedParts | None,
                    fsdp_prefix: str = "pytorch_model_fsdp") -> Component:
    files = det.files("weights")
    plain = [f for f in files if not DS_MODEL.match(leaf(f)) and not _in_dcp(det, f)]
    dcp = [rel for rel in det.dcp if rel.startswith(fsdp_prefix)]
    if plain:
        return weights_component(fs, plain)
    if dcp:
        return weights_component(fs, under(files, dcp[0]), dcp=dcp[0], dcp_prefix="model.")
    if ds is not None and ds.model_files:
        return ds_weights(fs, ds, [f for f in files if f not in plain])
    return missing("weights", "no model weights here: this checkpoint cannot even warm-start "
                   "a run.")


def _in_dcp(det: Detection, f: str) -> bool:
    return any(f.startswith(rel + "/") for rel in det.dcp if rel)


def optimizer_sources(fs: StateFiles, det: Detection, ds: DeepSpeedParts | None) -> Component:
    files = det.files("optimizer")
    plain = [f for f in files if "/" not in f]
    dcp = [rel for rel in det.dcp if rel.startswith("optimizer")]
    if plain:
        return optimizer_from_pickles(fs, plain)
    if dcp:
        return optimizer_from_dcp(fs, under(files, dcp[0]), dcp[0], "optimizer.")
    if ds is not None and (ds.optim_files or ds.model_files):
        return ds_optimizer(fs, ds, [f for f in files if f.endswith("zero/")])
    return missing("optimizer", "no optimizer state (saved with save_only_model=True?): "
                   "Adam's moments restart from zero, so this is a warm start, not a resume.")
