"""The fp32 master weights of a DeepSpeed ZeRO checkpoint, as zero_to_fp32.py rebuilds them.

`zero_items` gives the state dict that DeepSpeed's `get_fp32_state_dict_from_zero_checkpoint`
returns, name for name, in its order, as Items whose bytes stay in the rank files: buffers from
the first model_states file (floating ones cast to F32, as its `.float()` does), frozen
parameters from `frozen_param_fragments` in their saved dtype, trainable parameters from the
optim_states files' flat fp32 partitions (zero_pieces), then `shared_params` as tied names.
Only the inert records of the safe reader are used; no tensor byte is read here.
"""

from __future__ import annotations

import itertools
import math
import re

from ckpt_browser.errors import CheckpointError
from ckpt_browser.export.item import Item
from ckpt_browser.export.zero_files import TagFiles, tag_files
from ckpt_browser.export.zero_pieces import Flat, Param, gathered, zero2_params, zero3_params
from ckpt_browser.model import Checkpoint
from ckpt_browser.parts.common import as_int, fields
from ckpt_browser.standins import Opaque, TensorRef
from ckpt_browser.values.locate import TensorLoc, pickle_loc

_IDS = itertools.count()  # one per tensor zero_to_fp32 makes; a tied name shares its target's
FLOATS = re.compile(r"^(F\d+|BF16|F8_.*)$")  # what torch's is_floating_point() says yes to


def zero_items(ckpt: Checkpoint) -> tuple[list[Item], list[str]] | None:
    """The fp32 state dict of a ZeRO stage 1, 2 or 3 checkpoint and notes for the user; None
    when `ckpt` is not one. Raises CheckpointError (one line, naming the file) when its files
    do not fit together."""
    tf = tag_files(ckpt)
    if tf is None:
        return None
    osd = fields(fields(tf.optim[0].obj).get("optimizer_state_dict"))
    if not osd:
        raise CheckpointError(tf.optim[0].name, "holds no optimizer_state_dict")
    stage = _stage(osd.get("zero_stage"))
    if stage is None:  # a BF16_Optimizer state: zero_to_fp32 says "not a zero checkpoint"
        return None
    world = _world(tf, osd, stage)
    ms = fields(tf.model[0].obj)
    entries: dict[str, tuple[Item, int]] = {}  # name -> (item, identity of its tensor)
    notes = [f"DeepSpeed ZeRO stage {stage}, {world} data-parallel ranks: fp32 master weights "
             f"from the {world} optim_states files, as zero_to_fp32.py rebuilds them"]
    notes += _buffers(tf, ms, entries)
    notes += _frozen(tf, ms, stage, entries)
    for p in _trainable(tf, ms, stage, world):
        _put(entries, _item(p, tf.optim[0].name))
    notes += _shared(tf, ms, entries)
    notes += _left_out(tf, ms, entries)
    return _tied(list(entries.values())), notes


# --- what the optim_states files say ---------------------------------------------------------

def _stage(v) -> int | None:
    if isinstance(v, Opaque) and v.qualname.endswith("ZeroStageEnum") and len(v.args) == 1:
        v = v.args[0]
    return as_int(v)


def _world(tf: TagFiles, osd: dict, stage: int) -> int:
    first = tf.optim[0].name
    if stage not in (1, 2, 3):
        raise CheckpointError(first, f"zero_stage is {stage}; zero_to_fp32 knows 1, 2 and 3")
    counts = osd.get("partition_count")
    counts = counts if isinstance(counts, list) else [counts]
    if not counts or any(as_int(c) is None or c < 1 for c in counts):
        raise CheckpointError(first, "partition_count is not a positive number of ranks")
    world = max(counts)  # expert groups may be split fewer ways (zero_to_fp32 takes the max)
    tf.check_ranks(world)
    for pf in tf.optim[1:]:
        other = fields(fields(pf.obj).get("optimizer_state_dict"))
        if _stage(other.get("zero_stage")) != stage or other.get("partition_count") != \
                osd.get("partition_count"):
            raise CheckpointError(pf.name, "its zero_stage or partition_count differs from "
                                  f"{first}'s: files of two different saves")
    dp = as_int(fields(tf.model[0].obj).get("dp_world_size"))
    if dp is not None and dp != world:
        raise CheckpointError(tf.model[0].name, f"dp_world_size is {dp}; the optim_states "
                              f"files are partitioned {world} ways")
    return world


