"""The HF Trainer's `checkpoint-N` folders (transformers `trainer.py`, PREFIX_CHECKPOINT_DIR)."""

from __future__ import annotations

import re

from ckpt_browser.producers.base import Producer, rx, step_name
from ckpt_browser.producers.trainer import TrainerRule

RULE = TrainerRule(
    "hf-trainer",
    {
        "weights": rx(r"model\.safetensors", r"model-\d+-of-\d+\.safetensors",
                      r"model\.safetensors\.index\.json", r"pytorch_model\.bin",
                      r"pytorch_model-\d+-of-\d+\.bin", r"pytorch_model\.bin\.index\.json",
                      r"adapter_model\.(?:safetensors|bin)", r"pytorch_model_fsdp\.bin",
                      r"pytorch_model_fsdp(?:_\d+)?_rank\d+\.bin",
                      r"rank\d+-of-\d+-pytorch_model\.bin"),
        "optimizer": rx(r"optimizer\.pt", r"optimizer\.bin", r"optimizer(?:_\d+)?_rank\d+\.bin",
                        r"rank\d+-of-\d+-optimizer\.pt", r"optimizer\.pt_.+"),
        "scheduler": rx(r"scheduler\.pt"),
        "rng": rx(r"rng_state\.pth", r"rng_state_\d+\.pth"),
        "progress": rx(r"trainer_state\.json"),
        "data": rx(r"trainer_state\.json", r"training_args\.bin"),
        "scaler": rx(r"scaler\.pt"),
    },
    # any one of these names, in a folder or alone: a lone pytorch_model.bin is no sign of HF
    rx(r"trainer_state\.json", r"training_args\.bin", r"optimizer\.pt", r"scheduler\.pt",
       r"rng_state(?:_\d+)?\.pth"),
    re.compile(r"^global_step\d+$"), adapters=True, folder_epoch=False)

HF_TRAINER = Producer("hf-trainer", RULE.signed, RULE.roles_of,
                      (step_name("checkpoint-N", r"checkpoint-(\d+)"),),
                      rank_names=re.compile(r"^rng_state_(\d+)\.pth$"),
                      rng_file=lambda rank, n: "rng_state.pth" if n == 1 else
                      f"rng_state_{rank}.pth")
