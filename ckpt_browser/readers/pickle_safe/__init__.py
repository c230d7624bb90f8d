"""A pickle reader that rebuilds data and never runs code (FORMATS.md "Reading without
running code").

`find_class` never imports anything. A global is either a value from the allowlist (a dtype
tag), or an inert stand-in: `Opaque(qualname)`, or `UnsafeCall(qualname)` for a callable that
could run code or touch the system. Calling a stand-in (REDUCE, NEWOBJ, INST, OBJ) goes through
the allowlist's local recorders (tensors become TensorRef, numpy arrays NumpyArray, OrderedDict a
dict ...); any other call yields `Opaque(qualname, args)`, filled in by BUILD.

Everything is bounded: the pickle's size, the opcodes it may run (each may allocate an object),
the memo, and how deep values nest. Bad content becomes one-line Problems, never an exception.

  unpickler.py   the opcode loop and its budgets; globals, persistent ids and calls
  containers.py  the opcodes that fill containers; tuples record how deep they nest
  policy.py      the tiers: data (silent), imports (a warning), unsafe (an error)
  allowlist.py   the torch allowlist: dtype tags (dtypes.py) and recorders (torch_records,
                 builtin_records, numpy_records; their argument checks in checks.py)
  bounds.py      after reading: measure the whole graph and cut a bomb
  limits.py      CappedReader, the elided marker (the caps: ckpt_browser/limits.py)
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any

from ckpt_browser import limits as caps  # `limits` here is this package's own module
from ckpt_browser.model import ERROR, WARNING, Problem
from ckpt_browser.readers.pickle_safe.allowlist import TORCH_GLOBALS
from ckpt_browser.readers.pickle_safe.bounds import measure, pruned
from ckpt_browser.readers.pickle_safe.dtypes import DTYPE_GLOBALS, ITEMSIZE
from ckpt_browser.readers.pickle_safe.limits import CappedReader, Limit, short
from ckpt_browser.readers.pickle_safe.policy import describe, is_data, is_unsafe
from ckpt_browser.readers.pickle_safe.quiet_gc import gc_paused
from ckpt_browser.readers.pickle_safe.torch_records import torch_layout, torch_size
from ckpt_browser.readers.pickle_safe.unpickler import SafeUnpickler

__all__ = [
    "DTYPE_GLOBALS", "ITEMSIZE", "TORCH_GLOBALS", "CappedReader", "SafeUnpickler", "Unpickled",
    "describe", "is_data", "is_unsafe", "read_pickle_bytes", "short", "torch_layout",
    "torch_size", "unpickle",
]


@dataclass
class Unpickled:
    obj: Any = None
    ok: bool = False  # read to its STOP opcode
    unsafe: tuple[str, ...] = ()
    imports: tuple[str, ...] = ()  # globals whose module loading would import (a warning)
    problems: tuple[Problem, ...] = ()
    storages: dict[str, tuple[str, int]] = field(default_factory=dict)  # key -> (tag, numel)


def _message(e: BaseException) -> str:
    if isinstance(e, Limit):
        return str(e)
    if isinstance(e, RecursionError):
        return "pickle nests too deeply to read (RecursionError)"
    if isinstance(e, MemoryError):
        return "ran out of memory while reading the pickle"
    if isinstance(e, EOFError):
        return "pickle ends early (truncated?)"
    text = " ".join(str(e).split())[:160]
    return f"cannot unpickle: {type(e).__name__}: {text}" if text else \
        f"cannot unpickle: {type(e).__name__}"


def _at_end(file) -> bool:
    try:
        return file.read(1) == b""
    except Exception:  # noqa: BLE001 - e.g. a CappedReader at its limit
        return False


def unpickle(file, name: str, allow: dict | None = None, *, storage_ids: str | None = "zip",
             ops: str = "pickle_ops") -> Unpickled:
    """Read one pickle from `file` (a BytesIO, or a CappedReader over a real file).
    `ops`: the cap on opcodes run (a field of `limits.Limits`)."""
    u = SafeUnpickler(file, name, allow, storage_ids=storage_ids, ops=ops)
    problems: list[Problem] = []
    obj, ok = None, False
    try:
        with gc_paused():
            obj, ok = u.load(), True
    except Exception as e:  # noqa: BLE001 - bad content of any kind becomes a Problem
        if not isinstance(e, (Limit, MemoryError, RecursionError)) and _at_end(file):
            e = EOFError()  # an opcode cut short fails in many ways; say what happened
        problems.append(Problem(ERROR, name, _message(e)))
    finally:
        u.release()
    if ok:
        try:
            lim = caps.LIMITS
            height, paths = measure(obj, lim.depth, lim.paths)
            if height > lim.depth or paths > lim.paths:
                obj = pruned(obj, lim.depth)
                u.note(f"the object nests deeper than {lim.depth} levels or expands to more "
                       f"than {lim.paths:,} paths; the excess is elided (pickle bomb? "
                       f"{caps.env('depth')} and {caps.env('paths')} raise the caps)")
        except (RecursionError, MemoryError) as e:
            obj, ok = None, False
            problems.append(Problem(ERROR, name, _message(e)))
    if ok and u.saw_getattr and "builtins.getattr" not in u.unsafe and _bare_getattr(obj):
        u.unsafe["builtins.getattr"] = None  # kept as a value: whoever calls it reaches anything
    imports = {q: how for q, how in u.imports.items() if q not in u.unsafe}
    notes = [Problem(ERROR if any(w in n for w in HOSTILE) else WARNING, name, n)
             for n in u.notes]
    if imports:
        notes.insert(0, Problem(WARNING, name, imports_message(imports)))
    if u.note_count > len(u.notes):
        more = u.note_count - len(u.notes)
        notes.append(Problem(WARNING, name, f"... and {more:,} more warnings like these"))
    problems[:0] = notes
    return Unpickled(obj, ok, tuple(u.unsafe), tuple(imports), tuple(problems), u.storages)


# notes about content built to exhaust a loader: no checkpoint writer makes it, so an error
HOSTILE = ("pickle bomb", "hash-flooding")


def imports_message(imports: dict[str, str]) -> str:
    """One warning for every global beyond the data allowlist that is not unsafe."""
    objects = [q for q, how in imports.items() if how == "object"]
    refs = [q for q, how in imports.items() if how != "object"]
    modules = list(dict.fromkeys(q.rsplit(".", 1)[0] for q in (*objects, *refs)))
    parts = []
    if objects:
        parts.append(f"rebuild {_listed(objects)} objects")
    if refs:
        parts.append(f"reference {_listed(refs)}")
    return (f"loading this file the torch way imports {_listed(modules)} to "
            f"{' and '.join(parts)}: that code runs, and torch.load(weights_only=True) refuses "
            "the file (nothing was imported here)")


def _listed(names: list[str], most: int = 4) -> str:
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most:,} more" if len(names) > most else "")


def _bare_getattr(obj) -> bool:
    """Whether the builtin getattr itself is somewhere in the graph (not just called)."""
    from ckpt_browser.standins import Opaque, UnsafeCall

    stack, seen = [obj], set()
    while stack:
        o = stack.pop()
        kind = type(o)
        if kind is UnsafeCall:
            if o.qualname == "builtins.getattr" and not o.args:
                return True
            stack.extend(o.args)
        elif kind in (dict, list, tuple, set, frozenset, Opaque) and id(o) not in seen:
            seen.add(id(o))
            if kind is dict:
                stack.extend(o.keys())
                stack.extend(o.values())
            elif kind is Opaque:
                stack.extend(o.args)
                stack.append(o.state)
            else:
                stack.extend(o)
    return False


def read_pickle_bytes(data: bytes, name: str) -> tuple[Any, tuple[str, ...], tuple[Problem, ...]]:
    """One pickle from memory, with the torch allowlist: (object, unsafe names, problems)."""
    most = caps.LIMITS.pickle_bytes
    if len(data) > most:
        return None, (), (Problem(ERROR, name, f"pickle is {len(data):,} bytes, over the "
                                  f"{most:,}-byte limit; not read "
                                  f"({caps.env('pickle_bytes')} raises it)"),)
    result = unpickle(io.BytesIO(data), name)
    return result.obj, result.unsafe, result.problems
