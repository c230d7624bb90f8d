"""torchtune's run folders (producers/torchtune.py), on the samples its own save code wrote
(sample_checkpoints/make_torchtune_samples.py): what `check --json` and `inspect --json` say,
against values read from the files independently with torch.load(weights_only=True), and what
a missing or cut recipe_state.pt does to the verdict.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from .helpers import SAMPLES, run_cli

FULL = SAMPLES / "torchtune-full"  # 2 of 3 epochs done: recipe_state is epoch_1's
LORA = SAMPLES / "torchtune-lora"  # 2 of 2 done: recipe_state is epoch_0's
RECIPE = Path("recipe_state") / "recipe_state.pt"
# torchtune's resume rebuilds the scheduler from the step and has only the seed for the RNG
RESUMABLE = {"weights": "ok", "optimizer": "ok", "scheduler": "missing", "rng": "missing",
             "data": "ok", "progress": "ok", "scaler": "not-needed"}
NOT_ITS_STATE = {**RESUMABLE, "optimizer": "missing", "data": "missing", "progress": "missing"}


def recipe_state(run: Path) -> dict:
    return torch.load(run / RECIPE, map_location="cpu", weights_only=True)


def cli_json(*args: str) -> tuple[int, dict | list]:
    done = run_cli(*args, "--json")
    return done.returncode, json.loads(done.stdout)


def statuses(doc: dict) -> dict[str, str]:
    return {k: c["status"] for k, c in doc["components"].items()}


def test_full_run_newest_epoch_resumes_but_not_bit_exact():
    state = recipe_state(FULL)
    assert (state["epochs_run"], state["total_epochs"]) == (2, 3)
    code, docs = cli_json("check", str(FULL))
    assert code == 3
    assert [Path(d["path"]).name for d in docs] == ["epoch_1", "epoch_0"]
    newest = docs[0]
    assert (newest["format"], newest["verdict"]) == ("torchtune", "inexact")
    assert statuses(newest) == RESUMABLE
    adam_steps = {int(s["step"]) for s in state["optimizer"]["state"].values()}
    assert newest["step"] == adam_steps.pop() == 8
    comps = newest["components"]
    assert comps["optimizer"]["files"] == ["../recipe_state/recipe_state.pt"]
    assert f"for {len(state['optimizer']['state'])} of" in comps["optimizer"]["detail"]
    assert "only the seed" in comps["rng"]["detail"]
    assert "last_epoch = global_step - 1" in comps["scheduler"]["detail"]
    assert not [f for f in newest["findings"] if f["severity"] == "error"]


def test_full_run_inspect_names_the_recipe_state_and_its_counters():
    state = recipe_state(FULL)
    code, doc = cli_json("inspect", str(FULL / "epoch_1"))
    assert code == 0
    assert (doc["framework"], doc["epoch"], doc["step"]) == ("torchtune", state["epochs_run"], 8)
    assert "torchtune" in doc["project"]
    files = {f["path"]: f for f in doc["files"]}
    assert files["../recipe_state/recipe_state.pt"]["format"] == "torch-zip"
    assert "model-00001-of-00001.safetensors" in files
    progress = doc["components"]["progress"]["facts"]["counters"]
    assert progress == {k: state[k] for k in ("epochs_run", "total_epochs",
                                              "max_steps_per_epoch", "seed")}
    data = doc["components"]["data"]["facts"]["dataloader"]
    assert data["_num_yielded"] == state["dataloader"]["_num_yielded"]
    groups = doc["components"]["optimizer"]["facts"]["param_groups"]
    assert [g["lr"] for g in groups] == pytest.approx(
        [g["lr"] for g in state["optimizer"]["param_groups"]])


def test_an_epoch_whose_recipe_state_was_overwritten_is_weights_only():
    code, doc = cli_json("check", str(FULL / "epoch_0"))
    assert (code, doc["verdict"]) == (4, "weights-only")
    assert statuses(doc) == NOT_ITS_STATE
    assert "epoch_1's (epochs_run 2)" in doc["components"]["optimizer"]["detail"]


def test_lora_finished_run_last_save_has_no_recipe_state():
    state = recipe_state(LORA)
    assert (state["epochs_run"], state["total_epochs"]) == (1, 2)
    code, docs = cli_json("check", str(LORA))
    by_name = {Path(d["path"]).name: d for d in docs}
    last, first = by_name["epoch_1"], by_name["epoch_0"]
    assert (code, last["verdict"]) == (4, "weights-only")
    assert statuses(last) == NOT_ITS_STATE
    assert "last save of a finished run" in last["components"]["optimizer"]["detail"]
    assert (first["verdict"], statuses(first)) == ("inexact", RESUMABLE)
    weights = first["components"]["weights"]
    assert weights["files"][0] == "adapter_model.pt"
    adapter = torch.load(LORA / "epoch_0" / "adapter_model.pt", weights_only=True)
    # the optimizer covers only the adapter, as the LoRA recipe trains it
    assert len(state["optimizer"]["state"]) == len(adapter) == 8
    assert f"for {len(adapter)} of {len(adapter)}" in first["components"]["optimizer"]["detail"]


def copy_run(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def test_missing_recipe_state_is_weights_only_and_named(tmp_path):
    run = copy_run(FULL, tmp_path / "run")
    (run / RECIPE).unlink()
    code, doc = cli_json("check", str(run / "epoch_1"))
    assert (code, doc["verdict"], doc["format"]) == (4, "weights-only", "torchtune")
    assert doc["components"]["weights"]["status"] == "ok"
    errors = [f for f in doc["findings"] if f["severity"] == "error"]
    assert errors and "recipe_state/recipe_state.pt" in errors[0]["message"]


def test_truncated_recipe_state_is_damaged_in_one_line(tmp_path):
    run = copy_run(FULL, tmp_path / "run")
    raw = (run / RECIPE).read_bytes()
    (run / RECIPE).write_bytes(raw[: len(raw) // 2])
    code, doc = cli_json("check", str(run / "epoch_1"))
    assert (code, doc["verdict"]) == (4, "weights-only")
    assert {k for k, s in statuses(doc).items() if s == "damaged"} == {
        "optimizer", "scheduler", "rng", "data", "progress"}
    done = run_cli("inspect", str(run / "epoch_1"))
    assert done.returncode == 5
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert "recipe_state.pt" in done.stderr and "truncated" in done.stderr
