"""What `export` writes: every weight of a checkpoint, named as the model's state_dict names it,
each with where its bytes are. Tensor bytes are read only to tell a copy of a tensor that
another file holds from a shard of it (their first 64 KiB).

The names come from the same recognition as everything else (parts.tag): a Lightning
`state_dict.`, a training dict's `model.`, a pickled module's records and the wrappers
`module.` and `_orig_mod.` are taken off. A DeepSpeed ZeRO checkpoint gives its fp32 master
weights, rebuilt from the optimizer's partitions (export.zero).
"""

from __future__ import annotations

import fnmatch
import math
import os
from dataclasses import dataclass, field, replace

from ckpt_browser import alarms
from ckpt_browser.errors import UsageError
from ckpt_browser.export.item import Item
from ckpt_browser.model import Checkpoint, FileInfo, Problem
from ckpt_browser.parts.tag import named_weights, part_weights
from ckpt_browser.values.locate import TensorLoc, all_locs

FLOATS = {"F64", "F32", "F16", "BF16"}  # what --dtype casts; integers and FP8 stay as stored
DTYPES = {"fp32": "F32", "fp16": "F16", "bf16": "BF16"}
# what safetensors 0.8 stores (safetensors.torch._TYPES): complex128, quantized, bit types not
SAFETENSORS_DTYPES = {"BOOL", "U8", "I8", "U16", "I16", "U32", "I32", "U64", "I64", "F16",
                      "BF16", "F32", "F64", "C64", "F8_E4M3", "F8_E5M2", "F8_E4M3FNUZ",
                      "F8_E5M2FNUZ"}


@dataclass
class Options:
    dtype: str | None = None  # "F32" ...: cast floating weights to it
    include: list[str] = field(default_factory=list)  # globs of output names
    exclude: list[str] = field(default_factory=list)
    strip_prefix: str = ""
    ema: bool = False  # the EMA copy instead of the model


@dataclass
class Plan:
    items: list[Item]
    left_out: list[tuple[str, str]]  # (name, why): what could not be read
    notes: list[str]  # tied tensors, duplicates, where the weights came from
    problems: list[Problem]  # the source's error-level problems (damaged, unsafe)

    @property
    def whole(self) -> bool:
        """Every weight can be written and the source has no error-level problem."""
        return not (self.left_out or self.problems)

    @property
    def params(self) -> int:
        return sum(math.prod(i.shape) for i in self.items if i.same_as is None)

    @property
    def adapter(self) -> bool:
        """Only a LoRA adapter's tensors: written under PEFT's names (write.stem_for)."""
        return bool(self.items) and all(is_lora(i.name) for i in self.items)

    @property
    def nbytes(self) -> int:
        return sum(out_bytes(i) for i in self.items if i.same_as is None)


def out_bytes(item: Item) -> int:
    from ckpt_browser.readers.pickle_safe import ITEMSIZE

    return math.prod(item.shape) * ITEMSIZE.get(item.dtype, 1)


def plan(ckpt: Checkpoint, opts: Options, where: str) -> Plan:
    """The export of `ckpt`; `where` names it in messages. UsageError when nothing is left."""
    notes: list[str] = []
    items = _zero(ckpt, notes) if not opts.ema else None
    if items is None:
        items = _without_adapters(_weights(ckpt, opts, notes), notes)
    items = _select(items, opts, where)
    items = _tie(items, notes)
    if opts.dtype:
        items = [replace(i, dtype=opts.dtype) if i.loc.dtype in FLOATS else i for i in items]
    items = [_short(_storable(i)) for i in items]
    left = [(i.name, i.loc.problem) for i in items if i.loc.problem]
    left += _unread_index_names(ckpt, {i.loc.name for i in items}, opts)
    items = [i for i in items if not i.loc.problem]
    problems = alarms.errors(ckpt.problems)
    if not items and not left:
        raise UsageError(where, "holds no weights to export" + (
            " (--ema: no EMA copy in it)" if opts.ema else ""))
    return Plan(items, left, notes, problems)


def _storable(i: Item) -> Item:
    if i.dtype in SAFETENSORS_DTYPES or i.loc.problem:
        return i
    return replace(i, loc=replace(i.loc, pieces=(), problem=(
        f"{i.dtype} has no safetensors dtype (complex128, quantized and bit types do not)")))


def _short(i: Item) -> Item:
    """A tensor whose bytes run past the end of its file (a truncated shard) is left out."""
    from ckpt_browser.values.read import ValuesError, check_ends

    try:
        check_ends(i.loc)
    except ValuesError as e:
        return replace(i, loc=replace(i.loc, pieces=(), problem=str(e)))
    return i


def _unread_index_names(ckpt: Checkpoint, have: set[str], opts: Options
                        ) -> list[tuple[str, str]]:
    """Weights the index names in a file that could not be read (missing, damaged)."""
    index = ckpt.layout.index
    if index is None or opts.ema:
        return []
    read = {f.name for f in ckpt.files if f.ok and f.format == "safetensors"}
    why = {}
    for p in reversed(ckpt.problems):  # the first error said about each file
        if p.severity == "error" and p.file:
            why[p.file] = p.message
    return [(name, f"{file}: {why.get(file, 'could not be read')}")
            for name, file in index.weight_map.items()
            if name not in have and file not in read and _wanted(name, opts)]


def _stripped(name: str, opts: Options) -> str:
    return name.removeprefix(opts.strip_prefix) if opts.strip_prefix else name


def _wanted(name: str, opts: Options) -> bool:
    name = _stripped(name, opts)
    return (not opts.include or any(fnmatch.fnmatchcase(name, g) for g in opts.include)) \
        and not any(fnmatch.fnmatchcase(name, g) for g in opts.exclude)


