"""Resume the FSDP2 sample (torchtitan layout, DCP) on 2 gloo CPU ranks; see test_fsdp2_resume.

Usage: python fsdp2_worker.py SAMPLE_DIR SCRATCH_DIR OUT_JSON [K]

One torch.multiprocessing.spawn of 2 ranks runs everything in the same two processes, with the
generator's own model, optimizer, scheduler, data and training step
(sample_checkpoints/make_training_samples.py, imported by path):

  uninterrupted  10 + K steps from scratch; at step 10 its full state is compared with the
                 sample's (read with dcp.load into copies) and saved into SCRATCH_DIR/own with
                 the generator's own code (the sample's layout, written on this machine)
  resumed        a fresh model, optimizer and scheduler, restored from the sample as torchtitan's
                 CheckpointManager does (one dcp.load of the Stateful containers), then trained
                 until train_state.step reaches 10 + K; its state at 10 + K is compared with the
                 uninterrupted run's
  resumed_own_save  the same from SCRATCH_DIR/own
  without_X      resumed from the sample with X left out of the load (torchtitan's
                 exclude_from_loading)
  dropout_*      a variant with dropout after attention (p=0.1): run 10 + K steps, dcp.save at 10
                 into SCRATCH_DIR in the same layout, resume without and with the RNG state

Losses are each rank's own loss on its own batch, all-gathered: one [rank 0, rank 1] pair per
step, compared exactly. Rank 0 writes OUT_JSON. The sample is only read (dcp.load never writes).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

GENERATOR = Path(__file__).resolve().parents[2] / "sample_checkpoints" / "make_training_samples.py"


def _generator():
    spec = importlib.util.spec_from_file_location("make_training_samples", GENERATOR)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class _Stateful:
    """A torchtitan state container: dcp.load calls state_dict() for the placeholders it
    loads into, then load_state_dict() with what it read."""

    def __init__(self, get, put):
        self.state_dict, self.load_state_dict = get, put


class _Run:
    """One training run on this rank: model, optimizer, scheduler, data stream, counters."""

    def __init__(self, gen, rank: int, world: int, dropout: float = 0.0):
        import torch.nn.functional as F

        self.gen, self.rank, self.world = gen, rank, world
        self.model, self.opt, self.sched = gen._tt_setup(world)
        if dropout:  # a dropout layer on the attention output (draws from torch's global RNG)
            attention = self.model.layers["0"].attention
            attention.register_forward_hook(
                lambda _m, _i, out: F.dropout(out, p=dropout, training=True)
            )
        self.step = 0  # torchtitan Trainer.step (train_state.step)
        self.ntokens_seen = 0
        self.next_index = 0  # batches this rank's loader has handed out
        self.data = gen._tt_data(rank)

    def train(self, until: int) -> list[list[float]]:
        """torchtitan's loop: `while step < training.steps`; each step's losses, all ranks."""
        import torch
        import torch.distributed as dist

        losses = []
        while self.step < until:
            self.step += 1
            loss, ntokens = self.gen._tt_train_step(self.model, self.opt, self.sched, self.data)
            self.next_index += 1
            self.ntokens_seen += ntokens
            both = [torch.zeros_like(loss) for _ in range(self.world)]
            dist.all_gather(both, loss)
            losses.append([t.item() for t in both])
        return losses

    def state(self) -> dict:
        return self.gen._tt_state(self.model, self.opt, self.sched, self.rank, self.world,
                                  self.step, self.ntokens_seen)

    def load(self, checkpoint: str, without: str | None = None) -> None:
        """torchtitan CheckpointManager.load: model FQNs at top level, the other Stateful
        containers under their names, one dcp.load; `without` is left out of the load."""
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            get_model_state_dict,
            get_optimizer_state_dict,
            set_model_state_dict,
            set_optimizer_state_dict,
        )

        flat = StateDictOptions(flatten_optimizer_state_dict=True)
        model, opt = self.model, self.opt

        def set_sched(sd: dict) -> None:  # LRSchedulersContainer.load_state_dict
            self.sched.last_epoch = sd["last_epoch"]
            self.sched._step_count = sd["last_epoch"] + 1
            self.sched._last_lr = self.sched.get_lr()

        def get_data() -> dict:  # the loader's state_dict(): this rank's iterator state
            return {"version": 1, "dp_world_size": self.world, "pipeline_fingerprint": "",
                    f"dp_rank_{self.rank}": {"next_index": self.next_index}}

        def set_data(sd: dict) -> None:  # the loader's load_state_dict()
            assert sd["dp_world_size"] == self.world, sd
            assert sd["pipeline_fingerprint"] == self.gen._tt_pipeline_fingerprint(), sd
            self.data = self.gen._tt_data(self.rank)  # regenerate the stream, skip what was read
            self.next_index = sd[f"dp_rank_{self.rank}"]["next_index"]
            for _ in range(self.next_index):
                self.gen._tt_batch(self.data)

        def set_train_state(sd: dict) -> None:  # Trainer.load_state_dict
            self.step, self.ntokens_seen = sd["step"], sd["ntokens_seen"]

        states: dict = {}
        model_sd = get_model_state_dict(model)
        if without != "weights":
            states.update(model_sd)
        parts = [  # (the tool's component, the name torchtitan saves it under, container)
            ("optimizer", "optimizer", _Stateful(
                lambda: get_optimizer_state_dict(model, opt, options=flat),
                lambda sd: set_optimizer_state_dict(model, opt, sd, options=flat))),
            ("scheduler", "lr_scheduler", _Stateful(
                lambda: {"last_epoch": self.sched.last_epoch}, set_sched)),
            ("data", "dataloader", _Stateful(get_data, set_data)),
            ("progress", "train_state", _Stateful(
                lambda: {"step": self.step, "ntokens_seen": self.ntokens_seen},
                set_train_state)),
        ]
        for kind, name, obj in parts:
            if kind != without:
                states[name] = obj
        dcp.load(states, checkpoint_id=checkpoint)
        if without != "weights":  # ModelWrapper.load_state_dict
            set_model_state_dict(model, {k: states[k] for k in model_sd})


# What leaving each component out of the load means (torchtitan's exclude_from_loading).
ABLATIONS = ("weights", "optimizer", "scheduler", "data", "progress")


def _clone(obj):
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.detach().clone()
    if isinstance(obj, dict):
        return {k: _clone(v) for k, v in obj.items()}
    return obj


def _locals(state: dict, prefix: str = "") -> dict:
    """Flat {key: this rank's values} (a DTensor's own shard; ints and strings as they are)."""
    import torch

    out = {}
    for k, v in state.items():
        if isinstance(v, dict):
            out.update(_locals(v, f"{prefix}{k}."))
        elif isinstance(v, torch.Tensor):
            out[prefix + k] = (v.to_local() if hasattr(v, "to_local") else v).detach().clone()
        else:
            out[prefix + k] = v
    return out


def _compare(mine: dict, theirs: dict) -> tuple[list[str], float]:
    """Keys whose values are not bit-identical, and the largest absolute difference."""
    import torch

    keys, worst = [], 0.0
    for k in sorted(set(mine) | set(theirs)):
        x, y = mine.get(k), theirs.get(k)
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if x.dtype != y.dtype or x.shape != y.shape:
                keys.append(k)
                worst = float("inf")
            elif not torch.equal(x, y):
                keys.append(k)
                worst = max(worst, (x.double() - y.double()).abs().max().item())
        elif x != y:
            keys.append(k)
            worst = float("inf")
    return keys, worst


def _gathered(obj) -> list:
    import torch.distributed as dist

    every = [None] * dist.get_world_size()
    dist.all_gather_object(every, obj)
    return every


def _both_ranks(mine: dict, theirs: dict) -> dict:
    """_compare on every rank: {"keys": [...], "max_abs_diff": x} over both ranks' shards."""
    every = _gathered(_compare(mine, theirs))
    return {"keys": sorted({k for keys, _ in every for k in keys}),
            "max_abs_diff": max(w for _, w in every)}


