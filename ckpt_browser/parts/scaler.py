"""fp16 loss / grad scaler state, any framework."""

from __future__ import annotations

from ckpt_browser.model import Component
from ckpt_browser.parts.common import (
    MISSING,
    OK,
    fields,
    from_one_pickle,
    jsonable,
    leaf,
    num,
)
from ckpt_browser.parts.files import StateFiles
from ckpt_browser.standins import PickleFile


def scaler_from_state(fs: StateFiles, pf: PickleFile, sd, files, where: str) -> Component:
    facts = {str(k): jsonable(v, fs.scalars(pf)) for k, v in fields(sd).items()}
    scale = facts.get("scale", facts.get("cur_scale", facts.get("_scale")))
    return Component("scaler", OK, tuple(files),
                     f"{where} holds the fp16 loss scaler (scale {num(scale)}), so the resumed "
                     "run keeps its loss scale instead of re-probing from the default.", facts)


def scaler_file(fs: StateFiles, files) -> Component | None:
    """HF Trainer's and accelerate's scaler.pt, when there is one."""
    files = [f for f in files if leaf(f) == "scaler.pt"]
    return from_one_pickle(fs, "scaler", files, scaler_from_state) if files else None


def fp16_scaler_missing(framework: str) -> Component:
    return Component("scaler", MISSING, (),
                     f"the run used fp16 but {framework} saved no grad-scaler state: the resumed "
                     "run restarts at the default loss scale and may skip steps finding it again.")