def _flats(tf: TagFiles, stage: int) -> list[list[Flat]]:
    key = "single_partition_of_fp32_groups" if stage <= 2 else "fp32_flat_groups"
    out: list[list[Flat]] = []
    for pf, path in zip(tf.optim, tf.optim_paths):
        groups = fields(fields(pf.obj).get("optimizer_state_dict")).get(key)
        if not isinstance(groups, list) or not groups:
            raise CheckpointError(pf.name, f"holds no {key}: no fp32 master weights")
        out.append([_flat(pf, path, t, key) for t in groups])
        if len(out[-1]) != len(out[0]):
            raise CheckpointError(pf.name, f"{len(out[-1])} parameter groups; "
                                  f"{tf.optim[0].name} has {len(out[0])}")
        if {f.dtype for f in out[-1]} != {out[0][0].dtype}:
            raise CheckpointError(pf.name, f"{key} mixes dtypes")
    return out


def _flat(pf, path: str, t, key: str) -> Flat:
    if not isinstance(t, TensorRef) or len(t.shape) != 1 or (t.stride != (1,) and t.numel > 1):
        raise CheckpointError(pf.name, f"{key} holds something other than flat 1-D tensors")
    loc = pickle_loc(path, pf, key, t, "optimizer")
    if loc.problem or t.dtype not in ("F32", "F16", "BF16", "F64"):
        raise CheckpointError(pf.name, f"{key}: {loc.problem or f'{t.dtype} partitions'}")
    return Flat(path, pf.name, loc.pieces[0].offset if loc.pieces else 0, t.numel, t.dtype)


# --- the state dict, part by part, in zero_to_fp32's order --------------------------------------

def _shapes(v, what: str, where: str) -> list[tuple[str, tuple[int, ...]]]:
    out = []
    for name, shape in fields(v).items():
        if type(name) is not str or type(shape) not in (tuple, list) or \
                not all(type(d) is int and d >= 0 for d in shape):
            raise CheckpointError(where, f"{what} has an entry that is not a name and a shape")
        out.append((name, tuple(shape)))
    return out


def _trainable(tf: TagFiles, ms: dict, stage: int, world: int) -> list[Param]:
    where = tf.model[0].name
    groups = ms.get("param_shapes")
    if not isinstance(groups, list):
        raise CheckpointError(where, "param_shapes is not a list of parameter groups")
    shapes = [_shapes(g, "param_shapes", where) for g in groups]
    ranks = _flats(tf, stage)
    if stage == 3:
        merged = [s for g in shapes for s in g]
        if len({n for n, _ in merged}) != len(merged):
            raise CheckpointError(where, "param_shapes names a parameter twice")
        return zero3_params(merged, ranks)
    if len(shapes) != len(ranks[0]):
        raise CheckpointError(where, f"param_shapes has {len(shapes)} parameter groups; "
                              f"the optim_states files {len(ranks[0])}")
    osd = fields(fields(tf.optim[0].obj).get("optimizer_state_dict"))
    return zero2_params(shapes, ranks, _paddings(osd.get("param_alignment_paddings"),
                                                tf.optim[0].name))


def _paddings(v, where: str) -> list[list[int]] | None:
    if v is None:
        return None
    if not isinstance(v, list) or not all(
            isinstance(g, list) and all(as_int(x) is not None and x >= 0 for x in g) for g in v):
        raise CheckpointError(where, "param_alignment_paddings is not a list of counts")
    return v


def _buffers(tf: TagFiles, ms: dict, entries: dict) -> list[str]:
    names = ms.get("buffer_names")
    wanted = set(n for n in names if type(n) is str) if isinstance(names, list) else set()
    pf, path = tf.model[0], tf.model_paths[0]
    cast = []
    for name, t in fields(ms.get("module")).items():
        if name not in wanted:
            continue
        if not isinstance(t, TensorRef):
            raise CheckpointError(pf.name, f"the buffer {name} is not a tensor")
        loc = _checked(pickle_loc(path, pf, name, t, "weights"))
        dtype = "F32" if FLOATS.match(t.dtype) else t.dtype  # zero_to_fp32: v.float()
        if dtype != t.dtype:
            cast.append(f"{name} ({t.dtype})")
        _put(entries, Item(name, loc, t.shape, dtype))
    if not cast:
        return []
    return [f"buffers cast to F32 as zero_to_fp32 does: {', '.join(cast)}"]


