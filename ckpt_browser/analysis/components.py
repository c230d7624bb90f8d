"""The seven parts of training state (weights, optimizer, scheduler, rng, data, progress, scaler)
as one framework wrote them, read without executing any pickle.

`training_state(path)` detects the framework by names (readers/frameworks.py), reads each state
file once with the restricted readers, and fills one `Component` per kind with a status, the
files, one sentence for a tired human, and JSON-able facts. It decides no resume verdict.
Each framework family's rules live in `analysis/state/`.
"""

from __future__ import annotations

import importlib
import os

from ckpt_browser.limits import env_limit
from ckpt_browser.analysis.state.common import Found, every_kind, missing
from ckpt_browser.analysis.state.files import StateFiles
from ckpt_browser.model import COMPONENTS, TrainingState
from ckpt_browser.readers.frameworks import Detection, detect
from ckpt_browser.readers.layout import MARKER_FILES

__all__ = ["BUILDERS", "MAX_JSON", "training_state"]

# read at each call, so a test can lower it
MAX_JSON = env_limit("MAX_JSON_BYTES", 64 * 1024 * 1024)


def build_unknown(det: Detection, fs: StateFiles) -> Found:
    return every_kind(Found(), lambda kind: missing(
        kind, "no framework's checkpoint files were recognised here."))


# framework -> "module:function" under analysis/state/, imported only for the framework found:
# a safetensors-only folder (the 94,000-tensor benchmark) loads one small module, not all six.
BUILDERS: dict[str, str] = {
    "hf-trainer": "hf:build_hf", "accelerate": "accelerate:build_accelerate",
    "lightning": "lightning:build_lightning", "torchtitan": "dcp:build_torchtitan",
    "dcp": "dcp:build_dcp", "deepspeed": "deepspeed:build_deepspeed",
    "megatron": "megatron:build_megatron", "safetensors": "weights:build_safetensors",
    "torch": "weights:build_safetensors",
}


def _builder(framework: str):
    target = BUILDERS.get(framework)
    if target is None:
        return build_unknown
    module, name = target.split(":")
    return getattr(importlib.import_module(f"ckpt_browser.analysis.state.{module}"), name)


# Files that only make sense as part of the folder around them: a user pointing at one means
# the checkpoint it belongs to.
_PART_OF_FOLDER = (".metadata", *MARKER_FILES)


def _checkpoint_of(path: str) -> str:
    name = os.path.basename(path)
    if os.path.isfile(path) and (name in _PART_OF_FOLDER or name.endswith((".distcp", ".index.json"))):
        return os.path.dirname(path) or "."
    return path


def training_state(path: str) -> TrainingState:
    """Detect the framework at `path` and describe all seven components. Never raises for a
    damaged or malicious file: those become statuses and problems."""
    det = detect(_checkpoint_of(path))
    fs = StateFiles(det.root, MAX_JSON)
    try:
        found = _builder(det.framework)(det, fs)
    finally:
        fs.close()
    comps = {k: found.components.get(k) or missing(k, "nothing in this checkpoint holds it.")
             for k in COMPONENTS}
    step = found.step if found.step is not None else det.step
    epoch = found.epoch if found.epoch is not None else det.epoch
    problems = list(det.problems) + fs.problems + found.problems
    return TrainingState(det.framework, step, epoch, found.ranks, comps, tuple(fs.read),
                         tuple(dict.fromkeys(problems)), det.root)
