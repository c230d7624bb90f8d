"""Megatron-LM: a tracker file naming iter_NNNNNNN, in the legacy torch or a DCP-based format
(`megatron/training/checkpointing.py`).

Read by `build_megatron`: model_optim_rng.pt per model-parallel rank in the legacy format;
DCP keys plus common.pt or a common_state object in dist checkpointing.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace

from ckpt_browser.model import (
    ERROR,
    WARNING,
    Component,
    Finding,
    Problem,
    TrainingState,
    natural_key,
)
from ckpt_browser.parts.common import (
    DAMAGED,
    INCOMPLETE,
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
from ckpt_browser.parts.files import StateFiles
from ckpt_browser.parts.optimizer import (
    optimizer_facts,
    optimizer_from_dcp,
    optimizer_sentence,
)
from ckpt_browser.parts.rng import generators
from ckpt_browser.parts.scaler import fp16_scaler_missing, scaler_from_state
from ckpt_browser.parts.scheduler import scheduler_component
from ckpt_browser.parts.weights import weights_component
from ckpt_browser.producers.base import (
    MAX_MARKER,
    NOT_EXACT,
    OTHER,
    Detection,
    Producer,
    Seen,
    add,
    dangling,
    isdir,
    listdir,
    read_marker,
    step_name,
)
from ckpt_browser.producers.dcp import DCP_DATA, dcp_files
from ckpt_browser.readers.pickle_safe import short
from ckpt_browser.readers.regular import open_regular

MEGATRON_TRACKER = "latest_checkpointed_iteration.txt"
MEGATRON_ITER = re.compile(r"^(?:iter_(\d{7})|release)$")
MEGATRON_RANK_DIR = re.compile(r"^mp_rank_\d\d(?:_\d{3})?(?:_\d{3})?$")
ALL_ROLES = ("weights", "optimizer", "scheduler", "rng", "data", "progress", "scaler")
STEPS = (step_name("iter_N", r"iter_(\d{7})"), step_name("release", "release", ""))


def megatron_format(folder: str, names: list[str]) -> str:
    """Megatron's `_get_checkpoint_format`: metadata.json -> torch_dist (or zarr),
    mp_rank_0* -> torch, .metadata -> torch_dcp."""
    if "metadata.json" in names:
        try:
            with open_regular(os.path.join(folder, "metadata.json")) as f:
                doc = json.loads(f.read(MAX_MARKER * 16))
            backend = doc.get("sharded_backend") if isinstance(doc, dict) else None
        except (OSError, ValueError, RecursionError):  # RecursionError: a nesting bomb
            backend = None
        return "zarr" if backend == "zarr" else "torch_dist"
    if any(n.startswith("mp_rank_0") for n in names):
        return "torch"
    if "common.pt" in names:  # a dist checkpoint that lost its metadata.json
        return "torch_dist"
    if ".metadata" in names or any(DCP_DATA.match(n) for n in names):
        return "torch_dcp"
    return ""


def megatron_root(path: str, names: list[str]) -> Detection:
    text, problem = read_marker(path, MEGATRON_TRACKER)
    iters = [n for n in names if MEGATRON_ITER.match(n) and isdir(path, n)]
    if problem:
        return Detection(path, path, "megatron", roles={OTHER: (MEGATRON_TRACKER,)},
                         problems=(problem,))
    if text == "release":
        tag, step = "release", None
    elif text.isdigit():
        step = int(text)
        tag = f"iter_{step:07d}"
    else:
        return Detection(path, path, "megatron", roles={OTHER: (MEGATRON_TRACKER,)},
                         problems=(Problem(ERROR, MEGATRON_TRACKER,
                                           f"holds {text!r}, not an iteration or 'release'"),))
    source = f"{MEGATRON_TRACKER} says {text}"
    if tag not in iters:
        return Detection(path, path, "megatron", step, source, roles={OTHER: (MEGATRON_TRACKER,)},
                         tag=tag, problems=(dangling(MEGATRON_TRACKER, tag, iters, "iteration",
                                                     here=path, step_names=STEPS),))
    det = megatron_iter(os.path.join(path, tag), tag, listdir(os.path.join(path, tag)), step,
                        source, root=path)
    roles = dict(det.roles)
    add(roles, OTHER, [MEGATRON_TRACKER])
    return Detection(path, path, "megatron", step, source, variant=det.variant, roles=roles,
                     dcp=det.dcp, tag=tag, problems=det.problems)


def megatron_iter(folder: str, tag: str, names: list[str], step, source, root: str | None = None,
                  rank_files: list[str] | None = None) -> Detection:
    root = root or folder
    prefix = f"{tag}/" if tag else ""
    roles: dict[str, tuple[str, ...]] = {}
    if rank_files is not None:  # the user opened one mp_rank_XX folder
        for role in ALL_ROLES:
            add(roles, role, ["model_optim_rng.pt"])
        add(roles, "optimizer", [n for n in rank_files if n == "distrib_optim.pt"
                                 or n.startswith("layer_wise_optimizer_")])
        return Detection(folder, folder, "megatron", step, source, variant="torch", roles=roles)
    variant = megatron_format(folder, names)
    problems: list[Problem] = []
    dcp: tuple[str, ...] = ()
    if variant == "torch":
        problems += _legacy_roles(folder, prefix, names, roles)
    elif variant in ("torch_dist", "torch_dcp"):
        files = tuple(prefix + f for f in dcp_files(folder, "", names))
        for role in ALL_ROLES:
            add(roles, role, files)
        if "common.pt" in names:
            for role in ("scheduler", "data", "progress"):
                add(roles, role, [prefix + "common.pt"])
        dcp = (tag,)
        if ".metadata" not in names:
            problems.append(Problem(ERROR, tag or None,
                                    "no DCP .metadata: the save did not finish"))
    elif variant == "zarr":
        problems.append(Problem(WARNING, prefix + "metadata.json", "zarr backend: removed from "
                                "Megatron in 2026-01, current Megatron cannot load it"))
        add(roles, OTHER, [prefix + n for n in names])
    else:
        problems.append(Problem(ERROR, tag or None, "no Megatron checkpoint files here (no "
                                "metadata.json, mp_rank_* folder or DCP .metadata)"))
    add(roles, OTHER, [prefix + "metadata.json"] if "metadata.json" in names else [])
    return Detection(folder, root, "megatron", step, source, variant=variant, roles=roles,
                     dcp=dcp, tag=tag, problems=tuple(problems))


def _legacy_roles(folder: str, prefix: str, names: list[str], roles: dict) -> list[Problem]:
    """The torch format: one mp_rank_XX folder per model-parallel rank."""
    problems = []
    rank_dirs = [n for n in names if MEGATRON_RANK_DIR.match(n) and isdir(folder, n)]
    main = []
    for d in rank_dirs:
        inner = listdir(os.path.join(folder, d))
        if "model_optim_rng.pt" in inner:
            main.append(f"{prefix}{d}/model_optim_rng.pt")
        else:
            problems.append(Problem(ERROR, f"{prefix}{d}", "has no model_optim_rng.pt"))
        add(roles, "optimizer", [f"{prefix}{d}/{n}" for n in inner if n == "distrib_optim.pt"
                                 or n.startswith("layer_wise_optimizer_")])
    for role in ("weights", "rng"):
        add(roles, role, main)
    for role in ("optimizer", "scheduler", "data", "progress", "scaler"):
        add(roles, role, main[:1])
    roles["optimizer"] = tuple(sorted(roles.get("optimizer", ()), key=natural_key))
    return problems


def _seen_as(seen: Seen) -> str:
    """Which of Megatron's layouts `seen` is, or "" when none."""
    if seen.is_file:
        return "file" if seen.names[0] in ("model_optim_rng.pt", "distrib_optim.pt") else ""
    if MEGATRON_TRACKER in seen.names:
        return "root"
    if MEGATRON_ITER.match(seen.base) and megatron_format(seen.path, seen.names):
        return "iteration"
    if MEGATRON_RANK_DIR.match(seen.base) and "model_optim_rng.pt" in seen.names:
        return "rank"
    return ""