def _worker(rank: int, world: int, port: int, sample: str, scratch: str, out: str,
            k: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp

    gen = _generator()
    gen._deterministic_torch()
    dist.init_process_group("gloo", rank=rank, world_size=world)
    saved = gen.TT_STEPS
    total = saved + k
    result: dict = {"k": k, "saved_step": saved}

    # a. uninterrupted. At step 10 its state is compared with the sample's and saved with the
    # generator's own code into the scratch folder (the same layout, made on this machine).
    a = _Run(gen, rank, world)
    losses = a.train(saved)
    state = a.state()
    theirs = _clone(state)
    dcp.load(theirs, checkpoint_id=sample)  # every key of a's state must be in the sample
    mine = _locals(state)
    result["step10_vs_sample"] = _both_ranks(mine, _locals(theirs))
    result["step10_values"] = len(mine)
    own = os.path.join(scratch, "own", "checkpoint", f"step-{saved}")
    dcp.save(state, checkpoint_id=own)
    result["uninterrupted"] = losses + a.train(total)
    final = _locals(a.state())
    del a, state, theirs

    # b. resumed from the sample, and from the same state saved on this machine;
    # c. resumed from the sample without one component
    runs: list[tuple[str, str, str | None]] = [("resumed", sample, None),
                                               ("resumed_own_save", own, None)]
    runs += [(f"without_{c}", sample, c) for c in ABLATIONS]
    for name, checkpoint, without in runs:
        r = _Run(gen, rank, world)
        r.load(checkpoint, without=without)
        result[name] = r.train(total)
        result[name + "_from_step"] = total - len(result[name])
        if without is None:
            result[name + "_final_vs_uninterrupted"] = _both_ranks(_locals(r.state()), final)
        del r

    # d. dropout: the RNG is the one thing the sample does not hold
    d = _Run(gen, rank, world, dropout=0.1)
    losses = d.train(saved)
    rng_at_10 = torch.get_rng_state()
    ckpt = os.path.join(scratch, "dropout", "checkpoint", f"step-{saved}")
    dcp.save(d.state(), checkpoint_id=ckpt)
    result["dropout_uninterrupted"] = losses + d.train(total)
    del d
    for name, rng in (("dropout_resumed_without_rng", None),
                      ("dropout_resumed_with_rng", rng_at_10)):
        r = _Run(gen, rank, world, dropout=0.1)
        r.load(ckpt)
        if rng is not None:
            torch.set_rng_state(rng)
        result[name] = r.train(total)
        del r

    dist.barrier()
    if rank == 0:
        Path(out).write_text(json.dumps(result, indent=1))
    dist.destroy_process_group()


def main(argv: list[str]) -> None:
    import torch.multiprocessing as mp

    sample, scratch, out = argv[:3]
    k = int(argv[3]) if len(argv) > 3 else 4
    gen = _generator()
    mp.spawn(_worker, args=(gen.TT_WORLD, gen._free_port(), sample, scratch, out, k),
             nprocs=gen.TT_WORLD, join=True)


if __name__ == "__main__":
    main(sys.argv[1:])
