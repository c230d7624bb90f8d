"""values/stats.py against torch: tensors written with safetensors.torch.save_file (and the DCP
samples), statistics recomputed by torch in float64 over the finite elements (std with
correction=1), the histogram against torch.histc over the reported range and bin count.
"""

from __future__ import annotations

import math
import threading

import pytest
import torch

from ckpt_browser.values.read import Cancelled
from ckpt_browser.values.stats import tensor_stats

from .values_helpers import (
    RANKS4,
    TITAN,
    assert_histogram,
    dcp_tensors,
    locs,
    st_loc,
    wait_for_dcp_ranks,
)

BLOCKS = [8 * 2**20, 64, 7, 1]  # the default, then blocks of a few elements down to one


def as_float64(t: torch.Tensor) -> torch.Tensor:
    if t.is_complex():
        t = torch.view_as_real(t)
    return t.double().reshape(-1)


def same_value(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b and type(a) is type(b)


def assert_stats(s, t: torch.Tensor) -> None:
    """Every field of Stats against torch on the whole tensor."""
    d = as_float64(t)
    fin = d[torch.isfinite(d)]
    assert (s.numel, s.shape) == (t.numel(), tuple(t.shape))
    assert s.finite == fin.numel()
    assert s.nan == int(d.isnan().sum())
    assert s.inf == int(d.isinf().sum())
    assert s.zeros == int((t == 0).sum())
    assert s.zero_fraction == (s.zeros / t.numel() if t.numel() else None)
    assert s.bytes_read == t.numel() * t.element_size()
    if fin.numel():
        assert s.min == fin.min().item() and s.max == fin.max().item()
        assert s.abs_max == fin.abs().max().item()
        scale = max(fin.abs().max().item(), 1e-300)
        assert math.isclose(s.mean, fin.mean().item(), rel_tol=1e-12, abs_tol=1e-13 * scale)
        if fin.numel() > 1:
            assert math.isclose(s.std, fin.std(correction=1).item(), rel_tol=1e-9,
                                abs_tol=1e-13 * scale)
        else:
            assert s.std is None
    else:
        assert (s.min, s.max, s.mean, s.std, s.abs_max) == (None,) * 5
    assert_histogram(s.hist, s.hist_range, fin)
    first = t.reshape(-1)[:8].tolist()
    assert len(s.preview) == len(first)
    assert all(same_value(a, b) for a, b in zip(s.preview, first)), (s.preview, first)


def assert_same_moments(a, b) -> None:
    """Multi-block against single-block: counts exact, moments to float64 rounding."""
    assert (a.finite, a.nan, a.inf, a.zeros, a.min, a.max, a.abs_max) == \
        (b.finite, b.nan, b.inf, b.zeros, b.min, b.max, b.abs_max)
    assert len(a.preview) == len(b.preview)
    assert all(same_value(x, y) for x, y in zip(a.preview, b.preview))
    for x, y in ((a.mean, b.mean), (a.std, b.std)):
        assert (x is None) == (y is None)
        if x is not None:
            assert math.isclose(x, y, rel_tol=1e-12, abs_tol=1e-15)
    assert sum(a.hist) == sum(b.hist) == a.finite


# -- floating point with NaN, Inf and zeros ------------------------------------------------------

def special_floats(dtype: torch.dtype) -> torch.Tensor:
    g = torch.Generator().manual_seed(11)
    x = torch.randn(37, 11, generator=g) * 3 + 0.5
    x[0, 0] = float("nan")
    x[9, 4] = float("nan")
    x[5, ::3] = float("inf")
    x[7, 1] = float("-inf")
    x[2, :4] = 0.0
    x[30, 2] = 250.0  # far from the rest: the histogram range has to grow
    return x.to(dtype)


FLOATS = [torch.float32, torch.bfloat16, torch.float16, torch.float8_e4m3fn, torch.float8_e5m2]


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_float_stats_match_torch_in_any_block_size(tmp_path, dtype):
    t = special_floats(dtype)
    loc = st_loc(tmp_path / "s.safetensors", {"x": t, "other": torch.ones(2)})
    whole = tensor_stats(loc)
    assert_stats(whole, t)
    for block_bytes in BLOCKS[1:]:
        s = tensor_stats(loc, block_bytes=block_bytes)
        assert_stats(s, t)
        assert_same_moments(s, whole)


def test_the_special_values_are_really_there():
    """The float test sees NaN everywhere, Inf where the dtype has it, and zeros."""
    for dtype in FLOATS:
        d = special_floats(dtype).double()
        assert d.isnan().sum() >= 2 and (d == 0).sum() >= 4, dtype
        assert bool(d.isinf().any()) == (dtype != torch.float8_e4m3fn), dtype  # e4m3fn: no Inf


def test_histogram_counts_every_finite_value_once_across_a_wide_range(tmp_path):
    """Blocks of growing magnitude make the histogram double its range many times."""
    t = torch.cat([torch.linspace(-1, 1, 50), torch.linspace(-1e4, 3e4, 50),
                   torch.tensor([5e5, -7e5])]).to(torch.bfloat16)
    loc = st_loc(tmp_path / "w.safetensors", {"x": t})
    for block_bytes in (4, 64, 8 * 2**20):
        s = tensor_stats(loc, block_bytes=block_bytes)
        assert_stats(s, t)
        lo, hi = s.hist_range
        # the range hugs the data: within a factor of two of its span, per the module's promise
        assert hi - lo <= 2 * (s.max - s.min) * (1 + 1e-9)


# -- integers, bools, complex --------------------------------------------------------------------

INTS = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8]


