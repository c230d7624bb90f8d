"""speechbrain: the `CKPT+<time>+NN/` folders its Checkpointer writes.

`Checkpointer.save_checkpoint` (utils/checkpoints.py) writes one folder per save, named
`CKPT+%Y-%m-%d+%H-%M-%S+NN`, holding `CKPT.yaml` (the meta: `end-of-epoch`, `unixtime`, the
recipe's own keys such as a loss) and one `<name>.ckpt` per registered recoverable, named by
the recipe: torch files (`model.ckpt`: a module's state_dict; `optimizer.ckpt`;
`lr_annealing.ckpt`: a speechbrain scheduler's small dict; `scaler.ckpt` in fp16) and text
(`counter.ckpt`: EpochCounter's epoch as an integer; `dataloader-TRAIN.ckpt`: the batches of
the epoch a SaveableDataLoader had yielded; `brain.ckpt`: Brain's `step`, `optimizer_step`
and `avg_train_loss` in YAML). So the torch files are read by content, the text by what it
holds.

What its resume restores (`Brain.on_fit_start` -> `recover_if_possible`, the newest folder by
`unixtime`): every recoverable from its file; EpochCounter counts the epoch again when the save
was mid-epoch (`end-of-epoch: false`); the data loader skips the batches already seen, but only
mid-epoch (at an epoch's end the file is ignored and the next epoch starts fresh); Brain's step
counters. It saves no RNG state: the recipe re-seeds from its seed, so the sampler's order
(derived from the seed and the epoch) comes back, while dropout and augmentation streams
restart.
"""

from __future__ import annotations

import os
import re

from ckpt_browser import limits
from ckpt_browser.model import Component
from ckpt_browser.parts.common import (
    OK,
    Found,
    damaged_or_unsafe,
    fields,
    find_optimizer,
    jsonable,
    missing,
    name_list,
    not_needed,
    num,
)
from ckpt_browser.parts.files import StateFiles
from ckpt_browser.parts.optimizer import optimizer_ok
from ckpt_browser.parts.scaler import scaler_from_state
from ckpt_browser.parts.weights import weights_component
from ckpt_browser.producers.base import Detection, Producer, Seen, with_other
from ckpt_browser.readers.files import head_of, sniff
from ckpt_browser.readers.regular import read_small
from ckpt_browser.standins import TensorRef

META = "CKPT.yaml"  # checkpoints.py METAFNAME
TEXT_LIMIT = 4096  # what its text recoverables hold: an integer, a few YAML lines
DATA = re.compile(r"^dataloader-.+\.ckpt$")  # Brain.make_dataloader's "dataloader-" + stage
# the dicts speechbrain's schedulers save (nnet/schedulers.py, each class's save())
SCHEDULER_KEYS = (
    {"hyperparam_value", "metric_values", "current_patient"},  # NewBobScheduler
    {"losses", "n_steps"},  # Noam, NoamInterval, LinearNoam, CyclicCosine, Interval
    {"n_steps"},  # InverseSquareRootScheduler
    {"losses", "clr_iterations"},  # CyclicLRScheduler
    {"losses", "anchor", "patience_counter"},  # ReduceLROnPlateau
    {"base_lr", "n_warmup_steps", "decay_factor", "decay_steps", "current_step"},
    {"initial_value", "num_warmup_steps", "num_training_steps", "current_step"},
    {"base_lr", "warmup", "power", "cooldown", "total_steps"},  # WarmCoolDecayLRSchedule
    {"peak_lr", "warmup_steps", "hold_steps", "decay_steps", "total_steps"},  # TriStage (part)
)
BRAIN_KEYS = {"step", "optimizer_step", "avg_train_loss"}  # core.py Brain._save


def _claims(seen: Seen) -> bool:
    """A folder holding CKPT.yaml, the Checkpointer's meta file (names only)."""
    return not seen.is_file and META in seen.names


