"""Megatron-LM: a tracker file naming iter_NNNNNNN, in the legacy torch or a DCP-based format
(`megatron/training/checkpointing.py`)."""

from __future__ import annotations

import json
import os
import re

from ckpt_browser.model import ERROR, WARNING, Problem, natural_key
from ckpt_browser.producers.base import (
    MAX_MARKER,
    OTHER,
    Detection,
    Producer,
    Seen,
    add,
    dangling,
    isdir,
    listdir,
    read_marker,
    step_name,
)
from ckpt_browser.producers.dcp import DCP_DATA, dcp_files
from ckpt_browser.readers.regular import open_regular

MEGATRON_TRACKER = "latest_checkpointed_iteration.txt"
MEGATRON_ITER = re.compile(r"^(?:iter_(\d{7})|release)$")
MEGATRON_RANK_DIR = re.compile(r"^mp_rank_\d\d(?:_\d{3})?(?:_\d{3})?$")
ALL_ROLES = ("weights", "optimizer", "scheduler", "rng", "data", "progress", "scaler")
STEPS = (step_name("iter_N", r"iter_(\d{7})"), step_name("release", "release", ""))


def megatron_format(folder: str, names: list[str]) -> str:
    """Megatron's `_get_checkpoint_format`: metadata.json -> torch_dist (or zarr),
    mp_rank_0* -> torch, .metadata -> torch_dcp."""
    if "metadata.json" in names:
        try:
            with open_regular(os.path.join(folder, "metadata.json")) as f:
                doc = json.loads(f.read(MAX_MARKER * 16))
            backend = doc.get("sharded_backend") if isinstance(doc, dict) else None
        except (OSError, ValueError, RecursionError):  # RecursionError: a nesting bomb
            backend = None
        return "zarr" if backend == "zarr" else "torch_dist"
    if any(n.startswith("mp_rank_0") for n in names):
        return "torch"
    if ".metadata" in names or any(DCP_DATA.match(n) for n in names):
        return "torch_dcp"
    return ""


def megatron_root(path: str, names: list[str]) -> Detection:
    text, problem = read_marker(path, MEGATRON_TRACKER)
    iters = [n for n in names if MEGATRON_ITER.match(n) and isdir(path, n)]
    if problem:
        return Detection(path, path, "megatron", roles={OTHER: (MEGATRON_TRACKER,)},
                         problems=(problem,))
    if text == "release":
        tag, step = "release", None
    elif text.isdigit():
        step = int(text)
        tag = f"iter_{step:07d}"
    else:
        return Detection(path, path, "megatron", roles={OTHER: (MEGATRON_TRACKER,)},
                         problems=(Problem(ERROR, MEGATRON_TRACKER,
                                           f"holds {text!r}, not an iteration or 'release'"),))
    source = f"{MEGATRON_TRACKER} says {text}"
    if tag not in iters:
        return Detection(path, path, "megatron", step, source, roles={OTHER: (MEGATRON_TRACKER,)},
                         tag=tag, problems=(dangling(MEGATRON_TRACKER, tag, iters, "iteration",
                                                     here=path, step_names=STEPS),))
    det = megatron_iter(os.path.join(path, tag), tag, listdir(os.path.join(path, tag)), step,
                        source, root=path)
    roles = dict(det.roles)
    add(roles, OTHER, [MEGATRON_TRACKER])
    return Detection(path, path, "megatron", step, source, variant=det.variant, roles=roles,
                     dcp=det.dcp, tag=tag, problems=det.problems)


