"""diffusers' training scripts save through accelerate's save_state, with save hooks that write
the models by save_pretrained into sub-folders (unet/, and unet_ema/ with --use_ema) instead of
accelerate's own model file (sample_checkpoints/make_diffusers_samples.py, whose generator
resumes checkpoint-4 with the script's own load hook). The weights are unet/'s; the EMA is a
copy kept apart, neither counted with the weights nor taken for a duplicate shard of them.
"""

from __future__ import annotations

import json
import shutil

from safetensors import safe_open

from .helpers import SAMPLES, run_cli

RUN = SAMPLES / "projects" / "diffusers" / "unconditional"
UNET = "unet/diffusion_pytorch_model.safetensors"
EMA = "unet_ema/diffusion_pytorch_model.safetensors"


def cli_json(*args: str) -> tuple[int, dict]:
    done = run_cli(*args, "--json")
    return done.returncode, json.loads(done.stdout)


def header(path) -> dict[str, tuple]:
    with safe_open(str(path), "np") as f:
        return {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}


def test_weights_are_the_unet_folder_and_the_ema_is_kept_apart():
    ckpt = RUN / "checkpoint-6"
    rc, doc = cli_json("inspect", str(ckpt))
    assert rc == 0, doc["problems"]
    assert not doc["problems"]  # no duplicate-name error between unet/ and unet_ema/
    unet = header(ckpt / UNET)
    by_file: dict[str, dict] = {}
    for t in doc["tensors"]:
        by_file.setdefault(t["file"], {})[t["name"]] = t
    assert {n: tuple(t["shape"]) for n, t in by_file[UNET].items()} == unet
    assert {t["component"] for t in by_file[UNET].values()} == {"weights"}
    assert {t["component"] for t in by_file[EMA].values()} == {"ema"}
    assert doc["totals"]["tensors"] == len(unet)
    assert doc["totals"]["by_component"]["ema"]["tensors"] == len(header(ckpt / EMA))
    assert EMA in doc["components"]["weights"]["detail"]  # what the browser shows


def test_check_reads_the_run_as_accelerate_with_its_weights():
    rc, doc = cli_json("check", str(RUN / "checkpoint-6"))
    assert rc == 3 and doc["verdict"] == "inexact"
    weights = doc["components"]["weights"]
    assert weights["status"] == "ok" and weights["files"] == [UNET]
    assert EMA in weights["detail"]
    # what the script does not save: the data position and the step (it parses the name)
    assert {f["component"] for f in doc["findings"] if f["severity"] == "warning"} == {
        "data", "progress"}


def test_without_unet_folder_nothing_loads(tmp_path):
    ckpt = tmp_path / "checkpoint-6"
    shutil.copytree(RUN / "checkpoint-6", ckpt)
    shutil.rmtree(ckpt / "unet")  # the load hook's UNet2DModel.from_pretrained(subfolder="unet")
    rc, doc = cli_json("check", str(ckpt))
    assert rc == 5 and doc["verdict"] == "broken"
    assert doc["components"]["weights"]["status"] == "missing"


def test_diff_pairs_the_ema_by_its_folder_and_stats_takes_that_name():
    a, b = RUN / "checkpoint-4", RUN / "checkpoint-6"
    doc = json.loads(run_cli("diff", str(a), str(b), "--json").stdout)
    assert not doc["notes"], doc["notes"]  # no name read twice
    ema = [r for r in doc["state"]["tensors"] if r["name"].startswith("unet_ema/")]
    assert sorted(r["name"] for r in ema) == sorted(f"unet_ema/{n}" for n in header(b / EMA))
    assert all(r["a"] and r["b"] for r in ema)  # paired, not only in A or only in B
    assert len(doc["tensors"]) == len(header(b / UNET))  # the weights: unet/ alone
    done = run_cli("stats", str(b), "unet_ema/conv_in.bias")
    assert done.returncode == 0 and done.stdout.startswith("conv_in.bias  F32 [")
    assert f"({EMA})" in done.stdout.split("\n")[0]
