"""`export SRC OUT`: every sample format's weights, tensor by tensor and bit for bit, equal to
what the framework's own loader gives; the result loads with safetensors and transformers; OUT
rules (new or empty, outside the checkpoint, nothing left on failure); damaged sources refused."""

from __future__ import annotations

import argparse
import json
import sys
import types
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from ckpt_browser.cli import main

SAMPLES = Path(__file__).resolve().parents[2] / "sample_checkpoints"
PROJECTS = SAMPLES / "projects"


def export(src, out, *flags) -> int:
    return main(["export", str(src), str(out), *flags])


def exported(out: Path) -> dict[str, torch.Tensor]:
    """Every tensor of OUT, through safetensors' own loader (the index when sharded)."""
    indexes = list(out.glob("*.safetensors.index.json"))
    files = sorted(set(json.loads(indexes[0].read_text())["weight_map"].values())) if indexes \
        else [p.name for p in out.glob("*.safetensors")]
    assert len(indexes) <= 1 and len(files) >= 1
    got: dict[str, torch.Tensor] = {}
    for f in files:
        with safe_open(out / f, "pt") as st:
            assert st.metadata() == {"format": "pt"}
        got.update(load_file(out / f))
    return got


def same(got: dict, want: dict) -> None:
    assert sorted(got) == sorted(want)
    for name, t in want.items():
        assert got[name].dtype == t.dtype and got[name].shape == t.shape, name
        # as bytes: a NaN equals itself, and -0.0 is not 0.0
        assert torch.equal(got[name].reshape(-1).view(torch.uint8),
                           t.contiguous().reshape(-1).view(torch.uint8)), name


def strip(sd: dict, prefix: str) -> dict:
    return {k.removeprefix(prefix): v for k, v in sd.items()}


def torch_load(path, *allowed):
    with torch.serialization.safe_globals(list(allowed)):
        return torch.load(path, weights_only=True, map_location="cpu")


def dcp_load(folder: Path, tmp_path: Path) -> dict:
    """DCP's own loader: the whole checkpoint as one torch.save file, read back."""
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    dcp_to_torch_save(folder, tmp_path / "dcp.pt")
    # written just now by DCP from our own sample; megatron-core's common state holds numpy
    # arrays, which weights_only refuses
    return torch.load(tmp_path / "dcp.pt", weights_only=False)


def whole_module_state_dict() -> dict:
    """torch.load of a pickled nn.Module: its class (the generator's mynet.TinyNet) stood in
    for by an empty nn.Module subclass, which is all unpickling a module needs."""
    mynet = types.ModuleType("mynet")

    class TinyNet(torch.nn.Module):
        pass

    TinyNet.__module__, TinyNet.__qualname__ = "mynet", "TinyNet"
    mynet.TinyNet = TinyNet
    sys.modules["mynet"] = mynet
    try:
        model = torch_load(PROJECTS / "whole-module" / "model.pt", TinyNet, torch.nn.Linear,
                           torch.nn.ReLU)
    finally:
        del sys.modules["mynet"]
    return model.state_dict()


def references(tmp_path):
    """(sample, what the framework's own loader gives for its weights)."""
    return {
        "safetensors, 3 shards and an index": (
            SAMPLES / "tiny-llama-run" / "checkpoint-6",
            lambda: {k: v for f in sorted((SAMPLES / "tiny-llama-run" / "checkpoint-6")
                                          .glob("model-*.safetensors")) for k, v in
                     load_file(f).items()}),
        "Lightning .ckpt (torch zip)": (
            SAMPLES / "lightning" / "last.ckpt",
            lambda: torch_load(SAMPLES / "lightning" / "last.ckpt")["state_dict"]),
        "legacy torch file (not zip)": (
            PROJECTS / "legacy" / "checkpoint.pth",
            lambda: torch_load(PROJECTS / "legacy" / "checkpoint.pth")["model_state_dict"]),
        "timm (argparse.Namespace beside)": (
            PROJECTS / "timm" / "last.pth.tar",
            lambda: torch_load(PROJECTS / "timm" / "last.pth.tar",
                               argparse.Namespace)["state_dict"]),
        "a whole pickled module": (PROJECTS / "whole-module" / "model.pt",
                                   whole_module_state_dict),
        "DCP, 2 ranks (the tutorial's layout)": (
            SAMPLES / "dcp-ranks" / "ranks-2",
            lambda: {k: v for k, v in dcp_load(SAMPLES / "dcp-ranks" / "ranks-2",
                                               tmp_path).items() if isinstance(v, torch.Tensor)}),
        "torchtitan (DCP, FSDP2)": (
            SAMPLES / "torchtitan-run" / "checkpoint" / "step-10",
            lambda: {k: v for k, v in dcp_load(SAMPLES / "torchtitan-run" / "checkpoint"
                                               / "step-10", tmp_path).items()
                     if isinstance(v, torch.Tensor)}),
    }


