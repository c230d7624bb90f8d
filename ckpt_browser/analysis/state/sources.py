"""Where HF Trainer and accelerate keep weights and optimizer: plain files, an FSDP DCP folder,
or a nested DeepSpeed tag (the same three layouts under other file names)."""

from __future__ import annotations

from ckpt_browser.analysis.state.common import leaf, missing, under
from ckpt_browser.analysis.state.deepspeed import DeepSpeedParts, ds_optimizer, ds_weights
from ckpt_browser.analysis.state.files import StateFiles
from ckpt_browser.analysis.state.optimizer import optimizer_from_dcp, optimizer_from_pickles
from ckpt_browser.analysis.state.weights import weights_component
from ckpt_browser.model import Component
from ckpt_browser.producers.base import Detection
from ckpt_browser.producers.deepspeed import DS_MODEL


def weights_sources(fs: StateFiles, det: Detection, ds: DeepSpeedParts | None,
                    fsdp_prefix: str = "pytorch_model_fsdp") -> Component:
    files = det.files("weights")
    plain = [f for f in files if not DS_MODEL.match(leaf(f)) and not _in_dcp(det, f)]
    dcp = [rel for rel in det.dcp if rel.startswith(fsdp_prefix)]
    if plain:
        return weights_component(fs, plain)
    if dcp:
        return weights_component(fs, under(files, dcp[0]), dcp=dcp[0], dcp_prefix="model.")
    if ds is not None and ds.model_files:
        return ds_weights(fs, ds, [f for f in files if f not in plain])
    return missing("weights", "no model weights here: this checkpoint cannot even warm-start "
                   "a run.")


def _in_dcp(det: Detection, f: str) -> bool:
    return any(f.startswith(rel + "/") for rel in det.dcp if rel)


def optimizer_sources(fs: StateFiles, det: Detection, ds: DeepSpeedParts | None) -> Component:
    files = det.files("optimizer")
    plain = [f for f in files if "/" not in f]
    dcp = [rel for rel in det.dcp if rel.startswith("optimizer")]
    if plain:
        return optimizer_from_pickles(fs, plain)
    if dcp:
        return optimizer_from_dcp(fs, under(files, dcp[0]), dcp[0], "optimizer.")
    if ds is not None and (ds.optim_files or ds.model_files):
        return ds_optimizer(fs, ds, [f for f in files if f.endswith("zero/")])
    return missing("optimizer", "no optimizer state (saved with save_only_model=True?): "
                   "Adam's moments restart from zero, so this is a warm start, not a resume.")
