"""Training state read from what the files hold: a custom loop's torch.save, a popular
project's single file (nanoGPT, timm, torchvision references, ignite, mmengine, detectron2 ...),
a plain state dict, a folder of weights, or any mix of files nobody named.

Each component comes from the parts `parts.classify` found, in any file, under any
key. For a custom loop the resume path is the user's own code, so each component says what is
there and what an exact resume would still need; a project's fingerprint adds what its own
resume re-derives (FORMATS.md "Single-file projects").
"""

from __future__ import annotations

import re

from ckpt_browser.model import COMPONENTS, ERROR, Checkpoint, Component, FileInfo
from ckpt_browser.parts.classify import Found as Part
from ckpt_browser.parts.classify import classify
from ckpt_browser.parts.common import (
    DAMAGED,
    INCOMPLETE,
    MISSING,
    NOT_NEEDED,
    OK,
    UNSAFE,
    Found,
    jsonable,
    name_list,
    num,
)
from ckpt_browser.parts.files import StateFiles
from ckpt_browser.parts.optimizer import optimizer_facts, optimizer_sentence
from ckpt_browser.parts.optimizer_names import ids_named, with_names
from ckpt_browser.parts.projects import Project, fingerprint
from ckpt_browser.parts.scheduler import scheduler_facts, scheduler_sentence
from ckpt_browser.parts.signatures import counter_kind, fields, rng_kinds
from ckpt_browser.parts.tag import part_prefix, part_weights
from ckpt_browser.parts.weights import weights_by_name
from ckpt_browser.readers.files import PICKLE_FORMATS
from ckpt_browser.readers.pickle_safe.policy import describe
from ckpt_browser.standins import Opaque, PickleFile, TensorRef

TRAINING = ("optimizer", "scheduler", "rng", "data", "progress", "scaler")
# a file that cannot be read says nothing by content; its name is the only hint left
HINTS = (("optimizer", re.compile(r"optim", re.I)), ("scheduler", re.compile(r"sched", re.I)),
         ("rng", re.compile(r"rng|random", re.I)), ("scaler", re.compile(r"scaler", re.I)),
         ("data", re.compile(r"data|sampler|loader", re.I)))
FP16_KEYS = ("fp16", "amp", "use_amp", "mixed_precision", "precision", "dtype", "half")
RECOVERY = re.compile(r"^recovery-(\d+)-(\d+)\.")


class Sources:
    """Every part found in the checkpoint's pickled files, and who wrote them."""

    def __init__(self, ckpt: Checkpoint, fs: StateFiles) -> None:
        self.ckpt, self.fs = ckpt, fs
        self.parts: list[tuple[FileInfo, PickleFile, Part]] = []
        self.bad: list[tuple[FileInfo, str, str]] = []  # (file, status, why)
        # what each unsafe file holds (read inert): only those components are UNSAFE
        self.unsafe_holds: dict[str, set[str]] = {}
        for f in ckpt.files:
            pf = f.source if isinstance(f.source, PickleFile) else None
            if pf is None or f.format not in PICKLE_FORMATS:
                continue
            if pf.unsafe:
                self.bad.append((f, UNSAFE, f"{f.name} asks to run {describe(pf.unsafe)} when "
                                 "unpickled (not run here); torch.load(weights_only=False) would "
                                 "execute it."))
                held = classify(pf.obj) if pf.obj is not None else []
                self.unsafe_holds[f.name] = {"weights" if p.kind == "ema" else p.kind
                                             for p in held}
                continue
            errors = [p.message for p in f.problems if p.severity == ERROR]
            if pf.obj is None or errors:
                self.bad.append((f, DAMAGED, f"{f.name} could not be read: "
                                 f"{errors[0] if errors else 'nothing readable'}."))
                if pf.obj is None:
                    continue
            self.parts.extend((f, pf, p) for p in classify(pf.obj))
        self.project = self._project()

    def _project(self) -> Project | None:
        seen = set()
        for _, pf, _ in self.parts:
            if id(pf) in seen:
                continue
            seen.add(id(pf))
            found = fingerprint(pf.obj)
            if found is not None:
                return found
        return None

    def spoiled(self, name: str) -> tuple[str, str] | None:
        """(status, why) when the file is damaged or unsafe: what it holds cannot be trusted."""
        return next(((status, why) for f, status, why in self.bad if f.name == name), None)

    def of(self, kind: str) -> list[tuple[FileInfo, PickleFile, Part]]:
        return [x for x in self.parts if x[2].kind == kind]

    def scalar(self, pf: PickleFile, v):
        return self.fs.scalar(pf, v) if isinstance(v, TensorRef) else v

    def settings(self) -> dict:
        """The saved run settings (args, config, hparams ...), merged one level deep."""
        out: dict = {}
        for _, _, p in self.of("config"):
            f = fields(p.node)
            out.update((str(k), v) for k, v in f.items())
            for v in f.values():
                if type(v) in (dict, Opaque):
                    out.update((str(k), x) for k, x in fields(v).items() if str(k) not in out)
        return out