def _zero(ckpt: Checkpoint, notes: list[str]) -> list[Item] | None:
    """A DeepSpeed ZeRO checkpoint's fp32 master weights, as zero_to_fp32 rebuilds them."""
    try:
        from ckpt_browser.export.zero import zero_items
    except ImportError:  # not built yet
        return None
    found = zero_items(ckpt)
    if found is None:
        return None
    items, said = found
    notes.extend(said)
    return items


def _weights(ckpt: Checkpoint, opts: Options, notes: list[str]) -> list[Item]:
    """Every file's weights (or its EMA), under their parameter names; the first file that
    holds a name gives it, unless another file holds a different tensor under that name
    (tensor-parallel shards: not joined, so left out)."""
    by_loc = {(loc.file, loc.name): loc for loc in all_locs(ckpt)}
    first: dict[str, int] = {}  # name -> its item
    items: list[Item] = []
    twice = 0
    for f in ckpt.files:
        for name, t in _named(f, opts.ema):
            loc = by_loc.get((f.name, t.name))
            if loc is None or loc.placeholder:
                continue
            if name not in first:
                first[name] = len(items)
                items.append(Item(name, loc, tuple(loc.shape), loc.dtype))
                continue
            twice += 1
            kept = items[first[name]]
            why = _differs(kept.loc, loc)
            if why and not kept.loc.problem:
                items[first[name]] = replace(kept, loc=replace(kept.loc, pieces=(), problem=(
                    f"{kept.loc.file} and {loc.file} hold different tensors under this name "
                    f"({why}): shards of one (tensor parallel?), which export does not join")))
    if twice:
        notes.append(f"{twice:,} weight(s) held by more than one file: taken from the first "
                     "file, after checking the copies have its shape, dtype and first bytes")
    return items


def is_lora(name: str) -> bool:
    return "lora_" in name.lower()  # PEFT's lora_A/lora_B, torchtune's lora_a/lora_b


def _without_adapters(items: list[Item], notes: list[str]) -> list[Item]:
    """A LoRA adapter saved beside the model it trained (torchtune's adapter_model.pt beside
    the merged model): the model is the export; the adapter, a file of its own, is said."""
    by_file: dict[str, list[Item]] = {}
    for i in items:
        by_file.setdefault(i.loc.file, []).append(i)
    adapters = [f for f, held in by_file.items() if all(is_lora(i.name) for i in held)]
    if not adapters or len(adapters) == len(by_file):
        return items
    notes.append(f"{', '.join(adapters)}: a LoRA adapter beside the model, left out (export "
                 "that file alone for the adapter)")
    return [i for i in items if i.loc.file not in adapters]


HEAD = 64 * 1024  # bytes of two copies compared: shards of one tensor differ from the start


def _differs(a: TensorLoc, b: TensorLoc) -> str:
    """Why two tensors of one name are not copies of each other ("" when they look alike):
    shape, dtype, or their first bytes (a replicated LayerNorm is equal in every shard)."""
    if (a.shape, a.dtype) != (b.shape, b.dtype):
        return f"{a.dtype} {list(a.shape)} and {b.dtype} {list(b.shape)}"
    if a.problem or b.problem:
        return ""
    from ckpt_browser.values.read import ValuesError, iter_raw

    try:
        heads = [next(iter(iter_raw(x, HEAD)), (None, None))[1] for x in (a, b)]
    except ValuesError as e:
        return f"unreadable: {e}"
    if heads[0] is None or heads[1] is None:
        return ""
    return "" if heads[0].tobytes() == heads[1].tobytes() else "their values differ"


def _named(f: FileInfo, ema: bool) -> list[tuple[str, object]]:
    if not ema:
        return named_weights(f)
    if f.format == "safetensors":  # an EMA copy kept apart (diffusers' unet_ema/)
        return [(t.name, t) for t in f.tensors if t.component == "ema"]
    return [x for p in f.parts if p.kind == "ema" for x in part_weights(f, p)]


def config_folder(plan: Plan) -> str:
    """The folder, relative to the checkpoint's, that the exported weights all come from
    ("unet_ema" for diffusers' EMA, "" most often): its config goes beside them."""
    folders = {os.path.dirname(i.loc.file) for i in plan.items}
    return folders.pop() if len(folders) == 1 else ""


def _select(items: list[Item], opts: Options, where: str) -> list[Item]:
    out = []
    for i in items:
        if not _wanted(i.name, opts):
            continue
        name = _stripped(i.name, opts)
        out.append(replace(i, name=name) if name != i.name else i)
    if items and not out:
        raise UsageError(where, "--include/--exclude leave no tensor to export")
    names = [i.name for i in out]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise UsageError(where, f"two tensors would both be named {dup!r} (--strip-prefix?)")
    return out


def _tie(items: list[Item], notes: list[str]) -> list[Item]:
    """Two names of one storage (tied embeddings) are written once, as safetensors'
    save_model does: the later name is marked `same_as` the first."""
    first: dict[tuple, str] = {}
    out = []
    for i in items:
        if i.same_as is not None:  # tied by its producer (ZeRO's shared_params), said there
            out.append(i)
            continue
        key = _storage_key(i.loc)
        if key is not None and key in first:
            out.append(replace(i, same_as=first[key]))
            notes.append(f"{i.name} is the same storage as {first[key]} (tied): stored once, "
                         f"as {first[key]}")
            continue
        if key is not None:
            first[key] = i.name
        out.append(i)
    return out


def _storage_key(loc: TensorLoc) -> tuple | None:
    if loc.problem or not loc.pieces:
        return None
    return (loc.dtype, tuple(loc.shape), loc.stride,
            tuple((p.path, p.offset, p.length, p.offsets, p.sizes) for p in loc.pieces))
