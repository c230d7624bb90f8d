"""Compare the training state of two checkpoints: step, learning rate, the optimizer's step
counters, the scheduler position and the seven components, with one plain sentence per telling
difference ("flags") and one per thing that could not be determined ("notes"), as a StateDiff;
its to_doc() is the `state` object of `diff --json` (less the tensors and their summary).

Everything comes from `training_state` facts and the tensor locations. The only bytes read are
the one-element optimizer `step` tensors (read_all) and, for DCP, the small param-group `lr`
items (the restricted unpickler behind StateFiles.dcp_value). No pickle is executed.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Generic, TypeVar

from ckpt_browser.model import COMPONENTS, TrainingState
from ckpt_browser.parts.common import num
from ckpt_browser.parts.signatures import SCHEDULER_COUNTERS
from ckpt_browser.producers import BY_ID
from ckpt_browser.values.locate import TensorLoc

__all__ = ["Flag", "LrGroup", "Pair", "StateDiff", "StateSide", "StepCounters", "state_diff"]

MAX_COUNTERS = 100_000  # optimizer step tensors read per side
FROZEN_SHOWN = 20
USABLE = ("ok", "incomplete")  # statuses whose facts still describe what is on disk
LOST = ("missing", "damaged", "unsafe")

_DCP_LR = re.compile(r"^optimizer(?:_\d+)?\.param_groups\.(.+)\.lr$")
# Adam-style counters inside a torch optimizer state_dict, wherever it is nested
_STATE_STEP = re.compile(r"(?:^|\.)state\..+\.step$")

T = TypeVar("T")
Number = int | float


# --- the comparison -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Pair(Generic[T]):
    """One fact of A and of B."""

    a: T
    b: T

    def to_doc(self) -> dict:
        return {"a": _doc(self.a), "b": _doc(self.b)}


@dataclass(frozen=True)
class StateSide:
    """What one side says about itself; None where it is unknown (epoch None when not finite)."""

    framework: str
    step: int | None
    epoch: Number | None
    ranks: int | None

    def to_doc(self) -> dict:
        return {"framework": self.framework, "step": self.step, "epoch": self.epoch,
                "ranks": self.ranks}


@dataclass(frozen=True)
class LrGroup:
    """The current learning rate of param group `group` on each side (None: not there)."""

    group: int
    a: float | None
    b: float | None

    def to_doc(self) -> dict:
        return {"group": self.group, "a": self.a, "b": self.b}


@dataclass(frozen=True)
class StepCounters:
    """The optimizer's per-parameter step counters of one side; a whole count is an int."""

    min: Number
    max: Number
    params: int  # parameters with a counter
    unreadable: int  # counter tensors that could not be read (not in min/max/params)

    def to_doc(self) -> dict:
        return {"min": self.min, "max": self.max, "params": self.params,
                "unreadable": self.unreadable}


@dataclass(frozen=True)
class Flag:
    """One telling difference. `component` is set for component_lost and component_gained,
    `tensors` (the first FROZEN_SHOWN names) for frozen."""

    kind: str  # step_went_back, optimizer_not_advanced, scheduler_behind, lr_unchanged, ...
    message: str
    component: str | None = None
    tensors: tuple[str, ...] | None = None

    def to_doc(self) -> dict:
        doc = {"kind": self.kind, "message": self.message}
        if self.component is not None:
            doc["component"] = self.component
        if self.tensors is not None:
            doc["tensors"] = list(self.tensors)
        return doc


@dataclass(frozen=True)
class StateDiff:
    """The training state of A against B: each side's facts, the components' statuses (every
    kind of COMPONENTS, in that order), the lr per param group, the step counters, the
    scheduler position, then the flags and the notes."""

    a: StateSide
    b: StateSide
    components: dict[str, Pair[str]]
    lr: tuple[LrGroup, ...]
    optimizer_steps: Pair[StepCounters | None]
    scheduler_last_epoch: Pair[int | None]
    flags: tuple[Flag, ...]
    notes: tuple[str, ...]

    @property
    def differs(self) -> bool:
        """The step, the epoch, a component's status or an lr differs (the flags and the
        counters alone do not make two checkpoints different)."""
        return (self.a.step != self.b.step or self.a.epoch != self.b.epoch
                or any(c.a != c.b for c in self.components.values())
                or any(g.a != g.b for g in self.lr))

    def to_doc(self) -> dict:
        """`diff --json`'s state object, without its summary and tensors."""
        return {"a": self.a.to_doc(), "b": self.b.to_doc(),
                "components": {k: c.to_doc() for k, c in self.components.items()},
                "lr": [g.to_doc() for g in self.lr],
                "optimizer_steps": self.optimizer_steps.to_doc(),
                "scheduler_last_epoch": self.scheduler_last_epoch.to_doc(),
                "flags": [f.to_doc() for f in self.flags], "notes": list(self.notes),
                "differs": self.differs}