@pytest.mark.parametrize("dtype", INTS, ids=str)
def test_integer_stats_match_torch(tmp_path, dtype):
    g = torch.Generator().manual_seed(5)
    lo, hi = (0, 256) if dtype == torch.uint8 else (-100, 100)
    t = torch.randint(lo, hi, (9, 13), generator=g).to(dtype)
    t[0, :3] = 0
    loc = st_loc(tmp_path / "i.safetensors", {"x": t})
    whole = tensor_stats(loc)
    assert_stats(whole, t)
    assert isinstance(whole.preview[0], int)
    for block_bytes in (3, 64):
        s = tensor_stats(loc, block_bytes=block_bytes)
        assert_stats(s, t)
        assert_same_moments(s, whole)


def test_bool_stats_count_false_as_zeros(tmp_path):
    t = torch.tensor([True, False, True, True, False, False, False, True, True, True])
    loc = st_loc(tmp_path / "b.safetensors", {"x": t})
    s = tensor_stats(loc, block_bytes=3)
    assert_stats(s, t)
    assert (s.zeros, s.mean, s.preview[:2]) == (4, 0.6, [True, False])


def test_complex_values_count_as_real_and_imaginary_parts(tmp_path):
    t = torch.randn(6, 5, dtype=torch.complex64, generator=torch.Generator().manual_seed(2))
    t[0, 0] = 0
    loc = st_loc(tmp_path / "c.safetensors", {"x": t})
    s = tensor_stats(loc, block_bytes=24)
    parts = torch.view_as_real(t).double().reshape(-1)
    assert s.finite == parts.numel() == 2 * t.numel()
    assert s.zeros == 1  # elements equal to 0+0j
    assert math.isclose(s.mean, parts.mean().item(), rel_tol=1e-12)
    assert math.isclose(s.std, parts.std().item(), rel_tol=1e-9)
    assert_histogram(s.hist, s.hist_range, parts)
    assert "real and imaginary" in s.note


# -- edge cases ----------------------------------------------------------------------------------

def test_a_constant_tensor_has_zero_spread_and_one_occupied_bin(tmp_path):
    t = torch.full((50,), 0.75)
    loc = st_loc(tmp_path / "k.safetensors", {"x": t})
    for block_bytes in (8, 8 * 2**20):
        s = tensor_stats(loc, block_bytes=block_bytes)
        assert_stats(s, t)
        assert (s.min, s.max, s.mean, s.std) == (0.75, 0.75, 0.75, 0.0)
        assert sum(1 for c in s.hist if c) == 1


def test_a_constant_zero_tensor(tmp_path):
    t = torch.zeros(4, 4, dtype=torch.bfloat16)
    s = tensor_stats(st_loc(tmp_path / "z.safetensors", {"x": t}))
    assert_stats(s, t)
    assert (s.zeros, s.zero_fraction, s.std) == (16, 1.0, 0.0)


def test_one_element_has_no_sample_std(tmp_path):
    t = torch.tensor([2.5])
    s = tensor_stats(st_loc(tmp_path / "o.safetensors", {"x": t}))
    assert_stats(s, t)
    assert s.std is None and s.mean == 2.5


def test_an_all_nan_tensor_has_counts_and_no_moments(tmp_path):
    t = torch.full((3, 2), float("nan"), dtype=torch.float16)
    s = tensor_stats(st_loc(tmp_path / "n.safetensors", {"x": t}))
    assert_stats(s, t)
    assert (s.nan, s.finite, s.hist, s.hist_range) == (6, 0, [], None)


def test_an_empty_tensor(tmp_path):
    t = torch.zeros(0, 3)
    s = tensor_stats(st_loc(tmp_path / "e.safetensors", {"x": t, "y": torch.ones(1)}))
    assert_stats(s, t)
    assert (s.numel, s.finite, s.zero_fraction, s.hist, s.preview) == (0, 0, None, [], [])


# -- DCP -----------------------------------------------------------------------------------------

def test_dcp_tensors_stats_match_torch():
    wait_for_dcp_ranks()
    four = locs(RANKS4)
    want = dcp_tensors(RANKS4)
    names = ["layers.0.attention.wo.weight", "tok_embeddings.weight", "output.weight",
             "optimizer.state.layers.0.feed_forward.w2.weight.exp_avg_sq"]
    assert any(p.offsets[1] > 0 for p in four[names[0]].pieces)  # split along dim 1
    for name in names:
        for block_bytes in (8 * 2**20, 10):
            assert_stats(tensor_stats(four[name], block_bytes=block_bytes), want[name])
    titan = locs(TITAN)
    titan_want = dcp_tensors(TITAN)
    assert_stats(tensor_stats(titan["tok_embeddings.weight"], block_bytes=20),
                 titan_want["tok_embeddings.weight"])


# -- cancel and progress -------------------------------------------------------------------------

def test_cancel_raises_cancelled(tmp_path):
    loc = st_loc(tmp_path / "c.safetensors", {"x": torch.randn(100)})
    cancel = threading.Event()
    seen = []

    def progress(done, total):
        seen.append(done)
        cancel.set()  # the user quits while the first block is being counted

    with pytest.raises(Cancelled):
        tensor_stats(loc, cancel=cancel, progress=progress, block_bytes=40)
    assert seen == [10]


def test_progress_reaches_the_element_count(tmp_path):
    loc = st_loc(tmp_path / "p.safetensors", {"x": torch.randn(25)})
    seen = []
    tensor_stats(loc, progress=lambda done, total: seen.append((done, total)), block_bytes=40)
    assert seen == [(10, 25), (20, 25), (25, 25)]
