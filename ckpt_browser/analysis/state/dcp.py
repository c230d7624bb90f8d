"""torch DCP checkpoints: torchtitan's step-N folders and plain DCP of unknown origin.

Non-tensor items (steps, loader state) are small torch.save zips, decoded with the safe reader.
"""

from __future__ import annotations

from ckpt_browser import limits
from ckpt_browser.analysis.state.common import (
    INCOMPLETE,
    OK,
    UNSAFE,
    Found,
    as_int,
    dcp_status,
    every_kind,
    jsonable,
    missing,
    name_list,
    not_needed,
    num,
)
from ckpt_browser.analysis.state.files import StateFiles
from ckpt_browser.analysis.state.optimizer import optimizer_from_dcp
from ckpt_browser.analysis.state.weights import weights_component
from ckpt_browser.model import WARNING, Component, Problem, natural_key
from ckpt_browser.producers.base import Detection
from ckpt_browser.producers.dcp import DCP_DATA
from ckpt_browser.standins import DcpCheckpoint

TITAN_SCALER = "torchtitan trains in bf16/fp32 and has no grad scaler."


def build_torchtitan(det: Detection, fs: StateFiles) -> Found:
    out = Found()
    if det.variant == "hf":
        out.add(weights_component(fs, det.files("weights")))
        for kind, what in (("optimizer", "no optimizer"), ("scheduler", "no LR scheduler"),
                           ("data", "no data-loader"), ("progress", "no train_state")):
            out.add(missing(kind, f"a last_save_in_hf export: model weights only, {what} state, "
                            "so this can only warm-start a run."))
        out.add(_titan_rng())
        out.add(not_needed("scaler", TITAN_SCALER))
        return out
    d = _model_and_optimizer(det, fs, out, titan=True)
    if d is None:
        return out
    files = det.files("weights")
    sched = _values(fs, d, "lr_scheduler.")
    out.add(_unsafe_items("scheduler", files, sched, "lr_scheduler.") or (
        Component("scheduler", OK, tuple(files), f"lr_scheduler.last_epoch is "
                  f"{num(sched.get('last_epoch'))} (torchtitan schedules are stateless "
                  "lambdas, so this is all they need).", sched) if sched else
        missing("scheduler", "no lr_scheduler.* keys: the LR schedule restarts (warmup "
                "again) on resume.")))
    out.add(_titan_data(fs, d, files, out))
    train = _values(fs, d, "train_state.")
    step = train.get("step")
    out.step = as_int(step)
    tokens = train.get("ntokens_seen")
    out.add(_unsafe_items("progress", files, train, "train_state.") or (
        Component("progress", OK, tuple(files), f"train_state.step is {num(step)}"
                  + (f", {tokens:,} tokens seen." if as_int(tokens) else "."), train) if train
        else missing("progress", "no train_state.* keys: the step is known only from the "
                     f"folder name ({det.step_source or 'none'}).")))
    if det.step is not None and out.step is not None and out.step != det.step:
        out.problems.append(Problem(WARNING, None, f"train_state.step is {out.step} but the folder "
                                    f"is named step-{det.step}"))
    out.add(_titan_rng())
    out.add(not_needed("scaler", TITAN_SCALER))
    return out


def build_dcp(det: Detection, fs: StateFiles) -> Found:
    out = Found()
    d = _model_and_optimizer(det, fs, out, titan=False)
    if d is None:
        return out
    files = det.files("weights")
    for kind, pre in (("scheduler", "lr_scheduler."), ("data", "dataloader."),
                      ("progress", "train_state.")):
        vals = _values(fs, d, pre)
        out.add(_unsafe_items(kind, files, vals, pre) or (
            Component(kind, OK, tuple(files), f"{pre}* keys in the DCP checkpoint: "
                      f"{name_list(sorted(vals), 5)}.", {"keys": vals}) if vals else
            missing(kind, f"a plain DCP checkpoint with no {pre}* keys: which framework wrote it "
                    "is unknown, so this state is not found.")))
    out.add(missing("rng", "DCP stores no RNG state unless the training script adds it."))
    out.add(not_needed("scaler", "no grad-scaler keys in this DCP checkpoint."))
    return out


def _titan_rng() -> Component:
    return missing("rng", "torchtitan never saves RNG state: random streams (dropout, sampling) "
                   "restart on resume.")


