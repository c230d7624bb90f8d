"""values/diff.py and report/diff.py (the `diff --json` document): pairing by name, statuses,
prefix stripping, globs, value comparison and cancel, on real checkpoints and on files written by
safetensors.torch.save_file, torch.save and torch's dcp_to_torch_save. Expected values come from
torch. `weights_only` keeps these tests off the training-state diff (values/state_diff.py).
"""

from __future__ import annotations

import shutil
import threading

import pytest
import torch
from safetensors.torch import load_file, save_file

from ckpt_browser.analysis.opened import open_path
from ckpt_browser.report.diff import diff_doc
from ckpt_browser.values.diff import Options, compare_values, diff, side_of, structure
from ckpt_browser.values.read import Cancelled

from .helpers import SAMPLES
from .state_helpers import leaves
from .values_helpers import (
    CKPT3,
    CKPT6,
    RANKS2,
    RANKS4,
    RELEASE,
    TITAN,
    assert_metrics,
    dcp_tensors,
    locs,
    torch_load,
    wait_for_dcp_ranks,
)

SHARDS = [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]
WEIGHTS = Options(weights_only=True)
VALUES = Options(values=True, weights_only=True)
CKPT_LIGHTNING = SAMPLES / "lightning" / "last.ckpt"


def run(a, b, opts: Options = WEIGHTS, **kw) -> dict:
    return diff_doc(diff(side_of(open_path(str(a))), side_of(open_path(str(b))), opts, **kw))


def by_name(doc: dict) -> dict[str, dict]:
    return {r["name"]: r for r in doc["tensors"]}


def release_tensors() -> dict[str, torch.Tensor]:
    out = {}
    for shard in SHARDS:
        out.update(load_file(str(RELEASE / shard)))
    return out


def single_file(folder) -> dict[str, torch.Tensor]:
    """The release's shards merged into one model.safetensors, as save_pretrained writes a model
    under its shard size."""
    tensors = release_tensors()
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    shutil.copy(RELEASE / "config.json", folder / "config.json")
    return tensors


def assert_all_unchanged_and_bitwise(rows: list, names) -> None:
    assert sorted(r["name"] for r in rows) == sorted(names)
    for r in rows:
        assert (r["status"], r["bitwise_equal"], r["max_abs_diff"], r["rel_l2"], r["cosine"]) == \
            ("unchanged", True, 0.0, 0.0, 1.0), r["name"]


# -- two steps of one run ------------------------------------------------------------------------

def test_two_steps_of_one_run_all_weights_changed_with_torch_metrics():
    doc = run(CKPT3, CKPT6, VALUES)
    a, b = reference_weights(CKPT3), reference_weights(CKPT6)
    rows = by_name(doc)
    assert set(rows) == set(a) == set(b)
    assert doc["summary"] == {"only_in_a": 0, "only_in_b": 0, "shape_changed": 0,
                              "dtype_changed": 0, "values_changed": 21, "unchanged": 0}
    for name, r in rows.items():
        assert (r["status"], r["bitwise_equal"]) == ("values_changed", False)
        assert r["a"] == {"dtype": "F32", "shape": list(a[name].shape),
                          "file": locs(CKPT3)[name].file}
        assert_metrics(r, a[name], b[name])
    assert doc["differs"] is True and doc["state"]["tensors"] == []


def reference_weights(folder) -> dict[str, torch.Tensor]:
    out = {}
    for shard in SHARDS:
        out.update(load_file(str(folder / shard)))
    return out


def test_without_values_the_same_shapes_are_unchanged_and_values_changed_is_null():
    doc = run(CKPT3, CKPT6, WEIGHTS)
    assert doc["summary"]["values_changed"] is None
    assert doc["summary"]["unchanged"] == 21
    assert all(r["status"] == "unchanged" and r["max_abs_diff"] is None
               and r["bitwise_equal"] is None for r in doc["tensors"])
    assert doc["differs"] is False


# -- the same weights in other layouts -----------------------------------------------------------

def test_single_file_against_shards_is_unchanged(tmp_path):
    tensors = single_file(tmp_path / "one")
    doc = run(RELEASE, tmp_path / "one", VALUES)
    assert_all_unchanged_and_bitwise(doc["tensors"], tensors)
    rows = by_name(doc)
    assert {r["a"]["file"] for r in rows.values()} == set(SHARDS)
    assert {r["b"]["file"] for r in rows.values()} == {"model.safetensors"}
    assert doc["differs"] is False and doc["summary"]["unchanged"] == len(tensors)


def test_safetensors_against_pytorch_model_bin_files(tmp_path):
    tensors = single_file(tmp_path / "st")
    torch.save(tensors, tmp_path / "pytorch_model.bin")  # what save_pretrained wrote before v5
    doc = run(tmp_path / "st" / "model.safetensors", tmp_path / "pytorch_model.bin", VALUES)
    assert_all_unchanged_and_bitwise(doc["tensors"], tensors)


