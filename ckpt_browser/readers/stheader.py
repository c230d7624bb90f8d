"""A safetensors header's entries as the Rust loader deserializes them (FORMATS.md "Safetensors").

`tensor` checks one entry's values; both readings use it. `read_exact` reads a header parsed by
`stjson.loads_exact`, for the headers the fast reading in safetensors.py leaves alone: it
follows serde's derived `Deserialize` for the crate's `HashMetadata` and `TensorInfo`:

- `__metadata__` twice is refused ("duplicate field"); a key twice inside it keeps the last.
- A tensor name twice keeps the last, yet every copy must be a valid entry.
- An entry is an object (unknown keys ignored, `dtype`, `shape` or `data_offsets` twice
  refused) or a list of exactly those three values; a dtype is its name or `{"F32": null}`.
"""

from __future__ import annotations

from collections import Counter

from ckpt_browser.errors import ShardError
from ckpt_browser.model import DTYPE_BITS, ERROR, WARNING, Problem, TensorInfo
from ckpt_browser.readers.stjson import Obj, nesting

U64 = 2**64
FIELDS = ("dtype", "shape", "data_offsets")


def tensor(name: str, dtype, shape, offsets, file: str, label: str | None = None) -> TensorInfo:
    """Validate one entry's values; `label` names it in messages (default: the name)."""
    label = label or repr(name)
    if type(dtype) is not str or (bits := DTYPE_BITS.get(dtype)) is None:
        raise ShardError(f"tensor {label}: unknown dtype {_shown(dtype)}")
    if type(shape) is not list:
        raise ShardError(f"tensor {label}: shape {_shown(shape)} is not a list of "
                         "non-negative integers")
    numel = 1
    for d in shape:
        if type(d) is not int or d < 0 or d >= U64:
            raise ShardError(f"tensor {label}: shape {_shown(shape)} is not a list of "
                             f"non-negative integers below 2**64{_minus_zero(shape)}")
        numel *= d
        if numel >= U64:  # the loader multiplies in order, in 64 bits: [2**32, 2**32, 0] fails
            raise ShardError(f"tensor {label}: shape {_shown(shape)} overflows: its element "
                             "count passes 2**64 before the end")
    if numel * bits >= U64:
        raise ShardError(f"tensor {label}: shape {_shown(shape)} of {dtype} overflows: its size "
                         "in bits passes 2**64")
    if type(offsets) is not list or len(offsets) != 2:
        raise ShardError(f"tensor {label}: data_offsets {_shown(offsets)} is not [begin, end]")
    begin, end = offsets
    if type(begin) is not int or type(end) is not int or not 0 <= begin <= end < U64:
        raise ShardError(f"tensor {label}: data_offsets {_shown(offsets)} is not [begin, end] "
                         f"with 0 <= begin <= end < 2**64{_minus_zero(offsets)}")
    nbits = numel * bits
    if nbits % 8:
        raise ShardError(f"tensor {label}: {numel} x {dtype} does not end on a byte boundary")
    if nbits >> 3 != end - begin:
        raise ShardError(f"tensor {label}: shape {_shown(shape)} of {dtype} needs "
                         f"{nbits >> 3:,} bytes but data_offsets span {end - begin:,}")
    return TensorInfo(name, dtype, tuple(shape), file, begin, end, numel)


def _minus_zero(values: list) -> str:
    if any(type(v) is float and v == 0 and str(v)[0] == "-" for v in values):
        return " (the safetensors loader reads -0 as a float)"
    return ""


def _shown(value) -> str:
    """A bounded repr for messages: a shape may hold 20,000 dimensions."""
    if type(value) is Obj:
        value = dict(value)
    text = repr(value)
    return text if len(text) <= 120 else f"{text[:100]}... ({len(text):,} characters)"


