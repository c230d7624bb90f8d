"""Lightning `.ckpt` folders: FSDP sharded (DCP + meta.pt) or DeepSpeed (tag `checkpoint`)."""

from __future__ import annotations

import os

from ckpt_browser.model import ERROR, Problem
from ckpt_browser.readers.detection.common import OTHER, Detection, isdir, with_other
from ckpt_browser.readers.detection.dcp import dcp_files
from ckpt_browser.readers.detection.deepspeed import DS_MARKERS, DS_MODEL, deepspeed_root

# Lightning never writes RNG state (FORMATS.md "Lightning"), so no file serves that role.
LIGHTNING_ROLES = ("weights", "optimizer", "scheduler", "data", "progress", "scaler")


def lightning_dir(path: str, names: list[str], step, epoch, source) -> Detection:
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
    if any(m in names for m in DS_MARKERS) or ("checkpoint" in names
                                               and isdir(path, "checkpoint")):
        ds = deepspeed_root(path, names)
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
