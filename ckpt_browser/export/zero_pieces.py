"""Where each parameter's fp32 elements are in DeepSpeed ZeRO's flat rank partitions.

Pure arithmetic on sizes and byte offsets, mirroring deepspeed/utils/zero_to_fp32.py:
`_zero2_merge_trainable_params` (stages 1 and 2), `_zero3_merge_trainable_params` with its
GatheredTensor and `zero3_partitioned_param_info` (stage 3). Every element count comes from
the files' own tensor shapes; a parameter that needs elements they do not hold is an error,
never a short read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ckpt_browser.errors import CheckpointError
from ckpt_browser.readers.pickle_safe import ITEMSIZE
from ckpt_browser.values.locate import Piece


@dataclass(frozen=True, slots=True)
class Flat:
    """One rank's flat partition of one parameter group (a 1-D tensor in its file)."""

    path: str  # the file, as it can be opened
    name: str  # relative to the checkpoint folder, for messages
    offset: int  # absolute byte offset of element 0
    numel: int
    dtype: str


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    shape: tuple[int, ...]
    dtype: str
    pieces: tuple[Piece, ...]  # 1-D slabs placed by offsets=(start,), in order


def slab(parts: list[Flat], start: int, count: int, at: int = 0) -> list[Piece]:
    """Elements [start, start + count) of the parts laid end to end, placed from `at`."""
    out, base, end = [], 0, start + count
    for p in parts:
        a, b = max(start, base), min(end, base + p.numel)
        if a < b:
            size = ITEMSIZE.get(p.dtype, 1)
            out.append(Piece(p.path, p.offset + (a - base) * size, (b - a) * size,
                             (at + a - start,), (b - a,)))
        base += p.numel
        if base >= end:
            break
    return out


def zero2_params(groups: list[list[tuple[str, tuple[int, ...]]]], ranks: list[list[Flat]],
                 paddings: list[list[int]] | None) -> list[Param]:
    """Stages 1 and 2: a group's partitions, rank after rank, are its flat fp32 vector; the
    parameters follow one another in it, each followed by its alignment padding."""
    world, where = len(ranks), ranks[0][0].name if ranks[0] else ""
    out = []
    for g, shapes in enumerate(groups):
        parts = [r[g] for r in ranks]
        avail = sum(p.numel for p in parts)
        pads = paddings[g] if paddings is not None else None
        if pads is not None and len(pads) != len(shapes):
            raise CheckpointError(where, f"param_alignment_paddings lists {len(pads)} paddings "
                                  f"for parameter group {g} of {len(shapes)} parameters")
        offset = 0
        for i, (name, shape) in enumerate(shapes):
            n = math.prod(shape)
            if offset + n > avail:
                raise CheckpointError(where, f"{name} needs elements {offset:,} to "
                                      f"{offset + n:,} of parameter group {g}; its {world} "
                                      f"partitions hold {avail:,}")
            out.append(Param(name, shape, parts[0].dtype, tuple(slab(parts, offset, n))))
            offset += n + (pads[i] if pads is not None else 0)
        # the flat vector is padded to a multiple of 2 * world size, as zero_to_fp32 checks
        align = 2 * world
        if -(-offset // align) * align != -(-avail // align) * align:
            raise CheckpointError(where, f"parameter group {g}: param_shapes use {offset:,} "
                                  f"elements; the {world} partitions hold {avail:,}")
    return out


def zero3_params(shapes: list[tuple[str, tuple[int, ...]]], ranks: list[list[Flat]]
                 ) -> list[Param]:
    """Stage 3: each parameter is split into `world` equal slices (the last padded), slice r
    in rank r's partitions at the same offset; the groups of a rank are laid end to end."""
    world = len(ranks)
    sizes = [p.numel for p in ranks[0]]
    for flats in ranks[1:]:
        if [p.numel for p in flats] != sizes:
            raise CheckpointError(flats[0].name if flats else "", f"its fp32 partitions hold "
                                  f"{[p.numel for p in flats]} elements; rank 0's hold {sizes}")
    total = sum(sizes)
    out, offset = [], 0
    for name, shape in shapes:
        n = math.prod(shape)
        part = -(-n // world)
        if offset + part > total:
            raise CheckpointError(ranks[0][0].name if ranks[0] else "", f"{name} needs "
                                  f"elements {offset:,} to {offset + part:,} of each rank's "
                                  f"partitions, which hold {total:,}")
        pieces = []
        for r in range(world):
            keep = min(part, n - r * part)  # the padding at the end is not the parameter's
            if keep <= 0:
                break
            pieces += slab(ranks[r], offset, keep, r * part)
        out.append(Param(name, shape, ranks[0][0].dtype, tuple(pieces)))
        offset += part
    if offset != total:
        raise CheckpointError(ranks[0][0].name if ranks[0] else "", f"param_shapes use "
                              f"{offset * world:,} elements; the {world} partitions hold "
                              f"{total * world:,}")
    return out


def gathered(name: str, shape: tuple[int, ...], parts: list[Flat]) -> Param:
    """A stage-3 frozen parameter: its ranks' fragments laid end to end, cut to its size."""
    n = math.prod(shape)
    held = sum(p.numel for p in parts)
    if held < n:
        raise CheckpointError(parts[0].name if parts else "", f"the frozen parameter {name} "
                              f"needs {n:,} elements; its {len(parts)} fragments hold {held:,}")
    if len({p.dtype for p in parts}) != 1:
        raise CheckpointError(parts[0].name, f"the fragments of {name} differ in dtype")
    return Param(name, shape, parts[0].dtype, tuple(slab(parts, 0, n)))
