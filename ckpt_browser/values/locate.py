"""Where each tensor's bytes are: one place for safetensors, torch files and DCP folders.

A `TensorLoc` names a tensor the way its checkpoint does and lists the byte ranges ("pieces")
that hold it. A safetensors or torch tensor is one piece; a DCP tensor is one piece per saved
chunk, each placed in the global tensor by its offsets. Nothing here reads tensor bytes.
"""

from __future__ import annotations

import fnmatch
import math
import os
from dataclasses import dataclass

from ckpt_browser.errors import UsageError
from ckpt_browser.model import Checkpoint, TrainingState
from ckpt_browser.readers.pickle_safe import ITEMSIZE


@dataclass(frozen=True, slots=True)
class Piece:
    path: str  # the file, as a path that can be opened
    offset: int  # absolute byte offset of the piece's first element in that file
    length: int  # bytes
    offsets: tuple[int, ...]  # where the piece sits in the global tensor
    sizes: tuple[int, ...]  # the piece's shape


@dataclass(frozen=True, slots=True)
class TensorLoc:
    name: str  # as the checkpoint names it (state-dict key, DCP key, dotted path in a .pt)
    dtype: str  # safetensors spelling; torch-only tags such as C128 too
    shape: tuple[int, ...]
    file: str  # relative to the checkpoint folder; a DCP tensor names its folder's .metadata
    component: str | None  # "weights", "optimizer" ... (None when no training state was read)
    pieces: tuple[Piece, ...] = ()
    stride: tuple[int, ...] | None = None  # a torch view that is not contiguous; pieces[0] is
    #                                       its whole storage from the view's first element
    problem: str | None = None  # why the bytes cannot be read; pieces is then empty
    key: str = ""  # the name a diff pairs it by (parts.tag.match_keys), else name
    placeholder: bool = False  # a ZeRO-3 placeholder: `problem` says where the values are

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * ITEMSIZE.get(self.dtype, 1)

    @property
    def files(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p.path for p in self.pieces))


def _contiguous(shape: tuple[int, ...], stride: tuple[int, ...]) -> bool:
    expect = 1
    for size, step in zip(reversed(shape), reversed(stride)):
        if size != 1 and step != expect:
            return False
        expect *= size
    return True


def safetensors_locs(ckpt: Checkpoint) -> list[TensorLoc]:
    out = []
    for shard in ckpt.shards:
        if shard.header_bytes is None:
            continue
        start = 8 + shard.header_bytes
        path = os.path.join(ckpt.layout.root, shard.name)
        # an EMA copy kept apart names its tensors as the model does: paired by its folder
        folder = os.path.dirname(shard.name) if shard.name in ckpt.layout.apart else ""
        for name, dtype, shape, file, begin, end, _, kind, _, _ in shard.tensors:
            out.append(TensorLoc(name, dtype, shape, file, kind,
                                 (Piece(path, start + begin, end - begin, (0,) * len(shape),
                                        shape),), key=f"{folder}/{name}" if folder else ""))
    return out


def state_locs(ckpt: Checkpoint) -> list[TensorLoc]:
    """Tensors of every torch file and DCP folder of the checkpoint."""
    from dataclasses import replace

    from ckpt_browser.parts.tag import match_keys
    from ckpt_browser.standins import DcpCheckpoint, PickleFile

    out = []
    placeholders: set[str] = set()  # every ZeRO-3 rank saves the same ones: the first stands
    for f in ckpt.files:
        kinds = {t.name: t.component for t in f.tensors}
        if isinstance(f.source, PickleFile):
            keys = match_keys(f)
            for loc in _pickle_locs(ckpt.layout.root, f.source, kinds,
                                    {t.name: t for t in f.tensors if not t.located}):
                if loc.placeholder:
                    if loc.name in placeholders:
                        continue
                    placeholders.add(loc.name)
                out.append(replace(loc, key=keys.get(loc.name, "")))
        elif isinstance(f.source, DcpCheckpoint):
            d = f.source
            folder = os.path.join(ckpt.layout.root, d.folder)
            for key, e in d.entries.items():
                if e.kind != "tensor" or e.shape is None:
                    continue
                out.append(_dcp_loc(key, e, f.name, folder, kinds.get(key, "other"), d.files))
    return out


