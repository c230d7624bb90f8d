"""Lightning: `epoch=E-step=S.ckpt` files (`-vN` on a clash, and `last.ckpt`), or `.ckpt`
folders, FSDP sharded (DCP + meta.pt) or an engine's save (base.Engine, its tag folder
`checkpoint`; `callbacks/model_checkpoint.py`, `strategies/`).

Read by `build_lightning`: progress and data position live in loops.fit_loop; Lightning never
saves RNG state.
"""

from __future__ import annotations

import re
from dataclasses import replace

from ckpt_browser.model import ERROR, Component, Problem, TrainingState
from ckpt_browser.parts.common import (
    DAMAGED,
    INCOMPLETE,
    MISSING,
    OK,
    Found,
    as_int,
    damaged_or_unsafe,
    dig,
    every_kind,
    fields,
    find_optimizer,
    jsonable,
    missing,
    not_needed,
    num,
    safe_fields,
)
from ckpt_browser.parts.files import StateFiles
from ckpt_browser.parts.optimizer import optimizer_from_dcp, optimizer_ok
from ckpt_browser.parts.scaler import scaler_from_state
from ckpt_browser.parts.scheduler import scheduler_component
from ckpt_browser.parts.weights import weights_component
from ckpt_browser.producers.base import (
    ENGINES,
    OTHER,
    Detection,
    Producer,
    Seen,
    StepName,
    engine_names,
    engine_parts,
    engine_save,
    facts_of,
    rx,
    step_name,
    with_other,
)
from ckpt_browser.producers.dcp import dcp_files

# Lightning never writes RNG state (FORMATS.md "Lightning"), so no file serves that role.
LIGHTNING_ROLES = ("weights", "optimizer", "scheduler", "data", "progress", "scaler")
CKPT_NAME = "lightning .ckpt"
ENGINE_TAGS = rx(r"checkpoint", r"global_step.*")  # its strategy saves tag="checkpoint"
_PARTS = re.compile(r"(?:^|[-_])epoch=(\d+)|(?:^|[-_])step=(\d+)")


def ckpt_numbers(name: str) -> tuple[int | None, int | None]:
    """(step, epoch) in a Lightning `.ckpt` file name such as `epoch=3-step=1200-v1.ckpt`."""
    step = epoch = None
    if name.endswith(".ckpt"):
        for m in _PARTS.finditer(name[:-5]):
            if m.group(1) is not None:
                epoch = int(m.group(1))
            else:
                step = int(m.group(2))
    return step, epoch


def lightning_dir(seen: Seen) -> Detection:
    path, names, step, epoch, source = seen.path, seen.names, seen.step, seen.epoch, seen.source
    if "meta.pt" in names:
        files = dcp_files(path, "", names)
        roles = {"weights": files, "optimizer": files}
        for role in LIGHTNING_ROLES[2:]:
            roles[role] = ("meta.pt",)
        problems = () if ".metadata" in names else (
            Problem(ERROR, None, "a sharded Lightning checkpoint without .metadata: the DCP "
                    "save did not finish"),)
        return Detection(path, path, "lightning", step, source, epoch, "sharded",
                         with_other(roles, names), ("",), problems=problems)
    inner = engine_save(seen, ENGINE_TAGS)
    if inner is not None:
        # Lightning's own state is in the engine's record (its scheduler file)
        roles, record = dict(inner.roles), inner.files("scheduler")
        for role in LIGHTNING_ROLES[2:]:
            roles[role] = record + (() if role != "scaler" else tuple(
                f for f in inner.files("optimizer") if f not in record))
        return Detection(path, path, "lightning", step, source, epoch, inner.framework, roles,
                         tag=inner.tag, problems=inner.problems)
    return Detection(path, path, "lightning", step, source, epoch, "folder",
                     roles={OTHER: tuple(names)} if names else {},
                     problems=(Problem(ERROR, None, "a .ckpt folder with neither meta.pt (FSDP) "
                                       f"nor {engine_names()}"),))


def _roles(seen: Seen) -> Detection:
    if seen.is_file:
        return Detection(seen.path, seen.root, "lightning", seen.step, seen.source, seen.epoch,
                         roles={k: (seen.names[0],) for k in LIGHTNING_ROLES})
    return lightning_dir(seen)


def _own_file(det: Detection, name: str, keys: set[str]) -> Detection | None:
    """A Lightning .ckpt by its keys, whatever it is called."""
    if "pytorch-lightning_version" in keys or {"state_dict", "loops", "optimizer_states"} <= keys:
        return replace(det, framework="lightning", variant="",
                       roles={k: (name,) for k in LIGHTNING_ROLES})
    return None