def _roles(seen: Seen) -> Detection:
    ckpts = [n for n in seen.names if n.endswith(".ckpt")]
    roles: dict[str, tuple[str, ...]] = {"progress": (META,)}
    data = tuple(n for n in ckpts if DATA.match(n))
    if data:
        roles["data"] = data
    # the rest are read by content in build: which is the model is the recipe's choice
    roles["weights"] = tuple(n for n in ckpts if not DATA.match(n))
    return Detection(seen.path, seen.path, "speechbrain", None, "", None,
                     roles=with_other(roles, seen.names))


# --- its text files ------------------------------------------------------------------------

def read_text(folder: str, name: str) -> str | None:
    try:
        return read_small(os.path.join(folder, name), TEXT_LIMIT).decode("utf-8")
    except (OSError, UnicodeDecodeError):  # TooLarge is an OSError
        return None


def simple_yaml(text: str) -> dict:
    """The `key: value` lines speechbrain's yaml.dump writes for a flat dict of scalars;
    anything else (nesting, lists) is left out. Never a YAML loader: nothing to construct."""
    out: dict = {}
    for line in text.splitlines()[:200]:
        if not line.strip() or line.lstrip().startswith("#") or line[:1].isspace():
            continue
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = _scalar(value.strip())
    return out


def _scalar(v: str):
    low = v.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("null", "~", ""):
        return None
    for kind in (int, float):
        try:
            return kind(v)
        except ValueError:
            pass
    return v.strip("'\"")


def _integer(text: str | None) -> int | None:
    try:
        return int(text.strip()) if text is not None else None
    except ValueError:
        return None


# --- reading a save ------------------------------------------------------------------------

def build_speechbrain(det: Detection, fs: StateFiles) -> Found:
    out = Found()
    folder = det.root
    meta = simple_yaml(read_text(folder, META) or "")
    end_of_epoch = meta.get("end-of-epoch")
    torch_files, texts = [], {}
    for name in det.files("weights")[:limits.LIMITS.rank_files]:
        try:
            kind = sniff(head_of(os.path.join(folder, name))[0])
        except OSError:
            continue
        if kind in ("zip", "torch-legacy", "pickle"):
            torch_files.append(name)
        else:
            texts[name] = read_text(folder, name)
    by_kind = _by_content(fs, torch_files)
    out.add(_weights(fs, by_kind.get("weights", [])))
    out.add(_optimizer(fs, by_kind.get("optimizer", [])))
    out.add(_scheduler(fs, by_kind.get("scheduler", [])))
    out.add(_scaler(fs, by_kind.get("scaler", [])))
    out.add(missing("rng", "speechbrain's Checkpointer saves no RNG state: the recipe re-seeds "
                    "from its seed, so the data order comes back (the sampler derives it from "
                    "the seed and the epoch) but dropout and augmentation streams restart."))
    out.add(_data(folder, det.files("data"), end_of_epoch))
    out.add(_progress(out, texts, end_of_epoch, meta))
    return out


def _by_content(fs: StateFiles, names) -> dict[str, list[str]]:
    """Each torch file's component from what it holds."""
    out: dict[str, list[str]] = {}
    for name in names:
        pf = fs.pickle(name)
        obj = pf.obj
        f = fields(obj)
        keys = {str(k) for k in f}
        if pf.unsafe or obj is None:
            kind = "weights"  # said damaged or unsafe there
        elif find_optimizer(obj) is not None:
            kind = "optimizer"
        elif keys and any(keys >= s for s in SCHEDULER_KEYS) and \
                not any(isinstance(v, TensorRef) and v.numel > 1 for v in f.values()):
            kind = "scheduler"
        elif {"scale", "_growth_tracker"} <= keys:
            kind = "scaler"
        elif f and all(isinstance(v, TensorRef) for v in f.values()):
            kind = "weights"
        else:
            kind = "other"
        out.setdefault(kind, []).append(name)
    return out


def _weights(fs: StateFiles, files) -> Component:
    if not files:
        return missing("weights", "no recoverable here holds a module's state_dict: this save "
                       "cannot even warm-start a run.")
    return weights_component(fs, files)