def _pickle_locs(root: str, pf, kinds: dict[str, str], shown: dict | None = None
                 ) -> list[TensorLoc]:
    path = os.path.join(root, pf.name)
    out = []
    for key, t in pf.tensors:
        comp = kinds.get(key, "other")
        real = (shown or {}).get(key)
        if real is not None and real.placeholder:
            out.append(TensorLoc(key, t.dtype, tuple(real.shape), pf.name, comp,
                                 problem="ZeRO-3 partitions this parameter: this file holds a "
                                 "0-element placeholder; its values are in the optim_states "
                                 "files (zero_to_fp32.py rebuilds it)", placeholder=True))
            continue
        out.append(pickle_loc(path, pf, key, t, comp))
    return out


def pickle_loc(path: str, pf, key: str, t, comp: str | None) -> TensorLoc:
    """Where one tensor of a read torch file is (`path`: the file, as it can be opened)."""
    itemsize = ITEMSIZE.get(t.dtype, 1)
    record = pf.storages.get(t.storage_key)
    if record is None:
        return TensorLoc(key, t.dtype, t.shape, pf.name, comp,
                         problem=f"storage {t.storage_key} was not found in the file")
    begin = record[0] + t.storage_offset * itemsize
    contiguous = _contiguous(t.shape, t.stride)
    if contiguous:
        length = t.numel * itemsize
    else:  # the view reaches as far as its largest index
        span = 1 + sum((d - 1) * s for d, s in zip(t.shape, t.stride)) if t.numel else 0
        length = span * itemsize
    if begin + length > record[0] + record[1]:
        return TensorLoc(key, t.dtype, t.shape, pf.name, comp,
                         problem=f"needs bytes past the end of storage {t.storage_key}")
    return TensorLoc(key, t.dtype, t.shape, pf.name, comp,
                     (Piece(path, begin, length, (0,) * len(t.shape), t.shape),),
                     None if contiguous else t.stride)


def _dcp_loc(key, e, metadata: str, folder: str, comp, files: dict) -> TensorLoc:
    itemsize = ITEMSIZE.get(e.dtype, 1)
    if not e.chunks:
        return TensorLoc(key, e.dtype, tuple(e.shape), metadata, comp,
                         problem="the metadata lists no chunk of it")
    pieces = []
    for c in e.chunks:
        n = math.prod(c.sizes)
        if c.file is None or c.offset is None or c.length is None:
            return TensorLoc(key, e.dtype, e.shape, metadata, comp,
                             problem=f"a chunk at {list(c.offsets)} has no rank file recorded")
        if c.file not in files:
            return TensorLoc(key, e.dtype, e.shape, metadata, comp,
                             problem=f"rank file {c.file} is missing")
        if c.length < n * itemsize or c.offset + c.length > files[c.file]:
            return TensorLoc(key, e.dtype, e.shape, metadata, comp,
                             problem=f"the chunk in {c.file} is shorter than its "
                             f"{n:,} elements need")
        pieces.append(Piece(os.path.join(folder, c.file), c.offset, c.length,
                            tuple(c.offsets), tuple(c.sizes)))
    return TensorLoc(key, e.dtype, tuple(e.shape), metadata, comp, tuple(pieces))


def all_locs(ckpt: Checkpoint | None, training: TrainingState | None = None) -> list[TensorLoc]:
    """Every tensor of a checkpoint: safetensors weights first, then the other files'."""
    if ckpt is None:
        return []
    return safetensors_locs(ckpt) + state_locs(ckpt)


def select(locs: list[TensorLoc], patterns: list[str], where: str) -> list[TensorLoc]:
    """The tensors named by `patterns` (exact names or globs, of full names or of the names
    a diff pairs them by), in order, each once.

    No patterns: every weight tensor. A pattern that matches nothing is a UsageError naming
    `where` (the checkpoint) with the closest names.
    """
    if not patterns:
        weights = [x for x in locs if x.component in ("weights", None)]
        if not weights:
            raise UsageError(where, "holds no weight tensors; name the tensors to read")
        return weights
    by_name = {x.name: x for x in reversed(locs)}
    out: dict[str, TensorLoc] = {}
    for pattern in patterns:
        # the full name, else the name a diff prints (a weight's parameter name: model.0.bias
        # for ema.model.0.bias when the EMA is the weights)
        hits = ([by_name[pattern]] if pattern in by_name
                else [x for x in locs if fnmatch.fnmatchcase(x.name, pattern)]
                or [x for x in locs if x.key and fnmatch.fnmatchcase(x.key, pattern)])
        if not hits:
            import difflib

            close = difflib.get_close_matches(pattern, list(by_name), n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise UsageError(where, f"no tensor named or matching {pattern!r}{hint}")
        for x in hits:
            out.setdefault(f"{x.file}:{x.name}", x)
    return list(out.values())
