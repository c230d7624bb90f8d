"""`ckpt-browser stats`: text and --json against torch, glob selection, state tensors by name, and
the exit codes (0 fine, 2 usage / no match, 5 unreadable values) with one-line errors. Runs
`ckpt_browser.cli.main` in-process.
"""

from __future__ import annotations

import fnmatch
import math
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from ckpt_browser.cli import main

from .values_helpers import (
    CKPT3,
    RANKS4,
    RELEASE,
    RUN,
    assert_histogram,
    dcp_tensors,
    one_line,
    strict_json,
    torch_load,
    wait_for_dcp_ranks,
)

SHARDS = [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]


def cli(capsys, *args) -> tuple[int, str, str]:
    code = main(["stats", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def release() -> dict[str, tuple[str, torch.Tensor]]:
    out = {}
    for shard in SHARDS:
        out.update({k: (shard, v) for k, v in load_file(str(RELEASE / shard)).items()})
    return out


def assert_doc(doc: dict, t: torch.Tensor) -> None:
    """One `stats --json` entry against torch in float64 over the finite elements."""
    d = t.double().reshape(-1)
    fin = d[torch.isfinite(d)]
    assert (doc["shape"], doc["numel"], doc["finite"]) == (list(t.shape), t.numel(), fin.numel())
    assert (doc["nan"], doc["inf"], doc["zeros"]) == (int(d.isnan().sum()), int(d.isinf().sum()),
                                                      int((d == 0).sum()))
    assert (doc["min"], doc["max"], doc["abs_max"]) == (fin.min().item(), fin.max().item(),
                                                        fin.abs().max().item())
    assert math.isclose(doc["mean"], fin.mean().item(), rel_tol=1e-12, abs_tol=1e-15)
    assert math.isclose(doc["std"], fin.std(correction=1).item(), rel_tol=1e-9, abs_tol=1e-15)
    assert_histogram(doc["hist"], tuple(doc["hist_range"]), fin)
    assert doc["bytes_read"] == t.numel() * t.element_size()


# -- text ----------------------------------------------------------------------------------------

def test_text_for_a_glob_shows_each_matching_tensor(capsys):
    code, out, err = cli(capsys, RELEASE, "model.layers.0.*norm*")
    assert (code, err) == (0, "")
    tensors = release()
    want = sorted(n for n in tensors if fnmatch.fnmatchcase(n, "model.layers.0.*norm*"))
    heads = [line.split("  ")[0] for line in out.splitlines() if not line.startswith(" ")]
    assert sorted(heads) == want and len(want) == 2
    for name in want:
        shard, t = tensors[name]
        d = t.double()
        assert f"{name}  F32 {list(t.shape)}  ({shard})" in out
        assert f"min {d.min().item():.6g}  max {d.max().item():.6g}  mean {d.mean().item():.6g}" \
               f"  std {d.std().item():.6g}" in out
        assert f"NaN 0  Inf 0  zeros {int((t == 0).sum())}" in out


def test_text_shows_nan_inf_and_zeros_of_bf16_and_fp8(capsys, tmp_path):
    x = torch.randn(40, generator=torch.Generator().manual_seed(3)) * 4
    x[0], x[1], x[2], x[3] = float("nan"), float("inf"), 0.0, 0.0
    save_file({"b": x.to(torch.bfloat16), "e5": x.to(torch.float8_e5m2),
               "e4": x.to(torch.float8_e4m3fn)}, str(tmp_path / "m.safetensors"))
    code, out, err = cli(capsys, tmp_path / "m.safetensors")
    assert (code, err) == (0, "")
    assert out.count("NaN 1  Inf 1  zeros 2") == 2  # BF16 and E5M2 keep the Inf
    assert out.count("NaN 1  Inf 0  zeros 2") == 1  # E4M3FN has no Inf: torch saturates it
    assert "first values: nan, inf, 0, 0," in out


# -- JSON ----------------------------------------------------------------------------------------

def test_json_default_is_every_weight_tensor_and_matches_torch(capsys):
    code, out, err = cli(capsys, RELEASE, "--json")
    assert (code, err) == (0, "")
    doc = strict_json(out)
    tensors = release()
    assert doc["path"] == str(RELEASE)
    assert sorted(d["name"] for d in doc["tensors"]) == sorted(tensors)
    for d in doc["tensors"]:
        shard, t = tensors[d["name"]]
        assert (d["file"], d["component"], d["dtype"]) == (shard, "weights", "F32")
        assert_doc(d, t)


def test_json_of_bf16_and_fp8_tensors_matches_torch(capsys, tmp_path):
    x = torch.randn(8, 9, generator=torch.Generator().manual_seed(8)) * 3
    x[0, 0], x[1, 1], x[2, :3] = float("nan"), float("-inf"), 0.0
    tensors = {"b": x.to(torch.bfloat16), "e4": x.to(torch.float8_e4m3fn),
               "e5": x.to(torch.float8_e5m2)}
    save_file(tensors, str(tmp_path / "m.safetensors"))
    code, out, err = cli(capsys, tmp_path / "m.safetensors", "--json")
    assert (code, err) == (0, "")
    docs = {d["name"]: d for d in strict_json(out)["tensors"]}
    assert {n: d["dtype"] for n, d in docs.items()} == {"b": "BF16", "e4": "F8_E4M3",
                                                       "e5": "F8_E5M2"}
    for name, t in tensors.items():
        assert_doc(docs[name], t)
        assert docs[name]["preview"][0] == "nan"  # JSON has no NaN: the preview spells it


def test_several_names_and_globs_are_selected_once_each(capsys):
    code, out, err = cli(capsys, RELEASE, "lm_head.weight", "*.weight", "model.norm.weight",
                         "--json")
    assert (code, err) == (0, "")
    names = [d["name"] for d in strict_json(out)["tensors"]]
    assert len(names) == len(set(names))
    assert sorted(names) == sorted(n for n in release() if n.endswith(".weight"))


def test_an_optimizer_tensor_by_name(capsys):
    code, out, err = cli(capsys, CKPT3, "state.0.exp_avg", "state.3.step", "--json")
    assert (code, err) == (0, "")
    docs = {d["name"]: d for d in strict_json(out)["tensors"]}
    opt = torch_load(CKPT3 / "optimizer.pt")
    assert set(docs) == {"state.0.exp_avg", "state.3.step"}
    for name, t in (("state.0.exp_avg", opt["state"][0]["exp_avg"]),
                    ("state.3.step", opt["state"][3]["step"])):
        assert (docs[name]["file"], docs[name]["component"]) == ("optimizer.pt", "optimizer")
        if t.numel() > 1:
            assert_doc(docs[name], t)
    assert docs["state.3.step"]["preview"] == [3.0] and docs["state.3.step"]["std"] is None


def test_a_dcp_tensor_split_along_two_dimensions(capsys):
    wait_for_dcp_ranks()
    name = "layers.0.feed_forward.w2.weight"
    code, out, err = cli(capsys, RANKS4, name, "--json")
    assert (code, err) == (0, "")
    (doc,) = strict_json(out)["tensors"]
    assert doc["file"] == ".metadata"
    assert_doc(doc, dcp_tensors(RANKS4)[name])


def test_checkpoint_picks_one_of_a_folder_of_checkpoints(capsys):
    code, out, err = cli(capsys, RUN, "lm_head.weight", "--checkpoint", "checkpoint-3", "--json")
    assert (code, err) == (0, "")
    doc = strict_json(out)
    assert doc["path"].endswith("checkpoint-3")
    assert_doc(doc["tensors"][0], load_file(str(CKPT3 / SHARDS[0]))["lm_head.weight"])


@pytest.mark.parametrize("args", [("--json", "model.norm.weight"),
                                  ("--checkpoint", "checkpoint-3", "model.norm.weight"),
                                  ("model.norm.weight", "--json", "lm_head.weight")])
def test_names_may_follow_the_options(capsys, args):
    """`stats PATH --json NAME` is as natural as `stats PATH NAME --json`."""
    path = RUN if "--checkpoint" in args else RELEASE
    code, out, err = cli(capsys, path, *args, *([] if "--json" in args else ["--json"]))
    assert (code, err) == (0, "")
    names = {d["name"] for d in strict_json(out)["tensors"]}
    assert names == {a for a in args if a.endswith(".weight")}


# -- errors ----------------------------------------------------------------------------------------

def test_no_match_exits_2_with_one_line_naming_the_path(capsys):
    code, out, err = cli(capsys, RELEASE, "no.such.*")
    assert (code, out) == (2, "")
    one_line(err, str(RELEASE), "no.such.*")


def test_a_close_miss_suggests_the_name(capsys):
    code, out, err = cli(capsys, RELEASE, "model.norm.weights")
    assert (code, out) == (2, "")
    one_line(err, "did you mean", "model.norm.weight")


def test_a_missing_path_exits_2(capsys, tmp_path):
    code, out, err = cli(capsys, tmp_path / "nowhere")
    assert (code, out) == (2, "")
    one_line(err, "nowhere")


def test_an_unknown_checkpoint_name_exits_2(capsys):
    code, out, err = cli(capsys, RUN, "--checkpoint", "checkpoint-99")
    assert (code, out) == (2, "")
    one_line(err, "checkpoint-99", "checkpoint-3")


@pytest.fixture
def truncated(tmp_path):
    damaged = shutil.copytree(RELEASE, tmp_path / "damaged")
    with open(damaged / SHARDS[0], "r+b") as f:
        f.truncate(f.seek(0, 2) - 100)
    return damaged


def test_a_truncated_file_exits_5_and_reports_the_tensor(capsys, truncated):
    code, out, err = cli(capsys, truncated, "--json")
    assert code == 5
    one_line(err, str(truncated), "1 tensor")
    docs = strict_json(out)["tensors"]
    bad = [d for d in docs if "error" in d]
    assert len(bad) == 1 and SHARDS[0] in bad[0]["error"] and bad[0]["file"] == SHARDS[0]
    tensors = release()
    assert len(docs) == len(tensors)
    for d in docs:
        if "error" not in d:
            assert_doc(d, tensors[d["name"]][1])


def test_a_truncated_file_in_text_mode(capsys, truncated):
    code, out, err = cli(capsys, truncated)
    assert code == 5
    one_line(err)
    assert out.count("values unreadable:") == 1
    assert "min " in out  # the other tensors are still reported


# -- the selection behind it: values.locate.select ------------------------------------------------

def test_select_names_globs_and_the_default_weights():
    from ckpt_browser.errors import UsageError
    from ckpt_browser.values.locate import TensorLoc, select

    locs = [TensorLoc("a.weight", "F32", (2,), "m.safetensors", "weights"),
            TensorLoc("a.bias", "F32", (2,), "m.safetensors", "weights"),
            TensorLoc("state.0.exp_avg", "F32", (2,), "optimizer.pt", "optimizer"),
            TensorLoc("a.weight", "F32", (2,), "copy.safetensors", "weights")]
    assert select(locs, [], "ck") == [locs[0], locs[1], locs[3]]
    assert select(locs, ["state.0.exp_avg"], "ck") == [locs[2]]
    assert select(locs, ["a.*", "a.bias"], "ck") == [locs[0], locs[1], locs[3]]
    assert select(locs, ["a.weight"], "ck") == [locs[0]]  # an exact name: its first tensor
    with pytest.raises(UsageError, match=r"^ck: no tensor named or matching 'a.weigth'; did you "
                                         r"mean a.weight\?"):
        select(locs, ["a.weigth"], "ck")
    with pytest.raises(UsageError, match="holds no weight tensors"):
        select(locs[2:3], [], "ck")