def test_safetensors_folder_against_a_pytorch_model_bin_folder(tmp_path):
    """An HF model folder saved with safe_serialization=False holds config.json and
    pytorch_model.bin; its weights are the same tensors as the safetensors export."""
    tensors = single_file(tmp_path / "st")
    (tmp_path / "bin").mkdir()
    torch.save(tensors, tmp_path / "bin" / "pytorch_model.bin")
    shutil.copy(RELEASE / "config.json", tmp_path / "bin" / "config.json")
    doc = run(RELEASE, tmp_path / "bin", VALUES)
    assert_all_unchanged_and_bitwise(doc["tensors"], tensors)


def test_dcp_from_2_ranks_against_4_ranks_every_tensor_unchanged():
    wait_for_dcp_ranks()
    opts = Options(values=True)
    rows, state_rows, notes = structure(side_of(open_path(str(RANKS2))),
                                        side_of(open_path(str(RANKS4))), opts)
    compare_values(rows + state_rows, opts)
    want = dcp_tensors(RANKS2)
    everything = rows + state_rows
    assert sorted(r.name for r in everything) == sorted(want)
    # the model FQNs at the top level are the weights; optimizer.* is training state
    assert sorted(r.name for r in rows) == sorted(n for n in want if not n.startswith("optimizer."))
    four = locs(RANKS4)
    assert any(p.offsets[1] > 0 for p in four["layers.0.feed_forward.w2.weight"].pieces)
    for r in everything:
        assert (r.status, r.error, r.values.bitwise_equal, r.values.compared) == \
            ("unchanged", None, True, want[r.name].numel()), r.name
    assert notes == []


@pytest.fixture(scope="module")
def titan_export(tmp_path_factory):
    """torchtitan's DCP converted by torch (dcp_to_torch_save), its model weights saved with
    save_file with and without a "model." prefix."""
    weights = {n for n, loc in locs(TITAN).items() if loc.component == "weights"}
    assert len(weights) == 12
    state = dcp_tensors(TITAN)
    model = {n: state[n].contiguous() for n in weights}
    root = tmp_path_factory.mktemp("titan-export")
    for name, prefix in (("plain", ""), ("prefixed", "model.")):
        (root / name).mkdir()
        save_file({prefix + k: v for k, v in model.items()}, str(root / name / "model.safetensors"))
    return root, model


def test_dcp_against_its_safetensors_export(titan_export):
    root, model = titan_export
    doc = run(TITAN, root / "plain", VALUES)
    assert_all_unchanged_and_bitwise(doc["tensors"], model)
    assert doc["differs"] is False


def test_strip_prefix_lines_up_a_prefixed_export(titan_export):
    root, model = titan_export
    doc = run(TITAN, root / "prefixed", Options(values=True, weights_only=True, strip_b="model."))
    assert_all_unchanged_and_bitwise(doc["tensors"], model)
    for r in doc["tensors"]:
        assert r["names"] == {"a": r["name"], "b": "model." + r["name"]}
    back = run(root / "prefixed", TITAN, Options(values=True, weights_only=True, strip_a="model."))
    assert_all_unchanged_and_bitwise(back["tensors"], model)


def test_without_stripping_a_prefix_nothing_pairs_and_a_note_says_why(titan_export):
    root, model = titan_export
    doc = run(TITAN, root / "prefixed", VALUES)
    assert doc["summary"]["only_in_a"] == doc["summary"]["only_in_b"] == len(model)
    assert {r["status"] for r in doc["tensors"]} == {"only_in_a", "only_in_b"}
    assert any("--strip-prefix" in n for n in doc["notes"])
    assert doc["differs"] is True


def test_strip_prefix_on_a_lightning_checkpoint_against_its_export(tmp_path):
    ckpt = torch_load(CKPT_LIGHTNING)
    sd = ckpt["state_dict"]
    save_file({k: v.contiguous() for k, v in sd.items()}, str(tmp_path / "model.safetensors"))
    doc = run(CKPT_LIGHTNING, tmp_path / "model.safetensors",
              Options(values=True, weights_only=True, strip_a="state_dict."))
    assert_all_unchanged_and_bitwise(doc["tensors"], sd)


def test_a_name_twice_after_stripping_is_noted(tmp_path):
    t = torch.ones(2)
    save_file({"model.x": t, "x": t * 2}, str(tmp_path / "a.safetensors"))
    save_file({"x": t}, str(tmp_path / "b.safetensors"))
    doc = run(tmp_path / "a.safetensors", tmp_path / "b.safetensors",
              Options(weights_only=True, strip_a="model."))
    assert [r["name"] for r in doc["tensors"]] == ["x"]
    assert any("twice" in n for n in doc["notes"])


