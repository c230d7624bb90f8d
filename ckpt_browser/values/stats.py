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

import torch

from ckpt_browser.values.locate import TensorLoc
from ckpt_browser.values.read import BLOCK_BYTES, iter_blocks

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

    @property
    def zero_fraction(self) -> float | None:
        return self.zeros / self.numel if self.numel else None


def as_real(x: torch.Tensor, wide: torch.dtype = torch.float64) -> torch.Tensor:
    """A float view of a block; complex values count as their real and imaginary parts."""
    if x.is_complex():
        x = torch.view_as_real(x).reshape(-1)
    return x if x.dtype == wide else x.to(wide)


def tensor_stats(loc: TensorLoc, cancel: threading.Event | None = None,
                 progress: Callable[[int, int], None] | None = None,
                 block_bytes: int = BLOCK_BYTES, bins: int = BINS) -> Stats:
    """Raises ValuesError (unreadable) or Cancelled."""
    out = Stats(loc.name, loc.dtype, loc.shape, loc.numel)
    if loc.dtype in ("C64", "C128", "C32"):
        out.note = "complex: counted as real and imaginary parts"
    hist = _Hist(bins * FINE)
    moments = _Moments()
    done = 0
    for block in iter_blocks(loc, block_bytes, cancel):
        out.bytes_read += block.numel() * block.element_size()
        if len(out.preview) < PREVIEW:
            out.preview.extend(block[:PREVIEW - len(out.preview)].tolist())
        x = as_real(block)  # float64: converting costs less than one reduction
        out.zeros += (int((block == 0).sum()) if block.is_complex()
                      else x.numel() - int(torch.count_nonzero(x)))
        x, bmin, bmax = _finite(x, out)
        if x.numel():
            moments.add(x, bmin, bmax)
            hist.add(x, bmin, bmax)
        done += block.numel()
        if progress:
            progress(done, loc.numel)
    n = out.finite = moments.n
    if n:
        out.min, out.max, out.mean = moments.lo, moments.hi, moments.mean
        out.std = math.sqrt(moments.m2 / (n - 1)) if n > 1 else None
        out.abs_max = max(abs(moments.lo), abs(moments.hi))
        out.hist, out.hist_range = hist.result(bins)
    return out


def _finite(x: torch.Tensor, out: Stats) -> tuple[torch.Tensor, float, float]:
    """The block's finite values and their range; NaN and Inf are counted into `out`.
    aminmax propagates NaN and shows Inf, so an all-finite block costs one pass."""
    bmin, bmax = (float(v) for v in torch.aminmax(x))
    if math.isfinite(bmin) and math.isfinite(bmax):
        return x, bmin, bmax
    out.nan += int(torch.isnan(x).sum())
    out.inf += int(torch.isinf(x).sum())
    x = x[torch.isfinite(x)]
    if not x.numel():
        return x, 0.0, 0.0
    bmin, bmax = (float(v) for v in torch.aminmax(x))
    return x, bmin, bmax


class _Moments:
    """Count, range, mean and sum of squared deviations, merged block by block (Chan)."""

    def __init__(self):
        self.n, self.mean, self.m2 = 0, 0.0, 0.0
        self.lo = self.hi = None

    def add(self, x: torch.Tensor, bmin: float, bmax: float) -> None:
        k = x.numel()
        self.lo = bmin if self.lo is None else min(self.lo, bmin)
        self.hi = bmax if self.hi is None else max(self.hi, bmax)
        var, bmean = torch.var_mean(x, correction=0)
        bmean, bm2 = float(bmean), float(var) * k
        delta = bmean - self.mean
        total = self.n + k
        self.mean += delta * k / total
        self.m2 += bm2 + delta * delta * self.n * k / total
        self.n = total


class _Hist:
    def __init__(self, bins: int):
        self.bins = bins + bins % 2  # pairs merge when the range doubles
        self.counts: torch.Tensor | None = None
        self.lo = 0.0
        self.width = 1.0

    def add(self, x: torch.Tensor, lo: float, hi: float) -> None:
        if self.counts is None:
            span = hi - lo
            self.width = span / self.bins * (1 + 1e-9) if span > 0 else max(abs(lo), 1.0) / self.bins
            self.lo = lo if span > 0 else lo - self.width * self.bins / 2
            self.counts = torch.zeros(self.bins, dtype=torch.int64)
        while lo < self.lo:  # double to the left, keeping the right edge
            right = self.lo + self.bins * self.width
            merged = self.counts.view(-1, 2).sum(1)
            self.counts = torch.cat([torch.zeros_like(merged), merged])
            self.width *= 2
            self.lo = right - self.bins * self.width
        while hi >= self.lo + self.bins * self.width:  # double to the right
            merged = self.counts.view(-1, 2).sum(1)
            self.counts = torch.cat([merged, torch.zeros_like(merged)])
            self.width *= 2
        top = self.lo + self.bins * self.width
        counts = torch.histc(x, self.bins, self.lo, top).to(torch.int64)
        if int(counts.sum()) != x.numel():  # an edge rounded in x's precision: count exactly
            x = x.to(torch.float64)
            idx = ((x - self.lo) / self.width).floor().clamp_(0, self.bins - 1).to(torch.int64)
            counts = torch.bincount(idx, minlength=self.bins)
        self.counts += counts

    def result(self, bins: int) -> tuple[list[int], tuple[float, float]]:
        """At most `bins` bins over the occupied part of the range."""
        nonzero = torch.nonzero(self.counts).flatten()
        first, last = int(nonzero[0]), int(nonzero[-1])
        group = -(-(last - first + 1) // bins)
        shown = -(-(last - first + 1) // group)
        counts = self.counts[first:first + shown * group]
        counts = torch.cat([counts, torch.zeros(shown * group - counts.numel(), dtype=torch.int64)])
        edges = (self.lo + first * self.width, self.lo + (first + shown * group) * self.width)
        return counts.view(shown, group).sum(1).tolist(), edges