def build_content(det, fs: StateFiles) -> Found:
    ckpt = fs.ckpt
    src = Sources(ckpt, fs)
    out = Found()
    training = any(p.kind in TRAINING for _, _, p in src.parts)
    out.framework = src.project.name if src.project else _plain(ckpt, training)
    out.project = src.project.label if src.project else ""
    weights = _weights(src, det)
    out.add(weights)
    unsafe_only = all(status == UNSAFE for _, status, _ in src.bad)
    if not training and unsafe_only and not _holds_training(src):
        if weights.status == MISSING:
            return _nothing(out, ckpt)
        return _weights_only(out, ckpt, weights)
    out.add(_optimizer(src, weights))
    out.add(_scheduler(src, out.components["optimizer"]))
    out.add(_rng(src, out))
    out.add(_progress(src, det, out))
    out.add(_data(src, out))
    out.add(_scaler(src))
    _bad_files(src, out)
    return out


def _plain(ckpt: Checkpoint, training: bool) -> str:
    if training:
        return "custom"
    if any(f.format in PICKLE_FORMATS and f.tensors for f in ckpt.files):
        return "torch"
    if any(f.format == "safetensors" for f in ckpt.files):
        return "safetensors"
    return "unknown"


def _where(f: FileInfo, p: Part) -> str:
    return f"{p.path} in {f.name}" if p.path else f.name


def _project_says(src: Sources, kind: str, default: Component | None = None) -> Component | None:
    project = src.project
    if project is not None and kind in project.not_needed:
        return Component(kind, NOT_NEEDED, (), project.not_needed[kind], {"project": project.name})
    if project is not None and kind in project.missing:
        return Component(kind, MISSING, (), project.missing[kind], {"project": project.name})
    return default


# --- weights ---------------------------------------------------------------------------------

def _weights(src: Sources, det) -> Component:
    ckpt = src.ckpt
    shards = [f.name for f in ckpt.files if f.format == "safetensors" and f.size is not None]
    rows, ema, classes = [], [], []
    files: list[str] = []
    for f, _pf, p in src.parts:
        if p.kind not in ("weights", "ema"):
            continue
        inside = part_weights(f, p)
        row = {"file": f.name, "path": p.path, "what": p.what, "tensors": len(inside),
               "params": sum(t.numel for _, t in inside)}
        prefix = part_prefix(f, p)
        if prefix:
            row["prefix"] = prefix
        if isinstance(p.node, Opaque):
            classes.append(p.node.qualname)
            row["class"] = p.node.qualname
        (ema if p.kind == "ema" else rows).append(row)
        files.append(f.name)
    dcp = [f for f in ckpt.files if f.format == "dcp-metadata"
           and any(t.component == "weights" for t in f.tensors)]
    if shards and not rows:
        by_name = weights_by_name(tuple(shards) + _index_names(ckpt))
        if by_name is not None:
            return by_name
        return Component("weights", OK, tuple(shards), f"{name_list(shards)} "
                         f"{'holds' if len(shards) == 1 else 'hold'} the model weights; headers "
                         "are checked in the weights view.",
                         {"format": "safetensors", "files": len(shards)})
    if not rows and not ema and dcp:
        n = sum(1 for f in dcp for t in f.tensors if t.component == "weights")
        return Component("weights", OK, tuple(f.name for f in dcp), f"{n:,} model tensors in DCP.",
                         {"format": "dcp", "tensors": n})
    if not rows and not ema:
        return _no_weights(src)
    for name in dict.fromkeys(files):
        spoiled = src.spoiled(name)
        if spoiled is not None:
            return Component("weights", spoiled[0], (name,), spoiled[1], {"file": name})
    sharded = weights_by_name(tuple(dict.fromkeys(files)))  # pytorch_model-0000k-of-0000n.bin
    if sharded is not None and sharded.status != OK:
        return sharded
    facts = {"format": "torch", "files": len(set(files)),
             "tensors": sum(r["tensors"] for r in rows),
             "params": sum(r["params"] for r in rows), "roots": rows}
    if ema:
        facts["ema"] = ema
    if classes:
        facts["classes"] = sorted(set(classes))
    return Component("weights", OK, tuple(dict.fromkeys(files + shards)),
                     _weights_sentence(rows, ema, classes, src.project), facts)


