"""values/read.py: every tensor of every sample reads back exactly what torch loads, in blocks of
any size, from safetensors, torch zip files (views included) and DCP chunks; damage, missing rank
files and cancel give the documented errors. References: safetensors.torch.load_file,
torch.load(weights_only=True) of our own samples, and torch's dcp_to_torch_save.
"""

from __future__ import annotations

import os
import shutil
import threading

import pytest
import torch
from safetensors.torch import load_file, save_file

from ckpt_browser.values.read import Cancelled, ValuesError, iter_blocks, read_all

from .helpers import SAMPLES
from .values_helpers import (
    CKPT3,
    DAMAGED,
    RANKS2,
    RANKS4,
    RELEASE,
    TITAN,
    assert_same_blocks,
    assert_same_tensor,
    dcp_tensors,
    locs,
    reference,
    st_loc,
    wait_for_dcp_ranks,
)

SAMPLE_PATHS = {
    "tiny-llama-run/checkpoint-3": CKPT3,
    "tiny-llama-run/checkpoint-6": SAMPLES / "tiny-llama-run" / "checkpoint-6",
    "tiny-llama-release": RELEASE,
    "hf-run3/checkpoint-2": SAMPLES / "hf-run3" / "checkpoint-2",
    "hf-run3/checkpoint-4": SAMPLES / "hf-run3" / "checkpoint-4",
    "hf-run3/checkpoint-6": SAMPLES / "hf-run3" / "checkpoint-6",
    "hf-multirank": SAMPLES / "hf-multirank" / "checkpoint-4",
    "lightning/last.ckpt": SAMPLES / "lightning" / "last.ckpt",
    "lightning/epoch=0-step=4.ckpt": SAMPLES / "lightning" / "epoch=0-step=4.ckpt",
    "accelerate": SAMPLES / "accelerate-state" / "step_4",
    "deepspeed": SAMPLES / "deepspeed-run",
    "megatron": SAMPLES / "megatron-run",
    "torchtitan": TITAN,
    "dcp-ranks/ranks-2": RANKS2,
    "dcp-ranks/ranks-4": RANKS4,
}


def side_locs(path):
    from ckpt_browser.analysis.opened import open_path
    from ckpt_browser.values.diff import side_of

    return side_of(open_path(str(path))).locs


# -- every tensor of every sample ----------------------------------------------------------------

@pytest.mark.parametrize("sample", list(SAMPLE_PATHS))
def test_read_all_equals_torch_for_every_tensor_of_the_sample(sample):
    if sample.startswith("dcp-ranks"):
        wait_for_dcp_ranks()
    path = SAMPLE_PATHS[sample]
    want = reference(path)
    got = side_locs(path)
    assert want, "the reference found no tensors"
    assert sorted((loc.file, loc.name) for loc in got) == sorted(want)
    for loc in got:
        assert loc.problem is None, (loc.name, loc.problem)
        assert_same_tensor(read_all(loc), want[(loc.file, loc.name)], f"{sample} {loc.name}")


def test_the_samples_cover_every_storage_layout():
    """The sample test above reaches each reader path: one piece, DCP chunks stacked along dim 0,
    and DCP chunks split along dim 1 (assembled slab by slab)."""
    wait_for_dcp_ranks()
    titan = locs(TITAN)
    assert len(titan["tok_embeddings.weight"].pieces) == 2
    four = locs(RANKS4)
    for name in ("layers.0.attention.wo.weight", "layers.0.feed_forward.w2.weight"):
        assert any(p.offsets[1] > 0 for p in four[name].pieces), name
    assert four["tok_embeddings.weight"].dtype == "BF16"


# -- blocks ------------------------------------------------------------------------------------

def _block_cases():
    wait_for_dcp_ranks()
    cases = []
    three = locs(CKPT3)
    for name in ("lm_head.weight", "model.norm.weight", "state.0.exp_avg", "state.0.step", "cpu"):
        cases.append((CKPT3, three[name]))
    cases += [(TITAN, loc) for loc in locs(TITAN).values()]
    cases += [(RANKS4, loc) for loc in locs(RANKS4).values()]
    return cases


@pytest.fixture(scope="module")
def block_cases():
    cases = _block_cases()
    refs = {}
    for root, _ in cases:
        if root not in refs:
            refs[root] = reference(root)
    return [(loc, refs[root][(loc.file, loc.name)]) for root, loc in cases]


