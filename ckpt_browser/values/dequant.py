"""An FP8 weight's values dequantized with its block scales, as DeepSeek-V3 saves them:
`X.weight` in F8_E4M3 (or F8_E5M2) of shape [M, N] beside `X.weight_scale_inv` in F32 of shape
[ceil(M / 128), ceil(N / 128)], one scale per 128x128 block: value = weight x scale.

Only the weight's bytes and its scales are read: the weight block by block (values.stats), the
scales whole, within SCALE_BYTES.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np

from ckpt_browser.values.locate import TensorLoc
from ckpt_browser.values.read import ValuesError, read_all
from ckpt_browser.values.stats import Stats, tensor_stats

FP8 = ("F8_E4M3", "F8_E5M2")
BLOCK = 128
SCALE_SUFFIX = "_scale_inv"
SCALE_BYTES = 16 * 2**20  # 4M block scales: a [512K, 512K]-element weight's


def scale_name(loc: TensorLoc) -> str | None:
    """The name its block scales would have, for a 2-D FP8 weight; else None."""
    if loc.dtype not in FP8 or len(loc.shape) != 2 or not loc.name.endswith(".weight"):
        return None
    return loc.name + SCALE_SUFFIX


def block_scales(weight: TensorLoc, scale: TensorLoc) -> np.ndarray:
    """The scales as float64 [rows of blocks, columns of blocks]; raises ValuesError when
    their shape is not the weight's blocks of 128x128."""
    m, n = weight.shape
    want = (-(-m // BLOCK), -(-n // BLOCK))
    if tuple(scale.shape) != want or scale.dtype not in ("F32", "BF16", "F16"):
        raise ValuesError(f"{scale.file}: {scale.name} is {scale.dtype} {list(scale.shape)}, "
                          f"not F32 {list(want)} (one scale per 128x128 block of "
                          f"{weight.name})")
    return np.asarray(read_all(scale, SCALE_BYTES), dtype=np.float64)


def dequantizer(scales: np.ndarray, columns: int) -> Callable[[np.ndarray, int], np.ndarray]:
    """values, start -> values times the scale of each one's block (row-major elements)."""

    def apply(x: np.ndarray, start: int) -> np.ndarray:
        idx = np.arange(start, start + x.size, dtype=np.int64)
        return x * scales[idx // columns // BLOCK, idx % columns // BLOCK]

    return apply


def dequantized_stats(weight: TensorLoc, scale: TensorLoc,
                      cancel: threading.Event | None = None,
                      progress: Callable[[int, int], None] | None = None) -> Stats:
    """The weight's statistics after dequantizing; raises ValuesError or Cancelled."""
    scales = block_scales(weight, scale)
    out = tensor_stats(weight, cancel, progress,
                       transform=dequantizer(scales, weight.shape[1]))
    out.note = f"dequantized: x {scale.name} (one scale per 128x128 block)"
    return out
