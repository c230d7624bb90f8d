#!/usr/bin/env python
"""Regenerate ``sample_checkpoints/deepspeed-zero1/``, ``deepspeed-zero2-tied/`` and
``deepspeed-zero3-tied/``:
real DeepSpeed ``engine.save_checkpoint`` from 2 gloo ranks on DeepSpeed's CPU accelerator.

Usage (from any working directory, in a venv with DeepSpeed; pin torch)::

    pip install "torch==2.13.0" "deepspeed==0.19.8"
    python sample_checkpoints/make_zero_samples.py          # all three
    python sample_checkpoints/make_zero_samples.py zero1    # some of: zero1, zero2, zero3

The model has what ``zero_to_fp32`` treats apart from plain trainable weights: an lm_head tied
to the embedding (``shared_params``), two frozen parameters (``frozen_param_shapes`` and
``frozen_param_fragments``; ZeRO-1 does not save them), a float32, a float16 and an int64
buffer (``buffer_names``; a non-persistent one is not saved), two parameter groups, and sizes
that leave padding in the rank partitions. ``zero1`` and ``zero2`` run fp16 (DeepSpeed keeps
the float32 buffer float32; the float16 one shows zero_to_fp32's cast; ZeRO-2's frozen
parameters stay float16); ``zero3`` runs fp32. The setup is make_training_samples.py's
DeepSpeed one.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_training_samples import SEED, _deterministic_torch, _free_port  # noqa: E402

HERE = Path(__file__).resolve().parent
WORLD, STEPS = 2, 3
FOLDERS = {"zero1": "deepspeed-zero1", "zero2": "deepspeed-zero2-tied",
           "zero3": "deepspeed-zero3-tied"}


def _config(stage: int) -> dict:
    return {
        "train_micro_batch_size_per_gpu": 2,
        "gradient_accumulation_steps": 1,
        "steps_per_print": 1000,
        "fp16": {"enabled": stage < 3, "initial_scale_power": 8},
        "zero_optimization": {"stage": stage},
        "zero_allow_untested_optimizer": True,
        "wall_clock_breakdown": False,
    }


def _model():
    import torch

    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(10, 8)
            self.gain = torch.nn.Parameter(torch.linspace(0.9, 1.1, 8))
            self.fc = torch.nn.Linear(8, 8)
            self.head2 = torch.nn.Linear(8, 3)
            self.lm_head = torch.nn.Linear(8, 10, bias=False)
            self.lm_head.weight = self.embed.weight
            self.offset = torch.nn.Parameter(torch.randn(3))
            self.register_buffer("scale", torch.linspace(0.5, 1.5, 8))
            self.register_buffer("mask", torch.tensor([1.0, 0.5, 2.0], dtype=torch.float16))
            self.register_buffer("count", torch.tensor(7, dtype=torch.int64))
            self.register_buffer("cache", torch.zeros(3), persistent=False)

        def forward(self, tokens):
            h = self.embed(tokens) * self.scale * self.gain
            h = h.to(self.fc.weight.dtype)  # DeepSpeed keeps buffers float32
            h = h + self.fc(h)
            extra = (self.head2(h) + self.offset) * self.mask
            return self.lm_head(h), extra

    m = Tied()
    for p in (m.gain, m.offset):
        p.requires_grad_(False)
    return m


def _worker(rank: int, world: int, port: int, stage: int, folder: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world),
                      DS_ACCELERATOR="cpu")
    import torch

    _deterministic_torch()
    import deepspeed
    from deepspeed.accelerator import get_accelerator

    # as make_training_samples.py: torch runs fp16 layers on any CPU
    type(get_accelerator()).is_fp16_supported = lambda self: True
    torch.manual_seed(SEED)
    deepspeed.init_distributed(dist_backend="gloo")
    if stage == 3:
        with deepspeed.zero.Init(config_dict_or_path=_config(stage)):
            model = _model()
    else:
        model = _model()
    decay = [model.embed.weight, model.fc.weight, model.head2.weight]
    groups = [{"params": decay, "weight_decay": 0.01},
              {"params": [model.fc.bias, model.head2.bias], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=1e-2)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=_config(stage))
    g = torch.Generator().manual_seed(SEED + rank)
    for _ in range(STEPS):
        tokens = torch.randint(0, 10, (2, 5), generator=g)
        logits, extra = engine(tokens)
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, 10),
                                                 tokens.reshape(-1)) + extra.float().pow(2).mean()
        engine.backward(loss)
        engine.step()
    engine.save_checkpoint(folder)
    torch.distributed.barrier()


def build(name: str) -> None:
    import torch.multiprocessing as mp

    out = HERE / FOLDERS[name]
    shutil.rmtree(out, ignore_errors=True)
    os.environ["DS_ACCELERATOR"] = "cpu"
    os.chdir(HERE)  # save_checkpoint gets a relative folder: no absolute path in the files
    stage = int(name[-1])
    mp.spawn(_worker, args=(WORLD, _free_port(), stage, FOLDERS[name]), nprocs=WORLD, join=True)
    print(name, sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()))


if __name__ == "__main__":
    for n in sys.argv[1:] or list(FOLDERS):
        build(n)
