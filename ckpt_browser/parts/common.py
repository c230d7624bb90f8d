"""What every framework's builder shares: statuses, the Found record, walking the inert
object graphs the safe readers return, and the Components for damaged, unsafe or absent state."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from ckpt_browser import limits
from ckpt_browser.model import COMPONENTS, ERROR, Component, Problem
from ckpt_browser.readers.pickle_safe.policy import describe
from ckpt_browser.standins import (
    DcpCheckpoint,
    NumpyArray,
    Opaque,
    PickleFile,
    TensorRef,
    UnsafeCall,
)

# Final: a type checker sees model.Status's Literals, not str
OK: Final = "ok"
MISSING: Final = "missing"
INCOMPLETE: Final = "incomplete"
DAMAGED: Final = "damaged"
UNSAFE: Final = "unsafe"
NOT_NEEDED: Final = "not-needed"


@dataclass
class Found:
    components: dict[str, Component] = field(default_factory=dict)
    step: int | None = None
    epoch: float | None = None
    ranks: int | None = None
    problems: list[Problem] = field(default_factory=list)
    framework: str = ""  # set when the content, not the names, says who wrote it
    project: str = ""  # that producer, for people

    def add(self, c: Component) -> None:
        self.components[c.kind] = c


def every_kind(out: Found, make: Callable[[str], Component]) -> Found:
    """All seven components from one cause (nothing readable, one damaged file ...)."""
    for kind in COMPONENTS:
        out.add(make(kind))
    return out


# --- the object graphs ----------------------------------------------------------------------------

def jsonable(value, scalar: Callable = lambda v: None, depth: int = 0):
    """Turn a stand-in graph into JSON values; tensors become their value (scalars) or a label."""
    if depth > 8:
        return "..."
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, TensorRef):
        v = scalar(value)
        if v is not None:
            return jsonable(v)
        return f"tensor {value.dtype}{list(value.shape)}"
    if isinstance(value, NumpyArray):
        return f"ndarray {value.dtype}{list(value.shape)}"
    if isinstance(value, Opaque):
        if not value.fields and len(value.args) == 1 and isinstance(value.args[0], (int, str)):
            return value.args[0]  # an Enum member, e.g. ZeroStageEnum(2) -> 2
        out = {"object": value.qualname}
        if value.args and not value.fields:
            out["args"] = jsonable(list(value.args), scalar, depth + 1)
        out.update({str(k): jsonable(v, scalar, depth + 1) for k, v in value.fields.items()})
        return out
    if isinstance(value, UnsafeCall):
        return f"unsafe call {value.qualname} (not run)"
    if isinstance(value, (bytes, bytearray)):
        return f"{len(value):,} bytes"
    if isinstance(value, dict):
        return {str(k): jsonable(v, scalar, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)
        shown = [jsonable(v, scalar, depth + 1) for v in items[:1000]]
        return shown + ([f"... {len(items) - 1000:,} more"] if len(items) > 1000 else [])
    return repr(value)[:200]


def fields(obj) -> dict:
    """A dict, or the attributes of an Opaque object (Namespace, dataclass ...)."""
    if isinstance(obj, dict):
        return obj
    if isinstance(obj, Opaque):
        return obj.fields
    return {}


def dig(obj, *keys):
    for k in keys:
        obj = fields(obj).get(k)
        if obj is None:
            return None
    return obj


def count_tensors(obj, limit: int = 10_000_000) -> int:
    n, stack = 0, [obj]
    while stack and n < limit:
        o = stack.pop()
        if isinstance(o, TensorRef):
            n += 1
        elif isinstance(o, dict):
            stack.extend(o.values())
        elif isinstance(o, (list, tuple)):
            stack.extend(o)
        elif isinstance(o, Opaque):
            stack.append(o.state)
    return n


def find_optimizer(obj, depth: int = 0):
    """The torch optimizer state_dict ({"state", "param_groups"}) inside a wrapper's dict."""
    f = fields(obj)
    if isinstance(f.get("state"), dict) and isinstance(f.get("param_groups"), list):
        return f
    if depth >= 4:
        return None
    for key in ("optimizer_state_dict", "base_optimizer_state", "optimizer", "optimizer_states"):
        inner = f.get(key)
        if isinstance(inner, list) and inner:
            inner = inner[0]
        found = find_optimizer(inner, depth + 1) if inner is not None else None
        if found is not None:
            return found
    return None


def set_key(v):
    """A value from a file as a set or dict key: ints past 2**61 - 1 (which a pickle can make
    share one hash value, so that every insert compares with every earlier one) and anything
    but a number or string go in as text (str hashes cannot be made to collide)."""
    if type(v) in (str, float, bool) or (type(v) is int and -2**61 < v < 2**61):
        return v
    return str(v)


