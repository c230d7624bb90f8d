"""HF Trainer and accelerate folders: the same layout with other file names, so one rule each.

Both may nest FSDP DCP folders and a DeepSpeed tag folder (FORMATS.md "HF Trainer",
"accelerate").
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from ckpt_browser.model import Problem
from ckpt_browser.readers.checkpoints import newest_name
from ckpt_browser.readers.detection.common import (
    OTHER,
    Detection,
    add,
    classify,
    dangling,
    isdir,
    listdir,
    read_marker,
    rx,
    with_other,
)
from ckpt_browser.readers.detection.dcp import dcp_files, is_dcp
from ckpt_browser.readers.detection.deepspeed import deepspeed_tag


@dataclass(frozen=True)
class TrainerRule:
    framework: str
    roles: dict[str, re.Pattern]
    signature: re.Pattern  # any one of these names says this framework wrote the folder
    ds_tags: re.Pattern  # the DeepSpeed tag folders it nests
    adapters: bool = False  # PEFT saves one adapter folder per adapter name
    folder_epoch: bool = True  # HF takes its epoch from trainer_state.json, not the name


HF = TrainerRule(
    "hf-trainer",
    {
        "weights": rx(r"model\.safetensors", r"model-\d+-of-\d+\.safetensors",
                      r"model\.safetensors\.index\.json", r"pytorch_model\.bin",
                      r"pytorch_model-\d+-of-\d+\.bin", r"pytorch_model\.bin\.index\.json",
                      r"adapter_model\.(?:safetensors|bin)", r"pytorch_model_fsdp\.bin",
                      r"pytorch_model_fsdp(?:_\d+)?_rank\d+\.bin",
                      r"rank\d+-of-\d+-pytorch_model\.bin"),
        "optimizer": rx(r"optimizer\.pt", r"optimizer\.bin", r"optimizer(?:_\d+)?_rank\d+\.bin",
                        r"rank\d+-of-\d+-optimizer\.pt", r"optimizer\.pt_.+"),
        "scheduler": rx(r"scheduler\.pt"),
        "rng": rx(r"rng_state\.pth", r"rng_state_\d+\.pth"),
        "progress": rx(r"trainer_state\.json"),
        "data": rx(r"trainer_state\.json", r"training_args\.bin"),
        "scaler": rx(r"scaler\.pt"),
    },
    rx(r"trainer_state\.json", r"training_args\.bin", r"optimizer\.pt", r"scheduler\.pt",
       r"rng_state(?:_\d+)?\.pth"),
    re.compile(r"^global_step\d+$"), adapters=True, folder_epoch=False)

ACCELERATE = TrainerRule(
    "accelerate",
    {
        "weights": rx(r"model(?:_\d+)?\.safetensors", r"pytorch_model(?:_\d+)?\.bin",
                      r"pytorch_model_fsdp(?:_\d+)?\.bin",
                      r"pytorch_model_fsdp(?:_\d+)?_rank\d+\.bin"),
        "optimizer": rx(r"optimizer(?:_\d+)?\.bin", r"optimizer(?:_\d+)?_rank\d+\.bin"),
        "scheduler": rx(r"scheduler(?:_\d+)?\.bin"),
        "rng": rx(r"random_states_\d+\.pkl"),
        "data": rx(r"dl_state_dict(?:_\d+)?\.bin", r"sampler(?:_\d+)?\.bin"),
        "progress": rx(r"custom_checkpoint_\d+\.pkl"),
        "scaler": rx(r"scaler\.pt"),
    },
    rx(r"random_states_\d+\.pkl", r"optimizer(?:_\d+)?\.bin", r"scheduler(?:_\d+)?\.bin",
       r"dl_state_dict(?:_\d+)?\.bin", r"custom_checkpoint_\d+\.pkl"),
    re.compile(r"^pytorch_model(?:_\d+)?$"))

TRAINERS = (HF, ACCELERATE)


def trainer_folder(rule: TrainerRule, path: str, names: list[str], step, epoch,
                   source) -> Detection:
    roles = classify(rule.roles, names)
    if rule.adapters:
        for sub in names:
            if os.path.isfile(os.path.join(path, sub, "adapter_model.safetensors")):
                add(roles, "weights", [f"{sub}/adapter_model.safetensors"])
    dcp: list[str] = []
    variant = _fsdp_dirs(path, names, roles, dcp)
    ds_variant, problems = _nested_deepspeed(path, names, roles, rule.ds_tags)
    roles = with_other(roles, [n for n in names if not isdir(path, n)])
    return Detection(path, path, rule.framework, step, source,
                     epoch if rule.folder_epoch else None, ds_variant or variant, roles,
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
    tag = newest_name(tags)
    inner = deepspeed_tag(os.path.join(path, tag), path, tag, listdir(os.path.join(path, tag)),
                          None, "")
    for role, files in inner.roles.items():
        if role != OTHER:
            add(roles, role, files)
    add(roles, OTHER, [n for n in ("latest", "zero_to_fp32.py") if n in names])
    return "deepspeed", problems + list(inner.problems)
