#!/usr/bin/env python
"""Regenerate the small multi-framework training checkpoints in ``sample_checkpoints/``.

Usage (from any working directory)::

    pip install "torch==2.13.0" transformers accelerate lightning deepspeed grain   # pin torch on the same line
    python sample_checkpoints/make_training_samples.py            # all samples
    python sample_checkpoints/make_training_samples.py lightning  # only some (names below)

None of these packages is a dependency of ckpt-browser; they are only needed to rebuild the
samples. Each sample is built in its own fresh Python process (so the frameworks' global
state never mixes), then checked with safe loaders. Every output folder is deleted first,
then rebuilt; nothing else in ``sample_checkpoints/`` is touched (in particular not the
``tiny-llama-*`` samples made by ``make_samples.py``).

Samples (name -> folder):

``torchtitan``   -> ``torchtitan-run/checkpoint/step-10/``
    REAL ``torch.distributed.checkpoint.save`` from 2 gloo ranks (``torch.multiprocessing.spawn``)
    of a tiny Llama-style model sharded with FSDP2 ``fully_shard`` on a CPU DeviceMesh, in the
    torchtitan layout: model FQNs at top level, ``optimizer.*`` flattened by
    ``get_optimizer_state_dict(..., flatten_optimizer_state_dict=True)``, ``lr_scheduler``,
    ``dataloader`` (Grain-era state, per-rank ``dp_rank_{r}``) and ``train_state``. torchtitan
    itself is not installed: the state containers are re-created from its source.
``dcp-ranks``    -> ``dcp-ranks/ranks-2/`` + ``dcp-ranks/ranks-4/``
    Two REAL ``torch.distributed.checkpoint.save`` checkpoints of exactly the same tensors (a tiny
    model after 2 AdamW steps, one BF16 weight, vocab 7 so dim 0 splits unevenly), in the
    torchtitan key layout: ``ranks-2`` from 2 gloo ranks with FSDP2 ``fully_shard`` on a 1-D
    mesh (chunks split along dim 0), ``ranks-4`` from 4 gloo ranks on a 2x2 ("dp", "tp") mesh
    with DTensor parameters placed ``[Shard(0), Shard(1)]``, ``[Shard(0), Shard(0)]`` or
    ``[Shard(0), Replicate()]`` (chunks split along dim 1 too). For resharding tests.
``lightning``    -> ``lightning/epoch=0-step=4.ckpt`` + ``lightning/last.ckpt``
    REAL ``lightning.Trainer`` + ``ModelCheckpoint`` run (AdamW + StepLR, 4 steps, stops mid-epoch).
``accelerate``   -> ``accelerate-state/step_4/``
    REAL ``Accelerator().save_state`` (AdamW + LambdaLR, one ``register_for_checkpointing`` object).
``deepspeed``    -> ``deepspeed-run/``
    REAL DeepSpeed ZeRO-2 ``engine.save_checkpoint`` from 2 gloo ranks on DeepSpeed's CPU
    accelerator, fp16 with dynamic loss scaling (DeepSpeed's "fp16 supported on this device"
    check is bypassed: it is False on this CPU, but fp16 training runs fine).
``megatron``     -> ``megatron-run/``
    SHAPED: Megatron-LM cannot run here (it needs CUDA); the legacy ``torch`` format
    (``iter_0000004/mp_rank_00/model_optim_rng.pt``) is written with ``torch.save`` with exactly the
    structure of ``megatron/training/checkpointing.py``. ``args`` is a plain ``argparse.Namespace``.
``hf-multirank`` -> ``hf-multirank/checkpoint-4/``
    REAL ``transformers.Trainer`` DDP run with 2 processes (``torch.distributed.run``, gloo, CPU),
    ``max_steps=8``, ``save_steps=4``, attention dropout 0.1; only ``checkpoint-4`` is kept, so
    the run can be resumed from it (``tests/resume/test_trainer_resume.py`` does).
``hf-run3``      -> ``hf-run3/checkpoint-{2,4,6}/``
    REAL single-process ``transformers.Trainer`` run, ``save_steps=2``, ``max_steps=6``.
``malicious``    -> ``malicious/``
    HF-like folder whose ``optimizer.pt`` carries a pickle payload ``os.system("touch
    ckpt-browser-PWNED")``. This script never unpickles that file.

Determinism: python ``random``, numpy and torch are seeded, torch runs single-threaded, all
paths handed to the frameworks are relative, and the script checks that no written file
contains the repository path, the home directory, ``/tmp/`` or the host name. Re-running gives
the same tensors and JSON. Known byte-level exception: the DCP ``.metadata`` pickle holds a
random ``save_id``/``load_id`` UUID per save (torch's ``FileSystemWriter``), so its bytes change
on every run although its content is otherwise identical.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import shutil
import socket
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = 1234

FOLDERS = {
    "torchtitan": "torchtitan-run",
    "dcp-ranks": "dcp-ranks",
    "lightning": "lightning",
    "accelerate": "accelerate-state",
    "deepspeed": "deepspeed-run",
    "megatron": "megatron-run",
    "hf-multirank": "hf-multirank",
    "hf-run3": "hf-run3",
    "malicious": "malicious",
}
# hf-run3 must exist before malicious (malicious reuses its real step-2 files).
ORDER = list(FOLDERS)

PWNED_NAME = "ckpt-browser-PWNED"


# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------


def _seed_everything(seed: int = SEED) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _deterministic_torch() -> None:
    import torch

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _numpy_safe_globals():
    """Catalog §8.2: what weights_only=True needs for numpy RNG states."""
    import numpy as np

    np_core = getattr(np, "_core", None) or np.core
    return [np_core.multiarray._reconstruct, np.ndarray, np.dtype, type(np.dtype(np.uint32))]


def _safe_load(path: Path, extra_globals=()):
    import torch

    with torch.serialization.safe_globals(_numpy_safe_globals() + list(extra_globals)):
        return torch.load(path, weights_only=True, map_location="cpu")


def _check(cond: bool, msg: str) -> None:
    if not cond:
        sys.exit(f"CHECK FAILED: {msg}")


def _check_no_abs_paths(root: Path) -> None:
    needles = [str(HERE).encode(), str(HERE.parent).encode(), str(Path.home()).encode(), b"/tmp/"]
    host = socket.gethostname()
    if len(host) >= 6:
        needles.append(host.encode())
    for p in sorted(root.rglob("*")):
        if p.is_file():
            blob = p.read_bytes()
            for n in needles:
                if n in blob:
                    sys.exit(f"{p} contains {n!r}")


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


# Tiny HF model shared by the Trainer samples (hf-multirank, hf-run3, malicious).
def _tiny_llama(attention_dropout: float = 0.0):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=32,
        hidden_size=8,
        intermediate_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=4,
        max_position_embeddings=32,
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        attention_dropout=attention_dropout,
        dtype="float32",
    )
    model = LlamaForCausalLM(cfg)
    model.to(torch.float32)
    return model


class _RandomTokens:
    """Map-style dataset of random token ids, usable by Trainer."""

    def __init__(self, n: int, seq_len: int, vocab: int, seed: int):
        import torch

        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(3, vocab, (n, seq_len), generator=g)

    def __len__(self) -> int:
        return self.ids.shape[0]

    def __getitem__(self, i: int) -> dict:
        import torch

        x = self.ids[i]
        return {"input_ids": x, "attention_mask": torch.ones_like(x), "labels": x.clone()}


def _trainer_args(output_dir: str, **over):
    import inspect

    from transformers import TrainingArguments

    kw = dict(
        output_dir=output_dir,  # relative on purpose
        save_strategy="steps",
        logging_strategy="steps",
        logging_steps=1,
        learning_rate=1e-3,
        weight_decay=0.01,
        optim="adamw_torch",
        lr_scheduler_type="linear",
        warmup_steps=1,
        seed=SEED,
        data_seed=SEED,
        report_to=[],
        use_cpu=True,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    kw.update(over)
    if "save_safetensors" in inspect.signature(TrainingArguments.__init__).parameters:
        kw["save_safetensors"] = True
    return TrainingArguments(**kw)


def _verify_hf_checkpoint(ck: Path, rng_files: list[str]) -> dict:
    from safetensors import safe_open

    names = set(p.name for p in ck.iterdir())
    for f in ["model.safetensors", "optimizer.pt", "scheduler.pt", "trainer_state.json", "config.json"] + rng_files:
        _check(f in names, f"{ck}: missing {f} (has {sorted(names)})")
    with safe_open(str(ck / "model.safetensors"), framework="pt") as f:
        _check(len(list(f.keys())) > 0, "empty safetensors")
    opt = _safe_load(ck / "optimizer.pt")
    _check(set(opt) == {"state", "param_groups"}, f"optimizer keys {set(opt)}")
    sch = _safe_load(ck / "scheduler.pt")
    _check("last_epoch" in sch, "scheduler has last_epoch")
    for r in rng_files:
        rng = _safe_load(ck / r)
        _check({"python", "numpy", "cpu"} <= set(rng), f"{r} keys {set(rng)}")
    state = json.loads((ck / "trainer_state.json").read_text())
    return state


# --------------------------------------------------------------------------------------
# 1. torchtitan-shaped DCP from 2 ranks (real dcp.save, real FSDP2 sharding)
# --------------------------------------------------------------------------------------

TT_STEPS = 10
TT_VOCAB, TT_DIM, TT_HIDDEN, TT_SEQ, TT_BATCH = 16, 8, 16, 8, 2
TT_WORLD = 2


def _tt_model():
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Attention(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.wq = nn.Linear(d, d, bias=False)
            self.wk = nn.Linear(d, d, bias=False)
            self.wv = nn.Linear(d, d, bias=False)
            self.wo = nn.Linear(d, d, bias=False)

        def forward(self, x):
            q, k, v = self.wq(x), self.wk(x), self.wv(x)
            return self.wo(F.scaled_dot_product_attention(q, k, v, is_causal=True))

    class FeedForward(nn.Module):
        def __init__(self, d, h):
            super().__init__()
            self.w1 = nn.Linear(d, h, bias=False)
            self.w2 = nn.Linear(h, d, bias=False)
            self.w3 = nn.Linear(d, h, bias=False)

        def forward(self, x):
            return self.w2(F.silu(self.w1(x)) * self.w3(x))

    class TransformerBlock(nn.Module):
        def __init__(self, d, h):
            super().__init__()
            self.attention = Attention(d)
            self.feed_forward = FeedForward(d, h)
            self.attention_norm = nn.RMSNorm(d, eps=1e-5)
            self.ffn_norm = nn.RMSNorm(d, eps=1e-5)

        def forward(self, x):
            x = x + self.attention(self.attention_norm(x))
            return x + self.feed_forward(self.ffn_norm(x))

    class Transformer(nn.Module):
        """Parameter names follow torchtitan's Llama (tok_embeddings, layers.N.attention.wq, ...)."""

        def __init__(self):
            super().__init__()
            self.tok_embeddings = nn.Embedding(TT_VOCAB, TT_DIM)
            self.layers = nn.ModuleDict({"0": TransformerBlock(TT_DIM, TT_HIDDEN)})
            self.norm = nn.RMSNorm(TT_DIM, eps=1e-5)
            self.output = nn.Linear(TT_DIM, TT_VOCAB, bias=False)

        def forward(self, tokens):
            h = self.tok_embeddings(tokens)
            for layer in self.layers.values():
                h = layer(h)
            return self.output(self.norm(h))

    torch.manual_seed(SEED)
    return Transformer()


