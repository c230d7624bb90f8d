"""The HF Trainer's `checkpoint-N` folders (transformers `trainer.py`, PREFIX_CHECKPOINT_DIR).

Read by `build_hf`: trainer_state.json, training_args.bin and per-rank RNG beside the
weights, optimizer and scheduler files, or a nested FSDP save or engine tag folder.
"""

from __future__ import annotations

import os
import re

from ckpt_browser.model import ERROR, WARNING, Component, Finding, Problem, TrainingState
from ckpt_browser.parts.common import (
    DAMAGED,
    INCOMPLETE,
    MISSING,
    OK,
    Found,
    as_int,
    from_one_pickle,
    jsonable,
    leaf,
    missing,
    name_list,
    not_needed,
    num,
    safe_fields,
)
from ckpt_browser.parts.files import StateFiles
from ckpt_browser.parts.rng import RANK_IN_NAME, add_rng
from ckpt_browser.parts.scaler import fp16_scaler_missing, scaler_file
from ckpt_browser.parts.scheduler import scheduler_component
from ckpt_browser.producers.base import (
    NOT_EXACT,
    Detection,
    Producer,
    Seen,
    engine_parts,
    per_update,
    rx,
    step_name,
)
from ckpt_browser.producers.trainer import TrainerRule, optimizer_sources, weights_sources
from ckpt_browser.standins import HugeInt

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
    # any one of these names, in a folder or alone: a lone pytorch_model.bin is no sign of HF,
    # nor optimizer.pt or scheduler.pt, which custom loops and other libraries write too
    # (skorch's Checkpoint); those sign HF only in a checkpoint-N folder (_claims)
    rx(r"trainer_state\.json", r"training_args\.bin", r"rng_state(?:_\d+)?\.pth"),
    re.compile(r"^global_step\d+$"), adapters=True, folder_epoch=False)


# --- reading its files -----------------------------------------------------------------

HF_ARGS = ("seed", "data_seed", "per_device_train_batch_size", "gradient_accumulation_steps",
           "ignore_data_skip", "dataloader_drop_last", "max_steps", "num_train_epochs",
           "fp16", "bf16", "save_only_model")
HF_PROGRESS = ("global_step", "epoch", "max_steps", "num_train_epochs", "num_input_tokens_seen",
               "total_flos", "train_batch_size", "logging_steps", "eval_steps", "save_steps",
               "best_metric", "best_global_step", "best_model_checkpoint")


def build_hf(det: Detection, fs: StateFiles) -> Found:
    out = Found()
    ds = engine_parts(det, fs, out)
    args: dict = {}
    if "training_args.bin" in det.files("data"):
        args = safe_fields(out, fs.pickle("training_args.bin"))
    state, why = (fs.json("trainer_state.json") if "trainer_state.json" in det.files("progress")
                  else (None, ""))
    out.add(weights_sources(fs, det, ds))
    optimizer = optimizer_sources(fs, det, ds)
    out.add(optimizer)
    out.add(_scheduler(fs, det, ds, optimizer, out))
    expected = ds.world if ds else None
    if det.files("rng") and all(RANK_IN_NAME.search(leaf(f)) for f in det.files("rng")):
        expected = max(expected or 0, 2)  # rng_state_{r}.pth only when world_size > 1
    add_rng(out, fs, det.files("rng"), "no rng_state*.pth: the Trainer only logs an info line "
            "and the resumed run draws different random numbers (dropout, sampling).",
            expected=expected)
    if expected and (out.ranks or 0) < expected:
        out.ranks = expected
    out.add(_progress(det, state, why, out))
    out.add(_data(state, args, det))
    out.add(_scaler(fs, det, ds, args))
    return out