@pytest.mark.parametrize("name", [
    "safetensors, 3 shards and an index", "Lightning .ckpt (torch zip)",
    "legacy torch file (not zip)", "timm (argparse.Namespace beside)", "a whole pickled module",
    "DCP, 2 ranks (the tutorial's layout)", "torchtitan (DCP, FSDP2)"])
def test_export_equals_the_frameworks_own_loader(tmp_path, name):
    src, load = references(tmp_path)[name]
    assert export(src, tmp_path / "out") == 0
    same(exported(tmp_path / "out"), load())


def test_nanogpt_loses_orig_mod_and_stores_the_tied_head_once(tmp_path, capsys):
    sd = strip(torch_load(PROJECTS / "nanogpt" / "ckpt.pt")["model"], "_orig_mod.")
    assert export(PROJECTS / "nanogpt" / "ckpt.pt", tmp_path / "out") == 0
    assert "lm_head.weight is the same storage as transformer.wte.weight" in \
        capsys.readouterr().out
    got = exported(tmp_path / "out")
    assert "lm_head.weight" not in got
    same(got, {k: v for k, v in sd.items() if k != "lm_head.weight"})
    # safetensors' own load_model ties it again (it is what save_model writes)
    assert torch.equal(sd["lm_head.weight"], got["transformer.wte.weight"])


def test_megatron_core_tensors_keep_their_global_shapes(tmp_path):
    folder = SAMPLES / "megatron-core" / "run"
    meta = next(folder.rglob(".metadata")).parent
    want = {k: v for k, v in dcp_load(meta, tmp_path).items() if isinstance(v, torch.Tensor)}
    assert export(folder, tmp_path / "out") == 0
    got = exported(tmp_path / "out")
    assert got and set(got) <= set(want)
    for name, t in got.items():
        assert torch.equal(t, want[name]), name


def test_the_export_loads_with_transformers_from_its_own_folder(tmp_path):
    from transformers import AutoModelForCausalLM

    src = SAMPLES / "tiny-llama-run" / "checkpoint-6"
    assert export(src, tmp_path / "out", "--max-shard-size", "40K") == 0
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == ["config.json", "generation_config.json", "model-00001-of-00003.safetensors",
                     "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors",
                     "model.safetensors.index.json"]
    a = AutoModelForCausalLM.from_pretrained(src).state_dict()
    b = AutoModelForCausalLM.from_pretrained(tmp_path / "out").state_dict()
    assert sorted(a) == sorted(b) and all(torch.equal(a[k], b[k]) for k in a)


def test_cast_include_exclude_and_strip(tmp_path):
    src = SAMPLES / "tiny-llama-run" / "checkpoint-6"
    want = {k: v for f in sorted(src.glob("model-*.safetensors")) for k, v in load_file(f).items()}
    # the globs match the names as written, after --strip-prefix
    assert export(src, tmp_path / "out", "--dtype", "bf16", "--include", "layers.*",
                  "--exclude", "*norm*", "--strip-prefix", "model.") == 0
    want = {k.removeprefix("model."): v.to(torch.bfloat16) for k, v in want.items()
            if k.startswith("model.layers.") and "norm" not in k}
    same(exported(tmp_path / "out"), want)


def test_out_must_be_new_or_empty_and_outside_the_checkpoint(tmp_path, capsys):
    src = tmp_path / "ckpt"
    src.mkdir()
    save_file({"w": torch.ones(3)}, src / "model.safetensors")
    assert export(src, src / "out") == 2
    assert "inside the checkpoint folder" in capsys.readouterr().err
    assert sorted(p.name for p in src.iterdir()) == ["model.safetensors"]  # nothing written
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine")
    assert export(src, full) == 2
    assert "is not empty" in capsys.readouterr().err
    assert sorted(p.name for p in full.iterdir()) == ["keep.txt"]
    assert export(src, tmp_path / "new") == 0
    assert export(src, tmp_path / "new") == 2  # not over a finished export either


