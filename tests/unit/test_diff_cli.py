"""`ckpt-browser diff`: exit codes (0 same, 1 differences, 2 trouble), the --json schema the issue
fixes, the text report, and one-line errors. Runs `ckpt_browser.cli.main` in-process; the tensor
lists and values it is checked against come from safetensors and torch.
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from ckpt_browser.cli import main

from .state_helpers import leaves
from .values_helpers import (
    CKPT3,
    CKPT6,
    RELEASE,
    RUN,
    TITAN,
    assert_metrics,
    dcp_tensors,
    locs,
    one_line,
    reference,
    strict_json,
    torch_load,
)

SHARDS = [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]
STATUSES = {"only_in_a", "only_in_b", "shape_changed", "dtype_changed", "values_changed",
            "unchanged"}
ROW = {"name", "status", "a", "b", "max_abs_diff", "mean_abs_diff", "rel_l2", "cosine",
       "bitwise_equal"}
SUMMARY = ["only_in_a", "only_in_b", "shape_changed", "dtype_changed", "values_changed",
           "unchanged"]


def cli(capsys, *args) -> tuple[int, str, str]:
    code = main(["diff", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def names_in(*files) -> dict[str, tuple[str, list[int]]]:
    """name -> (dtype, shape) as the real safetensors library reads the files."""
    out = {}
    for f in files:
        with safe_open(str(f), framework="pt") as s:
            for k in s.keys():
                sl = s.get_slice(k)
                out[k] = (sl.get_dtype(), list(sl.get_shape()))
    return out


def assert_schema(doc: dict, a: dict, b: dict, values: bool) -> None:
    """The document the issue fixes; a and b: name -> (dtype, shape) of each side's tensors."""
    assert set(doc) == {"a", "b", "summary", "tensors", "state", "options", "problems", "notes",
                        "differs"}
    assert isinstance(doc["a"], str) and isinstance(doc["b"], str)
    assert set(SUMMARY) <= set(doc["summary"]) <= set(SUMMARY) | {"errors"}
    for k in SUMMARY:
        v = doc["summary"][k]
        if k == "values_changed" and not values:
            assert v is None
        else:
            assert isinstance(v, int) and not isinstance(v, bool)
    rows = doc["tensors"]
    assert sorted(r["name"] for r in rows) == sorted(set(a) | set(b)), "not every tensor listed"
    counts = {s: 0 for s in STATUSES}
    for r in rows:
        assert ROW <= set(r) <= ROW | {"nonfinite_mismatch", "names", "error"}
        compared = values and r["status"] in ("unchanged", "values_changed", "dtype_changed")
        if compared:
            assert isinstance(r["bitwise_equal"], bool)
        else:
            assert r["bitwise_equal"] is None
        assert r["status"] in STATUSES
        counts[r["status"]] += 1
        for side, names in (("a", a), ("b", b)):
            if r["name"] in names:
                assert set(r[side]) == {"dtype", "shape", "file"}
                assert (r[side]["dtype"], r[side]["shape"]) == names[r["name"]]
                assert isinstance(r[side]["file"], str)
            else:
                assert r[side] is None
        for k in ("max_abs_diff", "mean_abs_diff", "rel_l2", "cosine"):
            assert r[k] is None or isinstance(r[k], float)
        if not values:
            assert r["max_abs_diff"] is None
            if r["name"] in a and r["name"] in b and a[r["name"]] == b[r["name"]]:
                assert r["status"] == "unchanged"
    for k in SUMMARY:
        if doc["summary"][k] is not None:
            assert doc["summary"][k] == counts[k], k
    assert isinstance(doc["state"], dict)


# -- exit 0 and 1 ----------------------------------------------------------------------------------

@pytest.fixture
def merged(tmp_path):
    tensors = {}
    for shard in SHARDS:
        tensors.update(load_file(str(RELEASE / shard)))
    (tmp_path / "one").mkdir()
    save_file(tensors, str(tmp_path / "one" / "model.safetensors"), metadata={"format": "pt"})
    return tmp_path / "one"


def test_the_same_weights_sharded_differently_exit_0(capsys, merged):
    code, out, err = cli(capsys, RELEASE, merged, "--values", "--weights-only")
    assert (code, err) == (0, "")
    assert "0 values changed" in out and "21 unchanged" in out


def test_the_same_weights_json_follows_the_schema(capsys, merged):
    code, out, err = cli(capsys, RELEASE, merged, "--values", "--weights-only", "--json")
    assert (code, err) == (0, "")
    doc = strict_json(out)
    names = names_in(*(RELEASE / s for s in SHARDS))
    assert_schema(doc, names, names_in(merged / "model.safetensors"), values=True)
    assert doc["summary"]["unchanged"] == 21 and doc["summary"]["values_changed"] == 0
    assert doc["differs"] is False


