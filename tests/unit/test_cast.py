"""values.cast: every bit pattern class (normal, subnormal, huge, inf, halfway cases) casts to
the bits torch's `.to()` gives; a NaN to a NaN of the same sign (torch's own NaN payloads differ
between its scalar and vector kernels)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ckpt_browser.values.cast import caster

TORCH = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16,
         "BF16": torch.bfloat16}
NUMPY_BITS = {"F64": np.uint64, "F32": np.uint32, "F16": np.uint16, "BF16": np.uint16}
CONTAINER = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": np.uint16}


def values(src: str) -> np.ndarray:
    """Random bit patterns of `src`, plus the edges: zeros, infinities, NaNs, the largest
    finite, the smallest subnormal, and values exactly halfway between two bfloat16s."""
    rng = np.random.default_rng(0)
    bits = NUMPY_BITS[src]
    random = rng.integers(0, np.iinfo(bits).max, size=20_000, dtype=bits, endpoint=True)
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, 65520.0, 1e-45, 3.4e38,
                      1.00390625, 1.01171875, -2.5e-8, 6e-8], dtype=np.float64)
    edge_bits = edges.astype(np.float32 if src != "F64" else np.float64)
    if src in ("F16", "BF16"):
        return random.view(CONTAINER[src])
    return np.concatenate([random.view(CONTAINER[src]), edge_bits])


@pytest.mark.parametrize("src, dst", [(s, d) for s in TORCH for d in TORCH if s != d])
def test_every_cast_is_torchs_bit_for_bit(src, dst):
    block = values(src)
    ours = np.ascontiguousarray(caster(src, dst)(block)).view(NUMPY_BITS[dst])
    t = torch.frombuffer(bytearray(block.tobytes()), dtype=TORCH[src])
    out = t.to(TORCH[dst])
    theirs = out.view(torch.int16 if dst in ("F16", "BF16") else
                      torch.int32 if dst == "F32" else torch.int64).numpy().view(NUMPY_BITS[dst])
    nan = out.float().isnan().numpy() if dst == "BF16" else out.isnan().numpy()
    assert np.array_equal(ours[~nan], theirs[~nan])
    sign = np.array(1, dtype=NUMPY_BITS[dst]) << (8 * ours.itemsize - 1)
    high = {"F16": 0x7C00, "BF16": 0x7F80, "F32": 0x7F800000, "F64": 0x7FF0000000000000}[dst]
    mant = ~np.array(high, dtype=NUMPY_BITS[dst]) & ~sign
    assert np.all((ours[nan] & high) == high) and np.all(ours[nan] & mant)  # NaNs
    assert np.array_equal(ours[nan] & sign, theirs[nan] & sign) or dst == "BF16"
