"""The seven parts of training state (weights, optimizer, scheduler, rng, data, progress, scaler)
of one checkpoint, read without executing any pickle.

`training_state(ckpt)` takes a checkpoint whose files were all read by content
(`analysis.opened`). Framework folders whose layout only names can tell (HF
Trainer's checkpoint-N, accelerate, DCP / torchtitan, DeepSpeed, Megatron, Lightning's sharded
folders) go to their builders in `analysis/state/`; a single file goes to the builder its
content calls for (Lightning, DeepSpeed and Megatron files whatever their name); everything
else, the custom loops and popular projects' files above all, to the content builder. Each
fills one `Component` per kind with a status, the files, one sentence for a tired human, and
JSON-able facts. No resume verdict is decided here.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace

from ckpt_browser import limits
from ckpt_browser.analysis.content.optimizer_names import name_optimizer
from ckpt_browser.analysis.content.projects import framework_of
from ckpt_browser.analysis.state.accelerate import build_accelerate
from ckpt_browser.analysis.state.common import Found, missing
from ckpt_browser.analysis.state.content import build_content
from ckpt_browser.analysis.state.dcp import build_dcp, build_torchtitan
from ckpt_browser.analysis.state.deepspeed import build_deepspeed
from ckpt_browser.analysis.state.files import StateFiles
from ckpt_browser.analysis.state.hf import build_hf
from ckpt_browser.analysis.state.lightning import build_lightning
from ckpt_browser.analysis.state.megatron import build_megatron
from ckpt_browser.model import COMPONENTS, Checkpoint, TrainingState
from ckpt_browser.producers.base import Detection
from ckpt_browser.producers.deepspeed import deepspeed_tag
from ckpt_browser.producers.lightning import LIGHTNING_ROLES
from ckpt_browser.producers.names import step_from_name
from ckpt_browser.producers.recognise import detect
from ckpt_browser.readers.files import PICKLE_FORMATS
from ckpt_browser.standins import PickleFile

__all__ = ["BUILDERS", "training_state"]

# producer id -> the builder that reads its files by their names; anything else goes to
# build_content (the files say what they are)
BUILDERS: dict[str, Callable[[Detection, StateFiles], Found]] = {
    "hf-trainer": build_hf, "accelerate": build_accelerate, "lightning": build_lightning,
    "torchtitan": build_torchtitan, "dcp": build_dcp, "deepspeed": build_deepspeed,
    "megatron": build_megatron,
}


def training_state(ckpt: Checkpoint) -> TrainingState:
    """All seven components of a checkpoint (`Opened.training` opens a path for it). Never
    raises for a damaged or malicious file: those become statuses and problems."""
    det = _detection(ckpt)
    fs = StateFiles(det.root, limits.LIMITS.json_bytes, ckpt)
    try:
        found = BUILDERS.get(det.framework, build_content)(det, fs)
    finally:
        fs.close()
    comps = {k: found.components.get(k) or missing(k, "nothing in this checkpoint holds it.")
             for k in COMPONENTS}
    comps["optimizer"] = name_optimizer(ckpt, comps["optimizer"])
    step = found.step if found.step is not None else det.step
    epoch = found.epoch if found.epoch is not None else det.epoch
    # the layout's notes and every problem of a file the state is read from (not the shards:
    # those are the weights view's), so a report of the state alone still names them
    state_files = {f.name for f in ckpt.files if f.format != "safetensors"}
    problems = [p for p in ckpt.problems if p.file is None or p.file in state_files]
    problems += list(det.problems) + fs.problems + found.problems
    kinds = {f.name: {t.name: t.component for t in f.tensors}
             for f in ckpt.files if f.format != "safetensors" and f.tensors}
    return TrainingState(found.framework or det.framework, step, epoch, found.ranks, comps,
                         tuple(fs.read), tuple(dict.fromkeys(problems)), det.root, kinds,
                         found.project, {f.name: f.parts for f in ckpt.files if f.parts})


def _detection(ckpt: Checkpoint) -> Detection:
    """What the names say, corrected by content for a single torch file: a Lightning .ckpt,
    DeepSpeed or Megatron states are read by their builders whatever they are called, and a
    file that only looks like one by name is read by content."""
    layout = ckpt.layout
    det = layout.detection if isinstance(layout.detection, Detection) else detect(layout.path)
    if len(ckpt.files) != 1 or os.path.isdir(layout.path):
        return det
    f = ckpt.files[0]
    pf = f.source if isinstance(f.source, PickleFile) else None
    if f.format not in PICKLE_FORMATS or pf is None:
        return replace(det, framework="unknown") if det.framework in BUILDERS else det
    kind = framework_of(pf.obj) if pf.obj is not None and not pf.unsafe else None
    name = f.name
    if kind == "lightning":
        return replace(det, framework="lightning", variant="", roles={
            k: (name,) for k in LIGHTNING_ROLES})
    if kind == "deepspeed":
        step, source = det.step, det.step_source
        if step is None:  # a states file named like a checkpoint (global_step4)
            step, _, source = step_from_name(os.path.basename(os.path.abspath(layout.path)))
        return replace(deepspeed_tag(layout.path, det.root, "", [name], step, source),
                       path=det.path)
    if kind == "megatron":
        return replace(det, framework="megatron", variant="torch", roles={
            k: (name,) for k in COMPONENTS})
    return replace(det, framework="unknown") if det.framework in BUILDERS else det

