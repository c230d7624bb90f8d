"""Read one tensor's values, in bounded blocks, in the global tensor's row-major order.

Only the tensor's own bytes are read (`os.preadv`), never more than one block at a time. A DCP
tensor is read chunk by chunk: chunks that split it along dimension 0 stream one after the
other; chunks split along other dimensions are assembled one slab of rows at a time. Each DCP
chunk is a small torch.save archive inside its rank file; its storage record is found with the
same zip reader the browser uses.

Blocks are numpy arrays of a container dtype with the tensor's item size (BF16 as uint16, FP8
as uint8); `as_float` and `natural` convert them. numpy, not torch: importing torch alone costs
~220 MB and over a second, more than a whole diff needs. The FP8 tables are checked against
torch's own conversion, code by code, in the tests.
"""

from __future__ import annotations

import io
import math
import os
import threading
from collections.abc import Iterator
from dataclasses import replace

import numpy as np

from ckpt_browser import limits
from ckpt_browser.readers.export import Window
from ckpt_browser.values.locate import Piece, TensorLoc

# tag -> numpy dtype holding one element's bytes (little-endian, as the formats store them)
CONTAINERS = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2", "I64": "<i8", "I32": "<i4",
    "I16": "<i2", "I8": "i1", "U8": "u1", "U16": "<u2", "U32": "<u4", "U64": "<u8",
    "BOOL": "?", "C64": "<c8", "C128": "<c16", "C32": "<u4",
    "F8_E4M3": "u1", "F8_E5M2": "u1", "F8_E4M3FNUZ": "u1", "F8_E5M2FNUZ": "u1", "F8_E8M0": "u1",
}
FP8 = {  # tag -> (exponent bits, mantissa bits, bias, how NaN/Inf are encoded)
    "F8_E4M3": (4, 3, 7, "fn"), "F8_E5M2": (5, 2, 15, "ieee"),
    "F8_E4M3FNUZ": (4, 3, 8, "fnuz"), "F8_E5M2FNUZ": (5, 2, 16, "fnuz"),
    "F8_E8M0": (8, 0, 127, "e8m0"),
}
_TABLES: dict[str, np.ndarray] = {}


class ValuesError(Exception):
    """The tensor's values cannot be read; the message names the file and why."""


class Cancelled(Exception):
    pass


def container(dtype: str) -> np.dtype:
    got = CONTAINERS.get(dtype)
    if got is None:
        raise ValuesError(f"values of {dtype} tensors cannot be read (packed sub-byte or "
                          "quantized elements)")
    return np.dtype(got)


def fp8_table(dtype: str) -> np.ndarray:
    """float32 value of each of the 256 codes of an FP8 format (OCP and FNUZ variants)."""
    table = _TABLES.get(dtype)
    if table is None:
        table = _TABLES[dtype] = np.array([_fp8(code, *FP8[dtype]) for code in range(256)],
                                          dtype=np.float32)
    return table


def _fp8(code: int, exp_bits: int, man_bits: int, bias: int, kind: str) -> float:
    if kind == "e8m0":  # a bare exponent: no sign, no mantissa
        return float("nan") if code == 0xFF else 2.0 ** (code - bias)
    sign = -1.0 if code & 0x80 else 1.0
    e, m = (code >> man_bits) & ((1 << exp_bits) - 1), code & ((1 << man_bits) - 1)
    top = (1 << exp_bits) - 1
    if kind == "fnuz" and code == 0x80:
        return float("nan")
    if kind == "fn" and e == top and m == (1 << man_bits) - 1:
        return float("nan")
    if kind == "ieee" and e == top:
        return sign * float("inf") if m == 0 else float("nan")
    if e == 0:
        return sign * m / (1 << man_bits) * 2.0 ** (1 - bias)
    return sign * (1 + m / (1 << man_bits)) * 2.0 ** (e - bias)


def natural(block: np.ndarray, dtype: str) -> np.ndarray:
    """Values in a numpy dtype that holds them: BF16 and FP8 as float32, C32 as complex64."""
    if dtype == "BF16":
        return (block.astype(np.uint32) << 16).view(np.float32)
    if dtype in FP8:
        return fp8_table(dtype)[block]
    if dtype == "C32":
        return np.ascontiguousarray(block).view("<f2").astype(np.float32).view(np.complex64)
    return block


