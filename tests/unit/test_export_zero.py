"""export.zero: a DeepSpeed ZeRO checkpoint's fp32 weights, exactly as DeepSpeed's own
zero_to_fp32 rebuilds them (tests/data/zero_fp32, written by make_references.py from the same
samples), found as byte ranges of the rank files and read back through values.read."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from safetensors import safe_open

from ckpt_browser.analysis.opened import open_path
from ckpt_browser.errors import CheckpointError
from ckpt_browser.export.item import Item
from ckpt_browser.export.zero import zero_items
from ckpt_browser.export.zero_pieces import Flat, zero2_params, zero3_params
from ckpt_browser.values.read import iter_raw, natural

SAMPLES = Path(__file__).resolve().parents[2] / "sample_checkpoints"
REFS = Path(__file__).resolve().parents[1] / "data" / "zero_fp32"
CASES = {  # reference -> the folder opened
    "deepspeed-run": "deepspeed-run",
    "deepspeed-zero3": "projects/deepspeed-zero3",
    "deepspeed-zero1": "deepspeed-zero1",
    "deepspeed-zero2-tied": "deepspeed-zero2-tied",
    "deepspeed-zero3-tied": "deepspeed-zero3-tied",
}
DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


def items_of(path: Path) -> tuple[list[Item], list[str]]:
    got = zero_items(open_path(str(path)).checkpoint)
    assert got is not None
    return got


def values(item: Item) -> np.ndarray:
    """The item as the writer writes it: its loc's bytes in order, cast to its dtype."""
    blocks = [b for _, b in iter_raw(item.loc)]
    raw = np.concatenate(blocks) if blocks else np.empty(0, DTYPES[item.loc.dtype])
    assert raw.size == item.loc.numel
    if item.dtype != item.loc.dtype:
        import torch

        cast = {"F32": torch.float32}[item.dtype]
        raw = torch.from_numpy(natural(raw, item.loc.dtype).copy()).to(cast).numpy()
    return raw.reshape(item.shape)


def reference(name: str) -> tuple[dict[str, np.ndarray], list[str], dict[str, str]]:
    with safe_open(str(REFS / f"{name}.safetensors"), "numpy") as f:
        meta = f.metadata()
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    return tensors, json.loads(meta["order"]), json.loads(meta["tied"])


@pytest.mark.parametrize("name", list(CASES))
def test_the_same_names_shapes_and_bits_as_deepspeed(name):
    ref, order, _ = reference(name)
    items, _ = items_of(SAMPLES / CASES[name])
    assert [i.name for i in items] == order
    for item in items:
        want, got = ref[item.name], values(item)
        assert (got.dtype, got.shape) == (want.dtype, want.shape), item.name
        assert got.tobytes() == want.tobytes(), item.name


def test_the_tag_folder_opened_alone_gives_the_same():
    ref, order, _ = reference("deepspeed-run")
    items, _ = items_of(SAMPLES / "deepspeed-run" / "global_step4")
    assert [i.name for i in items] == order
    assert all(values(i).tobytes() == ref[i.name].tobytes() for i in items)


@pytest.mark.parametrize("name", ["deepspeed-zero1", "deepspeed-zero2-tied",
                                  "deepspeed-zero3-tied"])
def test_tied_names_are_stored_once_and_said(name):
    _, _, tied = reference(name)
    items, notes = items_of(SAMPLES / CASES[name])
    assert tied == {"lm_head.weight": "embed.weight"}
    assert {i.name: i.same_as for i in items if i.same_as} == tied
    by_name = {i.name: i for i in items}
    assert by_name["lm_head.weight"].loc == by_name["embed.weight"].loc
    assert "lm_head.weight is tied to embed.weight: stored once" in notes


def test_what_zero_to_fp32_casts_and_leaves_out_is_said():
    items, notes = items_of(SAMPLES / "deepspeed-zero1")
    mask = next(i for i in items if i.name == "mask")
    assert (mask.loc.dtype, mask.dtype) == ("F16", "F32")  # buffers: v.float()
    assert any("mask (F16)" in n for n in notes)
    assert any("left out" in n and "gain, offset" in n for n in notes)  # ZeRO-1: not saved
    assert notes[0].startswith("DeepSpeed ZeRO stage 1, 2 data-parallel ranks")


