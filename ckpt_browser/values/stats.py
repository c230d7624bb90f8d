"""Statistics of one tensor, in one pass over its bytes, in bounded memory.

Moments are merged block by block (Chan's parallel update) in float64. The histogram is built
in the same pass: its range starts at the first block's and doubles (merging bin pairs) when a
later block falls outside, so every finite value is counted exactly once, and the final range
covers the data to within a factor of two.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ckpt_browser.values.locate import TensorLoc
from ckpt_browser.values.read import as_float, iter_blocks, natural

BINS = 32
FINE = 16  # internal bins per shown bin: the shown range hugs the data, not the doubled range
PREVIEW = 8


@dataclass
class Stats:
    name: str
    dtype: str
    shape: tuple[int, ...]
    numel: int
    finite: int = 0  # elements that are neither NaN nor infinite
    min: float | None = None  # over finite elements
    max: float | None = None
    mean: float | None = None
    std: float | None = None  # sample standard deviation (n - 1), as torch.std
    abs_max: float | None = None
    nan: int = 0
    inf: int = 0
    zeros: int = 0
    hist: list[int] = field(default_factory=list)
    hist_range: tuple[float, float] | None = None  # edges of the first and last bin
    preview: list = field(default_factory=list)  # the first few values, in order
    bytes_read: int = 0
    note: str = ""  # e.g. how complex values were counted
    dequantized: Stats | None = None  # an FP8 weight's values times its block scales

    @property
    def zero_fraction(self) -> float | None:
        return self.zeros / self.numel if self.numel else None


def tensor_stats(loc: TensorLoc, cancel: threading.Event | None = None,
                 progress: Callable[[int, int], None] | None = None,
                 block_bytes: int | None = None, bins: int = BINS,
                 transform: Callable[[np.ndarray, int], np.ndarray] | None = None) -> Stats:
    """Raises ValuesError (unreadable) or Cancelled. `transform(values, start)` maps each
    block's float64 values (the first at element `start`) before they are counted."""
    out = Stats(loc.name, loc.dtype, loc.shape, loc.numel)
    complex_ = loc.dtype in ("C64", "C128", "C32")
    if complex_:
        out.note = "complex: counted as real and imaginary parts"
    hist = _Hist(bins * FINE)
    moments = _Moments()
    done = 0
    for block in iter_blocks(loc, block_bytes, cancel):
        out.bytes_read += block.nbytes
        x = as_float(block, loc.dtype)  # complex: real and imaginary parts, interleaved
        if transform is not None:
            x = transform(x, done)
        if len(out.preview) < PREVIEW:
            first = x if transform is not None else natural(block, loc.dtype)
            out.preview.extend(first[:PREVIEW - len(out.preview)].tolist())
        out.zeros += (int(np.count_nonzero((x.reshape(-1, 2) == 0).all(axis=1))) if complex_
                      else x.size - int(np.count_nonzero(x)))
        with np.errstate(invalid="ignore", over="ignore"):  # NaN/Inf are counted instead
            x, bmin, bmax = _finite(x, out)
            if x.size:
                moments.add(x, bmin, bmax)
                hist.add(x, bmin, bmax)
        done += block.size
        if progress:
            progress(done, loc.numel)
    n = out.finite = moments.n
    if n:
        out.min, out.max, out.mean = moments.lo, moments.hi, moments.mean
        out.std = math.sqrt(moments.m2 / (n - 1)) if n > 1 else None
        out.abs_max = max(abs(moments.lo), abs(moments.hi))
        out.hist, out.hist_range = hist.result(bins)
        if out.min == out.max:  # one value throughout: one bin at it, not a made-up width
            out.hist, out.hist_range = [n], (out.min, out.max)
        if hist.too_wide:
            out.note = "; ".join(filter(None, [out.note, "no histogram: the finite values span "
                                                         "more than a float can hold"]))
    return out


def _finite(x: np.ndarray, out: Stats) -> tuple[np.ndarray, float, float]:
    """The block's finite values and their range; NaN and Inf are counted into `out`.
    min and max propagate NaN and show Inf, so an all-finite block needs no mask."""
    bmin, bmax = float(x.min()), float(x.max())
    if math.isfinite(bmin) and math.isfinite(bmax):
        return x, bmin, bmax
    out.nan += int(np.count_nonzero(np.isnan(x)))
    out.inf += int(np.count_nonzero(np.isinf(x)))
    x = x[np.isfinite(x)]
    if not x.size:
        return x, 0.0, 0.0
    return x, float(x.min()), float(x.max())