def _tt_lr_lambda(step: int, warmup_steps: int = 2, total_steps: int = TT_STEPS) -> float:
    # torchtitan linear_warmup_stable_decay with decay_ratio=None, decay_type="linear"
    stable_steps = 1
    decay_steps = total_steps - warmup_steps
    if step < warmup_steps:
        return float((step + 1) / warmup_steps)
    if step < warmup_steps + stable_steps:
        return 1.0
    progress = float(step + 1 - warmup_steps - stable_steps) / decay_steps
    return 1 - progress


def _tt_pipeline_fingerprint() -> str:
    """torchtitan components/data/dataset.py fingerprint_parts() of the loader recipe."""
    import hashlib

    def parts(*ps: str) -> str:
        d = hashlib.sha256()
        for p in ps:
            d.update(p.encode())
            d.update(b"\0")
        return d.hexdigest()

    dataset_fp = parts("SingleDatasetConfig", parts("SyntheticSourceConfig", "rows=64"), "none")
    return parts(dataset_fp, "seed=42", "shuffle=True", "infinite=True", f"seq_len={TT_SEQ}", f"local_batch_size={TT_BATCH}")


def _tt_grain_state(rank: int, steps: int) -> dict:
    """State of torchtitan's GrainDataLoader iterator after `steps` batches.

    With grain installed this is the live ``iterator.get_state()`` of the same pipeline
    torchtitan builds (shuffle -> DP stride shard -> repeat -> batch -> to_iter_dataset ->
    ThreadPrefetchIterDataset); without grain the same dict is written literally.
    """
    expected = {"next_index": steps}
    try:
        import grain.python as grain
        from grain import experimental as grain_experimental
    except ImportError:
        return expected
    ds = grain.MapDataset.source(list(range(64))).shuffle(seed=42)
    ds = ds[rank::TT_WORLD].repeat().batch(TT_BATCH)
    it = iter(grain_experimental.ThreadPrefetchIterDataset(ds.to_iter_dataset(), prefetch_buffer_size=8))
    for _ in range(steps):
        next(it)
    state = it.get_state()
    _check(state == expected, f"grain state {state} != {expected}")
    return state


def _tt_setup(world: int, model_fn=None):
    """The FSDP2 model, AdamW and LambdaLR of the sample (after init_process_group).

    tests/resume/fsdp2_worker.py builds its runs with this, ``_tt_train_step`` and ``_tt_state``.
    """
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    model = (model_fn or _tt_model)()
    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("dp_shard",))
    for block in model.layers.values():
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    # torchtitan defaults: AdamW lr 8e-4, betas (0.9, 0.95), eps 1e-8, weight_decay 0.1
    opt = torch.optim.AdamW(model.parameters(), lr=8e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, foreach=True)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, _tt_lr_lambda)
    return model, opt, sched


def _tt_data(rank: int):
    """Rank `rank`'s batch stream: batch n is the n-th draw of this generator."""
    import torch

    return torch.Generator().manual_seed(SEED + rank)


def _tt_batch(g):
    """The next batch of the stream `g`: token ids, one more than the sequence (inputs, labels)."""
    import torch

    return torch.randint(0, TT_VOCAB, (TT_BATCH, TT_SEQ + 1), generator=g)


def _tt_train_step(model, opt, sched, g):
    """One training step on the next batch of `g`; returns (loss, tokens in the batch)."""
    import torch
    import torch.nn.functional as F

    tokens = _tt_batch(g)
    inputs, labels = tokens[:, :-1], tokens[:, 1:]
    logits = model(inputs)
    loss = F.cross_entropy(logits.reshape(-1, TT_VOCAB), labels.reshape(-1))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0, foreach=True)
    opt.step()
    sched.step()
    opt.zero_grad()
    return loss.detach(), labels.numel()


def _tt_state(model, opt, sched, rank: int, world: int, step: int, ntokens_seen: int) -> dict:
    """What the sample's dcp.save writes, in torchtitan's layout (each rank its own dict)."""
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        get_model_state_dict,
        get_optimizer_state_dict,
    )

    # torchtitan CheckpointManager._flattened_model_states_sd(): model state at top level,
    # the other Stateful objects under their names; dcp.save flattens nested dicts with dots.
    state = dict(get_model_state_dict(model))
    state["optimizer"] = get_optimizer_state_dict(
        model, opt, options=StateDictOptions(flatten_optimizer_state_dict=True)
    )
    state["lr_scheduler"] = {"last_epoch": sched.last_epoch}  # LRSchedulersContainer.state_dict()
    state["dataloader"] = {  # GrainDataLoader.state_dict()
        "version": 1,
        "dp_world_size": world,
        "pipeline_fingerprint": _tt_pipeline_fingerprint(),
        f"dp_rank_{rank}": _tt_grain_state(rank, step),
    }
    state["train_state"] = {"step": step, "ntokens_seen": ntokens_seen}  # Trainer.state_dict()
    return state