def _index_names(ckpt: Checkpoint) -> tuple[str, ...]:
    return (ckpt.layout.index.name,) if ckpt.layout.index is not None else ()


WRAPPED = {"module.": "DataParallel / DDP", "_orig_mod.": "torch.compile",
           "_fsdp_wrapped_module.": "FSDP"}


def _weights_sentence(rows: list[dict], ema: list[dict], classes: list[str],
                      project: Project | None = None) -> str:
    main = rows[0] if rows else ema[0]
    n = sum(r["tensors"] for r in rows) if rows else main["tensors"]
    files = list(dict.fromkeys(r["file"] for r in rows))
    if len(files) > 1:
        text = f"{n:,} weight tensors in {len(files)} files ({name_list(files)})"
    else:
        where = f"{main['path']} in {main['file']}" if main["path"] else main["file"]
        more = f", in {len(rows)} state dicts" if len(rows) > 1 else ""
        text = f"{where} holds {n:,} weight tensors{more}"
    prefix = main.get("prefix")
    own, why = project.own_prefix if project is not None else ("", "")
    if prefix and prefix == own:
        text += f"; every name starts with {prefix} ({why})"
    elif prefix:
        who = " then ".join(WRAPPED.get(w + ".", w) for w in prefix.rstrip(".").split("."))
        text += (f"; every name starts with {prefix} (saved from {who}), which the loading "
                 "code must strip")
    if not rows:
        text += ("; only an EMA copy of the weights is saved (the raw weights are not), so the "
                 "resume loads the EMA as the model")
    elif ema:
        text += f", with an EMA copy in {ema[0]['path'] or ema[0]['file']}"
    if classes:
        text += (f"; the weights are a pickled {classes[0]} object, so torch.load imports its "
                 "class to rebuild it (weights_only=True refuses it); nothing is imported here")
    return text + "."


def _no_weights(src: Sources) -> Component:
    for f, status, why in src.bad:
        if _holds(src, f.name, "weights"):
            return Component("weights", status, (f.name,), why,
                             {"file": f.name} if status == DAMAGED else {"file": f.name})
    files = [f.name for f, _, _ in src.parts]
    where = name_list(dict.fromkeys(files)) if files else "these files"
    return Component("weights", MISSING, (), f"no model weights in {where}: nothing to load, "
                     "so this checkpoint cannot even warm-start a run.")


def _nothing(out: Found, ckpt: Checkpoint) -> Found:
    out.framework = "unknown"
    why = ("nothing in these files is a model or training state (no tensors, optimizer, "
           "counters ... were found in them).")
    for kind in COMPONENTS:
        out.add(Component(kind, MISSING, (), why))
    return out


def _weights_only(out: Found, ckpt: Checkpoint, weights: Component) -> Found:
    what = "file" if len(ckpt.files) == 1 else "folder"
    for kind in ("optimizer", "scheduler", "rng", "data", "progress"):
        out.add(Component(kind, MISSING, (), f"a weights-only {what}: no training state, so this "
                          "can only warm-start a run."))
    out.add(Component("scaler", NOT_NEEDED, (), "weights only: there is no run to resume."))
    return out