def _scheduler(fs, det, ds, optimizer: Component, out: Found) -> Component:
    files = [f for f in det.files("scheduler") if leaf(f) == "scheduler.pt"]
    if files:
        c = from_one_pickle(fs, "scheduler", files, scheduler_component)
    else:
        c = None
    if ds is not None:
        return c or ds.scheduler(fs)
    if c is None and optimizer.status != MISSING:
        if optimizer.status != OK:  # an unsafe or damaged optimizer keeps its own status
            return missing("scheduler", "no scheduler.pt: HF Trainer skips the optimizer AND "
                           "scheduler load unless both optimizer.pt and scheduler.pt exist.")
        out.components["optimizer"] = Component(
            "optimizer", INCOMPLETE, optimizer.files,
            f"{name_list(optimizer.files)} is here but scheduler.pt is not: HF Trainer skips the "
            "optimizer AND scheduler load unless both exist, so both restart fresh.",
            optimizer.facts)
        return missing("scheduler", "no scheduler.pt: HF Trainer skips the optimizer AND scheduler "
                       "load unless both optimizer.pt and scheduler.pt exist, so the LR schedule "
                       "and Adam's moments both restart.")
    if c is None:
        return missing("scheduler", "no scheduler.pt: the LR schedule restarts from its first "
                       "step (warmup again).")
    if optimizer.status == MISSING and c.status == OK:
        return Component("scheduler", INCOMPLETE, c.files,
                         "scheduler.pt is here but no optimizer file: HF Trainer loads neither "
                         "unless both exist, so the LR schedule restarts.", c.facts)
    return c


def _progress(det: Detection, state: dict | None, why: str, out: Found) -> Component:
    if state is None:
        if why:
            return Component("progress", DAMAGED, ("trainer_state.json",),
                             f"trainer_state.json is unreadable ({why}): the resume cannot learn "
                             "its global step.")
        return missing("progress", NO_STATE, {"trainer_state_json": "absent"})
    facts = {k: jsonable(state[k]) for k in HF_PROGRESS if k in state}
    log = state.get("log_history")
    if isinstance(log, list):
        facts["log_history_entries"] = len(log)
        if log and isinstance(log[-1], dict):
            facts["last_log"] = jsonable({k: v for k, v in log[-1].items()
                                          if isinstance(v, (int, float, str))})
    callbacks = state.get("stateful_callbacks")
    if isinstance(callbacks, dict):
        facts["stateful_callbacks"] = sorted(callbacks)
    gs = as_int(state.get("global_step"))
    out.step = gs
    out.epoch = state.get("epoch") if isinstance(state.get("epoch"), (int, float)) else None
    if gs is None:
        bad = state.get("global_step")
        said = f"'s global_step is {bad}, not the step count" if isinstance(bad, HugeInt) \
            else " has no integer global_step, which is the step count"
        if isinstance(bad, HugeInt):
            out.problems.append(Problem(ERROR, "trainer_state.json", f"global_step is {bad}"))
        return Component("progress", DAMAGED, ("trainer_state.json",),
                         f"trainer_state.json{said} the resume needs.", facts)
    if det.step is not None and det.step != gs:
        out.problems.append(Problem(WARNING, "trainer_state.json", f"global_step is {gs} but the "
                                    f"folder is named for step {det.step}"))
    text = f"trainer_state.json: global step {gs}"
    if as_int(state.get("max_steps")):
        text += f" of {state['max_steps']}"
    if out.epoch is not None:
        text += f", epoch {num(out.epoch)}"
    tokens = as_int(state.get("num_input_tokens_seen"))
    if tokens:
        text += f", {tokens:,} input tokens seen"
    return Component("progress", OK, ("trainer_state.json",), text + ".", facts)


