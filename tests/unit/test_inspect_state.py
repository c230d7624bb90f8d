"""`inspect` on training checkpoints: components, state tensors and weight totals in the JSON."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SAMPLES = Path(__file__).resolve().parents[2] / "sample_checkpoints"


def inspect(path, *extra):
    r = subprocess.run([sys.executable, "-m", "ckpt_browser", "inspect", "--json", *extra,
                        str(path)], capture_output=True, text=True, timeout=120)
    return r.returncode, json.loads(r.stdout) if r.stdout else None, r.stderr


def test_lightning_weights_come_from_state_dict_and_optimizer_is_separate():
    rc, doc, err = inspect(SAMPLES / "lightning" / "last.ckpt")
    assert rc == 0, err
    ckpt = torch.load(SAMPLES / "lightning" / "last.ckpt", weights_only=True)
    want = sum(t.numel() for t in ckpt["state_dict"].values())
    assert doc["framework"] == "lightning" and doc["totals"]["params"] == want
    weights = {t["name"] for t in doc["tensors"] if t["component"] == "weights"}
    assert weights == {f"state_dict.{k}" for k in ckpt["state_dict"]}
    assert doc["components"]["rng"]["status"] == "missing"  # Lightning never saves RNG


def test_torchtitan_dcp_lists_each_tensor_once_at_its_global_shape_with_its_chunks():
    from torch.distributed.checkpoint import FileSystemReader  # our own sample: safe to unpickle

    step = SAMPLES / "torchtitan-run" / "checkpoint" / "step-10"
    rc, doc, err = inspect(step)
    assert rc == 0, err
    meta = FileSystemReader(str(step)).read_metadata()
    tensors = {k: v for k, v in meta.state_dict_metadata.items() if hasattr(v, "chunks")}
    model = {k: v for k, v in tensors.items()
             if not k.startswith(("optimizer.", "lr_scheduler.", "dataloader.", "train_state."))}
    assert doc["totals"]["tensors"] == len(model)
    assert doc["totals"]["params"] == sum(v.size.numel() for v in model.values())
    rows = {t["name"]: t for t in doc["tensors"] if t["file"] == ".metadata"}
    assert len(rows) == len([t for t in doc["tensors"] if t["file"] == ".metadata"])
    assert rows.keys() == tensors.keys()
    files = set()
    for name, t in rows.items():
        want = tensors[name]
        assert t["shape"] == list(want.size)
        assert t["nbytes"] == want.size.numel() * want.properties.dtype.itemsize
        assert t["offsets"] is None
        chunks = {(tuple(c["chunk_offsets"]), tuple(c["shape"])) for c in t["chunks"]}
        assert chunks == {(tuple(c.offsets), tuple(c.sizes)) for c in want.chunks}
        for c in t["chunks"]:
            size = (step / c["file"]).stat().st_size
            assert 0 <= c["offsets"][0] < c["offsets"][1] <= size
            files.add(c["file"])
    assert files == {"__0_0.distcp", "__1_0.distcp"}
    assert any(len(t["chunks"]) == 2 for t in rows.values())  # sharded: a row, not two
    assert doc["step"] == 10 and doc["ranks"] == 2


@pytest.mark.parametrize("sample, framework, step", [
    ("tiny-llama-run/checkpoint-6", "hf-trainer", 6),
    ("hf-multirank/checkpoint-4", "hf-trainer", 4),
    ("accelerate-state/step_4", "accelerate", 4),
    ("deepspeed-run", "deepspeed", 4),
    ("megatron-run", "megatron", 4),
])
def test_every_sample_reports_framework_step_and_seven_components(sample, framework, step):
    rc, doc, err = inspect(SAMPLES / sample)
    assert rc == 0, err
    assert (doc["framework"], doc["step"]) == (framework, step)
    assert set(doc["components"]) == {"weights", "optimizer", "scheduler", "rng", "data",
                                      "progress", "scaler"}
    assert doc["components"]["optimizer"]["status"] == "ok"


def test_optimizer_tensors_point_at_their_bytes_in_the_zip():
    path = SAMPLES / "tiny-llama-run" / "checkpoint-6" / "optimizer.pt"
    rc, doc, err = inspect(path.parent)
    assert rc == 0, err
    sd = torch.load(path, weights_only=True)
    raw = path.read_bytes()
    rows = [t for t in doc["tensors"] if t["file"] == "optimizer.pt"]
    assert len(rows) == sum(len(s) for s in sd["state"].values())
    for t in rows:
        _, index, key = t["name"].split(".")
        want = sd["state"][int(index)][key].contiguous().view(-1).view(torch.uint8).numpy()
        begin, end = t["offsets"]
        assert raw[begin:end] == want.tobytes()


def test_malicious_sample_exits_5_naming_the_global_and_runs_nothing(tmp_path):
    r = subprocess.run([sys.executable, "-m", "ckpt_browser", "inspect",
                        str(SAMPLES / "malicious")], capture_output=True, text=True,
                       cwd=tmp_path, timeout=120)
    assert r.returncode == 5
    assert r.stderr.count("\n") == 1 and "posix.system" in r.stderr
    assert not (tmp_path / "ckpt-browser-PWNED").exists()


@pytest.mark.parametrize("inside, framework", [
    ("torchtitan-run/checkpoint/step-10/.metadata", "torchtitan"),
    ("torchtitan-run/checkpoint/step-10/__1_0.distcp", "torchtitan"),
    ("deepspeed-run/latest", "deepspeed"),
    ("megatron-run/latest_checkpointed_iteration.txt", "megatron"),
    ("hf-run3/checkpoint-2/trainer_state.json", "hf-trainer"),
    ("tiny-llama-run/checkpoint-6/model.safetensors.index.json", "hf-trainer"),
])
def test_a_file_that_is_part_of_a_checkpoint_means_the_checkpoint(inside, framework):
    rc, doc, err = inspect(SAMPLES / inside)
    assert rc == 0, err
    assert doc["framework"] == framework and doc["components"]["optimizer"]["status"] == "ok"