def test_zero2_frozen_parameters_keep_their_saved_dtype():
    items, notes = items_of(SAMPLES / "deepspeed-zero2-tied")
    gain = next(i for i in items if i.name == "gain")
    assert (gain.loc.dtype, gain.dtype, gain.shape) == ("F16", "F16", (8,))
    assert gain.loc.file == "global_step3/mp_rank_00_model_states.pt"
    assert any("2 frozen parameters" in n and "(F16)" in n for n in notes)


def test_zero3_pieces_come_from_every_rank_and_leave_the_padding_out():
    items, notes = items_of(SAMPLES / "deepspeed-zero3-tied")
    offset = next(i for i in items if i.name == "offset")  # frozen, 3 elements over 2 ranks
    assert [(p.path.rsplit("/", 1)[-1], p.offsets, p.sizes) for p in offset.loc.pieces] == [
        ("zero_pp_rank_0_mp_rank_00_model_states.pt", (0,), (2,)),
        ("zero_pp_rank_1_mp_rank_00_model_states.pt", (2,), (1,))]
    assert any("2 frozen parameters" in n for n in notes)


def test_not_a_zero_checkpoint():
    assert zero_items(open_path(str(SAMPLES / "tiny-llama-run" / "checkpoint-3")).checkpoint) \
        is None


# --- damaged copies -------------------------------------------------------------------------

def copy(tmp_path: Path, name: str) -> Path:
    dst = tmp_path / "run"
    shutil.copytree(SAMPLES / CASES[name], dst)
    return dst


def refused(path: Path) -> str:
    with pytest.raises(CheckpointError) as e:
        zero_items(open_path(str(path)).checkpoint)
    assert "\n" not in str(e.value)
    return str(e.value)


@pytest.mark.parametrize("name,tag", [("deepspeed-run", "global_step4"),
                                      ("deepspeed-zero3", "global_step2")])
@pytest.mark.parametrize("rank", [0, 1])
def test_a_missing_rank_file_is_named(tmp_path, name, tag, rank):
    run = copy(tmp_path, name)
    (run / tag / f"zero_pp_rank_{rank}_mp_rank_00_optim_states.pt").unlink()
    msg = refused(run)
    assert f"{tag}/zero_pp_rank_{rank}_mp_rank_00_optim_states.pt: missing" in msg


@pytest.mark.parametrize("name,tag", [("deepspeed-run", "global_step4"),
                                      ("deepspeed-zero3-tied", "global_step3")])
@pytest.mark.parametrize("keep", [0.5, 0.98])
def test_a_truncated_rank_file_is_named(tmp_path, name, tag, keep):
    run = copy(tmp_path, name)
    f = run / tag / "zero_pp_rank_1_mp_rank_00_optim_states.pt"
    data = f.read_bytes()
    f.write_bytes(data[:int(len(data) * keep)])
    assert "zero_pp_rank_1_mp_rank_00_optim_states.pt" in refused(run)


def test_no_optim_states_at_all(tmp_path):
    run = copy(tmp_path, "deepspeed-run")
    for f in (run / "global_step4").glob("*optim_states.pt"):
        f.unlink()
    assert "mp_rank_00_model_states.pt: no *_optim_states.pt" in refused(run)


def test_a_rank_file_that_is_not_an_optimizer_state(tmp_path):
    run = copy(tmp_path, "deepspeed-run")
    tag = run / "global_step4"
    shutil.copy(tag / "mp_rank_00_model_states.pt",
                tag / "zero_pp_rank_0_mp_rank_00_optim_states.pt")
    assert "zero_pp_rank_0_mp_rank_00_optim_states.pt: holds no optimizer_state_dict" in \
        refused(run)


def test_zero3_frozen_fragments_need_every_rank(tmp_path):
    run = copy(tmp_path, "deepspeed-zero3-tied")
    (run / "global_step3" / "zero_pp_rank_1_mp_rank_00_model_states.pt").unlink()
    assert "zero_pp_rank_1_mp_rank_00_model_states.pt: missing" in refused(run)


def test_a_rank_file_of_another_save_is_refused(tmp_path):
    run = copy(tmp_path, "deepspeed-run")
    other = SAMPLES / "projects" / "deepspeed-zero3" / "global_step2"
    shutil.copy(other / "zero_pp_rank_1_mp_rank_00_optim_states.pt",
                run / "global_step4" / "zero_pp_rank_1_mp_rank_00_optim_states.pt")
    assert "zero_pp_rank_1_mp_rank_00_optim_states.pt" in refused(run)


# --- the layouts, on made-up partitions ------------------------------------------------------

