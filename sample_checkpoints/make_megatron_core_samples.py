#!/usr/bin/env python
"""Regenerate the megatron-core distributed checkpoint samples (``torch_dist`` format).

Usage (from any working directory)::

    python3.11 -m venv /tmp/mcvenv
    echo torch==2.13.0 > /tmp/mc-constraints.txt
    /tmp/mcvenv/bin/pip install -c /tmp/mc-constraints.txt torch==2.13.0 megatron-core==0.16.1 numpy psutil
    /tmp/mcvenv/bin/python sample_checkpoints/make_megatron_core_samples.py

megatron-core is not a dependency of ckpt-browser; it is only needed to rebuild these samples.

Samples (folder under ``sample_checkpoints/megatron-core/``):

``run/``
    A whole Megatron-LM run folder for ``--ckpt-format torch_dist``: ``iter_0000002/`` (the
    dist checkpoint, written by megatron-core's OWN ``dist_checkpointing.save``) and
    ``latest_checkpointed_iteration.txt`` holding ``2``. Two gloo CPU ranks
    (``torch.multiprocessing.spawn``), ``parallel_state.initialize_model_parallel`` with
    tensor parallel 2, a tiny mcore ``GPTModel`` (local layer spec, no TransformerEngine,
    2 layers, hidden 16, 4 heads, vocab 64, seq 8, ``use_cpu_initialization``; TP 2 x DP 1),
    two steps of mcore's own optimizer (``get_megatron_optimizer`` with
    ``OptimizerConfig(optimizer='adam')``: mcore's ``FP32Optimizer`` over ``torch.optim.AdamW``,
    its fallback without apex/TE; no gradient clipping). mcore's ``DistributedDataParallel``
    cannot be used on CPU (its grad buffers are made on CUDA); with DP 1 it would reduce
    nothing, so the bare ``GPTModel`` is trained. A few CUDA-only calls are pointed at the CPU
    while training, saving and loading (see ``_cuda_literals_on_cpu``); they change nothing
    that is written. The sharded state dict is the one Megatron-LM's
    ``megatron/training/checkpointing.py`` (``generate_state_dict`` + ``get_rng_state``) builds:
    ``model``, ``optimizer`` (``optimizer.sharded_state_dict(model_sd, metadata=...)``),
    ``opt_param_scheduler`` (mcore's ``OptimizerParamScheduler``), ``iteration``,
    ``checkpoint_version`` 3.0, ``num_floating_point_operations_so_far``, ``args`` (a real
    ``argparse.Namespace``, as Megatron-LM stores it) and ``rng_state`` (a ``ShardedObject``
    per (pp, tp) rank). ``megatron/training`` is not in the megatron-core wheel, so the run
    folder is laid out here as Megatron-LM's ``save_checkpoint`` does; the content metadata is
    passed to ``save`` as Megatron-LM passes it.
    CPU-only differences: no ``cuda_rng_state`` key in the rng state, and
    ``rng_tracker_states`` is empty (mcore's CUDA RNG tracker cannot be seeded without CUDA:
    its inference tracker, which keeps no states, is used).
``no-common/``
    A copy of ``run/`` with ``iter_0000002/common.pt`` removed: DAMAGED ON PURPOSE.

After saving, the checkpoint is loaded back with ``dist_checkpointing.load`` into a freshly built
model + optimizer (on both ranks) and every tensor is compared with the saved one.
"""

import argparse
import os
import random
import shutil
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "megatron-core")
ITERATION = 2
WORLD = 2
TP = 2
SEED = 1234

warnings.filterwarnings("ignore")


def _args_namespace(save_dir):
    # A realistic subset of Megatron-LM's arguments for this run.
    import torch

    return argparse.Namespace(
        num_layers=2,
        hidden_size=16,
        ffn_hidden_size=64,
        num_attention_heads=4,
        seq_length=8,
        max_position_embeddings=8,
        padded_vocab_size=64,
        tensor_model_parallel_size=TP,
        pipeline_model_parallel_size=1,
        context_parallel_size=1,
        data_parallel_size=WORLD // TP,
        world_size=WORLD,
        micro_batch_size=2,
        global_batch_size=2,
        train_iters=ITERATION,
        consumed_train_samples=2 * ITERATION,
        consumed_valid_samples=0,
        skipped_train_samples=0,
        lr=1e-3,
        min_lr=1e-4,
        lr_decay_style="cosine",
        weight_decay=0.01,
        adam_beta1=0.9,
        adam_beta2=0.999,
        optimizer="adam",
        fp16=False,
        bf16=False,
        params_dtype=torch.float32,
        use_distributed_optimizer=False,
        ckpt_format="torch_dist",
        transformer_impl="local",
        seed=SEED,
        save=save_dir,
        iteration=ITERATION,
    )