def _optimizer(fs: StateFiles, files) -> Component:
    if not files:
        return missing("optimizer", "no optimizer recoverable (Brain registers its optimizer as "
                       "optimizer.ckpt): the moments restart.")
    pfs = [fs.pickle(f) for f in files]
    bad = damaged_or_unsafe("optimizer", files, pfs)
    if bad is not None:
        return bad
    sd = find_optimizer(pfs[0].obj)
    return optimizer_ok(fs, pfs[0], sd, files, f"optimizer in {files[0]}", files=len(files))


def _scheduler(fs: StateFiles, files) -> Component:
    if not files:
        return missing("scheduler", "no LR scheduler recoverable (recipes register one as "
                       "lr_annealing): if the recipe anneals the LR, it starts over.")
    pf = fs.pickle(files[0])
    facts = {str(k): jsonable(v, fs.scalars(pf)) for k, v in fields(pf.obj).items()}
    said = "; ".join(f"{k} {num(v)}" for k, v in list(facts.items())[:4]
                     if not isinstance(v, (list, dict)))
    return Component("scheduler", OK, tuple(files), f"{name_list(files)} holds a speechbrain "
                     f"scheduler's state ({said or ', '.join(facts)}), which its load restores.",
                     facts)


def _scaler(fs: StateFiles, files) -> Component:
    if not files:
        return not_needed("scaler", "no scaler.ckpt: Brain registers its GradScaler only when "
                          "it trains in fp16, so this run needs none.")
    pf = fs.pickle(files[0])
    return scaler_from_state(fs, pf, pf.obj, files[:1], files[0])


def _data(folder: str, files, end_of_epoch) -> Component:
    if end_of_epoch is True:
        return not_needed("data", "saved at the end of an epoch: the resumed run starts the "
                          "next epoch from its first batch (speechbrain ignores the data "
                          "loader's file then), in the order its sampler derives from the "
                          "seed and the epoch.", {"end_of_epoch": True})
    if not files:
        return missing("data", "saved mid-epoch, but no dataloader-*.ckpt: the resumed run "
                       "starts this epoch's data from the beginning, repeating batches.",
                       {"end_of_epoch": end_of_epoch})
    skip = _integer(read_text(folder, files[0]))
    if skip is None:
        return missing("data", f"{files[0]} holds no batch count (the loader had not started): "
                       "the epoch's data starts from the beginning.", {"stored": False})
    return Component("data", OK, tuple(files), f"{files[0]}: the loader had yielded {num(skip)} "
                     "batches of this epoch; the resumed run skips them.",
                     {"stored": True, "skip_batches": skip})


def _progress(out: Found, texts: dict, end_of_epoch, meta: dict) -> Component:
    counters: dict = {}
    files = [META]
    epoch = None
    for name, text in sorted(texts.items()):
        if text is None or DATA.match(name):
            continue
        value = _integer(text)
        record = simple_yaml(text) if value is None else {}
        if value is not None:  # EpochCounter._save: the epoch, as text
            epoch, counters[name] = value, value
        elif "current_epoch" in record:  # EpochCounterWithStopper
            epoch, counters[name] = _int(record["current_epoch"]), record
        elif BRAIN_KEYS & set(record):
            counters[name] = record
            out.step = _int(record.get("optimizer_step"))
        else:
            continue
        files.append(name)
    if epoch is None:
        return missing("progress", "no epoch counter among the .ckpt files (recipes register "
                       "an EpochCounter as counter.ckpt): the resumed run starts at epoch 1.",
                       {"counters": counters})
    done = epoch if end_of_epoch is not False else epoch - 1
    out.epoch = done
    where = "at the end of" if end_of_epoch is not False else "during"
    said = f"saved {where} epoch {num(epoch)} ({num(done)} done)"
    if out.step is not None:
        said += f", {num(out.step)} optimizer steps"
    return Component("progress", OK, tuple(files), f"{said}; {name_list(files[1:])} "
                     "restore the counters.", {"counters": counters, "epochs_done": done,
                                               "end_of_epoch": end_of_epoch,
                                               "meta": {k: meta[k] for k in list(meta)[:8]}})


def _int(v) -> int | None:
    return v if type(v) is int else None


SPEECHBRAIN = Producer("speechbrain", _claims, _roles, build=build_speechbrain, marks=(META,))