class _Moments:
    """Count, range, mean and sum of squared deviations, merged block by block (Chan)."""

    def __init__(self):
        self.n, self.mean, self.m2 = 0, 0.0, 0.0
        self.lo = self.hi = None

    def add(self, x: np.ndarray, bmin: float, bmax: float) -> None:
        k = x.size
        self.lo = bmin if self.lo is None else min(self.lo, bmin)
        self.hi = bmax if self.hi is None else max(self.hi, bmax)
        bmean = float(x.sum()) / k
        d = x - bmean
        bm2 = float(np.dot(d, d))
        delta = bmean - self.mean
        total = self.n + k
        self.mean += delta * k / total
        self.m2 += bm2 + (delta * delta * self.n * k / total if self.n else 0.0)  # inf * 0: nan
        self.n = total


class _Hist:
    def __init__(self, bins: int):
        self.bins = bins + bins % 2  # pairs merge when the range doubles
        self.counts: np.ndarray | None = None
        self.lo = 0.0
        self.width = 1.0
        self.too_wide = False  # the values span more than a float holds: no histogram

    def add(self, x: np.ndarray, lo: float, hi: float) -> None:
        if self.too_wide:
            return
        if not math.isfinite(hi - lo) or not math.isfinite(
                (max(abs(lo), abs(hi), abs(self.lo)) + self.bins * abs(self.width)) * 16):
            self.too_wide, self.counts = True, None  # the edges would overflow to inf
            return
        if self.counts is None:
            span = hi - lo
            self.width = span / self.bins * (1 + 1e-9) if span > 0 else 0.0
            if not 0 < self.width < math.inf:  # one value, or a subnormal span that underflows
                self.width = max(abs(lo), 1.0) / self.bins
                span = 0.0
            self.lo = lo if span > 0 else lo - self.width * self.bins / 2
            self.counts = np.zeros(self.bins, dtype=np.int64)
        while lo < self.lo:  # double to the left, keeping the right edge
            right = self.lo + self.bins * self.width
            merged = self.counts.reshape(-1, 2).sum(1)
            self.counts = np.concatenate([np.zeros_like(merged), merged])
            self.width *= 2
            self.lo = right - self.bins * self.width
        while hi >= self.lo + self.bins * self.width:  # double to the right
            merged = self.counts.reshape(-1, 2).sum(1)
            self.counts = np.concatenate([merged, np.zeros_like(merged)])
            self.width *= 2
        idx = (x - self.lo) / self.width
        np.floor(idx, out=idx)
        np.clip(idx, 0, self.bins - 1, out=idx)
        self.counts += np.bincount(idx.astype(np.intp), minlength=self.bins)

    def result(self, bins: int) -> tuple[list[int], tuple[float, float] | None]:
        """At most `bins` bins over the occupied part of the range; none when too wide."""
        if self.counts is None:
            return [], None
        nonzero = np.flatnonzero(self.counts)
        first, last = int(nonzero[0]), int(nonzero[-1])
        group = -(-(last - first + 1) // bins)
        shown = -(-(last - first + 1) // group)
        counts = np.zeros(shown * group, dtype=np.int64)
        part = self.counts[first:first + shown * group]
        counts[:part.size] = part
        edges = (self.lo + first * self.width, self.lo + (first + shown * group) * self.width)
        return counts.reshape(shown, group).sum(1).tolist(), edges


def unsound(s: Stats, constant: bool = False) -> list[str]:
    """What makes these values suspect, in words: NaN and Inf always; with `constant`, a
    tensor of more than one element that is all zeros or one value throughout."""
    out = []
    if s.nan:
        out.append(f"{s.nan:,} NaN")
    if s.inf:
        out.append(f"{s.inf:,} Inf")
    if constant and s.numel > 1 and not out:
        if s.zeros == s.numel:
            out.append("all zeros")
        elif s.finite == s.numel and s.min == s.max:
            out.append(f"constant ({s.min:g} throughout)")
    return out