# --- reading its files -----------------------------------------------------------------

LOOP_STEP = ("epoch_loop.automatic_optimization.optim_progress", "optimizer", "step", "total",
             "completed")
LOOP_MANUAL_STEP = ("epoch_loop.manual_optimization.optim_step_progress", "total", "completed")
LOOP_EPOCH = ("epoch_progress", "current", "completed")
LOOP_BATCH = ("epoch_loop.batch_progress", "current", "completed")
LOOP_LAST_BATCH = ("epoch_loop.batch_progress", "is_last_batch")
LOOP_STEPPED = ("epoch_loop.state_dict", "_batches_that_stepped")
LOOP_LOADER = ("state_dict", "combined_loader")
SCALER_KEYS = ("MixedPrecision", "native_amp_scaling_state")


def build_lightning(det: Detection, fs: StateFiles) -> Found:
    out = Found()
    if det.variant == "folder" or not det.roles:
        return every_kind(out, lambda kind: missing(
            kind, f"this .ckpt folder holds neither meta.pt (FSDP) nor a {_engines()} tag, so "
            "nothing of the training state can be read."))
    ds = engine_parts(det, fs, out)
    if ds is not None:
        ck, pf, where = ds.ms, ds.states, (ds.model_files[0] if ds.model_files else "model_states")
        out.add(ds.weights(fs, det.files("weights")))
        out.add(ds.optimizer(fs, []))
    elif det.variant == "sharded":
        pf, where = fs.pickle("meta.pt"), "meta.pt"
        ck = safe_fields(out, pf)
        out.add(weights_component(fs, det.files("weights"), dcp="", dcp_prefix="model."))
        out.add(optimizer_from_dcp(fs, det.files("optimizer"), "", "optimizer_0."))
    else:
        name = det.files("weights")[0]
        pf, where = fs.pickle(name), name
        bad = damaged_or_unsafe("weights", (name,), [pf])
        if bad:  # the one file holds everything
            return every_kind(out, lambda kind: replace(bad, kind=kind) if kind != "rng"
                              else _rng())
        ck = fields(pf.obj)
        out.add(weights_component(fs, (name,), key_in=lambda o: fields(o).get("state_dict")))
        out.add(_optimizer(fs, pf, ck, name))
    scalar = fs.scalars(pf)
    out.add(_scheduler(fs, pf, ck, det.files("scheduler"), where))
    out.add(_rng())
    out.add(_progress(ck, det.files("progress"), where, scalar, out))
    out.add(_data(ck, det.files("data"), where, scalar))
    out.add(_scaler(fs, pf, ck, det.files("scaler"), where))
    if ds is not None and out.ranks is None:
        out.ranks = ds.world
    return out


def _engines() -> str:
    return " or ".join(e.name for e in ENGINES)


def _rng() -> Component:
    return missing("rng", "Lightning never saves RNG state: dropout and sampling after the resume "
                   "differ from an uninterrupted run.")


def _optimizer(fs: StateFiles, pf, ck: dict, name: str) -> Component:
    states = ck.get("optimizer_states")
    if states is None:
        return missing("optimizer", f"{name} has no optimizer_states (saved with "
                       "save_weights_only=True): a warm start only; Adam's moments restart.")
    if not isinstance(states, list) or not states:
        return missing("optimizer", f"{name} has an empty optimizer_states list: no optimizer "
                       "state to restore.")
    sd = find_optimizer(states[0])
    if sd is None:
        return Component("optimizer", DAMAGED, (name,), f"optimizer_states[0] in {name} is not an "
                         "optimizer state_dict.")
    return optimizer_ok(fs, pf, sd, (name,), name, optimizers=len(states))


def _scheduler(fs, pf, ck: dict, files, where: str) -> Component:
    scheds = ck.get("lr_schedulers")
    if scheds is None:
        return missing("scheduler", f"{where} has no lr_schedulers (a weights-only save): any LR "
                       "schedule restarts from its first step.")
    if not isinstance(scheds, list) or not scheds:
        return not_needed("scheduler", "no LR scheduler was configured (lr_schedulers is empty).",
                          {"schedulers": 0})
    c = scheduler_component(fs, pf, scheds[0], files, where)
    return Component("scheduler", c.status, c.files, c.detail, {**c.facts,
                                                                  "schedulers": len(scheds)})