def _get_rng_state():
    """Megatron-LM's get_rng_state(ckpt_format='torch_dist'), less the CUDA parts."""
    import numpy as np
    import torch
    from megatron.core import parallel_state as mpu
    from megatron.core import tensor_parallel
    from megatron.core.dist_checkpointing.mapping import ShardedObject

    rng_state = {
        "random_rng_state": random.getstate(),
        "np_rng_state": np.random.get_state(),
        "torch_rng_state": torch.get_rng_state(),
        # 'cuda_rng_state': torch.cuda.get_rng_state()  -- no CUDA here
        "rng_tracker_states": tensor_parallel.get_cuda_rng_tracker().get_states(),
    }
    rng_state_list = [rng_state]  # data_parallel_random_init is False
    pp_rank = mpu.get_pipeline_model_parallel_rank()
    pp_size = mpu.get_pipeline_model_parallel_world_size()
    tp_rank = mpu.get_tensor_model_parallel_rank()
    tp_size = mpu.get_tensor_model_parallel_world_size()
    return ShardedObject(
        "rng_state",
        rng_state_list,
        (pp_size, tp_size),
        (pp_rank, tp_rank),
        replica_id=mpu.get_data_parallel_rank(with_context_parallel=True),
    )


class _cuda_literals_on_cpu:
    """While active, torch.tensor/zeros/ones/empty(..., device='cuda') make CPU tensors,
    torch.cuda.current_device() answers the CPU and torch.cuda.synchronize() does nothing.

    megatron-core assumes a GPU in a few small places, none of which changes what is written:
    FP32Optimizer.__init__ makes its loss scale with ``device='cuda'``; the local
    DotProductAttention takes its scratch buffer on ``torch.cuda.current_device()``; the
    torch_dist save strategy calls ``torch.cuda.synchronize()`` after its device-to-host copies
    and all-reduces two one-element flags made on ``'cuda'`` / ``current_device()``.
    """

    NAMES = ("tensor", "zeros", "ones", "empty")

    def __enter__(self):
        import torch

        self.saved = {n: getattr(torch, n) for n in self.NAMES}
        for n, f in self.saved.items():

            def wrapped(*a, _f=f, **kw):
                if str(kw.get("device", "")).startswith("cuda"):
                    kw["device"] = "cpu"
                return _f(*a, **kw)

            setattr(torch, n, wrapped)
        self.saved_current_device = torch.cuda.current_device
        self.saved_synchronize = torch.cuda.synchronize
        torch.cuda.current_device = lambda: torch.device("cpu")
        torch.cuda.synchronize = lambda *a, **kw: None
        return self

    def __exit__(self, *exc):
        import torch

        for n, f in self.saved.items():
            setattr(torch, n, f)
        torch.cuda.current_device = self.saved_current_device
        torch.cuda.synchronize = self.saved_synchronize