def _tt_worker(rank: int, world: int, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp

    _deterministic_torch()
    dist.init_process_group("gloo", rank=rank, world_size=world)
    model, opt, sched = _tt_setup(world)
    g = _tt_data(rank)
    ntokens_seen = 0
    for _ in range(TT_STEPS):
        _, ntokens = _tt_train_step(model, opt, sched, g)
        ntokens_seen += ntokens
    state = _tt_state(model, opt, sched, rank, world, TT_STEPS, ntokens_seen)
    dcp.save(state, checkpoint_id=os.path.join("checkpoint", f"step-{TT_STEPS}"))
    dist.barrier()
    dist.destroy_process_group()


def build_torchtitan(out: Path) -> None:
    import torch.multiprocessing as mp

    out.mkdir()
    os.chdir(out)  # checkpoint_id is relative: StorageMeta.checkpoint_id == 'checkpoint/step-10'
    mp.spawn(_tt_worker, args=(TT_WORLD, _free_port()), nprocs=TT_WORLD, join=True)
    os.chdir(HERE)
    verify_torchtitan(out)


def verify_torchtitan(out: Path) -> None:
    import collections

    import torch
    from torch.distributed.checkpoint import FileSystemReader

    step = out / "checkpoint" / f"step-{TT_STEPS}"
    files = sorted(p.name for p in step.iterdir())
    _check(".metadata" in files, f"no .metadata in {files}")
    _check("__0_0.distcp" in files and "__1_0.distcp" in files, f"distcp files {files}")
    md = FileSystemReader(str(step)).read_metadata()  # plain pickle: OK on our own fresh file
    sdm = md.state_dict_metadata
    for key in (
        "tok_embeddings.weight",
        "layers.0.attention.wq.weight",
        "optimizer.state.tok_embeddings.weight.exp_avg",
        "optimizer.state.tok_embeddings.weight.exp_avg_sq",
        "optimizer.state.tok_embeddings.weight.step",
        "optimizer.param_groups.tok_embeddings.weight.lr",
        "lr_scheduler.last_epoch",
        "dataloader.version",
        "dataloader.dp_world_size",
        "dataloader.dp_rank_0.next_index",
        "dataloader.dp_rank_1.next_index",
        "train_state.step",
        "train_state.ntokens_seen",
    ):
        _check(key in sdm, f"DCP key {key} missing")
    _check(not any(k.startswith("model.") for k in sdm), "model keys must have no 'model.' prefix")
    # real chunks split across both ranks' files
    per_file = collections.defaultdict(set)
    for idx, info in md.storage_data.items():
        per_file[info.relative_path].add(idx.fqn)
    for fqn in ("tok_embeddings.weight", "output.weight", "optimizer.state.output.weight.exp_avg"):
        _check(len(sdm[fqn].chunks) == 2, f"{fqn} has {len(sdm[fqn].chunks)} chunks")
        _check(fqn in per_file["__0_0.distcp"] and fqn in per_file["__1_0.distcp"], f"{fqn} not in both files")
    # every item blob loads with weights_only=True
    blobs = {}
    for idx, info in md.storage_data.items():
        with open(step / info.relative_path, "rb") as f:
            f.seek(info.offset)
            blob = f.read(info.length)
        blobs[idx.fqn] = torch.load(io.BytesIO(blob), weights_only=True)
    _check(blobs["train_state.step"] == TT_STEPS, "train_state.step")
    _check(blobs["lr_scheduler.last_epoch"] == TT_STEPS, "lr_scheduler.last_epoch")
    _check(blobs["dataloader.dp_world_size"] == TT_WORLD, "dp_world_size")
    _check(str(md.storage_meta.checkpoint_id) == f"checkpoint/step-{TT_STEPS}", f"checkpoint_id {md.storage_meta.checkpoint_id}")
    print(f"torchtitan: {len(sdm)} DCP keys, files {files}")


# --------------------------------------------------------------------------------------
# 1b. the same tensors as DCP from 2 ranks (FSDP2) and from 4 ranks (2-D DTensor "dp" x "tp")
# --------------------------------------------------------------------------------------

DR_STEPS = 2
DR_VOCAB, DR_DIM, DR_HIDDEN, DR_SEQ, DR_BATCH = 7, 8, 12, 6, 2  # vocab 7: dim 0 splits unevenly
DR_WORLDS = (2, 4)
DR_BF16 = "tok_embeddings.weight"
# ranks-4 placements on the ("dp", "tp") mesh. "Shard(1)" on tp = row-parallel TP weights,
# "Shard(0)" on tp = column-parallel ones; dp always shards dim 0 (like FSDP).
DR_PLACEMENTS_4 = {
    "tok_embeddings.weight": ("S0", "R"),
    "layers.0.attention.wq.weight": ("S0", "S0"),
    "layers.0.attention.wo.weight": ("S0", "S1"),
    "layers.0.feed_forward.w1.weight": ("S0", "S0"),
    "layers.0.feed_forward.w2.weight": ("S0", "S1"),
    "norm.weight": ("S0", "R"),
    "output.weight": ("S0", "S0"),
}


def _dr_model():
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Attention(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.wq = nn.Linear(d, d, bias=False)
            self.wo = nn.Linear(d, d, bias=False)

        def forward(self, x):  # one head, keys = values = the input (no wk/wv, to stay tiny)
            return self.wo(F.scaled_dot_product_attention(self.wq(x), x, x, is_causal=True))

    class FeedForward(nn.Module):
        def __init__(self, d, h):
            super().__init__()
            self.w1 = nn.Linear(d, h, bias=False)
            self.w2 = nn.Linear(h, d, bias=False)

        def forward(self, x):
            return self.w2(F.silu(self.w1(x)))

    class Block(nn.Module):
        def __init__(self, d, h):
            super().__init__()
            self.attention = Attention(d)
            self.feed_forward = FeedForward(d, h)

        def forward(self, x):
            x = x + self.attention(x)
            return x + self.feed_forward(x)

    class Transformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok_embeddings = nn.Embedding(DR_VOCAB, DR_DIM)
            self.layers = nn.ModuleDict({"0": Block(DR_DIM, DR_HIDDEN)})
            self.norm = nn.RMSNorm(DR_DIM, eps=1e-5)
            self.output = nn.Linear(DR_DIM, DR_VOCAB, bias=False)

        def forward(self, tokens):
            h = self.tok_embeddings(tokens).float()  # the embedding table is bf16
            return self.output(self.norm(self.layers["0"](h)))

    torch.manual_seed(SEED)
    model = Transformer()
    model.tok_embeddings.to(torch.bfloat16)
    return model


def _dr_adamw(params):
    import torch

    return torch.optim.AdamW(params, lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, foreach=False)


def _dr_full_states():
    """Train the unsharded model for DR_STEPS AdamW steps on fixed data. Every rank of both runs
    executes exactly this (seeded, one thread), so all of them hold the same full states."""
    import torch
    import torch.nn.functional as F
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_optimizer_state_dict

    model = _dr_model()
    opt = _dr_adamw(model.parameters())
    g = torch.Generator().manual_seed(SEED)
    for _ in range(DR_STEPS):
        tokens = torch.randint(0, DR_VOCAB, (DR_BATCH, DR_SEQ + 1), generator=g)
        logits = model(tokens[:, :-1])
        F.cross_entropy(logits.reshape(-1, DR_VOCAB), tokens[:, 1:].reshape(-1)).backward()
        opt.step()
        opt.zero_grad()
    return get_model_state_dict(model), get_optimizer_state_dict(model, opt)


def _dr_worker(rank: int, world: int, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    import torch.nn as nn
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        get_model_state_dict,
        get_optimizer_state_dict,
        set_model_state_dict,
        set_optimizer_state_dict,
    )
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    _deterministic_torch()
    dist.init_process_group("gloo", rank=rank, world_size=world)
    full_model_sd, full_optim_sd = _dr_full_states()

    model = _dr_model()
    if world == 2:
        mesh = init_device_mesh("cpu", (2,), mesh_dim_names=("dp_shard",))
        fully_shard(model.tok_embeddings, mesh=mesh)  # own group: FSDP2 wants one dtype per group
        fully_shard(model.layers["0"], mesh=mesh)
        fully_shard(model, mesh=mesh)
    else:
        mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
        kinds = {"S0": Shard(0), "S1": Shard(1), "R": Replicate()}
        for fqn, kind in DR_PLACEMENTS_4.items():
            owner_name, _, pname = fqn.rpartition(".")
            owner = model.get_submodule(owner_name)
            placements = [kinds[k] for k in kind]
            dt = distribute_tensor(getattr(owner, pname).detach(), mesh, placements)
            owner.register_parameter(pname, nn.Parameter(dt))
    opt = _dr_adamw(model.parameters())
    full = StateDictOptions(full_state_dict=True)
    set_model_state_dict(model, full_model_sd, options=full)
    set_optimizer_state_dict(model, opt, full_optim_sd, options=full)

    # torchtitan layout (as in the torchtitan sample): model FQNs at top level, flat optimizer.
    state = dict(get_model_state_dict(model))
    state["optimizer"] = get_optimizer_state_dict(
        model, opt, options=StateDictOptions(flatten_optimizer_state_dict=True)
    )
    dcp.save(state, checkpoint_id=f"ranks-{world}")
    dist.barrier()
    dist.destroy_process_group()
    # All files are written and closed. About 1 spawn in 40 (torch 2.13 gloo, CPU) then dies at
    # interpreter exit with "terminate called without an active exception" (SIGABRT, no Python
    # frame, after this function returned), which makes mp.spawn raise. Skip that teardown.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def build_dcp_ranks(out: Path) -> None:
    import torch.multiprocessing as mp

    out.mkdir()
    os.chdir(out)  # checkpoint_id is relative: StorageMeta.checkpoint_id == 'ranks-2' / 'ranks-4'
    for world in DR_WORLDS:
        mp.spawn(_dr_worker, args=(world, _free_port()), nprocs=world, join=True)
    os.chdir(HERE)
    verify_dcp_ranks(out)


def _dr_flatten(d, prefix: str = "") -> dict:
    flat = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            flat.update(_dr_flatten(v, key + "."))
        else:
            flat[key] = v
    return flat


def _dr_layout(md) -> dict:
    """{fqn: (dtype, size, sorted chunks as ((offsets), (sizes)))} of the tensor items."""
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    return {
        k: (
            v.properties.dtype,
            tuple(v.size),
            sorted((tuple(c.offsets), tuple(c.sizes)) for c in v.chunks),
        )
        for k, v in md.state_dict_metadata.items()
        if isinstance(v, TensorStorageMetadata)
    }


def verify_dcp_ranks(out: Path) -> None:
    import tempfile

    import torch
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    mds, layouts, files, loaded = {}, {}, {}, {}
    for world in DR_WORLDS:
        ck = out / f"ranks-{world}"
        files[world] = sorted(p.name for p in ck.iterdir())
        _check(".metadata" in files[world], f"no .metadata in {ck}: {files[world]}")
        mds[world] = FileSystemReader(str(ck)).read_metadata()  # plain pickle: our own fresh file
        layouts[world] = _dr_layout(mds[world])
        _check(str(mds[world].storage_meta.checkpoint_id) == f"ranks-{world}", f"checkpoint_id of {ck}")
    distcp = {w: [f for f in files[w] if f.endswith(".distcp")] for w in DR_WORLDS}
    _check(distcp[2] == ["__0_0.distcp", "__1_0.distcp"], f"ranks-2 files {distcp[2]}")
    _check(distcp[4] == [f"__{r}_0.distcp" for r in range(4)], f"ranks-4 files {distcp[4]}")
    _check(len(distcp[2]) != len(distcp[4]), "same number of .distcp files")

    keys2, keys4 = set(mds[2].state_dict_metadata), set(mds[4].state_dict_metadata)
    _check(keys2 == keys4, f"DCP keys differ: {sorted(keys2 ^ keys4)}")
    _check(not any(k.startswith("model.") for k in keys2), "model keys must have no 'model.' prefix")
    params = list(DR_PLACEMENTS_4)
    for fqn in params:
        for key in (fqn, f"optimizer.state.{fqn}.exp_avg", f"optimizer.state.{fqn}.exp_avg_sq",
                    f"optimizer.state.{fqn}.step", f"optimizer.param_groups.{fqn}.lr"):
            _check(key in keys2, f"DCP key {key} missing")
    for world in DR_WORLDS:
        lay = layouts[world]
        _check(set(lay) == set(layouts[2]), "tensor keys differ")
        for fqn in (DR_BF16, f"optimizer.state.{DR_BF16}.exp_avg"):
            _check(lay[fqn][0] == torch.bfloat16, f"ranks-{world} {fqn} is {lay[fqn][0]}")
        for key, (dtype, size, chunks) in lay.items():
            _check((dtype, size) == layouts[2][key][:2], f"{key}: dtype/size differ between runs")
            _check(sum(torch.Size(s).numel() for _, s in chunks) == torch.Size(size).numel(),
                   f"ranks-{world} {key}: chunks do not tile the tensor")
        # uneven dim-0 chunks (vocab 7 over 2 and 4 ranks)
        for fqn in ("tok_embeddings.weight", "output.weight"):
            rows = [s[0] for _, s in lay[fqn][2]]
            _check(len(set(rows)) > 1, f"ranks-{world} {fqn} rows {rows} are even")
    # ranks-2: FSDP2 splits dim 0 only, 2 chunks; ranks-4: some tensors also split along dim 1
    for fqn in params:
        chunks = layouts[2][fqn][2]
        _check(len(chunks) == 2 and all(o[1:] == (0,) * (len(o) - 1) for o, _ in chunks),
               f"ranks-2 {fqn} chunks {chunks}")
    dim1 = [k for k, (_, _, ch) in layouts[4].items() if any(len(o) > 1 and o[1] > 0 for o, _ in ch)]
    _check({"layers.0.attention.wo.weight", "layers.0.feed_forward.w2.weight"} <= set(dim1),
           f"ranks-4 tensors split along dim 1: {dim1}")
    _check(len(layouts[4]["output.weight"][2]) == 4, "ranks-4 output.weight must have 4 chunks")

    # the same values: convert both with DCP's own dcp_to_torch_save (outside sample_checkpoints)
    with tempfile.TemporaryDirectory(prefix="dcp-ranks-verify-") as tmp:
        for world in DR_WORLDS:
            dst = Path(tmp) / f"ranks-{world}.pt"
            dcp_to_torch_save(str(out / f"ranks-{world}"), str(dst))
            loaded[world] = _dr_flatten(torch.load(dst, weights_only=True, map_location="cpu"))
    a, b = loaded[2], loaded[4]
    ntensors = sum(isinstance(v, torch.Tensor) for v in a.values())
    _check(set(a) == set(b) == keys2, f"converted keys differ: {sorted(set(a) ^ set(b))}")
    for k in sorted(a):
        if isinstance(a[k], torch.Tensor):
            _check(isinstance(b[k], torch.Tensor) and a[k].dtype == b[k].dtype and torch.equal(a[k], b[k]),
                   f"{k} differs between ranks-2 and ranks-4")
        else:
            _check(type(a[k]) is type(b[k]) and a[k] == b[k], f"{k}: {a[k]!r} != {b[k]!r}")
    # ... and they are the states of the unsharded reference run (recomputed here)
    _deterministic_torch()
    ref_model, ref_optim = _dr_full_states()
    ref = dict(ref_model)
    for fqn, st in ref_optim["state"].items():
        ref.update({f"optimizer.state.{fqn}.{name}": v for name, v in st.items()})
    _check(len(ref) == ntensors, f"{len(ref)} reference tensors, {ntensors} in the checkpoints")
    for k, v in ref.items():
        _check(a[k].dtype == v.dtype and torch.equal(a[k], v), f"{k} differs from the unsharded run")
    _check(all(float(a[f"optimizer.state.{p}.step"]) == DR_STEPS for p in params), "optimizer step")
    _check(all(a[f"optimizer.state.{p}.exp_avg"].abs().sum() > 0 for p in params), "exp_avg is zero")
    for world in DR_WORLDS:
        nchunks = sum(len(ch) for _, _, ch in layouts[world].values())
        print(f"dcp-ranks/ranks-{world}: {len(keys2)} DCP keys ({len(layouts[world])} tensors, "
              f"{nchunks} chunks), files {files[world]}")
    print(f"dcp-ranks: {len(a)} values equal in both ({ntensors} tensors via torch.equal); "
          f"split along dim 1 in ranks-4: {sorted(dim1)}")


# --------------------------------------------------------------------------------------
# 2. Lightning (real)
# --------------------------------------------------------------------------------------


def build_lightning(out: Path) -> None:
    import fsspec
    import lightning as L
    import torch
    from lightning.pytorch.callbacks import ModelCheckpoint

    _seed_everything()
    _deterministic_torch()

    class TinyRegressor(L.LightningModule):
        def __init__(self, in_features: int = 4, hidden: int = 8, lr: float = 0.01):
            super().__init__()
            self.save_hyperparameters()
            self.net = torch.nn.Sequential(
                torch.nn.Linear(in_features, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, 1)
            )

        def training_step(self, batch, batch_idx):
            x, y = batch
            return torch.nn.functional.mse_loss(self.net(x), y)

        def configure_optimizers(self):
            opt = torch.optim.AdamW(self.parameters(), lr=self.hparams.lr)
            sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
            return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    g = torch.Generator().manual_seed(SEED)
    x, y = torch.randn(12, 4, generator=g), torch.randn(12, 1, generator=g)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(x, y),
        batch_size=2,
        shuffle=True,
        generator=torch.Generator().manual_seed(SEED),
    )
    # ModelCheckpoint turns every *local* dirpath into an absolute realpath (and stores it in
    # the callback state). A remote fsspec URL is kept as given, so the run writes to fsspec's
    # in-memory filesystem and the bytes are copied out unchanged.
    ckpt_cb = ModelCheckpoint(dirpath="memory://lightning", save_last=True)
    trainer = L.Trainer(
        max_steps=4,  # 6 batches per epoch: stops mid-epoch
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[ckpt_cb],
        deterministic=True,
    )
    trainer.fit(TinyRegressor(), loader)
    fs = fsspec.filesystem("memory")
    out.mkdir()
    for p in sorted(fs.ls("/lightning", detail=False)):
        (out / os.path.basename(p)).write_bytes(fs.cat(p))
    fs.rm("/lightning", recursive=True)
    verify_lightning(out)


def verify_lightning(out: Path) -> None:
    import torch

    names = sorted(p.name for p in out.iterdir())
    _check(names == ["epoch=0-step=4.ckpt", "last.ckpt"], f"lightning files {names}")
    for n in names:
        _check(torch.serialization.get_unsafe_globals_in_checkpoint(str(out / n)) == [], f"{n} unsafe globals")
        ck = _safe_load(out / n)
        for k in ("epoch", "global_step", "pytorch-lightning_version", "state_dict", "loops", "callbacks", "optimizer_states", "lr_schedulers", "hyper_parameters"):
            _check(k in ck, f"{n}: missing {k}")
        _check(ck["global_step"] == 4, "global_step")
        fl = ck["loops"]["fit_loop"]
        _check(fl["epoch_loop.automatic_optimization.optim_progress"]["optimizer"]["step"]["total"]["completed"] == 4, "optim steps")
    print(f"lightning: {names}")


# --------------------------------------------------------------------------------------
# 3. accelerate save_state (real)
# --------------------------------------------------------------------------------------


class _TrainProgress:
    """A small user object registered with Accelerator.register_for_checkpointing."""

    def __init__(self):
        self.global_step = 0
        self.epoch = 0

    def state_dict(self) -> dict:
        return {"global_step": self.global_step, "epoch": self.epoch}

    def load_state_dict(self, sd: dict) -> None:
        self.global_step, self.epoch = sd["global_step"], sd["epoch"]


def _acc_lr_lambda(step: int) -> float:
    return min(1.0, (step + 1) / 2)


def build_accelerate(out: Path) -> None:
    import torch
    from accelerate import Accelerator

    _seed_everything()
    _deterministic_torch()

    class TinyNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = torch.nn.Linear(6, 8)
            self.head = torch.nn.Linear(8, 3)

        def forward(self, x):
            return self.head(torch.relu(self.encoder(x)))

    acc = Accelerator(cpu=True)
    model = TinyNet()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, _acc_lr_lambda)
    g = torch.Generator().manual_seed(SEED)
    x, y = torch.randn(24, 6, generator=g), torch.randint(0, 3, (24,), generator=g)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(x, y), batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(SEED)
    )
    model, opt, loader, sched = acc.prepare(model, opt, loader, sched)
    progress = _TrainProgress()
    acc.register_for_checkpointing(progress)
    for xb, yb in loader:
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        acc.backward(loss)
        opt.step()
        sched.step()
        opt.zero_grad()
        progress.global_step += 1
        if progress.global_step == 4:
            break
    out.mkdir()
    acc.save_state(os.path.join(out.name, "step_4"))  # relative to HERE (cwd)
    verify_accelerate(out)