def _model_and_optimizer(det: Detection, fs: StateFiles, out: Found,
                         titan: bool) -> DcpCheckpoint | None:
    """Weights, optimizer and rank count; None (all seven filled) when the folder is unusable."""
    files = det.files("weights")
    d = fs.dcp("")
    bad = dcp_status("weights", files, d)
    if bad:
        rng = _titan_rng() if titan else missing("rng", "no RNG state.")
        every_kind(out, lambda kind: Component(kind, bad.status, bad.files, bad.detail)
                   if kind != "rng" else rng)
        return None
    # torchtitan, and dcp.save(model.state_dict()), keep model FQNs at top level, with no
    # "model." prefix; dcp.save({"model": ...}) adds it
    prefix = "model." if any(k.startswith("model.") for k in d.entries) else ""
    out.add(weights_component(fs, files, dcp="", dcp_prefix=prefix))
    out.add(optimizer_from_dcp(fs, files, "", "optimizer."))
    ranks = {m.group(1) for f in d.files if (m := DCP_DATA.match(f))}
    out.ranks = len(ranks) or None
    return d


def _values(fs: StateFiles, d: DcpCheckpoint, prefix: str) -> dict:
    """Items under `prefix`: non-tensor ones decoded when small and plain, tensors as labels.
    At most the dcp_items limit are decoded (each is a small zip and a pickle): READ_FIRST,
    then the shallowest keys (dp_world_size before dp_rank_7.state); the others keep their
    key, valued NOT_DECODED, and a warning counts them. Items in the same bytes are decoded
    once."""
    most = limits.LIMITS.dcp_items
    keys = [k for k in d.entries if k.startswith(prefix)]
    chosen = set(sorted(keys, key=lambda k: (k[len(prefix):] not in READ_FIRST, k.count("."),
                                             natural_key(k)))[:most])
    decoded: dict[tuple, object] = {}
    values = {}
    for key in keys:
        e = d.entries[key]
        if key not in chosen:
            values[key[len(prefix):]] = NOT_DECODED
            continue
        c = e.chunks[0] if e.kind != "tensor" and e.chunks else None
        where = (c.file, c.offset, c.length) if c is not None else (key,)
        if where not in decoded:
            decoded[where] = jsonable(fs.dcp_value("", e))
        values[key[len(prefix):]] = decoded[where]
    if len(keys) > most:
        fs.problems.append(Problem(WARNING, _metadata_name(d), f"{len(keys):,} items under "
                                   f"{prefix}*: only {most:,} were decoded (the shallowest "
                                   "keys); the others are listed by name only"))
    return values


NOT_DECODED = "(not decoded: too many items)"
READ_FIRST = ("step", "ntokens_seen", "last_epoch", "dp_world_size", "world_size")


def _metadata_name(d: DcpCheckpoint) -> str:
    return f"{d.folder}/.metadata" if d.folder else ".metadata"


def _unsafe_items(kind: str, files, values: dict, prefix: str) -> Component | None:
    bad = [k for k, v in values.items() if isinstance(v, str) and v.startswith("unsafe call")]
    if not bad:
        return None
    return Component(kind, UNSAFE, tuple(files), f"DCP item {prefix}{bad[0]} holds "
                     f"{values[bad[0]]}; torch's default DCP load would execute it.",
                     {"unsafe_items": [prefix + k for k in bad]})


def _titan_data(fs: StateFiles, d: DcpCheckpoint, files, out: Found) -> Component:
    vals = _values(fs, d, "dataloader.")
    unsafe = _unsafe_items("data", files, vals, "dataloader.")
    if unsafe:
        return unsafe
    if not vals:
        return missing("data", "no dataloader.* keys: the data restarts from the beginning on "
                       "resume.", {"stored": False})
    world = vals.get("dp_world_size", vals.get("world_size"))
    per_rank = sorted({k.split(".")[0] for k in vals if k.startswith("dp_rank_")},
                      key=natural_key)  # int() refuses a rank of 4,300 digits
    facts = {"stored": True, "world_size": jsonable(world), "per_rank": per_rank,
             "state": dict(sorted(vals.items())[:50])}
    if as_int(world):
        out.ranks = world
    elif per_rank:
        out.ranks = len(per_rank)
    expected = as_int(world)
    if expected and len(per_rank) < expected:
        return Component("data", INCOMPLETE, tuple(files), f"data-loader state for only "
                         f"{len(per_rank)} of {expected} data-parallel ranks.", facts)
    return Component("data", OK, tuple(files), f"data-loader position for {len(per_rank)} "
                     f"data-parallel rank{'s' if len(per_rank) != 1 else ''} "
                     f"(dp_world_size {num(world)}); resuming on a different number of ranks "
                     "loses or refuses it.", facts)