def _frozen(tf: TagFiles, ms: dict, stage: int, entries: dict) -> list[str]:
    shapes = _shapes(ms.get("frozen_param_shapes"), "frozen_param_shapes", tf.model[0].name)
    if not shapes:
        return []
    if stage == 3:
        tf.check_model_ranks()
    dtypes = set()
    for name, shape in shapes:
        if stage <= 2:
            item = _fragment(tf, 0, name, shape)
        else:
            parts = [_fragment_flat(tf, r, name) for r in range(len(tf.model))]
            item = _item(gathered(name, shape, parts), tf.model[0].name)
        dtypes.add(item.dtype)
        _put(entries, item)
    return [f"{len(shapes)} frozen parameters from the model_states files, in their saved "
            f"dtype ({', '.join(sorted(dtypes))}) as zero_to_fp32 gives them"]


def _fragment_ref(tf: TagFiles, r: int, name: str) -> TensorRef:
    t = fields(fields(tf.model[r].obj).get("frozen_param_fragments")).get(name)
    if not isinstance(t, TensorRef):
        raise CheckpointError(tf.model[r].name, f"frozen_param_fragments has no tensor {name}")
    return t


def _fragment(tf: TagFiles, r: int, name: str, shape: tuple[int, ...]) -> Item:
    t = _fragment_ref(tf, r, name)
    if t.shape != shape:
        raise CheckpointError(tf.model[r].name, f"the frozen parameter {name} is "
                              f"{list(t.shape)}; frozen_param_shapes says {list(shape)}")
    loc = _checked(pickle_loc(tf.model_paths[r], tf.model[r], name, t, "weights"))
    return Item(name, loc, t.shape, t.dtype)


def _fragment_flat(tf: TagFiles, r: int, name: str) -> Flat:
    t = _fragment_ref(tf, r, name)
    pf = tf.model[r]
    if len(t.shape) != 1 or (t.stride != (1,) and t.numel > 1):
        raise CheckpointError(pf.name, f"the fragment of {name} is not a flat 1-D tensor")
    loc = _checked(pickle_loc(tf.model_paths[r], pf, name, t, "weights"))
    return Flat(tf.model_paths[r], pf.name, loc.pieces[0].offset if loc.pieces else 0,
                t.numel, t.dtype)


def _shared(tf: TagFiles, ms: dict, entries: dict) -> list[str]:
    shared = fields(ms.get("shared_params"))
    notes = []
    for name, target in shared.items():
        if type(name) is not str or type(target) is not str:
            raise CheckpointError(tf.model[0].name, "shared_params is not a map of names")
        if target in entries:  # as zero_to_fp32: a tie to a name it does not have is dropped
            item, ident = entries[target]
            old = entries.get(name)
            entries[name] = (Item(name, item.loc, item.shape, item.dtype), ident)
            if old is None:
                notes.append(f"{name} is tied to {target}: stored once")
    return notes


def _left_out(tf: TagFiles, ms: dict, entries: dict) -> list[str]:
    """Module tensors zero_to_fp32 does not return (frozen parameters ZeRO-1 does not save)."""
    gone = [n for n in fields(ms.get("module")) if n not in entries]
    if not gone:
        return []
    shown = ", ".join(gone[:8]) + (f" and {len(gone) - 8} more" if len(gone) > 8 else "")
    return [f"left out, as zero_to_fp32 leaves them out (not in its param_shapes, "
            f"frozen_param_shapes, buffer_names or shared_params): {shown}"]


# --- helpers --------------------------------------------------------------------------------

def _put(entries: dict, item: Item) -> None:
    entries[item.name] = (item, next(_IDS))


def _tied(entries: list[tuple[Item, int]]) -> list[Item]:
    """One storage per tensor: a name that shares another's tensor names the first."""
    first: dict[int, str] = {}
    out = []
    for item, ident in entries:
        owner = first.setdefault(ident, item.name)
        out.append(item if owner == item.name else
                   Item(item.name, item.loc, item.shape, item.dtype, owner))
    return out


def _item(p: Param, file: str) -> Item:
    loc = TensorLoc(p.name, p.dtype, (math.prod(p.shape),), file, "weights", p.pieces)
    return Item(p.name, loc, p.shape, p.dtype)


def _checked(loc: TensorLoc) -> TensorLoc:
    if loc.problem:
        raise CheckpointError(loc.file, f"{loc.name}: {loc.problem}")
    return loc