def verify_accelerate(out: Path) -> None:
    from safetensors import safe_open

    d = out / "step_4"
    names = sorted(p.name for p in d.iterdir())
    for n in ["model.safetensors", "optimizer.bin", "scheduler.bin", "random_states_0.pkl", "custom_checkpoint_0.pkl"]:
        _check(n in names, f"accelerate: missing {n} in {names}")
    with safe_open(str(d / "model.safetensors"), framework="pt") as f:
        _check(sorted(f.keys()) == ["encoder.bias", "encoder.weight", "head.bias", "head.weight"], "model keys")
    _check(set(_safe_load(d / "optimizer.bin")) == {"state", "param_groups"}, "optimizer.bin")
    _check(_safe_load(d / "scheduler.bin")["last_epoch"] == 4, "scheduler last_epoch")
    rs = _safe_load(d / "random_states_0.pkl")
    _check({"step", "random_state", "numpy_random_seed", "torch_manual_seed"} <= set(rs), f"random_states keys {set(rs)}")
    _check(_safe_load(d / "custom_checkpoint_0.pkl") == {"global_step": 4, "epoch": 0}, "custom checkpoint")
    print(f"accelerate: {names}")


# --------------------------------------------------------------------------------------
# 4. DeepSpeed ZeRO-2 (real, 2 ranks, CPU accelerator, fp16)
# --------------------------------------------------------------------------------------