def test_a_damaged_source_is_refused_and_partial_lists_what_is_left_out(tmp_path, capsys):
    src = SAMPLES / "tiny-llama-damaged"
    assert export(src, tmp_path / "out") == 5
    err = capsys.readouterr().err
    assert "not exported" in err and "file does not exist" in err
    assert not (tmp_path / "out").exists()
    assert export(src, tmp_path / "out", "--partial", "--json") == 5
    doc = json.loads(capsys.readouterr().out)
    got = exported(tmp_path / "out")
    readable = {k: v for k, v in load_file(src / "model-00003-of-00003.safetensors").items()}
    assert set(readable) <= set(got)
    assert set(got).isdisjoint(doc["left_out"]) and len(got) + len(doc["left_out"]) == 21
    assert "model.layers.0.input_layernorm.weight" in doc["left_out"]  # past the truncation
    assert not (tmp_path / "out" / "config.json").exists()  # would load with random weights


def test_export_reads_no_pickle_it_did_not_write(tmp_path, monkeypatch):
    """The unsafe sample's payload would create ckpt-browser-PWNED in the working folder."""
    monkeypatch.chdir(tmp_path)
    rc = export(SAMPLES / "malicious", tmp_path / "out")
    assert rc in (2, 5)
    assert not (tmp_path / "ckpt-browser-PWNED").exists()


def test_ema_picks_the_ema_copy_in_a_file_and_kept_apart(tmp_path):
    timm = PROJECTS / "timm" / "last.pth.tar"
    assert export(timm, tmp_path / "timm", "--ema") == 0
    same(exported(tmp_path / "timm"), torch_load(timm, argparse.Namespace)["state_dict_ema"])
    run = PROJECTS / "diffusers" / "unconditional"
    ckpt = next(run.glob("checkpoint-*"))
    for flags, folder in (((), "unet"), (("--ema",), "unet_ema")):
        out = tmp_path / folder
        assert export(run, out, *flags) == 0
        same(exported(out), load_file(ckpt / folder / "diffusion_pytorch_model.safetensors"))
        # the config beside them is the one of the folder they came from, and the weights
        # have the name diffusers loads beside it
        assert (out / "config.json").read_bytes() == (ckpt / folder / "config.json").read_bytes()
        assert (out / "diffusion_pytorch_model.safetensors").exists()


def test_a_dtype_safetensors_cannot_store_is_left_out_and_said(tmp_path, capsys):
    src = tmp_path / "model.pt"
    torch.save({"w": torch.arange(6.0).reshape(2, 3), "z": torch.ones(2, dtype=torch.complex128),
                "q": torch.quantize_per_tensor(torch.ones(4), 0.1, 0, torch.qint8)}, src)
    assert export(src, tmp_path / "out") == 5  # refused: not every weight can be written
    assert "complex128" in capsys.readouterr().err
    assert export(src, tmp_path / "out", "--partial", "--json") == 5
    doc = json.loads(capsys.readouterr().out)
    assert set(doc["left_out"]) >= {"z"} and "w" not in doc["left_out"]
    same(exported(tmp_path / "out"), {"w": torch.arange(6.0).reshape(2, 3)})


ZERO = {"deepspeed-run": SAMPLES / "deepspeed-run",
        "deepspeed-zero3": PROJECTS / "deepspeed-zero3",
        "deepspeed-zero1": SAMPLES / "deepspeed-zero1",
        "deepspeed-zero2-tied": SAMPLES / "deepspeed-zero2-tied",
        "deepspeed-zero3-tied": SAMPLES / "deepspeed-zero3-tied"}


@pytest.mark.parametrize("name", sorted(ZERO))
def test_zero_exports_what_deepspeeds_zero_to_fp32_gives(tmp_path, capsys, name):
    """The reference: DeepSpeed's own get_fp32_state_dict_from_zero_checkpoint on the sample,
    saved by tests/data/zero_fp32/make_references.py in DeepSpeed's venv."""
    want = load_file(Path(__file__).parents[1] / "data" / "zero_fp32" / f"{name}.safetensors")
    assert export(ZERO[name], tmp_path / "out", "--json") == 0
    doc = json.loads(capsys.readouterr().out)
    got = exported(tmp_path / "out")
    for tied, kept in doc["tied"].items():  # one storage in the checkpoint: stored once
        assert tied not in got and torch.equal(want.pop(tied), want[kept])
    same(got, want)


def test_a_peft_adapter_keeps_peft_s_names(tmp_path):
    """PEFT loads adapter_model.safetensors beside adapter_config.json."""
    src = PROJECTS / "peft" / "checkpoint-4"
    assert export(src, tmp_path / "out") == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "adapter_config.json", "adapter_model.safetensors"]
    same(exported(tmp_path / "out"), load_file(src / "adapter_model.safetensors"))