@pytest.mark.parametrize("block_bytes", [1, 7, 64])
def test_tiny_blocks_concatenate_to_the_tensor(block_cases, block_bytes):
    for loc, want in block_cases:
        blocks = list(iter_blocks(loc, block_bytes))
        itemsize = want.element_size()
        per_block = max(1, block_bytes // itemsize)
        row = want.numel() // want.shape[0] if want.dim() and want.shape[0] else 1
        for b in blocks:
            # a DCP tensor split along inner dimensions is assembled at least one row at a time
            assert b.size <= (per_block if len(loc.pieces) == 1 else max(per_block, row))
        assert_same_blocks(blocks, want, f"{loc.name} in {block_bytes}-byte blocks")


def test_an_empty_tensor_yields_no_blocks_and_reads_as_empty(tmp_path):
    loc = st_loc(tmp_path / "e.safetensors", {"x": torch.zeros(0, 4, dtype=torch.bfloat16),
                                              "y": torch.ones(2)})
    assert list(iter_blocks(loc, 7)) == []
    assert_same_tensor(read_all(loc), torch.zeros(0, 4, dtype=torch.bfloat16))


def test_read_all_refuses_a_tensor_over_its_limit(tmp_path):
    loc = st_loc(tmp_path / "m.safetensors", {"x": torch.ones(64)})
    with pytest.raises(ValuesError, match="256 bytes"):
        read_all(loc, max_bytes=255)
    assert_same_tensor(read_all(loc, max_bytes=256), torch.ones(64))


# -- torch views that are not contiguous ---------------------------------------------------------

def test_non_contiguous_views_saved_by_torch_read_correctly(tmp_path):
    base = torch.arange(60, dtype=torch.float32).reshape(6, 10)
    half = torch.randn(5, 7).to(torch.bfloat16)
    sd = {"transposed": base.t(), "window": base[1:5, 2:7], "column": base[:, 3],
          "strided": base[::2, ::3], "rows": base[2:4], "expanded": base[0:1].expand(3, 10),
          "bf16.t": half.t(), "plain": torch.randn(4, 3)}
    path = tmp_path / "pytorch_model.bin"
    torch.save(sd, path)
    got = locs(path)
    assert set(got) == set(sd)
    # the file really holds views (torch.save keeps strides and offsets), not copies
    for name in ("transposed", "window", "column", "strided", "expanded", "bf16.t"):
        assert got[name].stride == tuple(sd[name].stride()), name
    assert got["rows"].stride is None and got["plain"].stride is None
    loaded = torch.load(path, weights_only=True)
    for name, loc in got.items():
        assert_same_tensor(read_all(loc), loaded[name], name)
        for block_bytes in (2, 9):
            assert_same_blocks(list(iter_blocks(loc, block_bytes)), loaded[name],
                               f"{name} in blocks")


# -- damage ------------------------------------------------------------------------------------

def test_truncated_safetensors_names_the_file_and_spares_intact_tensors(tmp_path):
    a, b = torch.randn(100), torch.randn(50)
    path = tmp_path / "model.safetensors"
    save_file({"a": a, "b": b}, str(path))
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 30)
    got = locs(tmp_path)
    last = max(got.values(), key=lambda loc: loc.pieces[0].offset)
    first = min(got.values(), key=lambda loc: loc.pieces[0].offset)
    with pytest.raises(ValuesError, match="model.safetensors") as e:
        read_all(last)
    assert "truncated" in str(e.value)
    assert "\n" not in str(e.value)
    assert_same_tensor(read_all(first), {"a": a, "b": b}[first.name])


def test_the_damaged_sample_fails_only_on_the_tensor_that_was_cut():
    shard = "model-00001-of-00003.safetensors"
    want = load_file(str(RELEASE / shard))
    got = {n: loc for n, loc in locs(DAMAGED).items() if loc.file == shard}
    assert set(got) == set(want)
    last = max(got.values(), key=lambda loc: loc.pieces[0].offset)
    for name, loc in got.items():
        if loc is last:
            with pytest.raises(ValuesError, match=shard):
                read_all(loc)
        else:
            assert_same_tensor(read_all(loc), want[name], name)


def test_a_file_deleted_after_locating_is_a_values_error(tmp_path):
    loc = st_loc(tmp_path / "gone.safetensors", {"x": torch.ones(3)})
    os.remove(tmp_path / "gone.safetensors")
    with pytest.raises(ValuesError, match="gone.safetensors"):
        read_all(loc)


