"""The seven parts of training state (weights, optimizer, scheduler, rng, data, progress, scaler)
of one checkpoint, read without executing any pickle.

`training_state(ckpt)` takes a checkpoint whose files were all read by content
(`analysis.opened`). A producer that names its files (producers.PRODUCERS, `build`) reads its
own folders; one torch file goes to the producer whose keys it holds, whatever its name;
everything else, the custom loops and popular projects' files above all, to the content
builder (parts.content). Each fills one `Component` per kind with a status, the files, one
sentence for a tired human, and JSON-able facts. No resume verdict is decided here.
"""

from __future__ import annotations

import os
from dataclasses import replace

from ckpt_browser import limits
from ckpt_browser.model import COMPONENTS, Checkpoint, TrainingState
from ckpt_browser.parts.common import fields, missing
from ckpt_browser.parts.content import build_content
from ckpt_browser.parts.files import StateFiles
from ckpt_browser.parts.optimizer_names import name_optimizer
from ckpt_browser.producers import BY_ID, PRODUCERS, reads_by_names
from ckpt_browser.producers.base import Detection
from ckpt_browser.producers.names import step_from_name
from ckpt_browser.producers.recognise import detect
from ckpt_browser.readers.files import PICKLE_FORMATS
from ckpt_browser.standins import PickleFile

__all__ = ["training_state"]


def training_state(ckpt: Checkpoint) -> TrainingState:
    """All seven components of a checkpoint (`Opened.training` opens a path for it). Never
    raises for a damaged or malicious file: those become statuses and problems."""
    det = _detection(ckpt)
    fs = StateFiles(det.root, limits.LIMITS.json_bytes, ckpt)
    try:
        producer = BY_ID.get(det.framework)
        found = (producer and producer.build or build_content)(det, fs)
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
    """What the names say, corrected by content for a single torch file: a file whose keys a
    producer owns is read by that producer whatever it is called, and a file that only looks
    like one by name is read by content."""
    layout = ckpt.layout
    det = layout.detection if isinstance(layout.detection, Detection) else detect(layout.path)
    if len(ckpt.files) != 1 or os.path.isdir(layout.path):
        return det
    f = ckpt.files[0]
    pf = f.source if isinstance(f.source, PickleFile) else None
    if f.format in PICKLE_FORMATS and pf is not None and pf.obj is not None and not pf.unsafe:
        keys = set(map(str, fields(pf.obj)))
        if det.step is None:  # a states file named like a checkpoint (global_step4)
            step, _, source = step_from_name(os.path.basename(os.path.abspath(layout.path)))
            det = replace(det, step=step, step_source=source)
        for producer in PRODUCERS:
            own = producer.own_file and producer.own_file(det, f.name, keys)
            if own:
                return own
    return replace(det, framework="unknown") if reads_by_names(det.framework) else det