# --- optimizer -------------------------------------------------------------------------------

def _optimizer(src: Sources, weights: Component) -> Component:
    found = src.of("optimizer")
    if not found:
        bad = _bad_for(src, "optimizer")
        if bad is not None:
            return bad
        return Component("optimizer", MISSING, (), _stripped(src) or (
            "no optimizer state anywhere in these files: Adam's moments (or SGD's momentum) "
            "restart from zero, so this is a warm start, not a resume."))
    f, pf, p = found[0]
    spoiled = src.spoiled(f.name)
    if spoiled is not None:
        return Component("optimizer", spoiled[0], (f.name,), spoiled[1], {"file": f.name})
    node = fields(p.node)
    sd = fields(node.get("optimizer")) if "fp32_from_fp16_params" in node else node
    where = _where(f, p)
    if "state" not in sd:  # flat ZeRO partitions, nothing per parameter
        facts = {"zero": True, "state_keys": sorted(map(str, sd))[:40]}
        return Component("optimizer", OK, (f.name,), f"{where} holds {p.what} (flat fp32 "
                         "partitions).", facts)
    facts = optimizer_facts(sd, src.fs.scalars(pf))
    if len(found) > 1:
        facts["optimizers"] = len(found)
    facts["path"], facts["file"] = p.path, f.name
    text = optimizer_sentence(facts, where)
    if len(found) > 1:
        text = text[:-1] + f" ({len(found)} optimizers in all)."
    comp = Component("optimizer", OK, tuple(dict.fromkeys(x[0].name for x in found)), text, facts)
    path = p.path + ".optimizer" if sd is not node else p.path
    return with_names(comp, ids_named(src.ckpt, sd), f.name, path)


def _stripped(src: Sources) -> str | None:
    for f, pf, _ in src.parts:
        top = fields(pf.obj)
        if top.get("epoch") == -1 and "optimizer" in top and top["optimizer"] is None:
            return (f"{f.name} was stripped after training (epoch -1, optimizer None, as "
                    "Ultralytics and YOLOv5 strip_optimizer write it): a warm start only, "
                    "there is nothing to resume.")
    return None


# --- scheduler -------------------------------------------------------------------------------

def _scheduler(src: Sources, optimizer: Component) -> Component:
    found = src.of("scheduler")
    if found:
        f, pf, p = found[0]
        node = p.node[0] if type(p.node) in (list, tuple) else p.node
        facts = scheduler_facts(node, src.fs.scalars(pf))
        if type(p.node) in (list, tuple):
            facts["schedulers"] = len(p.node)
        return Component("scheduler", OK, (f.name,), scheduler_sentence(facts, _where(f, p)),
                         facts)
    said = _project_says(src, "scheduler")
    if said is not None:
        return said
    bad = _bad_for(src, "scheduler")
    if bad is not None:
        return bad
    groups = optimizer.facts.get("param_groups") or []
    if any(isinstance(g, dict) and "initial_lr" in g for g in groups):
        return Component("scheduler", MISSING, (),
                         "no LR scheduler state, but the optimizer's param groups have "
                         "initial_lr, which every torch scheduler sets: the run used one, and "
                         "its schedule restarts from the first step (warmup again) unless the "
                         "script rebuilds it from the step.")
    if optimizer.status != OK:
        return Component("scheduler", MISSING, (), "no LR scheduler state (and no optimizer).")
    return Component("scheduler", NOT_NEEDED, (), "no LR scheduler state, and the optimizer's "
                     "param groups have no initial_lr, which any torch scheduler would have set: "
                     "the learning rate is constant or set by the script itself.")


# --- rng -------------------------------------------------------------------------------------