def as_int(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


# --- names and numbers in sentences ---------------------------------------------------------------

def name_list(files, n: int = 3) -> str:
    files = list(files)
    shown = ", ".join(files[:n])
    return shown + (f" and {len(files) - n} more" if len(files) > n else "")


def num(v) -> str:
    """A number in a sentence: 0.001, 3; a step of 10**40 as 1e+40 and one no float holds as
    "a 1,000-digit number", so a hostile file cannot flood the line."""
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, list):
        return "[" + ", ".join(num(x) for x in v[:MAX_LISTED]) + (
            f", ... {len(v) - MAX_LISTED:,} more]" if len(v) > MAX_LISTED else "]")
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 10**21:
        if abs(v) > 2**1023:
            return f"a {'negative ' if v < 0 else ''}{len(str(abs(v))):,}-digit number"
        return f"{v:g}"
    return str(v)


MAX_LISTED = 8  # values of a list shown in a sentence (base_lrs of 8 param groups)


def leaf(f: str) -> str:
    return f.rstrip("/").rsplit("/", 1)[-1]


def matching(files, rx: re.Pattern) -> list[str]:
    return [f for f in files if rx.match(leaf(f))]


def under(files, rel: str) -> list[str]:
    return [f for f in files if f.startswith(rel + "/")] if rel else list(files)


# --- statuses shared by every framework -----------------------------------------------------------

def safe_fields(out: Found, pf: PickleFile) -> dict:
    """The file's top-level fields, or none (and a problem) when it asks to run code."""
    if pf.unsafe:
        out.problems.append(Problem(ERROR, pf.name, f"unsafe: asks to run {describe(pf.unsafe)} "
                                    "when unpickled; not run, and its contents are not used"))
        return {}
    return fields(pf.obj)


def read_each(fs, kind: str, files,
              limit: int | None = -1) -> tuple[list[PickleFile], Component | None]:
    """Read the files (up to `limit`: -1 for the rank-files cap, None for all); the component
    is unsafe or damaged if any one is."""
    pfs = [fs.pickle(f) for f in files[:limits.LIMITS.rank_files if limit == -1 else limit]]
    return pfs, damaged_or_unsafe(kind, files, pfs)


def damaged_or_unsafe(kind: str, files, pfs) -> Component | None:
    """A file with code-running globals makes the component unsafe; an unreadable one damaged."""
    for pf in pfs:
        if pf.unsafe:
            return Component(kind, UNSAFE, tuple(files),
                             f"{pf.name} asks to run {describe(pf.unsafe)} when unpickled (not "
                             "run here); torch.load(weights_only=False) would execute it.",
                             {"unsafe": list(pf.unsafe), "file": pf.name})
    for pf in pfs:
        if isinstance(pf, PickleFile) and (pf.obj is None or
                                           any(p.severity == ERROR for p in pf.problems)):
            why = next((p.message for p in pf.problems if p.severity == ERROR), "nothing readable")
            return Component(kind, DAMAGED, tuple(files), f"{pf.name} could not be read: {why}.",
                             {"file": pf.name})
    return None


def from_one_pickle(fs, kind: str, files, make: Callable) -> Component:
    """A part saved alone in one pickle (scheduler.pt, scaler.pt ...), read by `make`."""
    pf = fs.pickle(files[0])
    return damaged_or_unsafe(kind, files, [pf]) or make(fs, pf, pf.obj, files, files[0])


def dcp_status(kind: str, files, d: DcpCheckpoint) -> Component | None:
    if d.unsafe:
        return Component(kind, UNSAFE, tuple(files), f"the DCP metadata in {d.folder or '.'} asks "
                         f"to run {describe(d.unsafe)} when unpickled (not run here); torch's "
                         "own reader would execute it.", {"unsafe": list(d.unsafe)})
    errors = [p.message for p in d.problems if p.severity == ERROR]
    if errors:
        unfinished = not d.entries and any(m.startswith(("incomplete", "empty")) for m in errors)
        status = INCOMPLETE if unfinished else DAMAGED
        return Component(kind, status, tuple(files),
                         f"the DCP folder {d.folder or '.'} is not usable: {errors[0]}.")
    return None


def missing(kind: str, detail: str, facts: dict | None = None) -> Component:
    return Component(kind, MISSING, (), detail, facts or {})


def not_needed(kind: str, detail: str, facts: dict | None = None) -> Component:
    return Component(kind, NOT_NEEDED, (), detail, facts or {})