def test_a_missing_dcp_rank_file_is_a_problem_of_the_tensors_it_held(tmp_path):
    folder = shutil.copytree(TITAN, tmp_path / "step-10")
    want = dcp_tensors(TITAN)
    os.remove(folder / "__1_0.distcp")
    intact = locs(TITAN)
    got = side_locs(folder)
    assert {loc.name for loc in got} == set(want)
    assert any(loc.problem for loc in got), "no tensor lost a chunk"
    for loc in got:
        if any(p.path.endswith("__1_0.distcp") for p in intact[loc.name].pieces):
            assert loc.problem and "__1_0.distcp" in loc.problem, loc.name
            with pytest.raises(ValuesError, match="__1_0.distcp"):
                read_all(loc)
        else:
            assert_same_tensor(read_all(loc), want[loc.name], loc.name)


def test_a_truncated_dcp_rank_file_fails_only_for_chunks_past_the_cut(tmp_path):
    folder = shutil.copytree(TITAN, tmp_path / "step-10")
    cut = os.path.getsize(folder / "__0_0.distcp") // 2
    with open(folder / "__0_0.distcp", "r+b") as f:
        f.truncate(cut)
    want = dcp_tensors(TITAN)
    intact = locs(TITAN)
    failed = 0
    for loc in side_locs(folder):
        lost = any(p.path.endswith("__0_0.distcp") and p.offset + p.length > cut
                   for p in intact[loc.name].pieces)
        if lost:
            failed += 1
            with pytest.raises(ValuesError, match="__0_0.distcp"):
                read_all(loc)
        else:
            assert_same_tensor(read_all(loc), want[loc.name], loc.name)
    assert 0 < failed < len(intact)


# -- cancel ------------------------------------------------------------------------------------

def test_a_set_cancel_event_stops_every_kind_of_read(tmp_path):
    wait_for_dcp_ranks()
    base = torch.arange(12.0).reshape(3, 4)
    torch.save({"t": base.t()}, tmp_path / "pytorch_model.bin")
    cases = [locs(CKPT3)["lm_head.weight"], locs(CKPT3)["state.0.exp_avg"],
             locs(TITAN)["tok_embeddings.weight"], locs(RANKS4)["layers.0.attention.wo.weight"],
             locs(tmp_path / "pytorch_model.bin")["t"]]
    assert cases[-1].stride is not None
    for loc in cases:
        cancel = threading.Event()
        cancel.set()
        with pytest.raises(Cancelled):
            next(iter_blocks(loc, 64, cancel))


def test_cancel_set_between_blocks_stops_at_the_next_block():
    loc = locs(CKPT3)["lm_head.weight"]
    cancel = threading.Event()
    blocks = iter_blocks(loc, 64, cancel)
    first = next(blocks)
    assert first.size == 16
    cancel.set()
    with pytest.raises(Cancelled):
        next(blocks)


# -- every dtype safetensors.torch can write -----------------------------------------------------

def _torch_dtypes() -> list[torch.dtype]:
    seen = {}
    for name in dir(torch):
        v = getattr(torch, name)
        if isinstance(v, torch.dtype):
            seen[str(v)] = v
    return list(seen.values())


def _safetensors_writes(dtype: torch.dtype, folder) -> bool:
    try:
        save_file({"x": torch.zeros(4, dtype=torch.uint8).view(dtype)
                   if _byte_sized(dtype) else torch.zeros(4, dtype=dtype)},
                  os.path.join(folder, "probe.safetensors"))
    except Exception:  # noqa: BLE001 - the dtype is not one safetensors.torch writes
        return False
    return True


def _byte_sized(dtype) -> bool:
    return dtype.itemsize == 1 and not dtype.is_complex and dtype != torch.bool


def _writable() -> list[torch.dtype]:
    import tempfile
    import warnings

    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # probing complex32 and the quantized dtypes warns
        return [d for d in _torch_dtypes() if _safetensors_writes(d, tmp)]


WRITABLE = _writable()
PACKED = [d for d in WRITABLE if str(d).startswith("torch.float4")]  # two values per byte
UNPACKED = [d for d in WRITABLE if d not in PACKED]


def test_the_dtype_list_holds_what_the_issue_names():
    names = {str(d).removeprefix("torch.") for d in UNPACKED}
    assert {"float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8",
            "uint8", "bool", "float8_e4m3fn", "float8_e5m2"} <= names


def _values(dtype: torch.dtype) -> torch.Tensor:
    g = torch.Generator().manual_seed(3)
    if dtype == torch.bool:
        return torch.randint(0, 2, (3, 5), generator=g).bool()
    if dtype.is_complex:
        return torch.randn(3, 5, dtype=dtype, generator=g)
    # every bit pattern is a value of the dtype (NaN payloads included): byte-exact round trip
    n = 15 * dtype.itemsize
    return torch.randint(0, 256, (n,), dtype=torch.uint8, generator=g).view(dtype).reshape(3, 5)


