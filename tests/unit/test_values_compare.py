"""values/compare.py: metrics against torch computed on the whole tensors in float64
(max/mean |a-b|, ||a-b||/||a||, a.b/(|a||b|) written out, not cosine_similarity, which clamps small
norms), on real checkpoints and on files written with safetensors.torch.save_file.
"""

from __future__ import annotations

import math
import threading

import pytest
import torch
from safetensors.torch import load_file, save_file

from ckpt_browser.values.compare import compare
from ckpt_browser.values.read import Cancelled, ValuesError

from .values_helpers import (
    CKPT3,
    CKPT6,
    RANKS2,
    RANKS4,
    RELEASE,
    assert_metrics,
    dcp_tensors,
    locs,
    reference,
    st_loc,
    torch_metrics,
    wait_for_dcp_ranks,
)

SHARDS = [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]


def pair(tmp_path, a: torch.Tensor, b: torch.Tensor):
    return (st_loc(tmp_path / "a.safetensors", {"x": a}),
            st_loc(tmp_path / "b.safetensors", {"x": b}))


def assert_identical(v, numel: int) -> None:
    assert (v.bitwise_equal, v.close, v.max_abs_diff, v.mean_abs_diff, v.rel_l2, v.cosine,
            v.nonfinite_mismatch, v.compared) == (True, True, 0.0, 0.0, 0.0, 1.0, 0, numel)


# -- two steps of one run ------------------------------------------------------------------------

def test_two_steps_of_one_run_every_tensor_against_torch():
    a, b = locs(CKPT3), locs(CKPT6)
    ra, rb = reference(CKPT3), reference(CKPT6)
    ta = {name: t for (_, name), t in ra.items()}
    tb = {name: t for (_, name), t in rb.items()}
    assert set(a) == set(b) == set(ta) == set(tb)
    weights = [n for n, loc in a.items() if loc.component == "weights"]
    assert len(weights) == 21
    for name in a:
        v = compare(a[name], b[name])
        differs = not torch.equal(ta[name], tb[name])
        assert v.bitwise_equal is not differs and v.close is not differs, name
        assert v.compared == ta[name].numel()
        assert_metrics(v, ta[name], tb[name])
        if name in weights:
            assert differs, f"{name} did not change between steps 3 and 6"


def test_step_counters_three_steps_apart():
    v = compare(locs(CKPT3)["state.0.step"], locs(CKPT6)["state.0.step"])
    assert (v.max_abs_diff, v.mean_abs_diff, v.rel_l2, v.cosine, v.close) == \
        (3.0, 3.0, 1.0, 1.0, False)


# -- the same values in other layouts ------------------------------------------------------------