def _doc(v):
    return v.to_doc() if isinstance(v, StepCounters) else v


def state_diff(a: TrainingState, b: TrainingState, locs_a: list[TensorLoc],
               locs_b: list[TensorLoc], unmoved: list[str] | None = None) -> StateDiff:
    """The comparison of two checkpoints' training state (A normally the earlier)."""
    notes: list[str] = []
    la, lb = _label("A", a), _label("B", b)
    lr_a, lr_b = _lrs(a, la, notes), _lrs(b, lb, notes)
    lr = tuple(LrGroup(i, _at(lr_a, i), _at(lr_b, i)) for i in range(max(len(lr_a), len(lr_b))))
    steps = Pair(_step_counters(a, locs_a, la, notes), _step_counters(b, locs_b, lb, notes))
    last = Pair(_last_epoch(a, la, notes), _last_epoch(b, lb, notes))
    for label, t in ((la, a), (lb, b)):
        if t.step is None:
            notes.append(f"{label}'s training step is unknown, so the step-based checks "
                         "were skipped.")
    flags = (_component_flags(a, b, la, lb) + _step_flags(a, b, steps)
             + _scheduler_flags(a, b, la, lb) + _lr_flags(a, b, lr)
             + _frozen_flags(a, b, unmoved))
    if a.step is not None and a.step == b.step and unmoved:
        notes.append(f"{len(unmoved)} weight tensors are identical, but both sides are at step "
                     f"{a.step}, so that says nothing about freezing.")
    return StateDiff(_side(a), _side(b),
                     {k: Pair(_status(a, k), _status(b, k)) for k in COMPONENTS},
                     lr, steps, last, tuple(flags), tuple(notes))


# --- each side ------------------------------------------------------------------------------------

def _side(t: TrainingState) -> StateSide:
    return StateSide(t.framework, _int(t.step), _number(t.epoch), _int(t.ranks))


def _label(side: str, t: TrainingState) -> str:
    return f"{side} (step {t.step})" if t.step is not None else side


def _status(t: TrainingState, kind: str) -> str:
    c = t.components.get(kind)
    return c.status if c is not None else "missing"


def _facts(t: TrainingState, kind: str) -> dict:
    c = t.components.get(kind)
    return c.facts if c is not None and c.status in USABLE else {}