@pytest.fixture
def statuses(tmp_path):
    g = torch.Generator().manual_seed(9)
    same, changed, reshaped, recast = (torch.randn(4, 6, generator=g) for _ in range(4))
    a = {"same": same, "changed": changed, "reshaped": reshaped, "recast": recast,
         "gone": torch.randn(3, generator=g)}
    b = {"same": same.clone(), "changed": changed + 0.5, "recast": recast.to(torch.bfloat16),
         "reshaped": reshaped.reshape(6, 4).contiguous(), "new": torch.randn(5, generator=g)}
    save_file(a, str(tmp_path / "a.safetensors"))
    save_file(b, str(tmp_path / "b.safetensors"))
    return tmp_path / "a.safetensors", tmp_path / "b.safetensors", a, b


def test_differences_exit_1_and_the_text_names_each_change(capsys, statuses):
    a, b, ta, tb = statuses
    code, out, err = cli(capsys, a, b, "--values")
    assert (code, err) == (1, "")
    lines = out.splitlines()
    assert "  - gone  F32 [3]" in lines
    assert "  + new  F32 [5]" in lines
    assert any(line.startswith("  ~ reshaped  F32 [4, 6] -> F32 [6, 4]") for line in lines)
    assert any(line.startswith("  ~ recast  F32 [4, 6] -> BF16 [4, 6]") for line in lines)
    changed = next(line for line in lines if line.startswith("  ~ changed  F32 [4, 6]"))
    assert f"max|d| {(ta['changed'] - tb['changed']).abs().max().item():.4g}" in changed
    assert not any(" same " in line for line in lines)  # unchanged tensors are only counted
    assert "1 only in A, 1 only in B, 1 shape changed, 1 dtype changed, 1 values changed, " \
        "1 unchanged" in out


def test_differences_json_every_tensor_of_both_sides(capsys, statuses):
    a, b, ta, tb = statuses
    for values in (False, True):
        code, out, err = cli(capsys, a, b, "--json", *(["--values"] if values else []))
        assert (code, err) == (1, "")
        doc = strict_json(out)
        assert_schema(doc, names_in(a), names_in(b), values)
        rows = {r["name"]: r for r in doc["tensors"]}
        assert rows["changed"]["status"] == ("values_changed" if values else "unchanged")
        if values:
            assert_metrics(rows["changed"], ta["changed"], tb["changed"])
            assert_metrics(rows["recast"], ta["recast"], tb["recast"])


def test_two_steps_of_one_run_json_with_values(capsys):
    code, out, err = cli(capsys, CKPT3, CKPT6, "--values", "--weights-only", "--json")
    assert (code, err) == (1, "")
    doc = strict_json(out)
    sa = names_in(*(CKPT3 / s for s in SHARDS))
    assert_schema(doc, sa, names_in(*(CKPT6 / s for s in SHARDS)), values=True)
    assert doc["summary"]["values_changed"] == 21
    wa = {k: v for s in SHARDS for k, v in load_file(str(CKPT3 / s)).items()}
    wb = {k: v for s in SHARDS for k, v in load_file(str(CKPT6 / s)).items()}
    for r in doc["tensors"]:
        assert_metrics(r, wa[r["name"]], wb[r["name"]])


def test_without_values_two_steps_have_no_structural_difference(capsys):
    code, out, err = cli(capsys, CKPT3, CKPT6, "--weights-only")
    assert (code, err) == (0, "")
    assert "with the same shape and dtype (values not compared: --values compares them)" in out


def test_strip_prefix_and_globs_from_the_command_line(capsys, tmp_path):
    state = dcp_tensors(TITAN)
    weights = {n for n, loc in locs(TITAN).items() if loc.component == "weights"}
    save_file({f"model.{n}": state[n].contiguous() for n in weights},
              str(tmp_path / "model.safetensors"))
    code, out, err = cli(capsys, TITAN, tmp_path / "model.safetensors", "--values",
                         "--weights-only", "--json", "--strip-prefix-b", "model.",
                         "--include", "layers.0.*", "--exclude", "*.wq.*")
    assert (code, err) == (0, "")
    doc = strict_json(out)
    want = sorted(n for n in weights if n.startswith("layers.0.") and ".wq." not in n)
    assert sorted(r["name"] for r in doc["tensors"]) == want and want
    assert all(r["bitwise_equal"] for r in doc["tensors"])
    assert doc["options"]["strip_prefix_b"] == "model."
    code, out, err = cli(capsys, TITAN, tmp_path / "model.safetensors", "--weights-only")
    assert code == 1 and "--strip-prefix" in out


