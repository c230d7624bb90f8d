"""What the HF Trainer and accelerate share: the same folder layout with other file names, so
one rule each (hf_trainer.py, accelerate.py) read by the code here.

Both may nest FSDP DCP folders and an engine's tag folder (base.Engine; FORMATS.md "HF
Trainer", "accelerate").

Where both keep weights and optimizer (`weights_sources`, `optimizer_sources`): plain
files, an FSDP DCP folder, or the engine's save.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from ckpt_browser.model import Component
from ckpt_browser.parts.common import OK, missing, name_list, under
from ckpt_browser.parts.files import StateFiles
from ckpt_browser.parts.optimizer import optimizer_from_dcp, optimizer_from_pickles
from ckpt_browser.parts.weights import weights_component
from ckpt_browser.producers.base import (
    OTHER,
    Detection,
    EngineParts,
    Seen,
    add,
    engine_save,
    isdir,
    listdir,
    match_roles,
    rx,
    small_json,
    with_other,
)
from ckpt_browser.producers.dcp import dcp_files, is_dcp


@dataclass(frozen=True)
class TrainerRule:
    framework: str
    roles: dict[str, re.Pattern]
    signature: re.Pattern  # any one of these names says this framework wrote the folder
    engine_tags: re.Pattern  # the tag folders an engine (base.Engine) saves into its folder
    adapters: bool = False  # PEFT saves one adapter folder per adapter name
    folder_epoch: bool = True  # HF takes its epoch from trainer_state.json, not the name
    pretrained: bool = False  # save hooks may write models with save_pretrained in sub-folders
    engine_pointer: bool = True  # its resume loads the tag the engine's marker names

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
    if rule.pretrained:
        _pretrained_dirs(path, names, roles)
    dcp: list[str] = []
    variant = _fsdp_dirs(path, names, roles, dcp)
    inner = engine_save(seen, rule.engine_tags, pointer=rule.engine_pointer)
    if inner is not None and any(r != OTHER for r in inner.roles):
        variant = inner.framework
        for role, files in inner.roles.items():
            if role != OTHER:
                add(roles, role, files)
    roles = with_other(roles, [n for n in names if not isdir(path, n)])
    return Detection(path, path, rule.framework, seen.step, seen.source,
                     seen.epoch if rule.folder_epoch else None, variant, roles,
                     tuple(dcp), problems=inner.problems if inner else ())


_STEM = r"(?:diffusion_pytorch_model|model|pytorch_model)"
PRETRAINED = rx(_STEM + r"(?:-\d+-of-\d+)?\.(?:safetensors|bin)",
                _STEM + r"\.(?:safetensors|bin)\.index\.json")
EMA_CONFIG = {"decay", "optimization_step"}  # diffusers' EMAModel.save_pretrained adds these


def _pretrained_dirs(path: str, names: list[str], roles: dict) -> None:
    """Models a script's save hook wrote with save_pretrained into sub-folders instead of
    accelerate's own model file (diffusers' training scripts: unet/, unet_ema/): each a
    config.json and its weights; an EMA's config records its decay and optimization_step."""
    for sub in names:
        if not isdir(path, sub):
            continue
        inner = listdir(os.path.join(path, sub))
        files = [f"{sub}/{n}" for n in inner if PRETRAINED.match(n)]
        if "config.json" not in inner or not files:
            continue
        config = small_json(os.path.join(path, sub, "config.json"))
        add(roles, "ema" if config is not None and EMA_CONFIG <= config.keys() else "weights",
            files)
        add(roles, OTHER, [f"{sub}/config.json"])


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


# --- where the weights and the optimizer are ---------------------------------------------


def weights_sources(fs: StateFiles, det: Detection, ds: EngineParts | None,
                    fsdp_prefix: str = "pytorch_model_fsdp") -> Component:
    files = det.files("weights")
    plain = [f for f in files if not (ds and ds.owns(f)) and not _in_dcp(det, f)]
    dcp = [rel for rel in det.dcp if rel.startswith(fsdp_prefix)]
    if plain:
        c = weights_component(fs, plain)
        ema = det.files("ema")
        if ema and c.status == OK:  # a save_pretrained EMA folder (Layout.apart)
            c = Component("weights", OK, c.files, c.detail[:-1] + "; an EMA copy is kept apart "
                          f"in {name_list(ema)}.", {**c.facts, "ema": list(ema)})
        return c
    if dcp:
        return weights_component(fs, under(files, dcp[0]), dcp=dcp[0], dcp_prefix="model.")
    if ds is not None and ds.model_files:
        return ds.weights(fs, [f for f in files if f not in plain])
    return missing("weights", "no model weights here: this checkpoint cannot even warm-start "
                   "a run.")


def _in_dcp(det: Detection, f: str) -> bool:
    return any(f.startswith(rel + "/") for rel in det.dcp if rel)


def optimizer_sources(fs: StateFiles, det: Detection, ds: EngineParts | None) -> Component:
    files = det.files("optimizer")
    plain = [f for f in files if "/" not in f]
    dcp = [rel for rel in det.dcp if rel.startswith("optimizer")]
    if plain:
        return optimizer_from_pickles(fs, plain)
    if dcp:
        return optimizer_from_dcp(fs, under(files, dcp[0]), dcp[0], "optimizer.")
    if ds is not None and (ds.optim_files or ds.model_files):
        return ds.optimizer(fs, [f for f in files if f.endswith("zero/")])
    return missing("optimizer", "no optimizer state (saved with save_only_model=True?): "
                   "Adam's moments restart from zero, so this is a warm start, not a resume.")
