"""DeepSpeed engine checkpoints: a `latest` marker naming a tag folder of *_states.pt files."""

from __future__ import annotations

import os
import re

from ckpt_browser.model import ERROR, WARNING, Problem
from ckpt_browser.producers.base import (
    OTHER,
    Detection,
    Producer,
    Seen,
    add,
    dangling,
    isdir,
    listdir,
    newest_name,
    read_marker,
    rx,
    step_name,
)

DS_MODEL = re.compile(r"^(?:mp_rank_\d\d|zero_pp_rank_\d+_mp_rank_\d\d)_model_states\.pt$")
DS_OPTIM = re.compile(r"^(?:bf16_)?zero_pp_rank_(\d+)_mp_rank_\d\d_?optim_states\.pt$")
DS_MOE_OPTIM = re.compile(r"^expp_rank_\d+_mp_rank_\d\d_optim_states\.pt$")
DS_EXTRA_MODEL = rx(r"layer_\d+_expert_\d+_mp_rank_\d\d_model_states\.pt",
                    r"layer_\d\d-model_\d+-model_states\.pt")
DS_MARKERS = ("latest", "latest_universal")
STEPS = (step_name("global_stepN", r"global_step(\d+)(?:_universal)?"),)  # runtime/engine.py


def is_state_file(name: str) -> bool:
    return bool(DS_MODEL.match(name) or DS_OPTIM.match(name))


def has_tag(seen: Seen) -> bool:
    """A folder DeepSpeed saved into: a `latest` marker or a tag folder named `checkpoint`
    (Lightning's)."""
    return any(m in seen.names for m in DS_MARKERS) or (
        "checkpoint" in seen.names and isdir(seen.path, "checkpoint"))


def deepspeed_root(seen: Seen) -> Detection:
    path, names = seen.path, seen.names
    marker = "latest" if "latest" in names else "latest_universal"
    problems: list[Problem] = []
    info = [n for n in names if not isdir(path, n)]  # latest, zero_to_fp32.py ...
    tag, problem = read_marker(path, marker) if marker in names else ("", None)
    if problem:
        problems.append(problem)
    tags = [n for n in names
            if (n.startswith("global_step") or n == "checkpoint") and isdir(path, n)]
    if tag and (tag not in names or not isdir(path, tag)):  # names: loops left out
        problems.append(dangling(marker, tag, tags, here=path, step_names=STEPS))
        return Detection(path, path, "deepspeed", seen.read_step(tag)[0],
                         f"{marker} names {tag}", roles={OTHER: tuple(info)}, tag=tag,
                         problems=tuple(problems))
    if not tag:
        if not tags:
            return Detection(path, path, "deepspeed", roles={OTHER: tuple(info)},
                             problems=tuple(problems))
        tag = newest_name(tags, STEPS)
        problems.append(Problem(WARNING, None, f"no readable latest; showing {tag}"))
    step = seen.read_step(tag)[0]
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
    problems = () if model else (Problem(ERROR, tag or None, "no *model_states.pt file: the "
                                         "DeepSpeed save did not finish or files were lost"),)
    return Detection(folder if not tag else root, root, "deepspeed", step, source,
                     variant=variant, roles=roles, tag=tag, problems=problems)


def _claims(seen: Seen) -> bool:
    if seen.is_file:
        return is_state_file(seen.names[0])
    return any(m in seen.names for m in DS_MARKERS) or any(map(is_state_file, seen.names))


def _roles(seen: Seen) -> Detection:
    if not seen.is_file and any(m in seen.names for m in DS_MARKERS):
        return deepspeed_root(seen)
    step, source = seen.step, seen.source
    if seen.is_file and step is None:  # a states file named like a checkpoint (global_step4)
        step, _, source = seen.read_step(seen.names[0])
    return deepspeed_tag(seen.path, seen.root, "", seen.names, step, source)


DEEPSPEED = Producer("deepspeed", _claims, _roles, STEPS,
                     rank_names=re.compile(r"^(?:bf16_)?zero_pp_rank_(\d+)_"))