def _int(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _number(v) -> int | float | None:
    """A finite real number (JSON has no NaN), else None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return v if math.isfinite(v) else None


def _count(v: float) -> Number:
    return int(v) if float(v).is_integer() else v


def _at(values: list, i: int):
    return values[i] if i < len(values) else None


# --- learning rate --------------------------------------------------------------------------------

def _lrs(t: TrainingState, label: str, notes: list[str]) -> list:
    """The current lr per param group: the optimizer's param_groups, else DCP's per-parameter
    items, else the scheduler's _last_lr."""
    groups = _facts(t, "optimizer").get("param_groups")
    if isinstance(groups, list) and groups:
        lrs = [_number(g.get("lr")) if isinstance(g, dict) else None for g in groups]
        if any(v is not None for v in lrs):
            return lrs
    lrs = _dcp_lrs(t, label, notes)
    if lrs:
        notes.append(f"{label}: DCP keeps param-group settings per parameter; its lr list is the "
                     f"distinct values in parameter order ({', '.join(num(v) for v in lrs)}).")
        return lrs
    last = _sched(t).get("_last_lr")
    if isinstance(last, list) and any(_number(v) is not None for v in last):
        return [_number(v) for v in last]
    if _status(t, "optimizer") in USABLE or _status(t, "scheduler") in USABLE:
        notes.append(f"{label}'s learning rate was not found in its optimizer or scheduler "
                     "state.")
    return []


def _dcp_lrs(t: TrainingState, label: str, notes: list[str]) -> list[float]:
    """Distinct lr values of DCP's per-parameter param-group items, in parameter order: at
    most the dcp_items limit decoded (a note says when more were left), items in the same
    bytes decoded once."""
    if _status(t, "optimizer") not in USABLE:
        return []
    from ckpt_browser import limits
    from ckpt_browser.parts.files import StateFiles
    from ckpt_browser.standins import DcpCheckpoint

    most = limits.LIMITS.dcp_items
    out: list[float] = []
    seen: dict[tuple, object] = {}
    left = 0
    fs = StateFiles(t.root, limits.LIMITS.json_bytes)
    try:
        for d in t.files:
            if not isinstance(d, DcpCheckpoint) or d.unsafe:
                continue
            for key, e in d.entries.items():
                if e.kind == "tensor" or not _DCP_LR.match(key):
                    continue
                c = e.chunks[0] if e.chunks else None
                where = (d.folder, c.file, c.offset, c.length) if c is not None else (key,)
                if where not in seen and len(seen) >= most:
                    left += 1
                    continue
                if where not in seen:
                    seen[where] = _number(fs.dcp_value(d.folder, e))
                v = seen[where]
                if v is not None and v not in out:
                    out.append(v)
    finally:
        fs.close()
    if left:
        notes.append(f"{label}: {left:,} more DCP param-group lr items were not decoded (only "
                     f"{most:,} are).")
    return out


# --- optimizer step counters ----------------------------------------------------------------------

def _counter_locs(t: TrainingState, locs: list[TensorLoc]) -> list[TensorLoc]:
    """The one-element `step` tensors of the optimizer state. A file shared by two components
    (a ZeRO shard also holds the loss scaler) leaves its tensors as "other": keep those too."""
    c = t.components.get("optimizer")
    files = set(c.files) if c is not None else set()
    return [loc for loc in locs if loc.name.endswith(".step") and loc.numel == 1 and (
        loc.component == "optimizer" or (loc.component in (None, "other") and loc.file in files
                                         and _STATE_STEP.search(loc.name)))]


def _step_counters(t: TrainingState, locs: list[TensorLoc], label: str,
                   notes: list[str]) -> StepCounters | None:
    picked = _counter_locs(t, locs)
    if not picked:
        return _counters_from_facts(t, label, notes)
    from ckpt_browser.values.read import ValuesError, read_all  # torch, only when needed

    if len(picked) > MAX_COUNTERS:
        notes.append(f"{label} has {len(picked):,} optimizer step counters; only the first "
                     f"{MAX_COUNTERS:,} were read.")
    values: list[float] = []
    bad, why = 0, ""
    for loc in picked[:MAX_COUNTERS]:
        try:
            v = float(read_all(loc, max_bytes=64).reshape(-1)[0].item())
        except (ValuesError, RuntimeError, TypeError, ValueError) as e:
            bad, why = bad + 1, why or str(e)
            continue
        if not math.isfinite(v):
            bad, why = bad + 1, why or f"{loc.name} is {v}"
            continue
        values.append(v)
    if bad:
        notes.append(f"{label}: {bad} optimizer step counters not readable: {why}.")
    if not values:
        return None
    return StepCounters(_count(min(values)), _count(max(values)), len(values), bad)


def _counters_from_facts(t: TrainingState, label: str,
                         notes: list[str]) -> StepCounters | None:
    """Steps pickled as plain numbers have no tensor; the optimizer facts list their values."""
    facts = _facts(t, "optimizer")
    values = [v for v in facts.get("step") or [] if _number(v) is not None]
    if values:
        params = _int(facts.get("params_with_state"))
        return StepCounters(_count(min(values)), _count(max(values)),
                            params if params is not None else len(values), 0)
    if _status(t, "optimizer") in USABLE:
        if _int(facts.get("params_with_state")) == 0:  # torch fills state at the first step
            notes.append(f"{label}'s optimizer has no per-parameter state yet (saved before its "
                         "first step): no step counters to compare.")
        else:
            notes.append(f"{label}'s optimizer state has no per-parameter step counters that "
                         "could be found (not an Adam-style optimizer, or its state is stored "
                         "elsewhere).")
    return None


# --- scheduler position ---------------------------------------------------------------------------

def _sched(t: TrainingState) -> dict:
    facts = _facts(t, "scheduler")
    inner = facts.get("keys")  # a plain DCP checkpoint nests its lr_scheduler.* values
    return inner if isinstance(inner, dict) else facts


def _position(t: TrainingState) -> tuple[str, int] | None:
    """The scheduler's step counter (torch's last_epoch, or another, parts.signatures)."""
    f = _sched(t)
    for key in SCHEDULER_COUNTERS:
        if _int(f.get(key)) is not None:
            return key, f[key]
    return None


def _last_epoch(t: TrainingState, label: str, notes: list[str]) -> int | None:
    pos = _position(t)
    if pos is None:
        if _status(t, "scheduler") in USABLE:
            notes.append(f"{label}'s scheduler state has no last_epoch.")
        return None
    key, value = pos
    counts, note = SCHEDULER_COUNTERS[key]
    if note:
        notes.append(f"{label}: " + note.format(value=value))
    return value if counts else None


def _per_epoch(t: TrainingState, value: int) -> bool:
    """Its producer steps schedulers once per epoch, and `value` is that count."""
    producer = BY_ID.get(t.framework)
    return bool(producer and producer.per_epoch and producer.per_epoch(t, value))


def _expected_position(t: TrainingState) -> tuple[int, str] | None:
    """Where the scheduler should be, for producers that step it once per optimizer update."""
    pos = _position(t)
    if pos is None or t.step is None or "num_bad_epochs" in _sched(t):
        return None  # ReduceLROnPlateau steps on evaluation, not per update
    key, value = pos
    skipped = _int(_facts(t, "progress").get("skipped_steps")) or 0
    if key == "last_batch_iteration":
        return t.step - skipped - 1, f"global step {t.step} (it counts from -1)"
    producer = BY_ID.get(t.framework)
    if key != "last_epoch" or producer is None or producer.scheduler_at is None:
        return None
    return producer.scheduler_at(t, value)


# --- flags ----------------------------------------------------------------------------------------

def _moved(a: TrainingState, b: TrainingState) -> bool:
    return a.step is not None and b.step is not None and a.step != b.step


def _component_flags(a: TrainingState, b: TrainingState, la: str, lb: str) -> list[Flag]:
    out = []
    for kind in COMPONENTS:
        sa, sb = _status(a, kind), _status(b, kind)
        if sa == "ok" and sb in LOST:
            out.append(Flag("component_lost", f"The {kind} state is ok in {la} but {sb} in "
                            f"{lb}.", component=kind))
        elif sa in LOST and sb == "ok":
            out.append(Flag("component_gained", f"The {kind} state is {sa} in {la} but ok in "
                            f"{lb}.", component=kind))
    return out


def _step_flags(a: TrainingState, b: TrainingState,
                steps: Pair[StepCounters | None]) -> list[Flag]:
    out = []
    if a.step is not None and b.step is not None and b.step < a.step:
        out.append(Flag("step_went_back", f"B's step {b.step} is lower than A's step {a.step}: "
                        "the checkpoints may be in the wrong order, or a resume restarted the "
                        "step count."))
    ca, cb = steps.a, steps.b
    if _moved(a, b) and ca is not None and cb is not None and ca.max == cb.max:
        out.append(Flag("optimizer_not_advanced", f"The training step moved from {a.step} to "
                        f"{b.step} but the optimizer's step counters stayed at {num(ca.max)}: "
                        "the optimizer state was probably not saved, or not restored on "
                        "resume."))
    return out


def _scheduler_flags(a: TrainingState, b: TrainingState, la: str, lb: str) -> list[Flag]:
    behind = {}
    for label, t in ((la, a), (lb, b)):
        pos, expected = _position(t), _expected_position(t)
        if pos is not None and expected is not None and pos[1] < expected[0]:
            behind.setdefault((pos, expected), []).append(label)
    out = [Flag("scheduler_behind", f"In {' and '.join(labels)} the scheduler's {pos[0]} is "
                f"{pos[1]}, behind the {expected[0]} expected from {expected[1]}, so the LR "
                "schedule lags the training (unless steps were skipped).")
           for (pos, expected), labels in behind.items()]  # one flag when both sides agree
    pa, pb = _position(a), _position(b)
    steps_per_epoch = any(p is not None and _per_epoch(t, p[1])
                          for p, t in ((pa, a), (pb, b)))
    if (_moved(a, b) and pa is not None and pb is not None and pa == pb
            and not steps_per_epoch and "num_bad_epochs" not in _sched(b)):
        out.append(Flag("scheduler_behind", f"The training step moved from {a.step} to {b.step} "
                        f"but the scheduler's {pa[0]} stayed at {pa[1]}: the LR schedule did "
                        "not advance (the scheduler state was not saved or not restored)."))
    return out


def _lr_flags(a: TrainingState, b: TrainingState, lr: tuple[LrGroup, ...]) -> list[Flag]:
    if not (_moved(a, b) and lr and _status(a, "scheduler") in USABLE
            and _status(b, "scheduler") in USABLE):
        return []
    if any(g.a is None or g.a != g.b for g in lr):
        return []
    values = ", ".join(dict.fromkeys(num(g.a) for g in lr))
    groups = {1: "the one param group", 2: "both param groups"}.get(
        len(lr), f"all {len(lr)} param groups")
    return [Flag("lr_unchanged", f"The learning rate of {groups} is {values} at both step "
                 f"{a.step} and step {b.step} although a scheduler is saved: is the schedule "
                 "constant, or did the scheduler not step?")]


def _frozen_flags(a: TrainingState, b: TrainingState, unmoved: list[str] | None) -> list[Flag]:
    if not unmoved or not _moved(a, b):
        return []
    n = len(unmoved)
    what = "weight tensor did" if n == 1 else "weight tensors did"
    return [Flag("frozen", f"{n} {what} not change between step {a.step} and step {b.step} "
                 "(frozen?)", tensors=tuple(unmoved[:FROZEN_SHOWN]))]
