"""torchtitan: `step-N` folders, DCP by default or HF safetensors when it saves for export."""

from __future__ import annotations

from ckpt_browser.producers.base import Detection, Producer, Seen, rx, step_name
from ckpt_browser.producers.dcp import dcp_only, has_dcp

SAFETENSORS = rx(r"model\.safetensors", r"model-\d+-of-\d+\.safetensors",
                 r"model\.safetensors\.index\.json")


def _claims(seen: Seen) -> bool:
    return not seen.is_file and seen.base.startswith("step-") and (
        has_dcp(seen) or "model.safetensors.index.json" in seen.names)


def _roles(seen: Seen) -> Detection:
    if has_dcp(seen):
        return dcp_only(seen, "torchtitan")
    return Detection(seen.path, seen.path, "torchtitan", seen.step, seen.source, variant="hf",
                     roles={"weights": tuple(n for n in seen.names if SAFETENSORS.match(n))})


TORCHTITAN = Producer("torchtitan", _claims, _roles,
                      (step_name("step-N", r"step-(\d+)"),))  # components/checkpoint.py
