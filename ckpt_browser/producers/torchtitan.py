"""torchtitan: `step-N` folders, DCP by default or HF safetensors when it saves for export.

Read by `build_torchtitan`: model and optimizer through the DCP producer's readers, its
own lr_scheduler.*, dataloader.* and train_state.* keys.
"""

from __future__ import annotations

from ckpt_browser.model import WARNING, Component, Finding, Problem, TrainingState, natural_key
from ckpt_browser.parts.common import (
    INCOMPLETE,
    OK,
    Found,
    as_int,
    jsonable,
    missing,
    not_needed,
    num,
)
from ckpt_browser.parts.files import StateFiles
from ckpt_browser.parts.weights import weights_component
from ckpt_browser.producers.base import (
    NOT_EXACT,
    Detection,
    Producer,
    Seen,
    per_update,
    rx,
    step_name,
)
from ckpt_browser.producers.dcp import (
    dcp_only,
    dcp_values,
    has_dcp,
    model_and_optimizer,
    rng_in_dcp,
    unsafe_items,
)
from ckpt_browser.standins import DcpCheckpoint

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



# --- reading its files -----------------------------------------------------------------

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
    read = model_and_optimizer(det, fs, out, _titan_rng())
    if read is None:
        return out
    d, parts = read
    files = det.files("weights")
    sched = dcp_values(fs, d, "lr_scheduler.")
    out.add(unsafe_items("scheduler", files, sched, "lr_scheduler.") or (
        Component("scheduler", OK, tuple(files), f"lr_scheduler.last_epoch is "
                  f"{num(sched.get('last_epoch'))} (torchtitan schedules are stateless "
                  "lambdas, so this is all they need).", sched) if sched else
        missing("scheduler", "no lr_scheduler.* keys: the LR schedule restarts (warmup "
                "again) on resume.")))
    out.add(_titan_data(fs, d, files, out))
    train = dcp_values(fs, d, "train_state.")
    step = train.get("step")
    out.step = as_int(step)
    tokens = train.get("ntokens_seen")
    out.add(unsafe_items("progress", files, train, "train_state.") or (
        Component("progress", OK, tuple(files), f"train_state.step is {num(step)}"
                  # DCP keeps one copy of a plain value, the first rank's: its own count
                  + (f", {tokens:,} tokens seen by rank 0 (each rank counts its own)."
                     if as_int(tokens) else "."), train) if train
        else missing("progress", "no train_state.* keys: the step is known only from the "
                     f"folder name ({det.step_source or 'none'}).")))
    if det.step is not None and out.step is not None and out.step != det.step:
        out.problems.append(Problem(WARNING, None, f"train_state.step is {out.step} but the folder "
                                    f"is named step-{det.step}"))
    out.add(rng_in_dcp(files, parts) or _titan_rng())  # a script's own
    out.add(not_needed("scaler", TITAN_SCALER))
    return out


def _titan_rng() -> Component:
    return missing("rng", "torchtitan never saves RNG state: random streams (dropout, sampling) "
                   "restart on resume.")


def _titan_data(fs: StateFiles, d: DcpCheckpoint, files, out: Found) -> Component:
    vals = dcp_values(fs, d, "dataloader.")
    unsafe = unsafe_items("data", files, vals, "dataloader.")
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


# --- its resume rules -------------------------------------------------------------------

def _world_checks(ts: TrainingState, components: dict[str, Component], n: int) -> list[Finding]:
    """torchtitan refuses its data-loader state on another data-parallel size."""
    world = as_int(components["data"].facts.get("world_size"))
    if ts.framework != "torchtitan" or not world or world == n:
        return []
    return [Finding(WARNING, "data", None, f"dataloader.dp_world_size is {world}: torchtitan "
                    f"refuses to load the data-loader state on another data-parallel size ({n} "
                    "if every rank is data-parallel). Add \"dataloader\" to "
                    "checkpoint.exclude_from_loading to resume; the data then restarts from the "
                    f"beginning, so {NOT_EXACT}.")]


TORCHTITAN = Producer("torchtitan", _claims, _roles,
                      (step_name("step-N", r"step-(\d+)"),),  # components/checkpoint.py
                      build=build_torchtitan, world_checks=_world_checks,
                      scheduler_at=per_update,
                      nests=("checkpoint",))