def _build(args_ns):
    import torch
    from megatron.core.distributed import DistributedDataParallelConfig
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
    from megatron.core.optimizer_param_scheduler import OptimizerParamScheduler
    from megatron.core.transformer.transformer_config import TransformerConfig

    config = TransformerConfig(
        num_layers=args_ns.num_layers,
        hidden_size=args_ns.hidden_size,
        ffn_hidden_size=args_ns.ffn_hidden_size,
        num_attention_heads=args_ns.num_attention_heads,
        use_cpu_initialization=True,
        tensor_model_parallel_size=TP,
        pipeline_dtype=torch.float32,
        params_dtype=torch.float32,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        gradient_accumulation_fusion=False,
        bias_dropout_fusion=False,
        masked_softmax_fusion=False,
        persist_layer_norm=False,
        apply_rope_fusion=False,
    )
    model = GPTModel(
        config=config,
        transformer_layer_spec=get_gpt_layer_local_spec(),
        vocab_size=args_ns.padded_vocab_size,
        max_sequence_length=args_ns.max_position_embeddings,
        position_embedding_type="learned_absolute",
    )
    # mcore's DistributedDataParallel allocates its grad buffers on torch.cuda.current_device()
    # and cannot run on CPU. With DP=1 it has no gradient to reduce anyway, so the bare GPTModel
    # is trained and given the ddp_config that get_megatron_optimizer reads.
    model.ddp_config = DistributedDataParallelConfig(
        grad_reduce_in_fp32=False, overlap_grad_reduce=False, use_distributed_optimizer=False
    )
    opt_config = OptimizerConfig(
        optimizer="adam",
        lr=args_ns.lr,
        min_lr=args_ns.min_lr,
        weight_decay=args_ns.weight_decay,
        adam_beta1=args_ns.adam_beta1,
        adam_beta2=args_ns.adam_beta2,
        fp16=False,
        bf16=False,
        params_dtype=torch.float32,
        use_distributed_optimizer=False,
        clip_grad=0.0,  # mcore's clip_grad_norm_fp32 asserts torch.cuda.FloatTensor grads
    )
    with _cuda_literals_on_cpu():
        optimizer = get_megatron_optimizer(opt_config, [model])
    scheduler = OptimizerParamScheduler(
        optimizer,
        init_lr=0.0,
        max_lr=args_ns.lr,
        min_lr=args_ns.min_lr,
        lr_warmup_steps=0,
        lr_decay_steps=args_ns.train_iters * args_ns.global_batch_size,
        lr_decay_style=args_ns.lr_decay_style,
        start_wd=args_ns.weight_decay,
        end_wd=args_ns.weight_decay,
        wd_incr_steps=args_ns.train_iters * args_ns.global_batch_size,
        wd_incr_style="constant",
    )
    return model, optimizer, scheduler


# Megatron-LM's _build_sharded_state_dict_metadata(args) for a non-distributed optimizer.
SHARDED_SD_METADATA = {"singleton_local_shards": False, "chained_optim_avoid_prefix": True}


def _state_dict(model, optimizer, scheduler, args_ns, is_loading=False):
    model_sd = model.sharded_state_dict(prefix="", metadata=SHARDED_SD_METADATA)
    return {
        "args": args_ns,
        "checkpoint_version": 3.0,
        "iteration": ITERATION,
        "model": model_sd,
        "optimizer": optimizer.sharded_state_dict(
            model_sd, is_loading=is_loading, metadata=SHARDED_SD_METADATA
        ),
        "opt_param_scheduler": scheduler.state_dict(),
        "rng_state": _get_rng_state(),
        "num_floating_point_operations_so_far": 0,
    }