DS_WORLD = 2
DS_STEPS = 4


def _ds_config() -> dict:
    return {
        "train_micro_batch_size_per_gpu": 2,
        "gradient_accumulation_steps": 1,
        "gradient_clipping": 1.0,
        "steps_per_print": 1000,
        "fp16": {"enabled": True, "initial_scale_power": 8, "loss_scale_window": 1000, "hysteresis": 2, "min_loss_scale": 1},
        "zero_optimization": {"stage": 2},
        "zero_allow_untested_optimizer": True,
        "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0.0, "warmup_max_lr": 1e-3, "warmup_num_steps": 2}},
        "wall_clock_breakdown": False,
    }


def _ds_worker(rank: int, world: int, port: int) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_RANK=str(rank),
        LOCAL_WORLD_SIZE=str(world),
        DS_ACCELERATOR="cpu",
    )
    import torch

    _deterministic_torch()
    import deepspeed
    from deepspeed.accelerator import get_accelerator

    # DeepSpeed's CPU accelerator reports fp16 as unsupported unless oneDNN has fp16 kernels;
    # torch runs fp16 Linear layers on any CPU, so bypass that one capability check.
    type(get_accelerator()).is_fp16_supported = lambda self: True

    class TinyMLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(8, 16)
            self.fc2 = torch.nn.Linear(16, 4)

        def forward(self, x):
            return self.fc2(torch.relu(self.fc1(x)))

    torch.manual_seed(SEED)
    model = TinyMLP()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    deepspeed.init_distributed(dist_backend="gloo")
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=_ds_config())
    g = torch.Generator().manual_seed(SEED + rank)
    for _ in range(DS_STEPS):
        x = torch.randn(2, 8, generator=g).half()
        y = torch.randn(2, 4, generator=g)
        loss = torch.nn.functional.mse_loss(engine(x).float(), y)
        engine.backward(loss)
        engine.step()
    engine.save_checkpoint("deepspeed-run")  # relative to HERE (cwd)
    torch.distributed.barrier()