# -- include / exclude -------------------------------------------------------------------------

def test_include_and_exclude_globs_select_rows():
    every = sorted(locs(RELEASE))
    doc = run(CKPT3, CKPT6, Options(weights_only=True, include=("*.self_attn.*",)))
    assert sorted(by_name(doc)) == [n for n in every if ".self_attn." in n]
    doc = run(CKPT3, CKPT6, Options(weights_only=True, exclude=("*norm*", "lm_head.*")))
    assert sorted(by_name(doc)) == [n for n in every if "norm" not in n and
                                    not n.startswith("lm_head.")]
    doc = run(CKPT3, CKPT6, Options(weights_only=True, include=("model.layers.1.*", "lm_head.*"),
                                    exclude=("*.mlp.*",)))
    assert sorted(by_name(doc)) == [n for n in every if (n.startswith("model.layers.1.") or
                                                         n.startswith("lm_head."))
                                    and ".mlp." not in n]


def test_globs_match_names_after_stripping(titan_export):
    root, model = titan_export
    doc = run(TITAN, root / "prefixed", Options(weights_only=True, strip_b="model.",
                                                include=("layers.0.attention.*",)))
    want = sorted(n for n in model if n.startswith("layers.0.attention."))
    assert sorted(by_name(doc)) == want and want
    assert all(r["status"] == "unchanged" for r in doc["tensors"])


# -- every status --------------------------------------------------------------------------------

@pytest.fixture
def statuses(tmp_path):
    g = torch.Generator().manual_seed(9)
    same, changed, reshaped, recast = (torch.randn(4, 6, generator=g) for _ in range(4))
    gone, new = torch.randn(3, generator=g), torch.randn(5, generator=g)
    a = {"same": same, "changed": changed, "reshaped": reshaped, "recast": recast, "gone": gone}
    b = {"same": same.clone(), "changed": changed + torch.randn(4, 6, generator=g) * 1e-2,
         "reshaped": reshaped.reshape(6, 4).contiguous(), "recast": recast.to(torch.bfloat16),
         "new": new}
    for side, tensors in (("a", a), ("b", b)):
        (tmp_path / side).mkdir()
        save_file(tensors, str(tmp_path / side / "model.safetensors"))
    return tmp_path / "a", tmp_path / "b", a, b


STATUS = {"same": "unchanged", "changed": "values_changed", "reshaped": "shape_changed",
          "recast": "dtype_changed", "gone": "only_in_a", "new": "only_in_b"}


def test_every_status_without_values(statuses):
    a, b, ta, tb = statuses
    doc = run(a, b)
    rows = by_name(doc)
    assert set(rows) == set(ta) | set(tb)
    assert {n: r["status"] for n, r in rows.items()} == {**STATUS, "changed": "unchanged"}
    assert doc["summary"] == {"only_in_a": 1, "only_in_b": 1, "shape_changed": 1,
                              "dtype_changed": 1, "values_changed": None, "unchanged": 2}
    assert rows["gone"]["b"] is None and rows["new"]["a"] is None
    assert rows["gone"]["a"] == {"dtype": "F32", "shape": [3], "file": "model.safetensors"}
    assert rows["reshaped"]["b"] == {"dtype": "F32", "shape": [6, 4], "file": "model.safetensors"}
    assert rows["recast"]["b"]["dtype"] == "BF16"
    assert doc["differs"] is True


def test_every_status_with_values(statuses):
    a, b, ta, tb = statuses
    doc = run(a, b, VALUES)
    rows = by_name(doc)
    assert {n: r["status"] for n, r in rows.items()} == STATUS
    assert doc["summary"] == {"only_in_a": 1, "only_in_b": 1, "shape_changed": 1,
                              "dtype_changed": 1, "values_changed": 1, "unchanged": 1}
    assert rows["same"]["bitwise_equal"] is True
    assert_metrics(rows["changed"], ta["changed"], tb["changed"])
    # a dtype change keeps its status; its values are measured after the float32 cast
    assert rows["recast"]["bitwise_equal"] is False
    assert_metrics(rows["recast"], ta["recast"], tb["recast"])
    assert rows["recast"]["max_abs_diff"] > 0
    for name in ("reshaped", "gone", "new"):  # nothing to compare element by element
        r = rows[name]
        assert (r["max_abs_diff"], r["mean_abs_diff"], r["rel_l2"], r["cosine"]) == (None,) * 4