def as_float(block: np.ndarray, dtype: str) -> np.ndarray:
    """float64 values of a block; complex values as their real and imaginary parts."""
    x = natural(block, dtype)
    if np.iscomplexobj(x):
        x = np.ascontiguousarray(x).view(x.real.dtype)
    with np.errstate(invalid="ignore"):  # a signalling NaN raises the flag; it stays a NaN
        return x.astype(np.float64)


def iter_blocks(loc: TensorLoc, block_bytes: int | None = None,
                cancel: threading.Event | None = None) -> Iterator[np.ndarray]:
    """Yield the tensor's elements as 1-D arrays of its container dtype, in row-major order;
    together they hold exactly numel elements. `block_bytes`: by default the block_bytes cap.
    Raises ValuesError or Cancelled."""
    for _, block in iter_raw(loc, block_bytes, cancel):
        yield block


def iter_raw(loc: TensorLoc, block_bytes: int | None = None,
             cancel: threading.Event | None = None) -> Iterator[tuple[bytearray | None,
                                                                      np.ndarray]]:
    """Like iter_blocks, with each block's bytes as read (None where blocks are assembled):
    comparing bytes is a memcmp, several times faster than torch.equal."""
    if loc.problem:
        raise ValuesError(f"{loc.file}: {loc.name}: {loc.problem}")
    dtype = container(loc.dtype)
    itemsize = dtype.itemsize
    lim = limits.LIMITS
    block_bytes = lim.block_bytes if block_bytes is None else block_bytes
    block = max(1, min(block_bytes // itemsize, lim.block_elements))
    if loc.numel == 0:
        return
    if loc.stride is not None:  # a view's piece spans its storage, not numel elements
        check_ends(loc)
        for t in _strided(loc, loc.pieces[0], dtype, itemsize, block, cancel):
            yield None, t
        return
    for p in loc.pieces:
        if len(p.offsets) != len(loc.shape) or len(p.sizes) != len(loc.shape) or any(
                o < 0 or s < 0 or o + s > d for o, s, d in zip(p.offsets, p.sizes, loc.shape)):
            raise ValuesError(f"{loc.file}: {loc.name}: a chunk at {list(p.offsets)} of "
                              f"{list(p.sizes)} does not fit the shape {list(loc.shape)}")
    check_ends(loc)
    pieces = [_unwrap(p, loc, itemsize) if _wrapped(p, itemsize) else p for p in loc.pieces]
    if len(pieces) == 1 and pieces[0].sizes == loc.shape:
        yield from _stream(pieces[0], 0, loc.numel, dtype, itemsize, block, cancel)
    elif _stacked(loc.shape, pieces):
        _check_tiling(loc, pieces)
        row = loc.numel // loc.shape[0]
        for p in sorted(pieces, key=lambda p: p.offsets[0]):
            yield from _stream(p, 0, p.sizes[0] * row, dtype, itemsize, block, cancel)
    else:
        for t in _slabs(loc, pieces, dtype, itemsize, block, cancel):
            yield None, t


def check_ends(loc: TensorLoc) -> None:
    """Every piece inside its file, before any byte is read: a piece past the end of a sparse
    8 GiB file would otherwise be read up to the end before it fails."""
    sizes: dict[str, int] = {}
    for p in loc.pieces:
        if p.path not in sizes:
            try:
                sizes[p.path] = os.stat(p.path).st_size
            except (OSError, ValueError):
                continue  # opening it says why
        if p.offset + p.length > sizes[p.path]:
            raise ValuesError(f"{p.path}: the file ends at byte {sizes[p.path]:,}, before the "
                              f"{p.length:,} bytes wanted from byte {p.offset:,} (truncated?)")


def read_all(loc: TensorLoc, max_bytes: int = 64 * 2**20) -> np.ndarray:
    """A small tensor whole, in its shape, as `natural` values (step counters, tests)."""
    if loc.nbytes > max_bytes:
        raise ValuesError(f"{loc.file}: {loc.name} is {loc.nbytes:,} bytes, over the "
                          f"{max_bytes:,}-byte limit for reading it whole")
    parts = [np.array(b) for b in iter_blocks(loc)]
    flat = np.concatenate(parts) if parts else np.empty(0, dtype=container(loc.dtype))
    return natural(flat, loc.dtype).reshape(loc.shape)


# -- plain byte ranges -----------------------------------------------------------------------

def _stream(p: Piece, first: int, count: int, dtype, itemsize: int, block: int,
            cancel) -> Iterator[tuple[bytearray, np.ndarray]]:
    """Elements [first, first + count) of a piece's contiguous bytes."""
    with _Fd(p.path) as fd:
        done = 0
        while done < count:
            if cancel is not None and cancel.is_set():
                raise Cancelled()
            n = min(block, count - done)
            buf = fd.read_exact(p.offset + (first + done) * itemsize, n * itemsize)
            yield buf, np.frombuffer(buf, dtype=dtype)
            done += n


class _Fd:
    """A file to read ranges of: local with os.preadv, or inside a remote mirror, where the
    range is fetched from the remote file (the mirror holds headers only)."""

    def __init__(self, path: str):
        self.path = path

    def __enter__(self) -> _Fd:
        from ckpt_browser.remote import range_reader

        self.remote = range_reader(self.path)
        if self.remote is not None:
            return self
        from ckpt_browser.readers.regular import open_regular

        try:
            self.file = open_regular(self.path, buffering=0)
        except OSError as e:
            raise ValuesError(f"{self.path}: cannot open: {e.strerror or e}") from None
        self.fd = self.file.fileno()
        return self

    def __exit__(self, *exc) -> None:
        if self.remote is None:
            self.file.close()

    def read_exact(self, offset: int, length: int) -> bytearray:
        buf = bytearray(length)
        got = self.readinto(memoryview(buf), offset)
        if got < length:
            raise ValuesError(f"{self.path}: the file ends at byte {offset + got:,}, before "
                              f"the {length:,} bytes wanted from byte {offset:,} (truncated?)")
        return buf

    def readinto(self, view: memoryview, offset: int) -> int:
        """Fill `view` from byte `offset`; fewer bytes only at the end of the file."""
        if self.remote is not None:
            from ckpt_browser.errors import CheckpointError

            try:
                data = self.remote(offset, len(view))
            except CheckpointError as e:
                raise ValuesError(str(e)) from None
            view.cast("B")[:len(data)] = data
            return len(data)
        got = 0
        while got < len(view):
            try:
                n = os.preadv(self.fd, [view[got:]], offset + got)
            except OSError as e:
                raise ValuesError(f"{self.path}: read failed at byte {offset + got:,}: "
                                  f"{e.strerror or e}") from None
            if n == 0:
                break
            got += n
        return got


# -- DCP chunks: a torch.save archive inside the rank file -----------------------------------

def _wrapped(p: Piece, itemsize: int) -> bool:
    return p.length != math.prod(p.sizes) * itemsize


def _unwrap(p: Piece, loc: TensorLoc, itemsize: int) -> Piece:
    """The data range of the storage inside a DCP chunk's torch.save archive."""
    from ckpt_browser.readers.torchfile import read_pickle_file_object

    n = math.prod(p.sizes)
    if p.length > n * itemsize + limits.LIMITS.dcp_wrapper_bytes:
        raise ValuesError(f"{p.path}: {loc.name}: a chunk of {p.length:,} bytes for "
                          f"{n * itemsize:,} bytes of data")
    with _Fd(p.path) as fd:
        window = _Window(fd, p.offset, p.length)
        buffer = 64 * 1024 if fd.remote else 1024  # remote: each buffer fill is a request
        pf = read_pickle_file_object(io.BufferedReader(window, buffer), os.path.basename(p.path),
                                     p.length)
    bad = [q.message for q in pf.problems if q.severity == "error"]
    if bad or len(pf.tensors) != 1:
        why = bad[0] if bad else f"{len(pf.tensors)} tensors instead of one"
        raise ValuesError(f"{p.path}: {loc.name}: the chunk at byte {p.offset:,} is unreadable: "
                          f"{why}")
    _, t = pf.tensors[0]
    record = pf.storages.get(t.storage_key)
    if t.shape != p.sizes or t.dtype != loc.dtype or record is None:
        raise ValuesError(f"{p.path}: {loc.name}: the chunk at byte {p.offset:,} holds "
                          f"{t.dtype} {list(t.shape)}, the metadata says {loc.dtype} "
                          f"{list(p.sizes)}")
    if any(st != ex for st, ex, d in zip(t.stride, _row_major(t.shape), t.shape) if d != 1):
        raise ValuesError(f"{p.path}: {loc.name}: a non-contiguous chunk (not written by DCP)")
    begin = record[0] + t.storage_offset * itemsize
    if begin + n * itemsize > record[0] + record[1]:
        raise ValuesError(f"{p.path}: {loc.name}: the chunk's storage is too short")
    return replace(p, offset=p.offset + begin, length=n * itemsize)


class _Window(Window):
    """A Window read with pread (`f` is an _Fd)."""

    def read_at(self, b: memoryview, offset: int) -> int:
        return self.f.readinto(b, offset)


def _row_major(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, step = [], 1
    for d in reversed(shape):
        out.append(step)
        step *= d
    return tuple(reversed(out))


# -- chunk layouts ---------------------------------------------------------------------------

def _stacked(shape: tuple[int, ...], pieces: list[Piece]) -> bool:
    """Every chunk spans all of dimensions 1.. : the tensor is the chunks one after another."""
    return bool(shape) and all(p.offsets[1:] == (0,) * (len(shape) - 1)
                               and p.sizes[1:] == shape[1:] for p in pieces)


def _check_tiling(loc: TensorLoc, pieces: list[Piece]) -> None:
    row = 0
    for p in sorted(pieces, key=lambda p: p.offsets[0]):
        if p.offsets[0] != row:
            what = "a gap" if p.offsets[0] > row else "an overlap"
            raise ValuesError(f"{loc.file}: {loc.name}: the chunks leave {what} at row {row:,}")
        row += p.sizes[0]
    if row != loc.shape[0]:
        raise ValuesError(f"{loc.file}: {loc.name}: the chunks cover {row:,} of "
                          f"{loc.shape[0]:,} rows")


def _slabs(loc: TensorLoc, pieces: list[Piece], dtype, itemsize: int, block: int,
           cancel) -> Iterator[np.ndarray]:
    """Chunks split along inner dimensions: assemble a few rows at a time."""
    shape = loc.shape
    row = loc.numel // shape[0] if shape[0] else 0
    most = limits.LIMITS.row_bytes
    if row * itemsize > most:
        raise ValuesError(f"{loc.file}: {loc.name}: one row is {row * itemsize:,} bytes, over "
                          f"the {most:,}-byte limit for assembling chunks")
    rows = max(1, block // max(row, 1))
    for r0 in range(0, shape[0], rows):
        r1 = min(shape[0], r0 + rows)
        out = np.empty((r1 - r0, *shape[1:]), dtype=dtype)
        filled = 0
        for p in pieces:
            a, b = max(r0, p.offsets[0]), min(r1, p.offsets[0] + p.sizes[0])
            if a >= b:
                continue
            if cancel is not None and cancel.is_set():
                raise Cancelled()
            prow = 1
            for d in p.sizes[1:]:
                prow *= d
            with _Fd(p.path) as fd:
                buf = fd.read_exact(p.offset + (a - p.offsets[0]) * prow * itemsize,
                                    (b - a) * prow * itemsize)
            part = np.frombuffer(buf, dtype=dtype).reshape((b - a, *p.sizes[1:]))
            where = [slice(a - r0, b - r0)] + [slice(o, o + s) for o, s in
                                              zip(p.offsets[1:], p.sizes[1:])]
            out[tuple(where)] = part
            filled += part.size
        if filled != out.size:
            raise ValuesError(f"{loc.file}: {loc.name}: the chunks cover {filled:,} of the "
                              f"{out.size:,} elements in rows {r0:,}-{r1 - 1:,}")
        flat = out.reshape(-1)
        for i in range(0, flat.size, block):  # a row may be far longer than a block: the
            yield flat[i:i + block]  # float64 copy of each block stays at block_bytes


def _strided(loc: TensorLoc, p: Piece, dtype, itemsize: int, block: int,
             cancel) -> Iterator[np.ndarray]:
    """A torch view that is not contiguous: read the storage it spans, then gather."""
    most = limits.LIMITS.view_bytes
    if p.length > most:
        raise ValuesError(f"{loc.file}: {loc.name}: a non-contiguous view over {p.length:,} "
                          f"bytes of storage, over the {most:,}-byte limit")
    if cancel is not None and cancel.is_set():
        raise Cancelled()
    with _Fd(p.path) as fd:
        buf = fd.read_exact(p.offset, p.length)
    flat = np.frombuffer(buf, dtype=dtype)
    view = np.lib.stride_tricks.as_strided(flat, loc.shape, [s * itemsize for s in loc.stride],
                                           writeable=False)
    # gathered a block at a time, in row-major order: reshape(-1) would copy the whole view
    # first (a view whose stride 0 repeats one element is gigabytes from 4 bytes)
    for part in np.nditer(view, flags=["external_loop", "buffered", "zerosize_ok"],
                          buffersize=block, order="C"):
        if cancel is not None and cancel.is_set():
            raise Cancelled()
        yield part.copy()  # the iterator's buffer is reused
