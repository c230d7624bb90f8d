"""torchtune: the `epoch_N/` folders its checkpointers write, and the recipe state beside them.

Each save (`FullModelHFCheckpointer.save_checkpoint`, the Meta and torchtune checkpointers
alike) writes the model to `output_dir/epoch_N/` (N counts epochs from 0: HF shards
`model-0000k-of-0000n.safetensors` or `.bin` with their index, and for LoRA
`adapter_model.pt`, `adapter_model.safetensors`, `adapter_config.json`). Every save but the
last of the run also writes the recipe state, `{optimizer, seed, epochs_run, total_epochs,
max_steps_per_epoch, dataloader}` (`steps_run`, `total_training_steps`, `val_dataloader` in
newer recipes), to one file: `output_dir/recipe_state/recipe_state.pt`, overwritten each time
(older releases wrote `recipe_state.pt` beside the model). So the recipe state belongs to one
epoch folder, `epoch_{epochs_run - 1}`, and after the last save of a finished run it is the
one before the last.

What torchtune's resume restores (`recipes/full_finetune_single_device.py` setup with
`resume_from_checkpoint`, `_update_recipe_state`; `training/checkpointing/_utils.py`): the
weights from the epoch folder `checkpoint_files` names (LoRA: the adapter from the newest
epoch folder's `adapter_model.pt`, on the original base model), the recipe state from
`recipe_state/recipe_state.pt`, the optimizer, `epochs_run` (the seed and max_steps_per_epoch
are taken from the file, with a warning when the config differs), and the data loader's state.
It re-derives the global step (epochs_run x steps per epoch) and rebuilds the LR scheduler with
`last_epoch = global_step - 1`, so its internal counters differ. It lacks the RNG: only the
seed is saved, and the resumed run re-seeds with it. No GradScaler: it trains in bf16 or fp32.
"""

from __future__ import annotations

import os
import re

from ckpt_browser.model import Component
from ckpt_browser.parts.common import (
    MISSING,
    OK,
    Found,
    as_int,
    damaged_or_unsafe,
    fields,
    find_optimizer,
    jsonable,
    missing,
    not_needed,
    num,
)
from ckpt_browser.parts.files import StateFiles
from ckpt_browser.parts.optimizer import optimizer_ok
from ckpt_browser.parts.projects import PROJECTS
from ckpt_browser.parts.weights import weights_component
from ckpt_browser.producers.base import (
    Detection,
    Producer,
    Seen,
    rx,
    step_name,
    with_other,
)

RECIPE_DIR = "recipe_state"  # training/checkpointing/_utils.py RECIPE_STATE_DIRNAME
RECIPE_FILE = "recipe_state.pt"
EPOCH = re.compile(r"^epoch_(\d+)$")
WEIGHTS = rx(r"model-\d+-of-\d+\.(?:safetensors|bin)", r"model\.safetensors\.index\.json",
             r"pytorch_model\.bin\.index\.json", r"consolidated\.\d+\.pth",
             r"hf_model_\d+_\d+\.pt", r"meta_model_\d+\.pt", r"torchtune_model_\d+\.pt")
ADAPTER = rx(r"adapter_model\.(?:pt|safetensors|bin)", r"adapter_\d+\.pt")
PROJECT = PROJECTS["torchtune"]
COUNTERS = ("epochs_run", "total_epochs", "max_steps_per_epoch", "steps_run",
            "total_training_steps", "seed")


def _recipe_beside(seen: Seen) -> str | None:
    """Where this epoch folder's recipe state is, relative to it: in the folder itself (older
    releases) or in recipe_state/ beside it; None when neither is there."""
    if RECIPE_FILE in seen.names:
        return RECIPE_FILE
    parent = os.path.dirname(os.path.abspath(seen.path))
    if os.path.isdir(os.path.join(parent, RECIPE_DIR)):
        return f"../{RECIPE_DIR}/{RECIPE_FILE}"
    return None