def _roles(seen: Seen) -> Detection:
    kind = _seen_as(seen)
    if kind == "root":
        return megatron_root(seen.path, seen.names)
    if kind == "iteration":
        return megatron_iter(seen.path, "", seen.names, seen.step, seen.source)
    # one rank's folder or file: the iteration is the folder above the rank's
    grand = os.path.dirname(os.path.abspath(seen.root if kind == "file" else seen.path))
    step, _, source = seen.read_step(os.path.basename(grand))
    if kind == "rank":
        return megatron_iter(seen.path, "", [], step, source, rank_files=seen.names)
    name = seen.names[0]
    keys = ("optimizer",) if name == "distrib_optim.pt" else ALL_ROLES
    return Detection(seen.path, seen.root, "megatron", step, source,
                     roles={k: (name,) for k in keys}, variant="torch")


def _own_file(det: Detection, name: str, keys: set[str]) -> Detection | None:
    """Megatron's model_optim_rng.pt by its keys, whatever it is called."""
    # its fork on another engine writes these too, beside that engine's own keys (ds_version)
    if {"checkpoint_version", "iteration"} <= keys and keys & {"model", "model0", "optimizer"} \
            and not keys & {"ds_version", "ds_config"}:
        return replace(det, framework="megatron", variant="torch",
                       roles={k: (name,) for k in ALL_ROLES})
    return None


# --- reading its files -----------------------------------------------------------------


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
        states = states or []
        for i, st in enumerate(states):
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
    lost = _lost(det) if det.variant == "torch_dist" else ""
    if lost:
        return every_kind(out, lambda kind: Component(kind, INCOMPLETE, tuple(files), lost))
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


PARALLEL = ("tensor_model_parallel_size", "pipeline_model_parallel_size",
            "context_parallel_size", "data_parallel_size")