def _rng(src: Sources, out: Found) -> Component:
    found = src.of("rng")
    if not found:
        said = _project_says(src, "rng")
        if said is not None:
            return said
        return _bad_for(src, "rng") or Component(
            "rng", MISSING, (), "no RNG state in these files: the resumed run draws different "
            "random numbers (dropout, augmentation, a shuffling DataLoader's order); saving "
            "torch.get_rng_state() with numpy's and random's would make it exact.")
    kinds: list[str] = []
    parts = []
    for f, _, p in found:
        got = rng_kinds(p.node) or []
        kinds.extend(got)
        parts.append({"file": f.name, "path": p.path, "generators": sorted(set(got))})
    per_rank = _per_rank(found)
    if per_rank:
        out.ranks = per_rank
    gens = sorted(set(kinds))
    f, _, p = found[0]
    facts = {"generators": gens, "parts": parts}
    text = f"{_where(f, p)} holds RNG state ({', '.join(gens)})"
    if not any(g.startswith("torch cpu") for g in gens):
        facts["missing_generators"] = ["torch cpu"]
        return Component("rng", INCOMPLETE, tuple(x[0].name for x in found),
                         text + ", but not the torch CPU generator, which dropout and a "
                         "shuffling DataLoader draw from: those streams restart on resume.", facts)
    return Component("rng", OK, tuple(dict.fromkeys(x[0].name for x in found)),
                     text + ", for the script to restore on resume.", facts)


def _per_rank(found) -> int | None:
    """One RNG dict per rank in a list (Composer's, and others')."""
    for _, _, p in found:
        if type(p.node) is list and len(p.node) > 1 and all(type(x) is dict for x in p.node):
            return len(p.node)
    return None


# --- progress --------------------------------------------------------------------------------

STEP_ORDER = ("iter_num", "global_step", "global_steps", "step", "steps", "iteration",
              "num_updates", "steps_run", "iter", "it")


def counters(src: Sources) -> dict[str, dict]:
    """Every counter found: dotted path -> {"file", "kind", "value"}."""
    out: dict[str, dict] = {}
    for f, pf, p in src.of("progress"):
        if p.what == "Composer timestamp":
            ts = fields(p.node)
            for key, kind in (("batch", "step"), ("epoch", "epoch"), ("batch_in_epoch", "batch"),
                              ("sample", "samples")):
                v = src.scalar(pf, ts.get(key))
                if type(v) is int:
                    out[f"{p.path}.{key}"] = {"file": f.name, "kind": kind, "value": v}
            continue
        v = src.scalar(pf, p.node)
        kind = counter_kind(p.key, v if type(v) is int else 0)
        if type(v) is int and kind:
            out[p.path] = {"file": f.name, "kind": kind, "value": v}
    return out


def _progress(src: Sources, det, out: Found) -> Component:
    found = counters(src)
    steps = sorted((p for p, c in found.items() if c["kind"] == "step"),
                   key=lambda p: (p.count("."), _rank(p)))
    epochs = sorted((p for p, c in found.items() if c["kind"] == "epoch"),
                    key=lambda p: p.count("."))
    facts: dict = {"counters": {p: c["value"] for p, c in found.items()}}
    if steps:
        out.step = found[steps[0]]["value"]
        facts["step"], facts["step_from"] = out.step, steps[0]
    if epochs:
        out.epoch = found[epochs[0]]["value"]
        facts["epoch"], facts["epoch_from"] = out.epoch, epochs[0]
    if not found:
        return _bad_for(src, "progress") or _epoch_history(src, out) or Component(
            "progress", MISSING, (), "no step or epoch counter in these files: the resumed run "
            "starts counting (schedule, logging, when to stop) from 0 unless the script knows "
            "where it was.")
    chosen = [p for p in (steps[:1] + epochs[:1])] or list(found)[:2]
    files = tuple(dict.fromkeys(found[p]["file"] for p in chosen))
    said = ", ".join(f"{'step' if found[p]['kind'] == 'step' else found[p]['kind']} "
                     f"{found[p]['value']:,} ({p})" for p in chosen)
    more = len(found) - len(chosen)
    extra = f"; {more} more counter{'s' if more != 1 else ''} in the facts" if more > 0 else ""
    return Component("progress", OK, files, f"{said} in {name_list(files)}{extra}.", facts)


