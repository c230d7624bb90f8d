"""Casting blocks of floating-point values between dtypes, bit for bit as torch's `.to()`.

numpy rounds float32 -> float16 to nearest-even as torch does. bfloat16 it lacks: torch rounds
float32 to nearest-even on the upper 16 bits. float64 goes through float32 first, as torch's
Half and BFloat16 constructors take a float. A NaN stays a NaN of its sign; its payload bits
are not torch's, which differ between torch's own scalar and vector kernels.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ckpt_browser.values.read import container


def _to_f32(block: np.ndarray, src: str) -> np.ndarray:
    if src == "BF16":
        return (block.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    return block.view(container(src)).astype(np.float32)


def _bf16(x: np.ndarray) -> np.ndarray:
    bits = x.view(np.uint32)
    rounded = ((bits + (0x7FFF + ((bits >> 16) & 1))) >> 16).astype(np.uint16)
    quiet = ((bits >> 16) | 0x0040).astype(np.uint16)  # rounding could carry a NaN into inf
    return np.where(np.isnan(x), quiet, rounded)


def caster(src: str, dst: str) -> Callable[[np.ndarray], np.ndarray]:
    """A block of `src` values (its container dtype) to an array of `dst`'s bytes."""
    def cast(block: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore", invalid="ignore"):  # inf and NaN are values here
            return _cast(block)

    def _cast(block: np.ndarray) -> np.ndarray:
        if dst == "F64":
            return _to_f32(block, src).astype(np.float64) if src != "F64" else block
        x = block.view(np.float64).astype(np.float32) if src == "F64" else _to_f32(block, src)
        if dst == "F32":
            return x
        if dst == "F16":
            return x.astype(np.float16)
        return _bf16(x)

    return cast
