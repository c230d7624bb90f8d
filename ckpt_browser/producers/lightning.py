"""Lightning: `epoch=E-step=S.ckpt` files (`-vN` on a clash, and `last.ckpt`), or `.ckpt`
folders, FSDP sharded (DCP + meta.pt) or DeepSpeed (tag `checkpoint`)
(`callbacks/model_checkpoint.py`)."""

from __future__ import annotations

import os
import re

from ckpt_browser.model import ERROR, Problem
from ckpt_browser.producers.base import (
    OTHER,
    Detection,
    Producer,
    Seen,
    StepName,
    step_name,
    with_other,
)
from ckpt_browser.producers.dcp import dcp_files
from ckpt_browser.producers.deepspeed import DS_MODEL, deepspeed_root, has_tag

# Lightning never writes RNG state (FORMATS.md "Lightning"), so no file serves that role.
LIGHTNING_ROLES = ("weights", "optimizer", "scheduler", "data", "progress", "scaler")
CKPT_NAME = "lightning .ckpt"
_PARTS = re.compile(r"(?:^|[-_])epoch=(\d+)|(?:^|[-_])step=(\d+)")


def ckpt_numbers(name: str) -> tuple[int | None, int | None]:
    """(step, epoch) in a Lightning `.ckpt` file name such as `epoch=3-step=1200-v1.ckpt`."""
    step = epoch = None
    if name.endswith(".ckpt"):
        for m in _PARTS.finditer(name[:-5]):
            if m.group(1) is not None:
                epoch = int(m.group(1))
            else:
                step = int(m.group(2))
    return step, epoch


def lightning_dir(seen: Seen) -> Detection:
    path, names, step, epoch, source = seen.path, seen.names, seen.step, seen.epoch, seen.source
    if "meta.pt" in names:
        files = dcp_files(path, "", names)
        roles = {"weights": files, "optimizer": files}
        for role in LIGHTNING_ROLES[2:]:
            roles[role] = ("meta.pt",)
        problems = () if ".metadata" in names else (
            Problem(ERROR, None, "a sharded Lightning checkpoint without .metadata: the DCP "
                    "save did not finish"),)
        return Detection(path, path, "lightning", step, source, epoch, "sharded",
                         with_other(roles, names), ("",), problems=problems)
    if has_tag(seen):
        ds = deepspeed_root(seen)
        roles = dict(ds.roles)
        model = tuple(f for f in ds.files("weights") if DS_MODEL.match(os.path.basename(f)))
        for role in LIGHTNING_ROLES[2:]:
            roles[role] = model[:1] + (() if role != "scaler" else tuple(
                f for f in ds.files("optimizer") if f not in model))
        return Detection(path, path, "lightning", step, source, epoch, "deepspeed", roles,
                         tag=ds.tag, problems=ds.problems)
    return Detection(path, path, "lightning", step, source, epoch, "folder",
                     roles={OTHER: tuple(names)} if names else {},
                     problems=(Problem(ERROR, None, "a .ckpt folder with neither meta.pt (FSDP) "
                                       "nor latest (DeepSpeed)"),))


def _roles(seen: Seen) -> Detection:
    if seen.is_file:
        return Detection(seen.path, seen.root, "lightning", seen.step, seen.source, seen.epoch,
                         roles={k: (seen.names[0],) for k in LIGHTNING_ROLES})
    return lightning_dir(seen)


LIGHTNING = Producer(
    "lightning", lambda seen: seen.base.endswith(".ckpt"), _roles,
    (StepName(CKPT_NAME, re.compile(r"^(?:.*[-_])?(?:epoch|step)=\d+.*\.ckpt$"), "step",
              ckpt_numbers),
     step_name("last.ckpt", r"last(?:-v\d+)?\.ckpt", "")))
