"""Megatron-LM: the legacy torch format (model_optim_rng.pt per model-parallel rank) and
dist checkpointing (DCP keys plus common.pt or a common_state object)."""

from __future__ import annotations

import re

from ckpt_browser.analysis.state.common import (
    DAMAGED,
    MISSING,
    OK,
    Found,
    as_int,
    damaged_or_unsafe,
    dcp_status,
    dig,
    every_kind,
    fields,
    find_optimizer,
    jsonable,
    leaf,
    missing,
    not_needed,
    num,
    read_each,
)
from ckpt_browser.analysis.state.files import StateFiles
from ckpt_browser.analysis.state.optimizer import (
    optimizer_facts,
    optimizer_from_dcp,
    optimizer_sentence,
)
from ckpt_browser.analysis.state.rng import generators
from ckpt_browser.analysis.state.scaler import fp16_scaler_missing, scaler_from_state
from ckpt_browser.analysis.state.scheduler import scheduler_component
from ckpt_browser.analysis.state.weights import weights_component
from ckpt_browser.model import Component
from ckpt_browser.producers.base import Detection
from ckpt_browser.readers.pickle_safe import short


def build_megatron(det: Detection, fs: StateFiles) -> Found:
    out = Found()
    main = [f for f in det.files("progress") if leaf(f) == "model_optim_rng.pt"]
    if det.variant in ("torch_dist", "torch_dcp"):
        return _dist(det, fs, out)
    if not main:
        why = det.problems[0].message if det.problems else "no model_optim_rng.pt was found"
        return every_kind(out, lambda kind: missing(kind, f"nothing to read: {why}."))
    pf = fs.pickle(main[0])
    bad = damaged_or_unsafe("progress", main, [pf])
    if bad:
        return every_kind(out, lambda kind: Component(
            kind, bad.status, tuple(det.files(kind)) or bad.files, bad.detail))
    ck = fields(pf.obj)
    args = fields(ck.get("args"))
    model_key = lambda o: {k: v for k, v in fields(o).items()  # noqa: E731
                           if str(k) == "model" or re.match(r"^model\d+$", str(k))}
    out.add(weights_component(fs, det.files("weights"), key_in=model_key))
    opt = ck.get("optimizer")
    out.add(_optimizer(fs, pf, opt, det.files("optimizer"), main[0]))
    out.add(_scheduler(fs, pf, ck, main[:1], f"{main[0]} has no opt_param_scheduler: the LR "
                       "schedule restarts."))
    out.add(_rng(fs, det.files("rng")))
    iteration = as_int(ck.get("iteration"))
    out.step = iteration if iteration is not None else det.step
    facts = {"iteration": iteration, "checkpoint_version": jsonable(ck.get("checkpoint_version")),
             "num_floating_point_operations_so_far":
                 jsonable(ck.get("num_floating_point_operations_so_far"))}
    parallel = {k: args[k] for k in ("world_size", "tensor_model_parallel_size",
                                     "pipeline_model_parallel_size", "data_parallel_size")
                if as_int(args.get(k))}
    if parallel:
        facts["parallel"] = parallel
    out.add(Component("progress", OK if iteration is not None else MISSING, tuple(main[:1]),
                      f"iteration {iteration}." if iteration is not None else
                      f"{main[0]} has no iteration: the resume would start from 0.", facts))
    data = {k: jsonable(args[k]) for k in ("consumed_train_samples", "consumed_valid_samples",
                                           "skipped_train_samples", "micro_batch_size",
                                           "global_batch_size") if k in args}
    if "consumed_train_samples" in data:
        out.add(Component("data", OK, tuple(main[:1]), f"args.consumed_train_samples is "
                          f"{num(data['consumed_train_samples'])}: the data loader resumes "
                          "right after those samples.", {"stored": True, **data}))
    else:
        out.add(missing("data", "args has no consumed_train_samples: the data restarts from the "
                        "first sample.", {"stored": False}))
    out.ranks = as_int(args.get("world_size"))
    out.add(_scaler(fs, pf, opt, args, main[0]))
    return out


def _optimizer(fs: StateFiles, pf, opt, files, where: str) -> Component:
    if opt is None:
        return missing("optimizer", f"{where} has no optimizer (saved with --no-save-optim): "
                       "a warm start only.", {})
    sd = find_optimizer(opt)
    facts = optimizer_facts(sd, fs.scalars(pf)) if sd else {"keys": sorted(map(str, fields(opt)))}
    text = optimizer_sentence(facts, where) if sd else (
        f"{where} holds the optimizer ({', '.join(facts['keys'][:5])}).")
    if any(leaf(f) == "distrib_optim.pt" for f in files):
        text = text[:-1] + "; the distributed optimizer's state is in distrib_optim.pt."
    return Component("optimizer", OK, tuple(files), text, facts)


def _scheduler(fs: StateFiles, pf, ck: dict, files, absent: str) -> Component:
    sched = ck.get("opt_param_scheduler")
    if sched is None:
        return missing("scheduler", absent)
    return scheduler_component(fs, pf, sched, files, files[0])