def _claims(seen: Seen) -> bool:
    """An epoch_N folder beside recipe_state/ or holding recipe_state.pt, or one holding
    torchtune's own adapter_model.pt (PEFT writes no .pt). Names only; a lone file is read
    by content (parts.projects knows recipe_state.pt)."""
    if seen.is_file or not EPOCH.match(seen.base):
        return False
    return _recipe_beside(seen) is not None or "adapter_model.pt" in seen.names


def _roles(seen: Seen) -> Detection:
    weights = tuple(n for n in seen.names if WEIGHTS.match(n) or ADAPTER.match(n))
    roles: dict[str, tuple[str, ...]] = {"weights": weights} if weights else {}
    recipe = _recipe_beside(seen) or f"../{RECIPE_DIR}/{RECIPE_FILE}"
    if os.path.isfile(os.path.join(seen.path, recipe)):
        for kind in ("optimizer", "data", "progress"):
            roles[kind] = (recipe,)
    epoch = as_int(seen.epoch)
    if epoch is None:
        m = EPOCH.match(seen.base)
        epoch = int(m.group(1)) if m else None
    return Detection(seen.path, seen.path, "torchtune", None, seen.source, epoch,
                     variant="lora" if any(ADAPTER.match(n) for n in seen.names) else "full",
                     roles=with_other(roles, seen.names))


# --- reading its files -----------------------------------------------------------------

SCALER = "torchtune trains in bf16 or fp32 and saves no GradScaler; none is needed."


def build_torchtune(det: Detection, fs: StateFiles) -> Found:
    out = Found(project=PROJECT.label)
    out.add(_weights(fs, det))
    out.add(not_needed("scaler", SCALER))
    if det.epoch is not None:  # epoch_N is saved once epoch N (from 0) is done: N + 1 run
        out.epoch = det.epoch + 1  # (as epochs_run counts them, when the recipe state is its)
    files = det.files("progress")
    if not files:
        return _no_recipe_state(out, det)
    pf = fs.pickle(files[0])
    bad = damaged_or_unsafe("progress", files, [pf])
    if bad is not None:
        for kind in ("optimizer", "scheduler", "rng", "data", "progress"):
            out.add(Component(kind, bad.status, bad.files, bad.detail, bad.facts))
        return out
    state = fields(pf.obj)
    counters = {k: jsonable(state[k], fs.scalars(pf)) for k in COUNTERS if k in state}
    sd = find_optimizer(state)
    own = _whose(det, counters, files[0])
    if own is not None:
        return _not_this_epoch(out, own, counters)
    where = f"optimizer in {files[0]}"
    if sd is None:
        out.add(missing("optimizer", f"{files[0]} holds no optimizer state_dict (keys: "
                        f"{', '.join(sorted(map(str, state))[:12])}): the moments restart."))
    else:
        out.add(optimizer_ok(fs, pf, sd, files, where))
    out.add(_data(fs, pf, state, files))
    out.add(_progress(out, counters, files))
    return _never_saved(out, counters.get("seed"))


def _never_saved(out: Found, seed=None) -> Found:
    """What torchtune never saves, in its project's words: the scheduler, the RNG (the seed)."""
    out.add(missing("scheduler", PROJECT.missing["scheduler"], {"project": PROJECT.name}))
    facts = {"project": PROJECT.name, **({"seed": seed} if seed is not None else {})}
    out.add(missing("rng", PROJECT.missing["rng"], facts))
    return out


def _weights(fs: StateFiles, det: Detection) -> Component:
    files = det.files("weights")
    adapters = [f for f in files if ADAPTER.match(f)]
    model = weights_component(fs, [f for f in files if f not in adapters])
    if not adapters:
        return model
    if model.status not in (OK, MISSING):
        return model
    merged = (f" {model.files[0]} and the rest of the model files are the merged model, "
              "for inference.") if model.status == OK else ""
    return Component("weights", OK, tuple(adapters) + model.files,
                     f"{adapters[0]} holds the LoRA adapter the resume loads, on top of the "
                     "original base model (checkpoint_dir), not on the merged weights here."
                     + merged, {**model.facts, "adapter": adapters})