def _data(state: dict | None, args: dict, det: Detection) -> Component:
    facts = {"stored": False, "derived_from": "trainer_state.json global_step"}
    facts.update({k: jsonable(args[k]) for k in HF_ARGS if k in args})
    files = tuple(f for f in det.files("data") if f == "trainer_state.json" or args)
    gs = as_int(state.get("global_step")) if state else None
    if state is None or gs is None:
        return Component("data", MISSING, files, "the Trainer stores no data-loader position and "
                         "derives it from trainer_state.json's global_step, which is unreadable "
                         "or missing: the data would restart from the first batch.", facts)
    facts["global_step"] = gs
    if state.get("epoch") is not None:
        facts["epoch"] = jsonable(state.get("epoch"))
    same = "the same seed"
    if "seed" in args:
        same += f" ({args['seed']})"
    batch = args.get("per_device_train_batch_size")
    accum = args.get("gradient_accumulation_steps")
    if batch is not None:
        same += f", batch size ({batch} x {accum or 1} accumulation)"
    else:
        same += ", batch size"
    if args.get("ignore_data_skip") is True:
        return Component("data", INCOMPLETE, files, "training_args has ignore_data_skip=True: on "
                         "resume the Trainer does not skip the batches already seen, so the epoch "
                         "replays from its start.", facts)
    return Component("data", OK, files, f"not stored: on resume the Trainer skips the batches "
                     f"implied by global step {gs}, which replays the same order only with "
                     f"{same}, data and world size.", facts)


def _scaler(fs, det, ds, args: dict) -> Component:
    c = scaler_file(fs, det.files("scaler"))
    if c is not None:
        return c
    if ds is not None:
        return ds.scaler(fs)
    if args.get("fp16") is True:
        return fp16_scaler_missing("the Trainer")
    why = "training_args has fp16=False" if args.get("fp16") is False else \
        "the Trainer writes one only for fp16 mixed precision"
    return not_needed("scaler", f"no scaler.pt and {why}: no GradScaler to restore "
                      "(bf16 and fp32 need none).", {"fp16": jsonable(args.get("fp16"))})


# --- its resume rules -------------------------------------------------------------------

NO_STATE = ("no trainer_state.json, which the Trainer writes last: the save was probably "
            "interrupted. Trainer.train(resume_from_checkpoint=...) reads it before anything "
            "else and fails without it (FileNotFoundError in transformers 5; some older "
            "releases restarted at global step 0 instead).")


def _rank_checks(components: dict[str, Component]) -> list[Finding]:
    """The files its resume cannot start without: trainer_state.json."""
    if components["progress"].facts.get("trainer_state_json") != "absent":
        return []
    return [Finding(ERROR, "progress", "trainer_state.json", f"{NO_STATE} So the resume "
                    "fails at once: write the file again (its global_step and log), or start a "
                    "new run from these weights.")]


def _world_checks(ts: TrainingState, components: dict[str, Component], n: int) -> list[Finding]:
    """The Trainer derives the data position from the step and the number of processes."""
    data = components["data"]
    if ts.framework != "hf-trainer" or data.status != "ok" or data.facts.get("stored"):
        return []
    saved = ts.ranks
    if saved is None or saved == n:
        return []
    step = data.facts.get("global_step")
    return [Finding(WARNING, "data", None, f"the Trainer derives the data position from global "
                    f"step {step} and the number of processes: with {n} instead of {saved}, each "
                    "step covers a different share of the data, so the batches it skips and "
                    f"those it trains on next differ from the original run; {NOT_EXACT}.")]


STEPS = (step_name("checkpoint-N", r"checkpoint-(\d+)"),)  # trainer_utils.PREFIX_CHECKPOINT_DIR
WEAK = rx(r"optimizer\.pt", r"scheduler\.pt")


def _claims(seen: Seen) -> bool:
    if RULE.signed(seen):
        return True
    named = seen.base if not seen.is_file else os.path.basename(os.path.abspath(seen.root))
    return STEPS[0].pattern.match(named) is not None and any(map(WEAK.match, seen.names))


HF_TRAINER = Producer("hf-trainer", _claims, RULE.roles_of, STEPS,
                      rank_names=re.compile(r"^rng_state_(\d+)\.pth$"),
                      rng_file=lambda rank, n: "rng_state.pth" if n == 1 else
                      f"rng_state_{rank}.pth",
                      build=build_hf, world_checks=_world_checks, rank_checks=_rank_checks,
                      scheduler_at=per_update,
                      marks=("trainer_state.json",))
