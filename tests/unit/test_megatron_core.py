"""megatron-core dist checkpoints (torch_dist), on the files its own dist_checkpointing.save
wrote from 2 ranks at tensor-parallel 2 (sample_checkpoints/make_megatron_core_samples.py):
the .metadata pickles torch's DCP planner classes (megatron-core keeps every rank's save plan
in Metadata.all_local_plans) and is read as torch's, the stacked layers are listed once at
their global shapes, the optimizer state sharded by moment is the optimizer's, not weights,
and a folder without common.pt is broken because megatron-core's load reads it first.
Ground truth is torch's own read of the metadata (our sample: safe to unpickle).
"""

from __future__ import annotations

import json
import shutil

from torch.distributed.checkpoint import FileSystemReader

from .helpers import SAMPLES, run_cli

RUN = SAMPLES / "megatron-core" / "run"
ITER = RUN / "iter_0000002"


def cli_json(*args: str) -> tuple[int, dict]:
    done = run_cli(*args, "--json")
    return done.returncode, json.loads(done.stdout)


def torch_tensors() -> dict:
    meta = FileSystemReader(str(ITER)).read_metadata()
    return {k: v for k, v in meta.state_dict_metadata.items() if hasattr(v, "chunks")}


def test_metadata_with_torch_planner_classes_is_safe_and_lists_global_shapes():
    rc, doc = cli_json("inspect", str(ITER))
    assert rc == 0, doc["problems"]
    assert not [p for p in doc["problems"] if p["severity"] == "error"]
    want = torch_tensors()
    model = {k: v for k, v in want.items() if not k.startswith("optimizer.")}
    rows = {t["name"]: t for t in doc["tensors"] if t["file"] == ".metadata"}
    assert rows.keys() == want.keys()
    for name, t in rows.items():
        assert t["shape"] == list(want[name].size), name
        assert t["component"] == ("optimizer" if name.startswith("optimizer.") else "weights")
    assert rows["decoder.layers.mlp.linear_fc1.weight"]["shape"] == [2, 64, 16]  # 2 layers
    assert len(rows["decoder.layers.mlp.linear_fc1.weight"]["chunks"]) == 4  # TP 2 x ...
    assert doc["totals"]["tensors"] == len(model)
    assert doc["totals"]["params"] == sum(v.size.numel() for v in model.values())
    assert doc["framework"] == "megatron" and doc["step"] == 2 and doc["ranks"] == 2


def test_training_state_read_from_dcp_and_common_pt():
    rc, doc = cli_json("inspect", str(RUN))
    assert rc == 0
    comps = doc["components"]
    assert {k: c["status"] for k, c in comps.items()} == {
        "weights": "ok", "optimizer": "ok", "scheduler": "ok", "rng": "ok", "data": "ok",
        "progress": "ok", "scaler": "not-needed"}
    model = [k for k in torch_tensors() if not k.startswith("optimizer.")]
    opt = comps["optimizer"]["facts"]
    assert opt["state_keys"] == ["exp_avg", "exp_avg_sq"]
    assert opt["params_with_state"] == len(model)
    assert comps["progress"]["facts"]["iteration"] == 2
    assert comps["progress"]["facts"]["tensor_model_parallel_size"] == 2
    assert comps["data"]["facts"]["consumed_train_samples"] == 4


def test_missing_common_pt_is_broken_and_says_why(tmp_path):
    rc, doc = cli_json("check", str(SAMPLES / "megatron-core" / "no-common"))
    assert rc == 5 and doc["verdict"] == "broken"
    assert "common.pt is missing" in doc["components"]["weights"]["detail"]
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    (run / "iter_0000002" / "metadata.json").unlink()
    rc, doc = cli_json("check", str(run))
    assert rc == 5 and "metadata.json is missing" in doc["components"]["weights"]["detail"]