# -- exit 2 ----------------------------------------------------------------------------------------

def test_a_missing_path_exits_2_with_one_line(capsys, tmp_path):
    missing = tmp_path / "nowhere"
    code, out, err = cli(capsys, RELEASE, missing)
    assert (code, out) == (2, "")
    one_line(err, str(missing))


def test_a_folder_of_several_checkpoints_exits_2_naming_them(capsys):
    code, out, err = cli(capsys, RUN, RELEASE)
    assert (code, out) == (2, "")
    one_line(err, "checkpoint-3", "checkpoint-6")


def test_unreadable_values_exit_2_and_the_report_shows_the_row(capsys, tmp_path):
    damaged = shutil.copytree(RELEASE, tmp_path / "damaged")
    with open(damaged / SHARDS[0], "r+b") as f:
        f.truncate(f.seek(0, 2) - 100)
    code, out, err = cli(capsys, RELEASE, damaged, "--values", "--weights-only", "--json")
    assert code == 2
    one_line(err, "1 tensor")
    doc = strict_json(out)
    bad = [r for r in doc["tensors"] if "error" in r]
    assert len(bad) == 1 and SHARDS[0] in bad[0]["error"]
    code, out, err = cli(capsys, RELEASE, damaged, "--values", "--weights-only")
    assert code == 2 and "values unreadable" in out
    one_line(err)


@pytest.mark.parametrize("option", ["--rtol", "--atol"])
@pytest.mark.parametrize("bad", ["-1", "abc", "nan", "inf"])
def test_a_bad_tolerance_exits_2_with_one_line(capsys, option, bad):
    code, out, err = cli(capsys, RELEASE, RELEASE, option, bad)
    assert (code, out) == (2, "")
    one_line(err, option, repr(bad))


def test_good_tolerances_are_used(capsys, tmp_path):
    save_file({"w": torch.tensor([1.0, 2.0])}, str(tmp_path / "a.safetensors"))
    save_file({"w": torch.tensor([1.0, 2.001])}, str(tmp_path / "b.safetensors"))
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    assert cli(capsys, a, b, "--values")[0] == 1
    code, out, _ = cli(capsys, a, b, "--values", "--rtol", "1e-3", "--json")
    assert code == 0 and strict_json(out)["options"]["rtol"] == 1e-3
    assert cli(capsys, a, b, "--values", "--atol", "0.0011")[0] == 0


# -- the full training-state path (values/state_diff.py) ------------------------------------------

def test_two_steps_of_one_run_with_training_state(capsys):
    code, out, err = cli(capsys, CKPT3, CKPT6, "--values", "--json")
    assert (code, err) == (1, "")
    doc = strict_json(out)
    steps = [json.loads((c / "trainer_state.json").read_text())["global_step"]
             for c in (CKPT3, CKPT6)]
    assert (doc["state"]["a"]["step"], doc["state"]["b"]["step"]) == tuple(steps) == (3, 6)
    ta = dict(leaves(torch_load(CKPT3 / "optimizer.pt")))
    tb = dict(leaves(torch_load(CKPT6 / "optimizer.pt")))
    ta["cpu"] = torch_load(CKPT3 / "rng_state.pth")["cpu"]
    tb["cpu"] = torch_load(CKPT6 / "rng_state.pth")["cpu"]
    rows = {r["name"]: r for r in doc["state"]["tensors"]}
    assert set(rows) == set(ta)
    # every tensor of the checkpoint appears once, in tensors or state.tensors
    every = sorted(name for _, name in reference(CKPT3))
    assert sorted([r["name"] for r in doc["tensors"]] + list(rows)) == every
    for name, r in rows.items():
        assert r["status"] == ("unchanged" if torch.equal(ta[name], tb[name])
                               else "values_changed"), name
    assert doc["state"]["summary"]["values_changed"] == sum(
        not torch.equal(ta[n], tb[n]) for n in ta)
    assert doc["differs"] is True


def test_a_checkpoint_against_its_copy_exits_0_with_training_state(capsys, tmp_path):
    copy = shutil.copytree(CKPT6, tmp_path / "checkpoint-6")
    code, out, err = cli(capsys, CKPT6, copy, "--values", "--json")
    assert (code, err) == (0, "")
    doc = strict_json(out)
    assert doc["differs"] is False
    assert all(r["status"] == "unchanged" for r in doc["tensors"] + doc["state"]["tensors"])
    assert len(doc["state"]["tensors"]) == len(leaves_of_optimizer(CKPT6)) + 1  # + the RNG


def leaves_of_optimizer(folder) -> dict:
    return dict(leaves(torch_load(folder / "optimizer.pt")))