def test_zero_inside_a_trainer_checkpoint_gets_the_trainer_s_config(tmp_path):
    """The HF Trainer with DeepSpeed writes checkpoint-N/ holding global_stepN/ and latest
    beside config.json: the weights come from the tag folder, the config from checkpoint-N/."""
    import shutil

    ckpt = tmp_path / "checkpoint-4"
    ckpt.mkdir()
    for name in ("config.json", "trainer_state.json", "training_args.bin"):
        shutil.copy(SAMPLES / "hf-run3" / "checkpoint-4" / name, ckpt / name)
    for name in ("global_step4", "latest"):
        src = SAMPLES / "deepspeed-run" / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, ckpt / name)
    assert export(ckpt, tmp_path / "out") == 0
    same(exported(tmp_path / "out"),
         load_file(Path(__file__).parents[1] / "data" / "zero_fp32" / "deepspeed-run.safetensors"))
    assert (tmp_path / "out" / "config.json").read_bytes() == (ckpt / "config.json").read_bytes()


def test_tensor_parallel_shards_are_not_taken_for_copies(tmp_path, capsys):
    """Megatron's legacy format at TP 2 (mp_rank_00/, mp_rank_01/): the same names in both
    files, the matrices split in halves, the LayerNorms replicated. A shard is never exported
    as if it were the whole tensor; a replicated tensor is."""
    import shutil

    run = tmp_path / "megatron-run"
    shutil.copytree(SAMPLES / "megatron-run", run)
    rank0 = run / "iter_0000004" / "mp_rank_00" / "model_optim_rng.pt"
    # our own sample (numpy and argparse objects beside the weights, which weights_only refuses)
    state = torch.load(rank0, weights_only=False)
    halves: dict[int, dict] = {0: {}, 1: {}}
    split, whole = [], []

    def shard(tree: dict, rank: int) -> dict:
        out = {}
        for k, v in tree.items():
            if isinstance(v, dict):
                out[k] = shard(v, rank)
            elif isinstance(v, torch.Tensor) and v.dim() == 2 and v.shape[0] % 2 == 0:
                out[k] = v.chunk(2)[rank].clone()
                (split if rank == 0 else []).append(k)
            else:
                out[k] = v
                (whole if rank == 0 and isinstance(v, torch.Tensor) else []).append(k)
        return out

    for rank in (0, 1):
        halves[rank] = dict(state, model=shard(state["model"], rank))
    (run / "iter_0000004" / "mp_rank_01").mkdir()
    torch.save(halves[0], rank0)
    torch.save(halves[1], run / "iter_0000004" / "mp_rank_01" / "model_optim_rng.pt")
    assert split and whole
    assert export(run, tmp_path / "out") == 5
    assert "hold different tensors under this name" in capsys.readouterr().err
    assert export(run, tmp_path / "out", "--partial", "--json") == 5
    doc = json.loads(capsys.readouterr().out)
    got = exported(tmp_path / "out")
    assert all(t.dim() != 2 for t in got.values())  # no half matrix passed off as whole
    assert len(doc["left_out"]) == len(split) and len(got) == len(whole)


def test_no_room_is_said_before_anything_is_written(tmp_path, monkeypatch, capsys):
    import shutil
    from collections import namedtuple

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10**9, 10**9 - 1000, 1000))
    assert export(SAMPLES / "tiny-llama-run" / "checkpoint-6", tmp_path / "out") == 7
    err = capsys.readouterr().err
    assert "the export needs 104.6 KiB" in err and "1000 Bytes free" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("sample", ["tiny-llama-release", "hf-run3/checkpoint-6",
                                    "hf-multirank/checkpoint-4", "torchtune-full/epoch_1",
                                    "torchtune-lora/epoch_1"])
def test_every_sample_with_a_config_loads_with_transformers(tmp_path, sample):
    """from_pretrained(OUT) equals from_pretrained of the checkpoint itself. torchtune's LoRA
    epoch holds the merged model and its adapter: the model is exported, without the adapter
    (and without adapter_config.json, which would make transformers load OUT as an adapter)."""
    from transformers import AutoModelForCausalLM

    assert export(SAMPLES / sample, tmp_path / "out") == 0
    assert not (tmp_path / "out" / "adapter_config.json").exists()
    a = AutoModelForCausalLM.from_pretrained(SAMPLES / sample).state_dict()
    b = AutoModelForCausalLM.from_pretrained(tmp_path / "out").state_dict()
    assert sorted(a) == sorted(b) and all(torch.equal(a[k], b[k]) for k in a)