def _epoch_history(src: Sources, out: Found) -> Component | None:
    """A JSON list of per-epoch records beside the state (skorch's history.json, which
    load_params(f_history=...) restores, so the next fit goes on counting epochs)."""
    for f in src.ckpt.files:
        if f.format != "json":
            continue
        doc, _ = src.fs.json(f.name, (dict, list))
        if not isinstance(doc, list) or not doc or not all(
                isinstance(r, dict) and type(r.get("epoch")) is int for r in doc):
            continue
        out.epoch = doc[-1]["epoch"]
        return Component("progress", OK, (f.name,), f"{f.name} records {len(doc):,} epochs, the "
                         f"last epoch {out.epoch}: a history the resume restores to go on "
                         "counting epochs.", {"epoch": out.epoch, "epoch_from": f.name,
                                              "epochs": len(doc)})
    return None


def _rank(path: str) -> int:
    leaf = path.rsplit(".", 1)[-1]
    return STEP_ORDER.index(leaf) if leaf in STEP_ORDER else len(STEP_ORDER)


# --- data ------------------------------------------------------------------------------------

def _data(src: Sources, out: Found) -> Component:
    found = src.of("data")
    if found:
        f, pf, p = found[0]
        facts = {"stored": True, "what": p.what,
                 "state": jsonable(p.node, src.fs.scalars(pf))}
        return Component("data", OK, tuple(dict.fromkeys(x[0].name for x in found)),
                         f"{_where(f, p)} holds the data position ({p.what}).", facts)
    facts: dict = {"stored": False}
    mid = _mid_epoch(src)
    if mid:
        facts["mid_epoch"] = mid
        return Component("data", MISSING, (), f"saved mid-epoch ({mid}) with no data-loader "
                         "position: on resume the rest of that epoch is replayed or skipped, "
                         "depending on the script.", facts)
    said = _project_says(src, "data") or _epoch_end(src)
    if said is not None:
        return said
    bad = _bad_for(src, "data")
    if bad is not None:
        return bad
    rng = out.components.get("rng")
    if rng is not None and rng.status == OK:
        return Component("data", NOT_NEEDED, (), "no data-loader position is saved: a shuffling "
                         "DataLoader draws each epoch's order from the torch CPU RNG, which is "
                         "saved, so the order is reproduced if this was written at an epoch "
                         "boundary.", facts)
    counted = out.components["progress"].facts
    if "epoch_from" in counted and "step_from" not in counted:
        return Component("data", NOT_NEEDED, (), "saved at an epoch boundary (an epoch counter, "
                         "no step counter): the next epoch starts its data fresh, as it would "
                         "have without the interruption; its order is a matter of the RNG.",
                         {**facts, "counters": counted.get("counters", {})})
    return Component("data", MISSING, (), "no data-loader position: the resumed run starts its "
                     "data stream over (from the start of an epoch, or from the seed), so it "
                     "sees other batches than an uninterrupted run.", facts)


def _engine_position(src: Sources) -> tuple[int, int] | None:
    """(iteration, epoch_length) of an ignite Engine's state, in any pickled file."""
    seen = set()
    for _, pf, _ in src.parts:
        if id(pf) in seen:
            continue
        seen.add(id(pf))
        for v in [pf.obj, *fields(pf.obj).values()]:
            e = fields(v)
            length, it = e.get("epoch_length"), e.get("iteration")
            if type(length) is int and type(it) is int and length > 0:
                return it, length
    return None


def _epoch_end(src: Sources) -> Component | None:
    """ignite's engine state says where in the epoch it saved: at an epoch's end the next
    epoch starts its data fresh, as an uninterrupted run does."""
    at = _engine_position(src)
    if at is None or at[0] % at[1]:
        return None
    it, length = at
    return Component("data", NOT_NEEDED, (), f"saved at the end of an epoch (iteration {it:,} = "
                     f"{it // length} x epoch_length {length:,}): the next epoch starts its data "
                     "fresh, as it would have without the interruption.", {"stored": False})