@pytest.mark.parametrize("dtype", UNPACKED, ids=str)
def test_every_dtype_round_trips(tmp_path, dtype):
    t = _values(dtype)
    path = tmp_path / "d.safetensors"
    save_file({"x": t, "pad": torch.ones(3)}, str(path))
    want = load_file(str(path))["x"]
    loc = locs(path)["x"]
    assert_same_tensor(read_all(loc), want, str(dtype))
    assert_same_blocks(list(iter_blocks(loc, 5)), want, f"{dtype} blocks")


@pytest.mark.parametrize("dtype", PACKED, ids=str)
def test_packed_fp4_is_refused_with_its_dtype_named(tmp_path, dtype):
    path = tmp_path / "f4.safetensors"
    save_file({"x": torch.zeros(4, dtype=torch.uint8).view(dtype)}, str(path))
    loc = locs(path)["x"]
    with pytest.raises(ValuesError, match=loc.dtype):
        read_all(loc)


# -- torch files: dtypes safetensors lacks, 0-d tensors, shared storage ---------------------------

def _torch_file_tensors() -> dict[str, torch.Tensor]:
    import warnings

    g = torch.Generator().manual_seed(6)
    shared = torch.randn(4, 3, generator=g)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "ComplexHalf support is experimental"
        chalf = torch.randn(5, dtype=torch.complex64, generator=g).to(torch.complex32)
    return {"embed.weight": shared, "lm_head.weight": shared,  # tied: one storage, two names
            "complex128": torch.randn(3, 2, dtype=torch.complex128, generator=g),
            "complex32": chalf, "step": torch.tensor(7), "flags": torch.tensor([True, False]),
            "fp8": torch.randn(5, generator=g).to(torch.float8_e5m2),
            "u16": torch.arange(6).to(torch.uint16).reshape(2, 3)}


@pytest.mark.parametrize("name", list(_torch_file_tensors()))
def test_torch_file_tensors_read_back(tmp_path, name):
    tensors = _torch_file_tensors()
    torch.save(tensors, tmp_path / "pytorch_model.bin")
    loaded = torch.load(tmp_path / "pytorch_model.bin", weights_only=True)
    got = locs(tmp_path / "pytorch_model.bin")
    assert set(got) == set(tensors)
    assert_same_tensor(read_all(got[name]), loaded[name], name)


# -- numpy conversions against torch's own -----------------------------------------------------

@pytest.mark.parametrize("tag, dtype", [("F8_E4M3", torch.float8_e4m3fn),
                                        ("F8_E5M2", torch.float8_e5m2),
                                        ("F8_E4M3FNUZ", torch.float8_e4m3fnuz),
                                        ("F8_E5M2FNUZ", torch.float8_e5m2fnuz),
                                        ("F8_E8M0", torch.float8_e8m0fnu)])
def test_fp8_tables_match_torch_on_all_256_codes(tag, dtype):
    from ckpt_browser.values.read import fp8_table

    want = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(dtype).float()
    assert_same_tensor(fp8_table(tag).copy(), want, tag)


def test_bf16_conversion_matches_torch_on_all_65536_codes():
    from ckpt_browser.values.read import natural

    codes = torch.arange(65536, dtype=torch.int32).to(torch.uint16)
    got = natural(codes.numpy(), "BF16")
    assert_same_tensor(got.copy(), codes.view(torch.bfloat16).float(), "BF16")


def test_diff_values_and_stats_of_safetensors_never_import_torch(tmp_path):
    import subprocess
    import sys

    code = ("import sys; from ckpt_browser.cli import main; "
            f"main(['diff', {str(RELEASE)!r}, {str(CKPT3)!r}, '--values', '--json']); "
            f"main(['stats', {str(RELEASE)!r}, '--json']); "
            "print('torch' in sys.modules, file=sys.stderr)")
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, timeout=120)
    assert got.stderr.strip().splitlines()[-1] == "False", got.stderr


def test_legacy_torch_save_format_reads_back(tmp_path):
    g = torch.Generator().manual_seed(9)
    sd = {"w": torch.randn(4, 5, generator=g), "b": torch.randn(5, generator=g).bfloat16(),
          "view": torch.randn(6, 4, generator=g).t()}
    path = tmp_path / "pytorch_model.bin"
    torch.save(sd, path, _use_new_zipfile_serialization=False)  # the pre-1.6 format
    got = locs(path)
    assert got["view"].stride == (1, 4)
    loaded = torch.load(path, weights_only=True)
    for name, loc in got.items():
        assert_same_tensor(read_all(loc), loaded[name], name)