def megatron_iter(folder: str, tag: str, names: list[str], step, source, root: str | None = None,
                  rank_files: list[str] | None = None) -> Detection:
    root = root or folder
    prefix = f"{tag}/" if tag else ""
    roles: dict[str, tuple[str, ...]] = {}
    if rank_files is not None:  # the user opened one mp_rank_XX folder
        for role in ALL_ROLES:
            add(roles, role, ["model_optim_rng.pt"])
        add(roles, "optimizer", [n for n in rank_files if n == "distrib_optim.pt"
                                 or n.startswith("layer_wise_optimizer_")])
        return Detection(folder, folder, "megatron", step, source, variant="torch", roles=roles)
    variant = megatron_format(folder, names)
    problems: list[Problem] = []
    dcp: tuple[str, ...] = ()
    if variant == "torch":
        problems += _legacy_roles(folder, prefix, names, roles)
    elif variant in ("torch_dist", "torch_dcp"):
        files = tuple(prefix + f for f in dcp_files(folder, "", names))
        for role in ALL_ROLES:
            add(roles, role, files)
        if "common.pt" in names:
            for role in ("scheduler", "data", "progress"):
                add(roles, role, [prefix + "common.pt"])
        dcp = (tag,)
        if ".metadata" not in names:
            problems.append(Problem(ERROR, tag or None,
                                    "no DCP .metadata: the save did not finish"))
    elif variant == "zarr":
        problems.append(Problem(WARNING, prefix + "metadata.json", "zarr backend: removed from "
                                "Megatron in 2026-01, current Megatron cannot load it"))
        add(roles, OTHER, [prefix + n for n in names])
    else:
        problems.append(Problem(ERROR, tag or None, "no Megatron checkpoint files here (no "
                                "metadata.json, mp_rank_* folder or DCP .metadata)"))
    add(roles, OTHER, [prefix + "metadata.json"] if "metadata.json" in names else [])
    return Detection(folder, root, "megatron", step, source, variant=variant, roles=roles,
                     dcp=dcp, tag=tag, problems=tuple(problems))


def _legacy_roles(folder: str, prefix: str, names: list[str], roles: dict) -> list[Problem]:
    """The torch format: one mp_rank_XX folder per model-parallel rank."""
    problems = []
    rank_dirs = [n for n in names if MEGATRON_RANK_DIR.match(n) and isdir(folder, n)]
    main = []
    for d in rank_dirs:
        inner = listdir(os.path.join(folder, d))
        if "model_optim_rng.pt" in inner:
            main.append(f"{prefix}{d}/model_optim_rng.pt")
        else:
            problems.append(Problem(ERROR, f"{prefix}{d}", "has no model_optim_rng.pt"))
        add(roles, "optimizer", [f"{prefix}{d}/{n}" for n in inner if n == "distrib_optim.pt"
                                 or n.startswith("layer_wise_optimizer_")])
    for role in ("weights", "rng"):
        add(roles, role, main)
    for role in ("optimizer", "scheduler", "data", "progress", "scaler"):
        add(roles, role, main[:1])
    roles["optimizer"] = tuple(sorted(roles.get("optimizer", ()), key=natural_key))
    return problems


def _seen_as(seen: Seen) -> str:
    """Which of Megatron's layouts `seen` is, or "" when none."""
    if seen.is_file:
        return "file" if seen.names[0] in ("model_optim_rng.pt", "distrib_optim.pt") else ""
    if MEGATRON_TRACKER in seen.names:
        return "root"
    if MEGATRON_ITER.match(seen.base) and megatron_format(seen.path, seen.names):
        return "iteration"
    if MEGATRON_RANK_DIR.match(seen.base) and "model_optim_rng.pt" in seen.names:
        return "rank"
    return ""


def _roles(seen: Seen) -> Detection:
    kind = _seen_as(seen)
    if kind == "root":
        return megatron_root(seen.path, seen.names)
    if kind == "iteration":
        return megatron_iter(seen.path, "", seen.names, seen.step, seen.source)
    # one rank's folder or file: the iteration is the folder above the rank's
    grand = os.path.dirname(os.path.abspath(seen.root if kind == "file" else seen.path))
    step, _, source = seen.read_step(os.path.basename(grand))
    if kind == "rank":
        return megatron_iter(seen.path, "", [], step, source, rank_files=seen.names)
    name = seen.names[0]
    keys = ("optimizer",) if name == "distrib_optim.pt" else ALL_ROLES
    return Detection(seen.path, seen.root, "megatron", step, source,
                     roles={k: (name,) for k in keys}, variant="torch")


MEGATRON = Producer("megatron", lambda seen: bool(_seen_as(seen)), _roles, STEPS,
                    rank_names=re.compile(r"^mp_rank_(\d\d)"))
