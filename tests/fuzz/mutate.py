"""Damage, as strategies: byte-level (flips, truncation, splices), object-level (replace or drop
a value somewhere in a state dict before it is saved) and zip-level (members renamed, resized,
compressed, added; central directory corrupted).
"""

from __future__ import annotations

import io
import math
import struct
import zipfile

import numpy as np
from hypothesis import strategies as st

# -- bytes -------------------------------------------------------------------------------------

INTERESTING = [b"\x00", b"\xff", b"\x80", b"\x7f", b"\xff\xff\xff\xff", b"\x00\x00\x00\x80",
               b"\xff" * 8, b"\x00" * 8, b"\x7f" + b"\xff" * 7, b"PK\x03\x04", b"PK\x05\x06",
               b"\x80\x02", b"NaN", b"[", b"{", b'"', b"\\", b"\xc3", b"\xed\xa0\x80"]


@st.composite
def damaged_bytes(draw, data: bytes, max_ops: int = 4,
                  region: tuple[int, int] | None = None) -> bytes:
    """Up to max_ops edits of data: flip, overwrite, insert, delete, truncate, duplicate."""
    out = bytearray(data)
    lo, hi = region if region is not None else (0, len(data))
    for _ in range(draw(st.integers(1, max_ops))):
        hi = min(hi, len(out))
        if hi <= lo:
            break
        at = draw(st.integers(lo, hi - 1))
        op = draw(st.sampled_from(["flip", "flip", "set", "insert", "delete", "truncate", "dup"]))
        if op == "flip":
            out[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "set":
            chunk = draw(st.sampled_from(INTERESTING))
            out[at:at + len(chunk)] = chunk
        elif op == "insert":
            out[at:at] = draw(st.sampled_from(INTERESTING) | st.binary(max_size=8))
        elif op == "delete":
            del out[at:at + draw(st.integers(1, 16))]
        elif op == "truncate":
            del out[at:]
        else:
            n = draw(st.integers(1, 64))
            out[at:at] = out[at:at + n]
    return bytes(out)


# -- python objects (before torch.save) --------------------------------------------------------

DTYPES = ("float32", "float16", "bfloat16", "float64", "int64", "int32", "int8", "uint8", "bool",
          "complex64", "float8_e4m3fn", "float8_e5m2", "uint16")


@st.composite
def small_tensor(draw):
    import torch

    dtype = getattr(torch, draw(st.sampled_from(DTYPES)))
    shape = draw(st.lists(st.integers(0, 4), max_size=3))
    t = torch.zeros(shape, dtype=dtype) if dtype.is_floating_point or dtype.is_complex \
        else torch.zeros(shape, dtype=dtype)
    if t.numel() and dtype in (torch.float32, torch.float64, torch.float16):
        t = t + torch.tensor(draw(st.sampled_from([0.0, 1.5, -2.0, math.inf, math.nan])),
                             dtype=dtype)
    view = draw(st.sampled_from(["none", "none", "slice", "t", "step", "expand"]))
    if view == "slice" and t.dim() and t.shape[0] > 1:
        t = t[1:]
    elif view == "t" and t.dim() == 2:
        t = t.t()
    elif view == "step" and t.dim() and t.shape[0] > 2:
        t = t[::2]
    elif view == "expand" and t.dim() == 0:
        t = t.expand(3)
    return t


KEYS = ("state", "param_groups", "lr", "step", "exp_avg", "exp_avg_sq", "params", "betas",
        "weight_decay", "last_epoch", "_last_lr", "base_lrs", "_step_count", "global_step",
        "epoch", "rng_state", "cpu_rng_state", "cuda", "python", "numpy", "cpu", "scale",
        "_growth_tracker", "optimizer_states", "lr_schedulers", "state_dict", "loops",
        "iteration", "args", "checkpoint_version", "model", "optimizer", "module",
        "opt_param_scheduler", "global_steps", "skipped_steps", "lr_scheduler", "buffer_names",
        "param_shapes", "dp_world_size", "mp_world_size", "ds_version", "zero_stage",
        "optimizer_state_dict", "base_optimizer_state", "single_partition_of_fp32_groups",
        "partition_count", "fp32_flat_groups", "num_update", "scaler", "train_state", "")

LEAVES = st.one_of(
    st.none(), st.booleans(),
    st.integers(-2**70, 2**70) | st.sampled_from([0, 1, -1, 2**31, 2**63]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=16), st.binary(max_size=16),
    st.sampled_from(KEYS),
    st.builds(lambda n, s: np.full(n, s, dtype=np.uint32), st.integers(0, 5),
              st.integers(0, 2**32 - 1)),
)


def junk(tensors: bool = True):
    leaves = LEAVES | small_tensor() if tensors else LEAVES
    return st.recursive(leaves, lambda v: st.one_of(
        st.lists(v, max_size=4), st.lists(v, max_size=3).map(tuple),
        st.dictionaries(st.sampled_from(KEYS) | st.integers(-1, 5) | st.text(max_size=8), v,
                        max_size=4)), max_leaves=12)


def _paths(obj, prefix=(), depth=0, out=None) -> list[tuple]:
    out = [] if out is None else out
    out.append(prefix)
    if depth < 10 and len(out) < 2000:
        if type(obj) is dict:
            for k, v in obj.items():
                _paths(v, prefix + (k,), depth + 1, out)
        elif type(obj) in (list, tuple):
            for i, v in enumerate(obj):
                _paths(v, prefix + (i,), depth + 1, out)
    return out


_DROP = object()


def _replace(obj, path: tuple, value):
    """A copy of obj with the value at path replaced (or dropped); copies only along the path."""
    if not path:
        return value
    key, rest = path[0], path[1:]
    if type(obj) is dict:
        new = dict(obj)
        sub = _replace(obj[key], rest, value)
        if sub is _DROP:
            new.pop(key)
        else:
            new[key] = sub
        return new
    items = list(obj)
    sub = _replace(items[key], rest, value)
    if sub is _DROP:
        del items[key]
    else:
        items[key] = sub
    return tuple(items) if type(obj) is tuple else items


def _reshape(v, json_only: bool = False):
    """The same content in another kind of container (or a tensor's shape instead of it)."""
    if type(v) is dict:
        return list(v.values())
    if type(v) in (list, tuple):
        return {str(i) if json_only else i: x for i, x in enumerate(v)}
    if hasattr(v, "shape") and hasattr(v, "dtype"):
        return list(v.shape)
    return [v]


@st.composite
def damaged_tree(draw, obj, max_edits: int = 3, values=None, json_only: bool = False):
    """obj with up to max_edits values replaced (by `values`, default junk()), dropped or
    re-shaped at random paths; `json_only` keeps it JSON (string keys)."""
    values = junk() if values is None else values
    for _ in range(draw(st.integers(1, max_edits))):
        paths = _paths(obj)
        path = draw(st.sampled_from(paths))
        how = draw(st.sampled_from(["junk", "junk", "drop", "reshape", "none"]))
        if how == "drop" and path:
            obj = _replace(obj, path, _DROP)
        elif how == "reshape":
            obj = _replace(obj, path, _reshape(_get(obj, path), json_only))
        elif how == "none":
            obj = _replace(obj, path, None)
        else:
            obj = _replace(obj, path, draw(values))
    return obj


def _get(obj, path):
    for k in path:
        obj = obj[k]
    return obj


def torch_bytes(obj, legacy: bool = False) -> bytes:
    import torch

    buf = io.BytesIO()
    torch.save(obj, buf, _use_new_zipfile_serialization=not legacy)
    return buf.getvalue()


# -- zip archives ------------------------------------------------------------------------------

def members(data: bytes) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return [(i.filename, zf.read(i)) for i in zf.infolist()]


def build_zip(entries: list[tuple[str, bytes, int]]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data, method in entries:
            info = zipfile.ZipInfo(name)
            info.compress_type = method
            zf.writestr(info, data)
    return buf.getvalue()


@st.composite
def damaged_members(draw, entries: list[tuple[str, bytes]], pickles) -> bytes:
    """Rebuild a torch zip after member-level damage."""
    rows = [(n, d, zipfile.ZIP_STORED) for n, d in entries]
    for _ in range(draw(st.integers(1, 3))):
        if not rows:
            break
        i = draw(st.integers(0, len(rows) - 1))
        name, data, method = rows[i]
        how = draw(st.sampled_from(["pickle", "flip", "resize", "compress", "rename", "drop",
                                    "extra", "dup", "root", "byteorder"]))
        if how == "pickle":  # data.pkl replaced by a grammar program, or damaged in place
            j = next((k for k, r in enumerate(rows) if r[0].endswith("/data.pkl")), i)
            name, data, method = rows[j]
            new = draw(pickles) if draw(st.booleans()) else draw(damaged_bytes(data))
            rows[j] = (name, new, method)
        elif how == "flip":
            rows[i] = (name, draw(damaged_bytes(data)), method)
        elif how == "resize":
            n = draw(st.integers(0, max(0, 2 * len(data) + 8)))
            rows[i] = (name, (data * 3)[:n] if data else b"\0" * n, method)
        elif how == "compress":
            rows[i] = (name, data, zipfile.ZIP_DEFLATED)
        elif how == "rename":
            new = draw(st.sampled_from(["../evil", "/abs/data.pkl", "archive/data/../../x",
                                        "other/data.pkl", "archive\\data.pkl", "", "archive/"]))
            rows[i] = (new or name + "~", data, method)
        elif how == "drop":
            del rows[i]
        elif how == "extra":
            root = rows[0][0].split("/", 1)[0]
            rows.insert(draw(st.integers(0, len(rows))),
                        (f"{root}/{draw(st.sampled_from(['data/99', 'data/0', 'data.pkl', 'x']))}",
                         draw(st.binary(max_size=64)), zipfile.ZIP_STORED))
        elif how == "dup":
            rows.append(rows[i])
        elif how == "root":
            rows = [("zz/" + r[0].split("/", 1)[-1], r[1], r[2]) for r in rows]
        else:
            rows = [(r[0], draw(st.sampled_from([b"big", b"", b"little\n", b"x" * 40]))
                     if r[0].endswith("/byteorder") else r[1], r[2]) for r in rows]
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about duplicate names
        return build_zip(rows)


def central_directory(data: bytes) -> tuple[int, int] | None:
    """(start, end) of the central directory, from the end record."""
    at = data.rfind(b"PK\x05\x06")
    if at < 0 or at + 22 > len(data):
        return None
    size, offset = struct.unpack("<II", data[at + 12:at + 20])
    return (offset, at + 22) if offset <= at else None


@st.composite
def damaged_central_directory(draw, data: bytes) -> bytes:
    """Flip bytes inside the central directory, or claim huge sizes and offsets in its records."""
    span = central_directory(data)
    if span is None:
        return draw(damaged_bytes(data))
    if draw(st.booleans()):
        return draw(damaged_bytes(data, region=span))
    out = bytearray(data)
    records = [i for i in range(span[0], span[1]) if out[i:i + 4] == b"PK\x01\x02"]
    if not records:
        return bytes(out)
    rec = draw(st.sampled_from(records))
    # compressed and plain sizes, local header offset, name and extra lengths, method, flags
    field = draw(st.sampled_from([(20, "<I"), (24, "<I"), (42, "<I"), (28, "<H"), (30, "<H"),
                                  (10, "<H"), (8, "<H")]))
    value = draw(st.sampled_from([0, 1, 2**16 - 1, 2**31, 2**32 - 1, 0xFFFFFFFF]))
    if field[1] == "<H":
        value &= 0xFFFF
    struct.pack_into(field[1], out, rec + field[0], value)
    return bytes(out)
