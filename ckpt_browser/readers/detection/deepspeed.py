"""DeepSpeed engine checkpoints: a `latest` marker naming a tag folder of *_states.pt files."""

from __future__ import annotations

import os
import re

from ckpt_browser.model import ERROR, WARNING, Problem
from ckpt_browser.readers.checkpoints import newest_name, step_from_name
from ckpt_browser.readers.detection.common import (
    OTHER,
    Detection,
    add,
    dangling,
    isdir,
    listdir,
    read_marker,
    rx,
)

DS_MODEL = re.compile(r"^(?:mp_rank_\d\d|zero_pp_rank_\d+_mp_rank_\d\d)_model_states\.pt$")
DS_OPTIM = re.compile(r"^(?:bf16_)?zero_pp_rank_(\d+)_mp_rank_\d\d_?optim_states\.pt$")
DS_MOE_OPTIM = re.compile(r"^expp_rank_\d+_mp_rank_\d\d_optim_states\.pt$")
DS_EXTRA_MODEL = rx(r"layer_\d+_expert_\d+_mp_rank_\d\d_model_states\.pt",
                    r"layer_\d\d-model_\d+-model_states\.pt")
DS_MARKERS = ("latest", "latest_universal")


def deepspeed_root(path: str, names: list[str]) -> Detection:
    marker = "latest" if "latest" in names else "latest_universal"
    problems: list[Problem] = []
    info = [n for n in names if not isdir(path, n)]  # latest, zero_to_fp32.py ...
    tag, problem = read_marker(path, marker) if marker in names else ("", None)
    if problem:
        problems.append(problem)
    tags = [n for n in names
            if (n.startswith("global_step") or n == "checkpoint") and isdir(path, n)]
    if tag and (tag not in names or not isdir(path, tag)):  # names: loops left out
        problems.append(dangling(marker, tag, tags, here=path))
        step, _, _ = step_from_name(tag)
        return Detection(path, path, "deepspeed", step, f"{marker} names {tag}",
                         roles={OTHER: tuple(info)}, tag=tag, problems=tuple(problems))
    if not tag:
        if not tags:
            return Detection(path, path, "deepspeed", roles={OTHER: tuple(info)},
                             problems=tuple(problems))
        tag = newest_name(tags)
        problems.append(Problem(WARNING, None, f"no readable latest; showing {tag}"))
    step, _, _ = step_from_name(tag)
    det = deepspeed_tag(os.path.join(path, tag), path, tag, listdir(os.path.join(path, tag)),
                        step, f"{marker} names {tag}")
    roles = dict(det.roles)
    add(roles, OTHER, info)
    variant = "universal" if marker == "latest_universal" or det.variant == "universal" else ""
    return Detection(path, path, "deepspeed", step, det.step_source, variant=variant,
                     roles=roles, tag=tag, problems=tuple(problems) + det.problems)


def deepspeed_tag(folder: str, root: str, tag: str, names: list[str], step, source) -> Detection:
    prefix = f"{tag}/" if tag else ""
    model = [prefix + n for n in names if DS_MODEL.match(n)]
    optim = [prefix + n for n in names if DS_OPTIM.match(n) or DS_MOE_OPTIM.match(n)]
    roles: dict[str, tuple[str, ...]] = {}
    add(roles, "weights", model + [prefix + n for n in names if DS_EXTRA_MODEL.match(n)])
    add(roles, "optimizer", optim or model[:1])  # without ZeRO the optimizer is in model_states
    variant = ""
    if "zero" in names and isdir(folder, "zero"):
        add(roles, "optimizer", [prefix + "zero/"])
        variant = "universal"
    for role in ("scheduler", "progress", "data"):
        add(roles, role, model[:1])
    add(roles, "scaler", optim or model[:1])
    if not tag and step is None:
        step, _, source = step_from_name(os.path.basename(os.path.abspath(folder)))
    problems = () if model else (Problem(ERROR, tag or None, "no *model_states.pt file: the "
                                         "DeepSpeed save did not finish or files were lost"),)
    return Detection(folder if not tag else root, root, "deepspeed", step, source,
                     variant=variant, roles=roles, tag=tag, problems=problems)