def test_single_file_against_shards_is_bitwise_equal(tmp_path):
    merged = {}
    for shard in SHARDS:
        merged.update(load_file(str(RELEASE / shard)))
    save_file(merged, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    one, three = locs(tmp_path / "model.safetensors"), locs(RELEASE)
    assert set(one) == set(three) == set(merged)
    assert {loc.file for loc in three.values()} == set(SHARDS)
    for name, t in merged.items():
        assert_identical(compare(three[name], one[name], block_bytes=60), t.numel())


def test_dcp_from_2_ranks_against_4_ranks_is_bitwise_equal():
    wait_for_dcp_ranks()
    two, four = locs(RANKS2), locs(RANKS4)
    want, want4 = dcp_tensors(RANKS2), dcp_tensors(RANKS4)
    assert set(two) == set(four) == set(want) == set(want4)
    for name, t in want.items():  # torch agrees the two checkpoints hold the same tensors
        assert t.dtype == want4[name].dtype and torch.equal(t, want4[name]), name
    dim1 = [n for n, loc in four.items() if any(p.offsets[1:2] > (0,) for p in loc.pieces)]
    assert {"layers.0.attention.wo.weight", "layers.0.feed_forward.w2.weight"} <= set(dim1)
    for name in two:
        for block_bytes in (8 * 2**20, 64, 6):
            v = compare(two[name], four[name], block_bytes=block_bytes)
            assert_identical(v, want[name].numel())


def test_dcp_against_a_safetensors_file_of_the_same_tensors(tmp_path):
    wait_for_dcp_ranks()
    want = dcp_tensors(RANKS4)
    save_file({k: v.contiguous() for k, v in want.items() if v.dim()},
              str(tmp_path / "model.safetensors"))
    four, flat = locs(RANKS4), locs(tmp_path / "model.safetensors")
    assert flat
    for name in flat:
        assert_identical(compare(four[name], flat[name], block_bytes=22), want[name].numel())


# -- dtypes and block alignment ------------------------------------------------------------------

CASTS = [(torch.float32, torch.bfloat16), (torch.bfloat16, torch.float32),
         (torch.float32, torch.float16), (torch.float64, torch.float32),
         (torch.bfloat16, torch.float8_e4m3fn), (torch.int32, torch.int64),
         (torch.float16, torch.float8_e5m2)]


@pytest.mark.parametrize("dtypes", CASTS, ids=lambda d: f"{d[0]}-{d[1]}")
def test_different_dtypes_are_measured_after_the_cast_in_any_block_alignment(tmp_path, dtypes):
    g = torch.Generator().manual_seed(7)
    base = torch.randn(13, 17, generator=g) * 4
    if not dtypes[0].is_floating_point:
        base = base * 100
    a, b = base.to(dtypes[0]), (base * 1.01 + 0.05).to(dtypes[1])
    la, lb = pair(tmp_path, a, b)
    for block_bytes in (8 * 2**20, 64, 7, 3):
        v = compare(la, lb, block_bytes=block_bytes)
        assert not v.bitwise_equal and not v.close
        assert v.compared == a.numel()
        assert_metrics(v, a, b)


def test_the_same_values_in_two_dtypes_are_close_but_not_bitwise_equal(tmp_path):
    a = torch.randn(40).to(torch.bfloat16)
    la, lb = pair(tmp_path, a, a.float())
    v = compare(la, lb, block_bytes=10)
    assert (v.bitwise_equal, v.close, v.max_abs_diff, v.rel_l2) == (False, True, 0.0, 0.0)
    assert math.isclose(v.cosine, 1.0, rel_tol=1e-6)


def test_equal_stretches_still_count_toward_the_norms(tmp_path):
    """Blocks whose bytes match skip the arithmetic; rel_l2 and cosine must still use them."""
    a = torch.randn(300, generator=torch.Generator().manual_seed(1))
    b = a.clone()
    b[130:140] += 1.0
    b[290] = -b[290]
    la, lb = pair(tmp_path, a, b)
    for block_bytes in (16, 40, 404, 8 * 2**20):
        v = compare(la, lb, block_bytes=block_bytes)
        assert not v.bitwise_equal and not v.close
        assert_metrics(v, a, b)


# -- NaN and Inf -----------------------------------------------------------------------------------

def test_nan_in_the_same_place_is_equal(tmp_path):
    a = torch.tensor([1.0, float("nan"), 3.0, float("inf"), -float("inf")])
    la, lb = pair(tmp_path, a, a.clone())
    assert_identical(compare(la, lb), 5)


def test_nan_in_the_same_place_with_other_changes_within_tolerance_is_close(tmp_path):
    a = torch.tensor([1.0, float("nan"), 3.0, float("inf"), 4.0])
    b = torch.tensor([1.0, float("nan"), 3.0 + 1e-6, float("inf"), 4.0])
    la, lb = pair(tmp_path, a, b)
    v = compare(la, lb, atol=1e-5)
    assert (v.bitwise_equal, v.close, v.nonfinite_mismatch) == (False, True, 0)
    assert_metrics(v, a, b)


NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("left,right", [(NAN, 5.0), (INF, 5.0), (INF, -INF), (NAN, INF)])
def test_a_nonfinite_value_against_another_value_is_a_mismatch(tmp_path, left, right):
    a = torch.tensor([1.0, left, 3.0, 4.0, 2.0])
    b = torch.tensor([2.0, right, 3.0, 4.0, 2.0])
    la, lb = pair(tmp_path, a, b)
    v = compare(la, lb, atol=10.0)  # no tolerance forgives a NaN or an Inf that moved
    assert (v.bitwise_equal, v.close, v.nonfinite_mismatch) == (False, False, 1)
    assert torch_metrics(a, b)["nonfinite_mismatch"] == 1
    assert_metrics(v, a, b)  # over the elements finite on both sides


# -- tolerances ----------------------------------------------------------------------------------

def test_atol_makes_small_perturbations_close(tmp_path):
    a = torch.randn(200, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    noise = torch.rand(200, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    b = a + (noise - 0.5) * 2e-6  # |a - b| < 1e-6
    la, lb = pair(tmp_path, a, b)
    biggest = (a - b).abs().max().item()
    assert not compare(la, lb).close
    assert compare(la, lb, atol=1e-6).close
    assert not compare(la, lb, atol=biggest * 0.999).close
    assert compare(la, lb, atol=biggest).close


def test_rtol_is_relative_to_b(tmp_path):
    a = torch.tensor([100.0, 1.0, -50.0], dtype=torch.float64)
    b = torch.tensor([100.1, 1.0, -50.0], dtype=torch.float64)
    la, lb = pair(tmp_path, a, b)
    assert compare(la, lb, rtol=0.1 / 100.1).close  # |a-b| <= rtol * |b|
    assert not compare(la, lb, rtol=0.1 / 100.1 * 0.99).close
    assert compare(la, lb, rtol=0.0005, atol=0.05).close  # 0.1 <= 0.05 + 0.0005 * 100.1
    assert not compare(la, lb, rtol=0.0004, atol=0.05).close


# -- degenerate norms, errors, cancel -----------------------------------------------------------

def test_a_zero_tensor_has_no_relative_error_or_cosine(tmp_path):
    zeros, ones = torch.zeros(6), torch.ones(6)
    la, lb = pair(tmp_path, zeros, ones)
    v = compare(la, lb)
    assert (v.max_abs_diff, v.mean_abs_diff, v.rel_l2, v.cosine) == (1.0, 1.0, None, None)
    la, lb = pair(tmp_path, ones, zeros)
    v = compare(la, lb)
    assert (v.rel_l2, v.cosine) == (1.0, None)
    assert torch_metrics(ones, zeros)["rel_l2"] == 1.0


def test_tiny_norms_are_not_clamped(tmp_path):
    """cosine_similarity would clamp these norms with eps=1e-8; the explicit formula does not."""
    a = torch.tensor([1e-20, 2e-20, -1e-20], dtype=torch.float64)
    b = torch.tensor([-1e-20, 2e-20, 1e-20], dtype=torch.float64)
    la, lb = pair(tmp_path, a, b)
    v = compare(la, lb)
    assert math.isclose(v.cosine, 2 / 6, rel_tol=1e-12)
    assert math.isclose(v.rel_l2, math.sqrt(8 / 6), rel_tol=1e-12)


def test_different_element_counts_are_a_values_error(tmp_path):
    la, lb = pair(tmp_path, torch.ones(4), torch.ones(5))
    with pytest.raises(ValuesError, match="4 elements against 5"):
        compare(la, lb)


def test_an_unreadable_side_is_a_values_error(tmp_path):
    la, lb = pair(tmp_path, torch.ones(40), torch.ones(40))
    with open(tmp_path / "b.safetensors", "r+b") as f:
        f.truncate(f.seek(0, 2) - 8)
    with pytest.raises(ValuesError, match="b.safetensors"):
        compare(la, lb)


def test_cancel_stops_the_comparison(tmp_path):
    la, lb = pair(tmp_path, torch.randn(100), torch.randn(100))
    cancel = threading.Event()
    seen = []

    def progress(done, total):
        seen.append(done)
        cancel.set()

    with pytest.raises(Cancelled):
        compare(la, lb, cancel=cancel, progress=progress, block_bytes=40)
    assert seen == [10]
