"""accelerate's save_state folders: `checkpoint_N` counts saves (automatic naming), its
examples name them `step_N` or `epoch_N` (`accelerator.py` save_state)."""

from __future__ import annotations

import re

from ckpt_browser.producers.base import Producer, Seen, match_roles, rx, step_name
from ckpt_browser.producers.trainer import TrainerRule

RULE = TrainerRule(
    "accelerate",
    {
        "weights": rx(r"model(?:_\d+)?\.safetensors", r"pytorch_model(?:_\d+)?\.bin",
                      r"pytorch_model_fsdp(?:_\d+)?\.bin",
                      r"pytorch_model_fsdp(?:_\d+)?_rank\d+\.bin"),
        "optimizer": rx(r"optimizer(?:_\d+)?\.bin", r"optimizer(?:_\d+)?_rank\d+\.bin"),
        "scheduler": rx(r"scheduler(?:_\d+)?\.bin"),
        "rng": rx(r"random_states_\d+\.pkl"),
        "data": rx(r"dl_state_dict(?:_\d+)?\.bin", r"sampler(?:_\d+)?\.bin"),
        "progress": rx(r"custom_checkpoint_\d+\.pkl"),
        "scaler": rx(r"scaler\.pt"),
    },
    rx(r"random_states_\d+\.pkl", r"optimizer(?:_\d+)?\.bin", r"scheduler(?:_\d+)?\.bin",
       r"dl_state_dict(?:_\d+)?\.bin", r"custom_checkpoint_\d+\.pkl"),
    re.compile(r"^pytorch_model(?:_\d+)?$"))


def _claims(seen: Seen) -> bool:
    """A folder: one of its signature names. One file: any of its names, but a lone
    .safetensors file is plain safetensors."""
    if seen.is_file:
        return not seen.names[0].endswith(".safetensors") and bool(
            match_roles(RULE.roles, seen.names))
    return RULE.signed(seen)


ACCELERATE = Producer(
    "accelerate", _claims, RULE.roles_of,
    (step_name("step_N", r"step_(\d+)"), step_name("epoch_N", r"epoch_(\d+)", "epoch"),
     step_name("checkpoint_N", r"checkpoint_(\d+)", "save")),
    rank_names=re.compile(r"^random_states_(\d+)\.pkl$"),
    rng_file=lambda rank, n: f"random_states_{rank}.pkl")