def _progress(ck: dict, files, where: str, scalar, out: Found) -> Component:
    fit = dig(ck, "loops", "fit_loop")
    facts: dict = {}
    if "pytorch-lightning_version" in ck:
        facts["lightning_version"] = jsonable(ck["pytorch-lightning_version"])
    for key in ("global_step", "epoch"):
        if key in ck:
            facts[key] = jsonable(ck[key], scalar)
    if fit is not None:
        for name, path in (("optimizer_steps", LOOP_STEP), ("manual_steps", LOOP_MANUAL_STEP),
                           ("epochs_completed", LOOP_EPOCH), ("batch_in_epoch", LOOP_BATCH),
                           ("is_last_batch", LOOP_LAST_BATCH),
                           ("batches_that_stepped", LOOP_STEPPED)):
            v = dig(fit, *path)
            if v is not None:
                facts[name] = jsonable(v, scalar)
    step = as_int(facts.get("optimizer_steps")) or as_int(facts.get("manual_steps"))
    if step is None:
        step = as_int(facts.get("global_step"))
    out.step = step
    out.epoch = facts.get("epoch") if isinstance(facts.get("epoch"), (int, float)) else None
    facts["step"] = step
    if fit is None and step is None:
        return missing("progress", f"{where} has no loops and no global_step: the resume starts "
                       "at step 0.", facts)
    text = f"global step {step}, epoch {num(facts.get('epoch'))}"
    if facts.get("batch_in_epoch") is not None:
        text += f", {num(facts['batch_in_epoch'])} batches into the epoch"
    if fit is None:
        return Component("progress", INCOMPLETE, tuple(files), f"{where} has only the legacy "
                         f"global_step/epoch ({text}), no loops: Lightning < 1.6 format.", facts)
    return Component("progress", OK, tuple(files), f"loops.fit_loop: {text}.", facts)


def _data(ck: dict, files, where: str, scalar) -> Component:
    fit = dig(ck, "loops", "fit_loop")
    loader = dig(fit, *LOOP_LOADER) if fit is not None else None
    batch = dig(fit, *LOOP_BATCH) if fit is not None else None
    last = dig(fit, *LOOP_LAST_BATCH) if fit is not None else None
    facts = {"stored": loader is not None, "batch_in_epoch": jsonable(batch, scalar),
             "is_last_batch": jsonable(last)}
    if loader is not None:
        facts["combined_loader"] = jsonable(loader, scalar)
        return Component("data", OK, tuple(files), "loops.fit_loop holds the stateful data "
                         "loader's position (combined_loader).", facts)
    if fit is None:
        return missing("data", f"{where} has no loops: the data position is unknown.", facts)
    if isinstance(batch, int) and batch > 0 and last is not True:
        return Component("data", MISSING, tuple(files), f"saved mid-epoch ({batch} batches in) "
                         "with a loader that is not stateful: Lightning warns and replays the "
                         "epoch from its first batch.", facts)
    return not_needed("data", "saved at an epoch boundary: the next epoch starts fresh, as it "
                      "would have without the interruption.", facts)


def _scaler(fs, pf, ck: dict, files, where: str) -> Component:
    for key in SCALER_KEYS:
        if isinstance(ck.get(key), dict) and ck[key]:
            return scaler_from_state(fs, pf, ck[key], files, f"{where} ({key})")
    return not_needed("scaler", "no MixedPrecision scaler state: the run did not use 16-mixed "
                      "precision (bf16 and fp32 need no scaler).")


# --- its resume rules -------------------------------------------------------------------

def _per_epoch(ts: TrainingState, value: int) -> bool:
    """Lightning steps schedulers per epoch by default: a last_epoch at the epoch count is
    that convention, not a lag."""
    epochs = as_int(facts_of(ts, "progress").get("epochs_completed"))
    return epochs is not None and value in (epochs, epochs + 1)


def _scheduler_at(ts: TrainingState, last_epoch: int) -> tuple[int, str] | None:
    """Stepped per optimizer step (interval="step"), unless it steps per epoch."""
    if _per_epoch(ts, last_epoch):
        return None
    steps = as_int(facts_of(ts, "progress").get("optimizer_steps"))
    return (steps, f"{steps} optimizer steps") if steps is not None else None


LIGHTNING = Producer(
    "lightning", lambda seen: seen.base.endswith(".ckpt"), _roles,
    (StepName(CKPT_NAME, re.compile(r"^(?:.*[-_])?(?:epoch|step)=\d+.*\.ckpt$"), "step",
              ckpt_numbers),
     step_name("last.ckpt", r"last(?:-v\d+)?\.ckpt", "")),
     build=build_lightning, own_file=_own_file, scheduler_at=_scheduler_at,
     per_epoch=_per_epoch)
