"""Compare two tensors of the same shape, block by block, wherever their bytes live.

Both sides stream in row-major order (`iter_raw`); blocks are re-aligned so a DCP tensor in
4 chunks compares against the same tensor in 2 chunks or in one safetensors file. Blocks whose
bytes are identical cost a memcmp; only blocks that differ are converted (to float64) and
measured. Metrics are computed on elements finite on both sides; NaN/Inf that differ are
counted separately.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ckpt_browser.values.locate import TensorLoc
from ckpt_browser.values.read import ValuesError, as_float, iter_raw


@dataclass
class ValueDiff:
    bitwise_equal: bool  # same dtype and the same bytes, element for element
    close: bool  # |a - b| <= atol + rtol * |b| everywhere (numpy.allclose), NaN == NaN
    max_abs_diff: float | None
    mean_abs_diff: float | None
    rel_l2: float | None  # ||a - b|| / ||a||
    cosine: float | None
    nonfinite_mismatch: int = 0  # positions where NaN/Inf on one side is not matched
    compared: int = 0  # elements
    bytes_read: int = 0


def compare(a: TensorLoc, b: TensorLoc, rtol: float = 0.0, atol: float = 0.0,
            cancel: threading.Event | None = None,
            progress: Callable[[int, int], None] | None = None,
            block_bytes: int | None = None) -> ValueDiff:
    """Raises ValuesError (unreadable, or shapes that differ) or Cancelled."""
    if a.numel != b.numel:
        raise ValuesError(f"{a.name}: {a.numel:,} elements against {b.numel:,}")
    same_dtype = a.dtype == b.dtype
    acc = _Sums()
    equal_ranges: list[tuple[int, int]] = []
    pos = 0
    read = 0
    for (ra, x), (rb, y) in _aligned(iter_raw(a, block_bytes, cancel),
                                     iter_raw(b, block_bytes, cancel), a, b):
        k = x.size
        read += x.nbytes + y.nbytes
        if same_dtype and _same_bytes(ra, x, rb, y):
            equal_ranges.append((pos, k))
        else:
            with np.errstate(invalid="ignore", over="ignore"):  # NaN/Inf are counted instead
                acc.add(as_float(x, a.dtype), as_float(y, b.dtype), rtol, atol)
        pos += k
        if progress:
            progress(pos, a.numel)
    if same_dtype and acc.measured == 0:
        return ValueDiff(True, True, 0.0, 0.0, 0.0, 1.0, 0, pos, read)
    if equal_ranges:  # identical stretches still count toward the norms and the mean
        shared, finite, extra = _sum_squares(a, equal_ranges, block_bytes, cancel)
        read += extra
        acc.finite += finite
        acc.aa += shared
        acc.bb += shared
        acc.ab += shared
    return acc.result(pos, read)


class _Sums:
    def __init__(self):
        self.measured = 0  # elements in blocks that were not bitwise equal
        self.max_abs = 0.0
        self.sum_abs = 0.0
        self.dd = self.aa = self.bb = self.ab = 0.0
        self.not_close = 0
        self.nonfinite = 0
        self.finite = 0  # elements finite on both sides, measured or bitwise equal

    def add(self, x: np.ndarray, y: np.ndarray, rtol: float, atol: float) -> None:
        self.measured += x.size
        d = x - y
        sums = (float(np.dot(x, x)), float(np.dot(y, y)), float(np.dot(x, y)), float(np.dot(d, d)))
        if not all(map(math.isfinite, sums)):  # NaN/Inf (or overflow): the slow, masked way
            x, y, d = self._finite_only(x, y)
            sums = (float(np.dot(x, x)), float(np.dot(y, y)), float(np.dot(x, y)),
                    float(np.dot(d, d)))
        if not x.size:
            return
        self.finite += x.size
        ad = np.abs(d, out=d)
        self.max_abs = max(self.max_abs, float(ad.max()))
        self.sum_abs += float(ad.sum())
        self.aa, self.bb = self.aa + sums[0], self.bb + sums[1]
        self.ab, self.dd = self.ab + sums[2], self.dd + sums[3]
        if atol or rtol:
            self.not_close += int(np.count_nonzero(ad > atol + rtol * np.abs(y)))
        else:
            self.not_close += int(np.count_nonzero(ad))

    def _finite_only(self, x: np.ndarray, y: np.ndarray):
        finite = np.isfinite(x) & np.isfinite(y)
        same = (x == y) | (np.isnan(x) & np.isnan(y))  # inf == inf, NaN "==" NaN
        mismatch = int(np.count_nonzero(~finite & ~same))
        self.nonfinite += mismatch
        self.not_close += mismatch
        x, y = x[finite], y[finite]
        return x, y, x - y

    def result(self, compared: int, read: int) -> ValueDiff:
        rel = math.sqrt(self.dd) / math.sqrt(self.aa) if self.aa > 0 else (
            0.0 if self.dd == 0 else None)
        cos = self.ab / math.sqrt(self.aa * self.bb) if self.aa > 0 and self.bb > 0 else None
        if cos is not None:  # nan (inf / inf: squares past the float range) is no cosine
            cos = max(-1.0, min(1.0, cos)) if math.isfinite(cos) else None
        return ValueDiff(False, self.not_close == 0, self.max_abs,
                         self.sum_abs / self.finite if self.finite else None, rel, cos,
                         self.nonfinite, compared, read)


def _same_bytes(ra, x: np.ndarray, rb, y: np.ndarray) -> bool:
    if ra is not None and rb is not None:
        if type(ra) is bytearray and type(rb) is bytearray:
            return ra == rb  # memcmp, no copy
        return bytes(ra) == bytes(rb)
    return x.tobytes() == y.tobytes()


def _aligned(ia, ib, a: TensorLoc, b: TensorLoc):
    """Pairs of (raw bytes or None, block) cut to the same element ranges on both sides."""
    x = y = None
    while True:
        if x is None or not x[1].size:
            x = next(ia, None)
        if y is None or not y[1].size:
            y = next(ib, None)
        if x is None or y is None:
            if x is not None or y is not None:
                short = a if x is None else b
                raise ValuesError(f"{short.file}: {short.name}: fewer elements than its shape")
            return
        k = min(x[1].size, y[1].size)
        if k == x[1].size and k == y[1].size:
            yield x, y
            x = y = None
            continue
        yield _cut(x, 0, k), _cut(y, 0, k)
        x, y = _cut(x, k, None), _cut(y, k, None)


def _cut(block, start: int, stop: int | None):
    raw, t = block
    size = t.itemsize
    if raw is not None:
        raw = memoryview(raw)[start * size:None if stop is None else stop * size]
    return raw, t[start:stop]


def _sum_squares(loc: TensorLoc, ranges: list[tuple[int, int]], block_bytes: int | None,
                 cancel) -> tuple[float, int, int]:
    """Sum of squares of loc's finite elements in the given (start, count) ranges, how many
    they are, and bytes read."""
    total, finite, read, pos, i = 0.0, 0, 0, 0, 0
    for _, block in iter_raw(loc, block_bytes, cancel):
        end = pos + block.size
        read += block.nbytes
        while i < len(ranges) and ranges[i][0] < end:
            start, count = ranges[i]
            lo, hi = max(start, pos), min(start + count, end)
            part = as_float(block[lo - pos:hi - pos], loc.dtype)
            with np.errstate(invalid="ignore", over="ignore"):
                square = float(np.dot(part, part))
            if not math.isfinite(square):
                part = part[np.isfinite(part)]
                square = float(np.dot(part, part))
            finite += part.size
            total += square
            if start + count > end:
                break
            i += 1
        pos = end
        if i >= len(ranges):
            break
    return total, finite, read
