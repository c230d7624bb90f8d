"""`stats --check`: "any NaN in this checkpoint?" answered in one line and an exit code a
script can test; --check-constant adds all-zero and constant tensors. Written by safetensors'
own save_file; the truth is torch's own isnan/isinf on the same tensors."""

from __future__ import annotations

import json

import torch
from safetensors.torch import save_file

from .helpers import RELEASE, run_cli


def write(tmp_path):
    t = {"ok.weight": torch.randn(4, 4),
         "nan.weight": torch.tensor([1.0, float("nan"), float("nan"), 2.0]),
         "inf.bias": torch.tensor([float("inf"), 0.5, -float("inf")]),
         "zero.weight": torch.zeros(3, 3),
         "const.weight": torch.full((5,), 0.25)}
    save_file(t, str(tmp_path / "model.safetensors"))
    return tmp_path / "model.safetensors", t


def test_nan_and_inf_are_found_with_exit_6(tmp_path):
    path, t = write(tmp_path)
    done = run_cli("stats", str(path), "--check")
    assert done.returncode == 6, done.stderr
    lines = done.stdout.strip().splitlines()
    want = {n for n, v in t.items() if torch.isnan(v).any() or torch.isinf(v).any()}
    assert {line.split()[0] for line in lines[:-1]} == want
    assert "2 NaN" in done.stdout and "2 Inf" in done.stdout
    assert lines[-1] == "checked 5 tensor(s): 2 suspect (1 with NaN, 1 with Inf)"


def test_constant_tensors_count_only_when_asked(tmp_path):
    path, _ = write(tmp_path)
    done = run_cli("stats", str(path), "--check-constant", "--json")
    assert done.returncode == 6
    found = json.loads(done.stdout)["check"]["found"]
    assert found["zero.weight"] == ["all zeros"]
    assert found["const.weight"] == ["constant (0.25 throughout)"]
    assert "ok.weight" not in found


def test_a_sound_checkpoint_exits_0_in_one_line():
    done = run_cli("stats", str(RELEASE), "--check")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "checked 21 tensor(s): none holds NaN or Inf\n"


def test_an_all_zero_tensor_s_histogram_is_one_bin_at_zero(tmp_path):
    """It read [0 .. 0.001953]: a width made up for a range of one value."""
    path, t = write(tmp_path)
    done = run_cli("stats", str(path), "zero.weight", "const.weight", "--json")
    docs = {d["name"]: d for d in json.loads(done.stdout)["tensors"]}
    for name in ("zero.weight", "const.weight"):
        v = float(t[name].reshape(-1)[0])
        assert docs[name]["hist_range"] == [v, v], docs[name]
        assert docs[name]["hist"] == [t[name].numel()]
    text = run_cli("stats", str(path), "zero.weight").stdout
    assert "histogram [0 .. 0]" in text