def _worker(rank, run_dir, port):
    import torch
    import torch.distributed as dist
    from megatron.core import dist_checkpointing
    from megatron.core import parallel_state as mpu
    from megatron.core.dist_checkpointing.mapping import ShardedBase

    # Relative paths, so the DCP metadata's storage_meta.checkpoint_id names no local folder.
    os.chdir(HERE)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    mpu.initialize_model_parallel(tensor_model_parallel_size=TP, pipeline_model_parallel_size=1)
    random.seed(SEED)
    torch.manual_seed(SEED)
    import numpy as np

    np.random.seed(SEED)
    # mcore's training RNG tracker needs torch.cuda.get_rng_state(); its inference tracker (no
    # per-region CUDA states, fork() is a no-op) is the one that works on CPU. Dropout is 0.
    from megatron.core.tensor_parallel import model_parallel_cuda_manual_seed

    model_parallel_cuda_manual_seed(SEED, inference_rng_tracker=True)

    ckpt_dir = os.path.join(run_dir, f"iter_{ITERATION:07d}")
    args_ns = _args_namespace("megatron-core/run")
    model, optimizer, scheduler = _build(args_ns)

    # Two training steps (same batch on both TP ranks, as Megatron's data loader broadcasts it).
    g = torch.Generator().manual_seed(SEED)
    for _ in range(ITERATION):
        tokens = torch.randint(0, args_ns.padded_vocab_size, (2, args_ns.seq_length), generator=g)
        labels = torch.roll(tokens, -1, dims=1)
        position_ids = torch.arange(args_ns.seq_length).unsqueeze(0).expand(2, -1)
        mask = torch.tril(torch.ones(args_ns.seq_length, args_ns.seq_length)) < 0.5
        mask = mask.view(1, 1, args_ns.seq_length, args_ns.seq_length)
        optimizer.zero_grad()
        with _cuda_literals_on_cpu():
            loss = model(tokens, position_ids, mask, labels=labels).mean()
            loss.backward()
            ok, grad_norm, _ = optimizer.step()
        scheduler.step(increment=args_ns.global_batch_size)
        if rank == 0:
            print(f"step loss={loss.item():.4f} update_ok={ok} grad_norm={grad_norm}", flush=True)

    if rank == 0 and os.path.exists(run_dir):
        shutil.rmtree(run_dir)
    dist.barrier()
    if rank == 0:
        os.makedirs(ckpt_dir)
    dist.barrier()
    sd = _state_dict(model, optimizer, scheduler, args_ns)
    saved = {}  # every tensor handed to save, by its path in the state dict

    def _items(d):
        return d.items() if isinstance(d, dict) else enumerate(d)

    def _collect(d, prefix=""):
        for k, v in _items(d):
            if isinstance(v, (dict, list)):
                _collect(v, f"{prefix}{k}/")
            elif isinstance(getattr(v, "data", None), torch.Tensor):
                saved[f"{prefix}{k}"] = v.data.detach().clone()

    _collect(sd)
    with _cuda_literals_on_cpu():
        dist_checkpointing.save(sd, ckpt_dir, content_metadata=SHARDED_SD_METADATA)
    dist.barrier()
    if rank == 0:
        with open(os.path.join(run_dir, "latest_checkpointed_iteration.txt"), "w") as f:
            f.write(str(ITERATION))
    dist.barrier()

    # ---- load back into a fresh model + optimizer and compare
    torch.manual_seed(SEED + 99)
    model2, optimizer2, scheduler2 = _build(args_ns)
    sd2 = _state_dict(model2, optimizer2, scheduler2, args_ns, is_loading=True)
    with _cuda_literals_on_cpu():
        loaded = dist_checkpointing.load(sd2, ckpt_dir)
    n_checked = 0

    def _compare(d, prefix=""):
        nonlocal n_checked
        for k, v in _items(d):
            if isinstance(v, (dict, list)):
                _compare(v, f"{prefix}{k}/")
            elif isinstance(v, torch.Tensor) and f"{prefix}{k}" in saved:
                assert torch.equal(v, saved[f"{prefix}{k}"]), f"{prefix}{k}"
                n_checked += 1

    _compare(loaded)
    assert not any(isinstance(v, ShardedBase) for v in loaded.values())
    if rank == 0:
        print(f"loaded back; {n_checked} of {len(saved)} saved tensors compared equal on rank 0")
        print("top-level keys:", sorted(loaded), flush=True)
        print("model keys:", sorted(loaded["model"]), flush=True)
        print("optimizer keys:", sorted(loaded["optimizer"]), flush=True)
        print("iteration:", loaded["iteration"], "checkpoint_version:", loaded["checkpoint_version"])
        print("rng_state:", type(loaded["rng_state"]).__name__, len(loaded["rng_state"]))
        print("common keys:", sorted(dist_checkpointing.load_common_state_dict(ckpt_dir)))
        print("content metadata:", dist_checkpointing.load_content_metadata(ckpt_dir))
    dist.barrier()
    mpu.destroy_model_parallel()
    dist.destroy_process_group()


def main():
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    run_dir = os.path.join("megatron-core", "run")  # relative to HERE (the workers chdir there)
    os.makedirs(OUT, exist_ok=True)
    mp.spawn(_worker, args=(run_dir, port), nprocs=WORLD, join=True)

    run_dir = os.path.join(HERE, run_dir)
    damaged = os.path.join(OUT, "no-common")
    if os.path.exists(damaged):
        shutil.rmtree(damaged)
    shutil.copytree(run_dir, damaged)
    os.remove(os.path.join(damaged, f"iter_{ITERATION:07d}", "common.pt"))
    print("wrote", run_dir, "and", damaged)


if __name__ == "__main__":
    sys.exit(main())