def _rng(fs: StateFiles, files) -> Component:
    if not files:
        return missing("rng", "no model_optim_rng.pt to read RNG state from.")
    per: dict[str, list[str]] = {}
    pfs, bad = read_each(fs, "rng", files)
    if bad:
        return bad
    for f, pf in zip(files, pfs):
        rank_dir = f.rsplit("/", 2)[-2] if "/" in f else f
        states = fields(pf.obj).get("rng_state")
        if states is None and "random_rng_state" in fields(pf.obj):
            states = [pf.obj]  # very old checkpoints keep the five keys at top level
        if isinstance(states, dict):
            states = [states]
        if states is not None and not isinstance(states, (list, tuple)):
            return Component("rng", DAMAGED, tuple(files), f"{f}: rng_state holds "
                             f"{short(states)}, not a list of RNG states; Megatron cannot "
                             "restore the random streams from it.")
        for i, st in enumerate(states or []):
            key = rank_dir if len(states) == 1 else f"{rank_dir}#{i}"
            per[key] = generators(st)
    if not per:
        return missing("rng", "model_optim_rng.pt has no rng_state (saved with --no-save-rng): "
                       "random streams restart on resume.")
    gens = sorted({g for keys in per.values() for g in keys})
    return Component("rng", OK, tuple(files), f"RNG state for {len(per)} model-parallel "
                     f"rank{'s' if len(per) != 1 else ''} ({', '.join(gens)}); restored unless "
                     "--finetune or --no-load-rng.", {"ranks": per})


def _scaler(fs, pf, opt, args: dict, where: str) -> Component:
    scaler = dig(opt, "grad_scaler") if opt is not None else None
    fp16 = args.get("fp16")
    if fp16 is not True:
        return not_needed("scaler", f"args.fp16 is {fp16}: no fp16 grad scaler to restore.",
                          {"fp16": jsonable(fp16)})
    if not fields(scaler):
        return fp16_scaler_missing("Megatron")
    return scaler_from_state(fs, pf, scaler, (where,), f"{where} (optimizer.grad_scaler)")


def _dist(det: Detection, fs: StateFiles, out: Found) -> Found:
    files = det.files("weights")
    rel = det.dcp[0] if det.dcp else ""
    d = fs.dcp(rel)
    bad = dcp_status("weights", files, d)
    if bad:
        return every_kind(out, lambda kind: Component(kind, bad.status, bad.files, bad.detail))
    keys = list(d.entries)
    opt = [k for k in keys if k.startswith("optimizer.")]
    n_model = sum(1 for k, e in d.entries.items() if e.kind == "tensor" and not k.startswith(
        ("optimizer.", "rng_state", "common_state")))
    out.add(Component("weights", OK if n_model else MISSING, tuple(files),
                      f"{n_model:,} model tensors in Megatron dist checkpointing (DCP).",
                      {"format": "dcp", "tensors": n_model}))
    out.add(optimizer_from_dcp(fs, files, rel, "optimizer.") if opt else missing(
        "optimizer", "no optimizer.* keys (saved with --no-save-optim): a warm start only."))
    rng = sorted(k for k in keys if k.startswith("rng_state"))
    out.add(Component("rng", OK, tuple(files), f"{len(rng)} rng_state shard objects.",
                      {"keys": rng}) if rng else missing(
        "rng", "no rng_state/* objects (saved with --no-save-rng): random streams restart."))
    common = [f for f in det.files("progress") if leaf(f) == "common.pt"]
    if common:
        _common_pt(fs, common, out)
    else:
        stored = [k for k in keys if k.startswith("common_state")]
        for kind in ("progress", "scheduler", "data"):
            out.add(Component(kind, OK if stored else MISSING, tuple(files),
                              "kept in the DCP common_state object (args, iteration, "
                              "opt_param_scheduler); not decoded here." if stored else
                              "no common_state object and no common.pt.", {"keys": stored}))
    out.add(not_needed("scaler", "grad scaler state, if any, is inside the optimizer keys."))
    return out


def _common_pt(fs: StateFiles, common: list[str], out: Found) -> None:
    """common.pt beside the DCP files: iteration, scheduler and args, as in the legacy file."""
    pf = fs.pickle(common[0])
    ck = {} if pf.unsafe else fields(pf.obj)
    iteration = as_int(ck.get("iteration"))
    out.step = iteration
    out.add(Component("progress", OK if iteration is not None else MISSING, tuple(common),
                      f"common.pt: iteration {iteration}.", {"iteration": iteration}))
    out.add(_scheduler(fs, pf, ck, common, "common.pt has no opt_param_scheduler."))
    consumed = dig(ck, "args", "consumed_train_samples")
    out.add(Component("data", OK, tuple(common), f"args.consumed_train_samples is "
                      f"{num(consumed)}.", {"stored": True, "consumed_train_samples":
                                            jsonable(consumed)})
            if consumed is not None else missing("data", "no consumed_train_samples."))