def build_deepspeed(out: Path) -> None:
    import torch.multiprocessing as mp

    os.environ["DS_ACCELERATOR"] = "cpu"
    mp.spawn(_ds_worker, args=(DS_WORLD, _free_port()), nprocs=DS_WORLD, join=True)
    verify_deepspeed(out)


def verify_deepspeed(out: Path) -> None:
    import torch

    os.environ["DS_ACCELERATOR"] = "cpu"
    from deepspeed.runtime.fp16.loss_scaler import DynamicLossScaler
    from deepspeed.runtime.zero.config import ZeroStageEnum
    from deepspeed.utils.tensor_fragment import fragment_address

    _check((out / "latest").read_text() == f"global_step{DS_STEPS}", "latest")
    tag = out / f"global_step{DS_STEPS}"
    names = sorted(p.name for p in tag.iterdir())
    _check(
        names == ["mp_rank_00_model_states.pt", "zero_pp_rank_0_mp_rank_00_optim_states.pt", "zero_pp_rank_1_mp_rank_00_optim_states.pt"],
        f"deepspeed files {names}",
    )
    ms = _safe_load(tag / "mp_rank_00_model_states.pt")
    _check(ms["global_steps"] == DS_STEPS and ms["dp_world_size"] == DS_WORLD and ms["optimizer"] is None, "model_states")
    _check(ms["lr_scheduler"] is not None, "lr_scheduler present")
    for r in range(DS_WORLD):
        f = tag / f"zero_pp_rank_{r}_mp_rank_00_optim_states.pt"
        unsafe = sorted(torch.serialization.get_unsafe_globals_in_checkpoint(str(f)))
        _check(
            unsafe == [
                "deepspeed.runtime.fp16.loss_scaler.DynamicLossScaler",
                "deepspeed.runtime.zero.config.ZeroStageEnum",
                "deepspeed.utils.tensor_fragment.fragment_address",
            ],
            f"unexpected globals {unsafe}",
        )
        osd = _safe_load(f, [DynamicLossScaler, ZeroStageEnum, fragment_address])["optimizer_state_dict"]
        _check(type(osd["loss_scaler"]).__name__ == "DynamicLossScaler" and osd["dynamic_loss_scale"] is True, "loss scaler")
        _check(int(osd["zero_stage"]) == 2 and osd["partition_count"] == [DS_WORLD], "zero stage / partitions")
    print(f"deepspeed: {names} + {sorted(p.name for p in out.iterdir() if p.is_file())}")


# --------------------------------------------------------------------------------------
# 5. Megatron-LM legacy torch format (shaped with torch.save)
# --------------------------------------------------------------------------------------

MG_ITER = 4
MG_MBS, MG_DP = 2, 2
MG_GBS = MG_MBS * MG_DP
MG_VOCAB, MG_HIDDEN, MG_FFN, MG_HEADS, MG_SEQ = 16, 8, 16, 2, 8


def _cuda_philox_state(seed: int, offset: int = 0):
    """Byte layout of torch.cuda.get_rng_state(): uint8[16] = uint64 seed + int64 philox offset (LE)."""
    import torch

    raw = int(seed).to_bytes(8, "little") + int(offset).to_bytes(8, "little", signed=True)
    return torch.tensor(list(raw), dtype=torch.uint8)


def _megatron_args():
    import torch

    return argparse.Namespace(
        # model
        num_layers=1, hidden_size=MG_HIDDEN, ffn_hidden_size=MG_FFN, num_attention_heads=MG_HEADS,
        kv_channels=MG_HIDDEN // MG_HEADS, group_query_attention=False, num_query_groups=1,
        seq_length=MG_SEQ, max_position_embeddings=MG_SEQ, position_embedding_type="rope",
        normalization="LayerNorm", add_bias_linear=True, swiglu=False,
        untie_embeddings_and_output_weights=True, vocab_size=MG_VOCAB, padded_vocab_size=MG_VOCAB,
        make_vocab_size_divisible_by=MG_VOCAB, tokenizer_type="NullTokenizer", transformer_impl="local",
        # precision
        fp16=True, bf16=False, params_dtype=torch.float16, loss_scale=None, initial_loss_scale=65536.0,
        min_loss_scale=1.0, loss_scale_window=1000, hysteresis=2,
        # optimizer / schedule
        optimizer="adam", lr=1e-3, min_lr=1e-4, lr_decay_style="cosine", lr_warmup_iters=2,
        lr_warmup_samples=0, lr_decay_iters=None, lr_decay_samples=None, lr_warmup_fraction=None,
        weight_decay=0.01, start_weight_decay=0.01, end_weight_decay=0.01, weight_decay_incr_style="constant",
        adam_beta1=0.9, adam_beta2=0.999, adam_eps=1e-8, clip_grad=1.0,
        use_distributed_optimizer=False,
        # batch / iterations
        micro_batch_size=MG_MBS, global_batch_size=MG_GBS, train_iters=8, train_samples=None,
        eval_iters=0, eval_interval=1000, save_interval=MG_ITER,
        consumed_train_samples=MG_ITER * MG_GBS, consumed_valid_samples=0, skipped_train_samples=0,
        # parallelism
        tensor_model_parallel_size=1, pipeline_model_parallel_size=1,
        virtual_pipeline_model_parallel_size=None, context_parallel_size=1, expert_model_parallel_size=1,
        data_parallel_size=MG_DP, world_size=MG_DP, rank=0, local_rank=0,
        # checkpointing
        save="megatron-run", load=None, ckpt_format="torch", use_dist_ckpt=False, auto_detect_ckpt_format=False,
        no_save_optim=None, no_save_rng=None, no_load_optim=None, no_load_rng=None, finetune=False,
        data_parallel_random_init=False, seed=SEED,
    )