def test_tolerances_make_small_perturbations_unchanged(tmp_path):
    t = torch.randn(50, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    save_file({"w": t}, str(tmp_path / "a.safetensors"))
    save_file({"w": t + 1e-7}, str(tmp_path / "b.safetensors"))
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    assert run(a, b, VALUES)["tensors"][0]["status"] == "values_changed"
    for opts in (Options(values=True, weights_only=True, atol=2e-7),
                 Options(values=True, weights_only=True, rtol=1.0)):
        doc = run(a, b, opts)
        assert doc["tensors"][0]["status"] == "unchanged"
        assert doc["tensors"][0]["bitwise_equal"] is False
        assert doc["differs"] is False
    tight = run(a, b, Options(values=True, weights_only=True, atol=5e-8))
    assert tight["tensors"][0]["status"] == "values_changed"


def test_nan_in_the_same_place_is_unchanged_and_nan_against_a_number_is_not(tmp_path):
    nan = float("nan")
    save_file({"w": torch.tensor([1.0, nan, 3.0]), "v": torch.tensor([nan, 2.0, 3.0])},
              str(tmp_path / "a.safetensors"))
    save_file({"w": torch.tensor([1.0, nan, 3.0]), "v": torch.tensor([1.0, 2.0, 3.0])},
              str(tmp_path / "b.safetensors"))
    rows = by_name(run(tmp_path / "a.safetensors", tmp_path / "b.safetensors", VALUES))
    assert rows["w"]["status"] == "unchanged"
    assert (rows["v"]["status"], rows["v"]["nonfinite_mismatch"]) == ("values_changed", 1)
    assert "nonfinite_mismatch" not in rows["w"]


# -- progress, cancel, unreadable values -----------------------------------------------------------

def test_progress_reaches_the_total_bytes_of_both_sides():
    a, b = side_of(open_path(str(CKPT3))), side_of(open_path(str(CKPT6)))
    rows, _, _ = structure(a, b, VALUES)
    seen = []
    compare_values(rows, VALUES, progress=lambda done, total, name: seen.append((done, total)))
    total = sum(r.a.nbytes + r.b.nbytes for r in rows)
    assert seen[-1] == (total, total)
    assert all(d1 <= d2 for (d1, _), (d2, _) in zip(seen, seen[1:]))


def test_cancel_during_compare_values_raises_cancelled():
    a, b = side_of(open_path(str(CKPT3))), side_of(open_path(str(CKPT6)))
    rows, _, _ = structure(a, b, VALUES)
    cancel = threading.Event()
    names = []

    def progress(done, total, name):
        names.append(name)
        if len(set(names)) > 1:  # the first tensor is done, the second has started
            cancel.set()

    with pytest.raises(Cancelled):
        compare_values(rows, VALUES, cancel=cancel, progress=progress)
    compared = [r for r in rows if r.values is not None]
    assert 1 <= len(compared) < len(rows)


def test_cancel_through_diff_raises_cancelled():
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Cancelled):
        diff(side_of(open_path(str(CKPT3))), side_of(open_path(str(CKPT6))), VALUES, cancel=cancel)


def test_values_that_cannot_be_read_are_an_error_on_their_row(tmp_path):
    damaged = tmp_path / "damaged"
    shutil.copytree(RELEASE, damaged)
    shard = damaged / SHARDS[0]
    with open(shard, "r+b") as f:
        f.truncate(f.seek(0, 2) - 100)
    result = diff(side_of(open_path(str(RELEASE))), side_of(open_path(str(damaged))), VALUES)
    assert result.errors == 1
    doc = diff_doc(result)
    bad = [r for r in doc["tensors"] if "error" in r]
    assert len(bad) == 1 and SHARDS[0] in bad[0]["error"]
    assert doc["summary"]["errors"] == 1
    assert all(r["bitwise_equal"] for r in doc["tensors"] if "error" not in r)


# -- the optimizer tensors are compared too (state.tensors) ----------------------------------------

def test_state_rows_hold_the_optimizer_tensors_with_torch_metrics():
    a, b = side_of(open_path(str(CKPT3))), side_of(open_path(str(CKPT6)))
    opts = Options(values=True)
    rows, state_rows, _ = structure(a, b, opts)
    compare_values(state_rows, opts)
    ta = dict(leaves(torch_load(CKPT3 / "optimizer.pt")))
    tb = dict(leaves(torch_load(CKPT6 / "optimizer.pt")))
    ta["cpu"] = torch_load(CKPT3 / "rng_state.pth")["cpu"]
    tb["cpu"] = torch_load(CKPT6 / "rng_state.pth")["cpu"]
    assert sorted(r.name for r in state_rows) == sorted(ta)
    assert len(rows) == 21
    for r in state_rows:
        assert r.status == ("unchanged" if torch.equal(ta[r.name], tb[r.name])
                            else "values_changed"), r.name
        assert_metrics(r.values, ta[r.name], tb[r.name])