def _mid_epoch(src: Sources) -> str:
    for path, c in counters(src).items():
        if c["kind"] == "batch" and c["value"] > 0:
            return f"{path.rsplit('.', 1)[-1]} {c['value']:,}"
    for f in src.ckpt.files:
        m = RECOVERY.match(f.name.rsplit("/", 1)[-1])
        if m and src.project is not None and src.project.name == "timm":
            return (f"timm's recovery file for epoch {m.group(1)}, batch {m.group(2)}: resuming "
                    "from it starts the next epoch and skips the rest of this one")
    at = _engine_position(src)
    if at is not None and at[0] % at[1]:
        it, length = at
        return (f"iteration {it:,} is {it % length:,} batches into an epoch of {length:,}; "
                "ignite's Engine restarts the epoch's data")
    return ""


# --- scaler ----------------------------------------------------------------------------------

def _scaler(src: Sources) -> Component:
    found = src.of("scaler")
    if found:
        f, pf, p = found[0]
        node = p.node
        facts = {str(k): jsonable(v, src.fs.scalars(pf)) for k, v in fields(node).items()}
        if type(node) is float:
            facts = {"loss_scale": node}
        if p.what.startswith("a disabled"):
            return Component("scaler", NOT_NEEDED, (f.name,), f"{_where(f, p)} is a disabled "
                             "GradScaler ({}): the run used bf16 or fp32, so there is no loss "
                             "scale to restore.", facts)
        scale = facts.get("scale", facts.get("cur_scale", facts.get("loss_scale")))
        return Component("scaler", OK, (f.name,), f"{_where(f, p)} holds the loss scaler "
                         f"({p.what}, scale {num(scale)}), so the resumed run keeps its loss "
                         "scale instead of probing for it again.", facts)
    bad = _bad_for(src, "scaler")
    if bad is not None:
        return bad
    if src.project is not None and src.project.saves_no_scaler:
        return Component("scaler", MISSING, (), src.project.missing["scaler"],
                         {"project": src.project.name})
    fp16 = _fp16(src)
    if fp16:
        said = _project_says(src, "scaler")
        if said is not None and said.status == MISSING:
            return said
        return Component("scaler", MISSING, (), f"the saved settings say {fp16} but no "
                         "GradScaler state is saved: the resumed run restarts at the default "
                         "loss scale and may skip steps finding it again.", {"fp16": fp16})
    return Component("scaler", NOT_NEEDED, (), "no GradScaler state and nothing in the saved "
                     "settings says fp16: bf16 and fp32 runs need no loss scaler.")


def _fp16(src: Sources) -> str:
    for key, v in src.settings().items():
        if key in FP16_KEYS and (v is True or (isinstance(v, str) and v.lower() in (
                "fp16", "float16", "16", "16-mixed", "half", "amp", "apex"))):
            return f"{key}={v!r}"
    return ""


# --- files that could not be read ------------------------------------------------------------

def _hint(name: str) -> str | None:
    leaf = name.rsplit("/", 1)[-1]
    return next((kind for kind, rx in HINTS if rx.search(leaf)), None)


def _holds(src: Sources, name: str, kind: str) -> bool:
    """Whether a damaged or unsafe file holds this component: an unsafe file by what it was
    read to hold (inert), else (nothing readable) by the hint its name gives."""
    held = src.unsafe_holds.get(name)
    if held:
        return kind in held
    hint = _hint(name)
    return hint == kind or (kind == "weights" and hint is None)


def _holds_training(src: Sources) -> bool:
    return any(kind in TRAINING for held in src.unsafe_holds.values() for kind in held)


def _bad_for(src: Sources, kind: str) -> Component | None:
    """A damaged or unsafe file that holds this component: its content is lost."""
    for f, status, why in src.bad:
        if _holds(src, f.name, kind):
            return Component(kind, status, (f.name,), why, {"file": f.name})
    return None


def _bad_files(src: Sources, out: Found) -> None:
    """One unreadable file that held everything (the only torch file): every component is
    lost with it, as when a single-file checkpoint is cut short. Not an unsafe one: it was
    read inert, so what it holds is known, and `_bad_for` marks only that UNSAFE."""
    if src.parts or not src.bad:
        return
    weights = out.components["weights"]
    if weights.status != DAMAGED:
        return
    for kind in COMPONENTS:
        if kind != "weights" and out.components[kind].status in (MISSING, NOT_NEEDED):
            out.add(Component(kind, weights.status, weights.files, weights.detail,
                              weights.facts))