def read_exact(tree, file: str) -> tuple[dict | None, list[TensorInfo], list[Problem]]:
    """Metadata, tensors (the last of each name) and problems of an exactly parsed header."""
    if type(tree) is not Obj:
        kind = "list" if type(tree) is list else type(tree).__name__
        raise ShardError(f"header is a JSON {'null' if tree is None else kind}, not an object")
    problems: list[Problem] = []
    metas = [value for key, value in tree if key == "__metadata__"]
    entries = dict(tree)  # the last copy of each name, as the loader keeps it
    entries.pop("__metadata__", None)
    if len(entries) + len(metas) < len(tree):  # a name written twice: keep every copy
        copies: dict[str, list] = {}
        for key, value in tree:
            if key != "__metadata__":
                copies.setdefault(key, []).append(value)
    else:
        copies = {}
    _ignored_nesting(tree)
    if len(metas) > 1:
        problems.append(Problem(ERROR, file, f"__metadata__ is written {_times(len(metas))}; "
                                "the safetensors loader refuses the file"))
    metadata = _metadata(metas[-1], file, problems) if metas else None
    tensors = []
    odd = []
    for name, value in entries.items():
        values = copies.get(name) or [value]
        last = None
        for i, value in enumerate(values, 1):
            label = repr(name) if len(values) == 1 else f"{name!r} (copy {i} of {len(values)})"
            try:
                (dtype, shape, offsets), serde_only = _fields(value, label)
                last = tensor(name, dtype, shape, offsets, file, label)
            except ShardError as e:
                problems.append(Problem(ERROR, file, str(e)))
                last = None
                continue
            if serde_only:
                odd.append(name)
        if len(values) > 1:
            problems.append(Problem(ERROR, file, f"{name!r} is written {_times(len(values))} in "
                                    "the header; the safetensors loader keeps the last one, "
                                    "other readers may keep the first"))
        if last is not None:
            tensors.append(last)
    if odd:
        problems.append(Problem(WARNING, file, _odd_forms(odd)))
    return metadata, tensors, problems


def _ignored_nesting(tree: Obj) -> None:
    """serde_json still parses what the loader ignores, an entry's unknown fields, and refuses
    the header if they nest too deep (a deep value anywhere else is refused for its type)."""
    for key, entry in tree:
        if key != "__metadata__" and type(entry) is Obj:
            for field, value in entry:
                if field not in FIELDS and (type(value) is Obj or type(value) is list):
                    nesting(value, 3)  # the header is level 1, the entry 2


def _metadata(value, file: str, problems: list[Problem]) -> dict | None:
    if value is None:
        return None
    if type(value) is not Obj or any(type(v) is not str for _, v in value):
        problems.append(Problem(ERROR, file, "__metadata__ must map strings to strings"))
        return None
    metadata = dict(value)
    if len(metadata) < len(value):
        twice = sorted(k for k, n in Counter(k for k, _ in value).items() if n > 1)
        problems.append(Problem(WARNING, file, f"__metadata__ writes {_shown(twice[0])} "
                                f"{'and others ' if len(twice) > 1 else ''}more than once; the "
                                "safetensors loader keeps the last value, other readers may keep "
                                "the first"))
    return metadata


def _fields(entry, label: str) -> tuple[tuple, bool]:
    """(dtype, shape, data_offsets) as serde reads them, and whether only serde reads them so
    (a list entry, a {"F32": null} dtype)."""
    if type(entry) is list:
        if len(entry) != 3:
            raise ShardError(f"tensor {label}: entry is a list of {len(entry)} values, not "
                             "[dtype, shape, data_offsets]")
        dtype, shape, offsets = entry
        serde_only = True
    elif (type(entry) is Obj and len(entry) == 3 and entry[0][0] == "dtype"
          and entry[1][0] == "shape" and entry[2][0] == "data_offsets"):
        (_, dtype), (_, shape), (_, offsets) = entry  # the writer's own order
        serde_only = False
    elif type(entry) is Obj:
        found: dict = {}
        for key, value in entry:
            if key in FIELDS:
                if key in found:
                    raise ShardError(f"tensor {label}: {key!r} is written twice in its entry; "
                                     "the safetensors loader refuses the file")
                found[key] = value
        missing = [k for k in FIELDS if k not in found]
        if missing:
            raise ShardError(f"tensor {label}: entry has no {missing[0]!r}")
        dtype, shape, offsets = (found[k] for k in FIELDS)
        serde_only = False
    else:
        raise ShardError(f"tensor {label}: entry is not an object")
    if type(dtype) is Obj and len(dtype) == 1 and dtype[0][1] is None:
        dtype, serde_only = dtype[0][0], True  # serde reads a unit variant from {"F32": null}
    return (dtype, shape, offsets), serde_only


def _times(k: int) -> str:
    return "twice" if k == 2 else f"{k:,} times"


def _odd_forms(names: list[str]) -> str:
    forms = "(a [dtype, shape, data_offsets] list, or a dtype written {\"F32\": null})"
    if len(names) == 1:
        return (f"tensor {names[0]!r} is written in a form only the Rust safetensors loader "
                f"reads {forms}; other readers refuse it")
    return (f"{len(names):,} tensors are written in forms only the Rust safetensors loader "
            f"reads {forms}, e.g. {names[0]!r}; other readers refuse them")