def flats(*numels: int, rank: int = 0) -> list[Flat]:
    return [Flat(f"r{rank}", f"r{rank}", 1000 * rank + 100 * g, n, "F32")
            for g, n in enumerate(numels)]


def test_zero2_parameters_cross_rank_boundaries_in_rank_order():
    ranks = [flats(5, rank=0), flats(5, rank=1)]
    a, b = zero2_params([[("a", (3,)), ("b", (2, 3))]], ranks, None)
    assert [(p.path, p.offset, p.offsets, p.sizes) for p in b.pieces] == [
        ("r0", 12, (0,), (2,)), ("r1", 1000, (2,), (4,))]
    assert [(p.path, p.offsets, p.sizes) for p in a.pieces] == [("r0", (0,), (3,))]


def test_zero2_alignment_padding_skips_elements():
    ranks = [flats(4, rank=0), flats(4, rank=1)]
    _, b = zero2_params([[("a", (3,)), ("b", (4,))]], ranks, [[1, 0]])
    assert [(p.path, p.offset) for p in b.pieces] == [("r1", 1000)]


@pytest.mark.parametrize("shapes", [[("a", (11,))], [("a", (3,))]])
def test_zero2_shapes_that_do_not_fit_the_partitions(shapes):
    with pytest.raises(CheckpointError, match="r0"):
        zero2_params([shapes], [flats(5, rank=0), flats(5, rank=1)], None)


def test_zero3_slices_per_rank_and_the_padding_is_dropped():
    ranks = [flats(3, rank=0), flats(3, rank=1)]
    a, b = zero3_params([("a", (3,)), ("b", (2,))], ranks)
    assert [(p.path, p.offset, p.offsets, p.sizes) for p in a.pieces] == [
        ("r0", 0, (0,), (2,)), ("r1", 1000, (2,), (1,))]
    assert [(p.path, p.offset, p.offsets, p.sizes) for p in b.pieces] == [
        ("r0", 8, (0,), (1,)), ("r1", 1008, (1,), (1,))]


def test_zero3_ranks_that_disagree():
    with pytest.raises(CheckpointError, match="rank 0's hold"):
        zero3_params([("a", (4,))], [flats(2, rank=0), flats(3, rank=1)])
    with pytest.raises(CheckpointError, match="partitions hold"):
        zero3_params([("a", (2,))], [flats(2, rank=0), flats(2, rank=1)])


def test_rank_files_past_the_read_limit_are_read_for_the_export(monkeypatch):
    import dataclasses

    from ckpt_browser import limits

    monkeypatch.setattr(limits, "LIMITS", dataclasses.replace(limits.LIMITS, rank_files=1))
    ref, order, _ = reference("deepspeed-zero3-tied")
    items, _ = items_of(SAMPLES / CASES["deepspeed-zero3-tied"])
    assert [i.name for i in items] == order
    assert all(values(i).tobytes() == ref[i.name].tobytes() for i in items)


def edit_model_states(run: Path, **changes) -> None:
    """Our own sample's model_states, re-saved with some fields changed (it loads with
    weights_only=True)."""
    import torch

    f = run / "global_step4" / "mp_rank_00_model_states.pt"
    sd = torch.load(f, weights_only=True)
    sd.update(changes)
    torch.save(sd, f)


def test_a_world_size_that_disagrees(tmp_path):
    run = copy(tmp_path, "deepspeed-run")
    edit_model_states(run, dp_world_size=4)
    msg = refused(run)
    assert "mp_rank_00_model_states.pt: dp_world_size is 4" in msg and "2 ways" in msg


def test_param_shapes_that_do_not_add_up(tmp_path):
    import torch

    run = copy(tmp_path, "deepspeed-run")
    shapes = {"fc1.weight": torch.Size([16, 8]), "fc1.bias": torch.Size([16]),
              "fc2.weight": torch.Size([4, 16]), "fc2.bias": torch.Size([6])}
    edit_model_states(run, param_shapes=[shapes])
    msg = refused(run)
    assert "fc2.bias needs elements 208 to 214 of parameter group 0" in msg
    # as zero_to_fp32, a shortfall within its 2 * world size alignment passes; more does not
    shapes["fc2.bias"] = torch.Size([1])
    edit_model_states(run, param_shapes=[shapes])
    assert zero_items(open_path(str(run)).checkpoint) is not None
    shapes["fc1.bias"] = torch.Size([8])
    edit_model_states(run, param_shapes=[shapes])
    assert "param_shapes use 201 elements; the 2 partitions hold 212" in refused(run)