def build_megatron(out: Path) -> None:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    _seed_everything()
    _deterministic_torch()
    args = _megatron_args()

    # mcore GPTModel with the local (non-TransformerEngine) layer spec: these are the
    # state_dict_for_save_checkpoint() names.
    shapes = {
        "embedding.word_embeddings.weight": (MG_VOCAB, MG_HIDDEN),
        "decoder.layers.0.input_layernorm.weight": (MG_HIDDEN,),
        "decoder.layers.0.input_layernorm.bias": (MG_HIDDEN,),
        "decoder.layers.0.self_attention.linear_proj.weight": (MG_HIDDEN, MG_HIDDEN),
        "decoder.layers.0.self_attention.linear_proj.bias": (MG_HIDDEN,),
        "decoder.layers.0.self_attention.linear_qkv.weight": (3 * MG_HIDDEN, MG_HIDDEN),
        "decoder.layers.0.self_attention.linear_qkv.bias": (3 * MG_HIDDEN,),
        "decoder.layers.0.pre_mlp_layernorm.weight": (MG_HIDDEN,),
        "decoder.layers.0.pre_mlp_layernorm.bias": (MG_HIDDEN,),
        "decoder.layers.0.mlp.linear_fc1.weight": (MG_FFN, MG_HIDDEN),
        "decoder.layers.0.mlp.linear_fc1.bias": (MG_FFN,),
        "decoder.layers.0.mlp.linear_fc2.weight": (MG_HIDDEN, MG_FFN),
        "decoder.layers.0.mlp.linear_fc2.bias": (MG_HIDDEN,),
        "decoder.final_layernorm.weight": (MG_HIDDEN,),
        "decoder.final_layernorm.bias": (MG_HIDDEN,),
        "output_layer.weight": (MG_VOCAB, MG_HIDDEN),
    }
    # tensor-parallel attributes Megatron sets on params (copied onto the fp32 main params)
    tp_attrs = {}
    for name in shapes:
        if "layernorm" in name:
            tp_attrs[name] = (False, -1, 1)
        elif "linear_proj.weight" in name or "linear_fc2.weight" in name:
            tp_attrs[name] = (True, 1, 1)  # RowParallelLinear
        elif "linear_proj.bias" in name or "linear_fc2.bias" in name:
            tp_attrs[name] = (False, -1, 1)
        else:
            tp_attrs[name] = (True, 0, 1)  # ColumnParallelLinear / VocabParallelEmbedding
    main = {}
    for name, shape in shapes.items():
        if "layernorm" in name:
            t = torch.ones(shape) if name.endswith("weight") else torch.zeros(shape)
        elif name.endswith("bias"):
            t = torch.zeros(shape)
        else:
            t = torch.randn(shape) * 0.02
        main[name] = t.requires_grad_(True)

    def forward(p, tokens):
        h = F.embedding(tokens, p["embedding.word_embeddings.weight"])
        pre = "decoder.layers.0."
        x = F.layer_norm(h, (MG_HIDDEN,), p[pre + "input_layernorm.weight"], p[pre + "input_layernorm.bias"])
        qkv = F.linear(x, p[pre + "self_attention.linear_qkv.weight"], p[pre + "self_attention.linear_qkv.bias"])
        b, s, _ = qkv.shape
        q, k, v = qkv.view(b, s, 3, MG_HEADS, -1).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, MG_HIDDEN)
        h = h + F.linear(a, p[pre + "self_attention.linear_proj.weight"], p[pre + "self_attention.linear_proj.bias"])
        x = F.layer_norm(h, (MG_HIDDEN,), p[pre + "pre_mlp_layernorm.weight"], p[pre + "pre_mlp_layernorm.bias"])
        x = F.linear(F.gelu(F.linear(x, p[pre + "mlp.linear_fc1.weight"], p[pre + "mlp.linear_fc1.bias"])),
                     p[pre + "mlp.linear_fc2.weight"], p[pre + "mlp.linear_fc2.bias"])
        h = h + x
        h = F.layer_norm(h, (MG_HIDDEN,), p["decoder.final_layernorm.weight"], p["decoder.final_layernorm.bias"])
        return F.linear(h, p["output_layer.weight"])

    # Megatron _get_param_groups: (wd_mult, lr_mult, is_expert_parallel, is_decoupled_lr) buckets,
    # biases and norms get no weight decay; then _update_min_and_max_lr_in_param_groups.
    wd_names = [n for n in shapes if not (n.endswith("bias") or "layernorm" in n)]
    nowd_names = [n for n in shapes if n not in wd_names]
    groups = []
    for names, wd_mult in ((wd_names, 1.0), (nowd_names, 0.0)):
        groups.append({
            "params": [main[n] for n in names], "wd_mult": wd_mult, "lr_mult": 1.0,
            "is_expert_parallel": False, "is_decoupled_lr": False, "max_lr": args.lr, "min_lr": args.min_lr,
        })
    # Without apex/TE Megatron falls back to torch.optim.AdamW for --optimizer adam.
    opt = torch.optim.AdamW(groups, lr=args.lr, betas=(args.adam_beta1, args.adam_beta2), eps=args.adam_eps,
                            weight_decay=args.weight_decay)

    # OptimizerParamScheduler (counts samples: increment = global batch size per iteration)
    lr_warmup_steps = args.lr_warmup_iters * MG_GBS
    lr_decay_steps = args.train_iters * MG_GBS
    num_steps = 0

    def sched_step(increment):
        nonlocal num_steps
        num_steps += increment
        if num_steps <= lr_warmup_steps:
            lr = args.lr * num_steps / lr_warmup_steps
        else:
            import math

            ratio = (num_steps - lr_warmup_steps) / (lr_decay_steps - lr_warmup_steps)
            lr = args.min_lr + 0.5 * (math.cos(math.pi * ratio) + 1.0) * (args.lr - args.min_lr)
        for grp in opt.param_groups:
            grp["lr"] = lr * grp["lr_mult"]
            grp["weight_decay"] = args.start_weight_decay * grp["wd_mult"]

    sched_step(0)
    g = torch.Generator().manual_seed(SEED)
    for _ in range(MG_ITER):
        tokens = torch.randint(0, MG_VOCAB, (MG_GBS, MG_SEQ + 1), generator=g)
        logits = forward(main, tokens[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, MG_VOCAB), tokens[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(main.values()), args.clip_grad)
        opt.step()
        opt.zero_grad()
        sched_step(MG_GBS)

    # fp16 model weights (Float16Module) and the fp32 main params with Megatron's TP attributes
    model_sd = {n: t.detach().to(torch.float16) for n, t in main.items()}
    fp32_from_fp16 = []
    for grp_names in (wd_names, nowd_names):
        lst = []
        for n in grp_names:
            mp_ = main[n].detach().clone()
            tmp, dim, stride = tp_attrs[n]
            mp_.tensor_model_parallel, mp_.partition_dim, mp_.partition_stride = tmp, dim, stride
            lst.append(mp_)
        fp32_from_fp16.append(lst)

    optimizer_sd = {
        "optimizer": opt.state_dict(),
        # DynamicGradScaler.state_dict(); no overflow in 4 iterations
        "grad_scaler": {"scale": torch.tensor([args.initial_loss_scale]), "growth_tracker": MG_ITER, "hysteresis_tracker": args.hysteresis},
        "fp32_from_fp16_params": fp32_from_fp16,
    }
    opt_param_scheduler = {
        "max_lr": args.lr, "lr_warmup_steps": lr_warmup_steps, "num_steps": num_steps,
        "lr_decay_style": args.lr_decay_style, "lr_decay_steps": lr_decay_steps, "min_lr": args.min_lr,
        "start_wd": args.start_weight_decay, "end_wd": args.end_weight_decay,
        "wd_incr_style": args.weight_decay_incr_style, "wd_incr_steps": lr_decay_steps,
    }
    # get_rng_state(): one entry (data_parallel_random_init=False). No GPU here, so the CUDA
    # states are the 16-byte Philox states torch.cuda.get_rng_state() returns after
    # model_parallel_cuda_manual_seed(seed) (no dropout was used, so every offset is 0).
    rng_state = [{
        "random_rng_state": random.getstate(),
        "np_rng_state": np.random.get_state(),
        "torch_rng_state": torch.get_rng_state(),
        "cuda_rng_state": _cuda_philox_state(SEED),
        "rng_tracker_states": {
            "data-parallel-rng": _cuda_philox_state(SEED),
            "model-parallel-rng": _cuda_philox_state(SEED + 2718),
            "expert-parallel-rng": _cuda_philox_state(SEED + 1024),
        },
    }]
    # num_floating_point_operations(): dense GPT estimate, summed over iterations
    flops_per_iter = 24 * MG_GBS * MG_SEQ * 1 * MG_HIDDEN * MG_HIDDEN * (
        1 + MG_FFN / (4 * MG_HIDDEN) + MG_SEQ / (6 * MG_HIDDEN) + MG_VOCAB / (4 * MG_HIDDEN)
    )
    state_dict = {
        "args": args,
        "checkpoint_version": 3.0,
        "iteration": MG_ITER,
        "model": model_sd,
        "optimizer": optimizer_sd,
        "opt_param_scheduler": opt_param_scheduler,
        "rng_state": rng_state,
        "num_floating_point_operations_so_far": float(flops_per_iter * MG_ITER),
    }
    ckpt = out / f"iter_{MG_ITER:07d}" / "mp_rank_00" / "model_optim_rng.pt"
    ckpt.parent.mkdir(parents=True)
    torch.save(state_dict, ckpt)
    (out / "latest_checkpointed_iteration.txt").write_text(str(MG_ITER))
    verify_megatron(out)


def verify_megatron(out: Path) -> None:
    import torch

    _check((out / "latest_checkpointed_iteration.txt").read_text() == str(MG_ITER), "tracker")
    f = out / f"iter_{MG_ITER:07d}" / "mp_rank_00" / "model_optim_rng.pt"
    unsafe = sorted(torch.serialization.get_unsafe_globals_in_checkpoint(str(f)))
    _check("argparse.Namespace" in unsafe, f"unsafe globals {unsafe}")
    sd = _safe_load(f, [argparse.Namespace])
    _check(sd["iteration"] == MG_ITER and sd["checkpoint_version"] == 3.0, "iteration")
    _check(sd["args"].consumed_train_samples == MG_ITER * MG_GBS, "consumed samples")
    _check(set(sd["optimizer"]) == {"optimizer", "grad_scaler", "fp32_from_fp16_params"}, "optimizer keys")
    _check(isinstance(sd["rng_state"], list) and len(sd["rng_state"]) == 1, "rng_state list")
    _check(sd["rng_state"][0]["cuda_rng_state"].numel() == 16, "cuda rng state size")
    print(f"megatron: keys {sorted(sd)}; unsafe globals {unsafe}")


# --------------------------------------------------------------------------------------
# 6. HF Trainer, 2-process DDP on CPU (real)
# --------------------------------------------------------------------------------------

HFM_SAVE, HFM_STEPS = 4, 8  # saves at 4 and 8; only checkpoint-4 is kept, to resume from
HFM_DROPOUT = 0.1  # attention dropout: the steps after a resume draw from the restored RNG


def hf_multirank_trainer(output_dir: str, callbacks=()):
    """The hf-multirank run's Trainer, freshly seeded: the generator trains it from scratch;
    tests/resume/trainer_worker.py also resumes it from the sample."""
    from transformers import Trainer, default_data_collator

    _seed_everything()
    _deterministic_torch()
    model = _tiny_llama(attention_dropout=HFM_DROPOUT)
    data = _RandomTokens(24, 8, model.config.vocab_size, SEED)  # 6 updates/epoch with 2x2
    args = _trainer_args(
        output_dir,
        max_steps=HFM_STEPS,
        save_steps=HFM_SAVE,
        per_device_train_batch_size=2,
        ddp_backend="gloo",
    )
    return Trainer(model=model, args=args, train_dataset=data, data_collator=default_data_collator,
                   callbacks=list(callbacks))


def _hf_ddp_worker() -> None:
    """Runs under torch.distributed.run (2 processes)."""
    os.chdir(HERE)
    hf_multirank_trainer(FOLDERS["hf-multirank"]).train()


def build_hf_multirank(out: Path) -> None:
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    cmd = [
        sys.executable, "-m", "torch.distributed.run",
        "--nproc_per_node", "2", "--nnodes", "1",
        "--master_addr", "127.0.0.1", "--master_port", str(_free_port()),
        str(Path(__file__).resolve()), "--hf-ddp-worker",
    ]
    subprocess.run(cmd, check=True, env=env, cwd=HERE)
    shutil.rmtree(out / f"checkpoint-{HFM_STEPS}")  # kept small: checkpoint-4 is the one to resume
    verify_hf_multirank(out)


def verify_hf_multirank(out: Path) -> None:
    _check(sorted(p.name for p in out.iterdir()) == [f"checkpoint-{HFM_SAVE}"], f"{out} content")
    ck = out / f"checkpoint-{HFM_SAVE}"
    _check(not (ck / "rng_state.pth").exists(), "no single-process rng_state.pth")
    state = _verify_hf_checkpoint(ck, ["rng_state_0.pth", "rng_state_1.pth"])
    _check(state["global_step"] == HFM_SAVE and state["max_steps"] == HFM_STEPS, "global_step")
    cfg = json.loads((ck / "config.json").read_text())
    _check(cfg["attention_dropout"] == HFM_DROPOUT, "attention_dropout")
    print(f"hf-multirank: {_tree(ck)}")


# --------------------------------------------------------------------------------------
# 7. HF Trainer run with three checkpoints (real)
# --------------------------------------------------------------------------------------


def build_hf_run3(out: Path) -> None:
    from transformers import Trainer, default_data_collator

    _seed_everything()
    _deterministic_torch()
    model = _tiny_llama()
    data = _RandomTokens(16, 8, model.config.vocab_size, SEED)  # 4 updates per epoch
    args = _trainer_args(FOLDERS["hf-run3"], max_steps=6, save_steps=2, per_device_train_batch_size=4)
    Trainer(model=model, args=args, train_dataset=data, data_collator=default_data_collator).train()
    verify_hf_run3(out)


def verify_hf_run3(out: Path) -> None:
    names = sorted(p.name for p in out.iterdir())
    _check(names == ["checkpoint-2", "checkpoint-4", "checkpoint-6"], f"hf-run3 content {names}")
    for n in names:
        state = _verify_hf_checkpoint(out / n, ["rng_state.pth"])
        _check(state["global_step"] == int(n.split("-")[1]), f"{n} global_step")
    print(f"hf-run3: {names}")


# --------------------------------------------------------------------------------------
# 8. malicious optimizer.pt (never unpickled here)
# --------------------------------------------------------------------------------------


class _Pwn:
    """Unpickling this runs os.system('touch ckpt-browser-PWNED') in the current directory."""

    def __reduce__(self):
        return (os.system, (f"touch {PWNED_NAME}",))


MALICIOUS_README = f"""\
DELIBERATELY MALICIOUS TEST FILE -- DO NOT LOAD WITH A STOCK UNPICKLER.

optimizer.pt in this folder is a torch.save zip of a real AdamW state dict
({{"state", "param_groups"}}) plus one extra top-level entry, "payload", whose pickle
calls os.system("touch {PWNED_NAME}"). torch.load(..., weights_only=False),
pickle.load or any unpickler that resolves arbitrary globals would create a file named
{PWNED_NAME} in the current directory. torch.load(weights_only=True) refuses it,
and torch.serialization.get_unsafe_globals_in_checkpoint() reports 'posix.system'.

The other files (model.safetensors, config.json, scheduler.pt, trainer_state.json) are
copied unchanged from the real Trainer checkpoint hf-run3/checkpoint-2. ckpt-browser tests
use this folder to prove that inspecting a checkpoint never executes pickled code.
Regenerate with sample_checkpoints/make_training_samples.py.
"""


def build_malicious(out: Path) -> None:
    import torch

    src = HERE / FOLDERS["hf-run3"] / "checkpoint-2"
    _check(src.is_dir(), f"{src} must be built first (hf-run3)")
    out.mkdir()
    for n in ("model.safetensors", "config.json", "scheduler.pt", "trainer_state.json"):
        shutil.copyfile(src / n, out / n)
    opt = _safe_load(src / "optimizer.pt")  # our own real, safe optimizer.pt
    opt["payload"] = _Pwn()
    torch.save(opt, out / "optimizer.pt")
    (out / "README.txt").write_text(MALICIOUS_README)
    verify_malicious(out)


def verify_malicious(out: Path) -> None:
    import torch

    f = out / "optimizer.pt"
    unsafe = torch.serialization.get_unsafe_globals_in_checkpoint(str(f))  # static scan only
    _check(unsafe == ["posix.system"], f"unsafe globals {unsafe}")
    for d in (Path.cwd(), HERE, out):
        _check(not (d / PWNED_NAME).exists(), f"{PWNED_NAME} appeared in {d}")
    print(f"malicious: {sorted(p.name for p in out.iterdir())}; unsafe globals {unsafe}")


# --------------------------------------------------------------------------------------

BUILDERS = {
    "torchtitan": build_torchtitan,
    "dcp-ranks": build_dcp_ranks,
    "lightning": build_lightning,
    "accelerate": build_accelerate,
    "deepspeed": build_deepspeed,
    "megatron": build_megatron,
    "hf-multirank": build_hf_multirank,
    "hf-run3": build_hf_run3,
    "malicious": build_malicious,
}


def _build_one(name: str) -> None:
    os.chdir(HERE)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    out = HERE / FOLDERS[name]
    shutil.rmtree(out, ignore_errors=True)
    BUILDERS[name](out)
    os.chdir(HERE)
    _check_no_abs_paths(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help=f"samples to build (default: all): {', '.join(ORDER)}")
    parser.add_argument("--build", help=argparse.SUPPRESS)
    parser.add_argument("--hf-ddp-worker", action="store_true", help=argparse.SUPPRESS)
    ns = parser.parse_args()
    unknown = [n for n in ns.names if n not in FOLDERS]
    if unknown:
        parser.error(f"unknown sample(s) {unknown}; choose from {ORDER}")
    if ns.hf_ddp_worker:
        _hf_ddp_worker()
        return
    if ns.build:
        _build_one(ns.build)
        return
    names = [n for n in ORDER if n in ns.names] if ns.names else ORDER
    if "malicious" in names and "hf-run3" not in names and not (HERE / FOLDERS["hf-run3"]).is_dir():
        names.insert(names.index("malicious"), "hf-run3")
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONHASHSEED="0")
    for n in names:
        print(f"=== {n} -> {FOLDERS[n]}/", flush=True)
        subprocess.run([sys.executable, str(Path(__file__).resolve()), "--build", n], check=True, cwd=HERE, env=env)
    print("done:", ", ".join(FOLDERS[n] for n in names))


if __name__ == "__main__":
    main()
