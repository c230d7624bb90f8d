"""FP8 weights dequantized with their block scales (values.dequant), against torch's own
float8 arithmetic, on a real safetensors file written by safetensors.torch.save_file in
DeepSeek-V3's layout: `X.weight` float8_e4m3fn [M, N] beside `X.weight_scale_inv` float32
[ceil(M/128), ceil(N/128)]."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file

from ckpt_browser.analysis.opened import open_path
from ckpt_browser.values.dequant import dequantized_stats, scale_name
from ckpt_browser.values.locate import safetensors_locs
from ckpt_browser.values.read import ValuesError
from ckpt_browser.values.stats import tensor_stats


def fp8_file(tmp_path, m: int = 200, n: int = 300, scale_shape=None):
    torch.manual_seed(0)
    weight = (torch.randn(m, n) * 3).to(torch.float8_e4m3fn)
    scale = torch.rand(scale_shape or (-(-m // 128), -(-n // 128))) + 0.5
    path = tmp_path / "model.safetensors"
    save_file({"layers.0.mlp.up_proj.weight": weight,
               "layers.0.mlp.up_proj.weight_scale_inv": scale}, str(path))
    locs = {loc.name: loc for loc in safetensors_locs(open_path(str(path)).checkpoint)}
    return weight, scale, locs


def torch_dequant(weight: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    m, n = weight.shape
    full = scale.repeat_interleave(128, 0).repeat_interleave(128, 1)[:m, :n]
    return weight.to(torch.float64) * full.to(torch.float64)


def test_dequantized_stats_match_torch(tmp_path):
    weight, scale, locs = fp8_file(tmp_path)
    w = locs["layers.0.mlp.up_proj.weight"]
    assert w.dtype == "F8_E4M3" and scale_name(w) == "layers.0.mlp.up_proj.weight_scale_inv"
    got = dequantized_stats(w, locs[scale_name(w)], progress=None)
    want = torch_dequant(weight, scale).flatten()
    assert got.numel == got.finite == want.numel()
    for value, expected in ((got.min, want.min()), (got.max, want.max()),
                            (got.mean, want.mean()), (got.std, want.std())):
        assert value == pytest.approx(float(expected), rel=1e-9)
    assert got.preview == pytest.approx(want[:8].tolist())
    assert sum(got.hist) == want.numel() and "weight_scale_inv" in got.note
    raw = tensor_stats(w)  # the raw codes' values differ: the scales matter
    assert raw.max == pytest.approx(float(weight.float().max()))
    assert raw.max != pytest.approx(got.max)


def test_small_blocks_read_the_same(tmp_path):
    """Blocks that end mid-row (17 bytes) still take each element's own block scale."""
    weight, scale, locs = fp8_file(tmp_path, 130, 257)
    w = locs["layers.0.mlp.up_proj.weight"]
    from ckpt_browser.values import dequant

    got = tensor_stats(w, block_bytes=17, transform=dequant.dequantizer(
        dequant.block_scales(w, locs[scale_name(w)]), 257))
    assert got.mean == pytest.approx(float(torch_dequant(weight, scale).mean()), rel=1e-9)


def test_scales_of_the_wrong_shape_are_refused_by_name(tmp_path):
    _, _, locs = fp8_file(tmp_path, scale_shape=(1, 1))
    w = locs["layers.0.mlp.up_proj.weight"]
    with pytest.raises(ValuesError, match=r"not F32 \[2, 3\]"):
        dequantized_stats(w, locs[scale_name(w)])


def test_only_2d_fp8_weights_have_scales(tmp_path):
    _, _, locs = fp8_file(tmp_path)
    assert scale_name(locs["layers.0.mlp.up_proj.weight_scale_inv"]) is None  # F32