def _no_recipe_state(out: Found, det: Detection) -> Found:
    here = os.path.basename(os.path.abspath(det.path))
    why = (f"no ../{RECIPE_DIR}/{RECIPE_FILE} beside {here}: torchtune writes the recipe state "
           "(optimizer, epochs_run, data loader) there with every save but the run's last, so "
           "without it these weights can only warm-start a run.")
    for kind in ("optimizer", "data", "progress"):
        out.add(missing(kind, why))
    return _never_saved(out)


def _whose(det: Detection, counters: dict, name: str) -> str | None:
    """The recipe state is the save of epoch_{epochs_run - 1}: when that is not the opened
    folder, why it cannot resume these weights; None when it is (or nothing says)."""
    run = as_int(counters.get("epochs_run"))
    if run is None or det.epoch is None or run - 1 == det.epoch:
        return None
    here, its = f"epoch_{det.epoch}", f"epoch_{run - 1}"
    total = as_int(counters.get("total_epochs"))
    if det.epoch > run - 1 and total is not None and det.epoch + 1 >= total:
        return (f"{here} is the last save of a finished run (total_epochs {total}), which "
                f"writes no recipe state: {name} is {its}'s (epochs_run {run}), so there is "
                f"nothing left to resume; resuming with it would train epoch {run} again from "
                f"{here}'s weights.")
    if det.epoch > run - 1:
        return (f"{name} is {its}'s (epochs_run {run}), older than {here}: the save of {here} "
                "did not finish writing the recipe state, so resuming pairs these weights with "
                "an older optimizer and data position.")
    return (f"{name} is {its}'s (epochs_run {run}): each save overwrites it, so {here}'s own "
            "recipe state is gone, and resuming would pair these weights with a later "
            "optimizer and data position.")


def _not_this_epoch(out: Found, why: str, counters: dict) -> Found:
    facts = {"recipe_state_of_epoch": (as_int(counters.get("epochs_run")) or 0) - 1,
             "counters": counters}
    for kind in ("optimizer", "data", "progress"):
        out.add(missing(kind, why, facts))
    return _never_saved(out)


def _data(fs: StateFiles, pf, state: dict, files) -> Component:
    loaders = [k for k in ("dataloader", "val_dataloader") if k in state]
    if "dataloader" not in state:
        return missing("data", f"{files[0]} holds no dataloader state: the resumed run starts "
                       "its epoch's data from the beginning.", {"stored": False})
    facts: dict = {"stored": True}
    for key in loaders:
        facts[key] = jsonable(state[key], fs.scalars(pf))
    dl = fields(facts["dataloader"]) if isinstance(facts["dataloader"], dict) else {}
    yielded = dl.get("_num_yielded")
    said = f", {num(yielded)} batches yielded" if yielded is not None else ""
    return Component("data", OK, tuple(files), f"{' and '.join(loaders)} in {files[0]} "
                     f"(StatefulDataLoader state{said}), which the resume loads; the sampler "
                     "re-derives each epoch's order from its seed and set_epoch.", facts)


def _progress(out: Found, counters: dict, files) -> Component:
    run = as_int(counters.get("epochs_run"))
    if run is None:
        return missing("progress", f"{files[0]} holds no epochs_run: the resumed run "
                       "starts counting from epoch 0.", {"counters": counters})
    out.epoch = run
    step = as_int(counters.get("steps_run"))
    source = "steps_run"
    if step is None:
        steps = out.components["optimizer"].facts.get("step") or []
        step = int(steps[0]) if len(steps) == 1 and isinstance(steps[0], (int, float)) else None
        source = "the optimizer's step count"
    out.step = step
    total = counters.get("total_epochs")
    said = f"epochs_run {num(run)} of total_epochs {num(total)}"
    if step is not None:
        said += f", global step {num(step)} ({source}; torchtune re-derives it as epochs_run x " \
                "steps per epoch)"
    return Component("progress", OK, tuple(files), f"{said} in {files[0]}.",
                     {"counters": counters, "step_from": source if step is not None else None})


TORCHTUNE = Producer("torchtune", _claims, _roles,
                     (step_name("epoch_N", r"epoch_(\d+)", "epoch"),),  # _checkpointer.py
                     build=build_torchtune)