def _lost(det: Detection) -> str:
    """What megatron-core's dist_checkpointing.load needs before any tensor: metadata.json
    (which backend) and common.pt (args, iteration, scheduler, the optimizer's param_groups)."""
    prefix = f"{det.tag}/" if det.tag else ""
    names = {f for files in det.roles.values() for f in files}
    if prefix + "metadata.json" not in names:
        return (f"{prefix}metadata.json is missing: megatron-core's dist_checkpointing.load "
                "says the folder \"is not a distributed checkpoint\" and loads nothing, not "
                "even the weights.")
    if prefix + "common.pt" not in names:
        return (f"{prefix}common.pt is missing: megatron-core's dist_checkpointing.load reads "
                "it first (args, iteration, LR scheduler, the optimizer's param_groups) and "
                "raises \"Common file ... does not exist\", so nothing loads, not even the "
                "weights.")
    return ""


def _common_pt(fs: StateFiles, common: list[str], out: Found) -> None:
    """common.pt beside the DCP files: iteration, scheduler and args, as in the legacy file."""
    pf = fs.pickle(common[0])
    ck = {} if pf.unsafe else fields(pf.obj)
    iteration = as_int(ck.get("iteration"))
    out.step = iteration
    args = fields(ck.get("args"))
    out.ranks = as_int(args.get("world_size"))
    degrees = {k: as_int(args.get(k)) for k in PARALLEL if as_int(args.get(k)) is not None}
    said = ", ".join(f"{k.split('_')[0]} {v}" for k, v in degrees.items())
    out.add(Component("progress", OK if iteration is not None else MISSING, tuple(common),
                      f"common.pt: iteration {iteration}" + (f" (saved at {said})" if said
                                                              else "") + ".",
                      {"iteration": iteration, **degrees}))
    out.add(_scheduler(fs, pf, ck, common, "common.pt has no opt_param_scheduler."))
    consumed = dig(ck, "args", "consumed_train_samples")
    out.add(Component("data", OK, tuple(common), f"args.consumed_train_samples is "
                      f"{num(consumed)}.", {"stored": True, "consumed_train_samples":
                                            jsonable(consumed)})
            if consumed is not None else missing("data", "no consumed_train_samples."))


# --- its resume rules -------------------------------------------------------------------

def _world_checks(ts: TrainingState, components: dict[str, Component], n: int) -> list[Finding]:
    """Legacy Megatron loads only with the same tensor/pipeline degrees; its distributed
    optimizer only on the same data-parallel size."""
    progress, data = components["progress"], components["data"]
    par = progress.facts.get("parallel")
    if not isinstance(par, dict) or "world_size" not in par:
        return []
    tp = as_int(par.get("tensor_model_parallel_size")) or 1
    pp = as_int(par.get("pipeline_model_parallel_size")) or 1
    saved = as_int(par.get("world_size"))
    mp = tp * pp
    if n % mp:
        return [Finding(ERROR, "optimizer", None, f"{n} ranks cannot keep tensor-parallel {tp} "
                        f"x pipeline-parallel {pp}, and this legacy checkpoint is split into {mp} "
                        "model-parallel part(s) that Megatron loads only with the same degrees: "
                        "tools/checkpoint/convert.py reshards the weights but not the optimizer, "
                        "so that is a warm start.")]
    if n == saved:
        return []
    out = []
    dp_old, dp_new = (saved or mp) // mp, n // mp
    if any(leaf(f) == "distrib_optim.pt" for f in components["optimizer"].files):
        out.append(Finding(ERROR, "optimizer", None, f"distrib_optim.pt shards the optimizer "
                           f"over {dp_old} data-parallel ranks; legacy Megatron loads it only on "
                           f"the same data-parallel size, not {dp_new}: resume with "
                           "--no-load-optim, a warm start."))
    out.append(Finding(WARNING, "data", None, f"the data-parallel size changes from {dp_old} to "
                       f"{dp_new}: consumed_train_samples carries the data position over, but "
                       f"each rank's batches and random streams change, so {NOT_EXACT}."))
    gbs, mbs = as_int(data.facts.get("global_batch_size")), as_int(data.facts.get(
        "micro_batch_size"))
    if gbs and mbs and gbs % (mbs * dp_new):
        out.append(Finding(WARNING, "data", None, f"global_batch_size {gbs} is not a multiple of "
                           f"micro_batch_size {mbs} x {dp_new} data-parallel ranks: Megatron "
                           "refuses to start until the batch sizes change, and changing them "
                           "changes the run."))
    return out

MEGATRON = Producer("megatron", lambda seen: bool(_seen_as(seen)), _roles, STEPS,
                    rank_names=re.compile(r"^mp_rank_(\d\d)"),
                    build=build_megatron, own_file=_own_file, world_checks=_world_checks,
                    marks=(MEGATRON_TRACKER,), pointers=(MEGATRON_TRACKER,))
