"""Training state: framework detection by names (hand-built folders of empty files) and the seven
components read from real samples, checked against torch.load(weights_only=True) and JSON."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ckpt_browser import limits
from ckpt_browser.analysis.opened import open_path
from ckpt_browser.errors import NotACheckpoint, PathNotFound
from ckpt_browser.model import COMPONENTS
from ckpt_browser.producers.recognise import detect

from .component_helpers import (
    ACCELERATE,
    DEEPSPEED,
    HF_MULTIRANK,
    HF_RUN3,
    LIGHTNING,
    MALICIOUS,
    MEGATRON,
    SENTINEL,
    TITAN_STEP,
    TORCHTITAN,
    dcp,
    expected_optimizer,
    safe_load,
    safe_load_with,
    trainer_state,
    tree,
)
from .helpers import RELEASE, RUN6

# --- detection by names -----------------------------------------------------------------------


def test_hf_plain_checkpoint_roles(tmp_path):
    d = tree(tmp_path / "checkpoint-12", {
        "model.safetensors": None, "optimizer.pt": None, "scheduler.pt": None,
        "rng_state.pth": None, "trainer_state.json": "{}", "training_args.bin": None,
        "scaler.pt": None, "config.json": "{}"})
    det = detect(str(d))
    assert (det.framework, det.step, det.variant) == ("hf-trainer", 12, "")
    assert det.files("weights") == ("model.safetensors",)
    assert det.files("optimizer") == ("optimizer.pt",)
    assert det.files("scheduler") == ("scheduler.pt",)
    assert det.files("rng") == ("rng_state.pth",)
    assert det.files("progress") == ("trainer_state.json",)
    assert det.files("scaler") == ("scaler.pt",)
    assert "config.json" in det.files("other")
    assert det.problems == ()


def test_hf_fsdp_sharded_dcp_folders_are_found(tmp_path):
    d = tree(tmp_path / "checkpoint-8", {
        "pytorch_model_fsdp_0": dcp(0, 1), "optimizer_0": dcp(0, 1), "scheduler.pt": None,
        "rng_state_0.pth": None, "rng_state_1.pth": None, "trainer_state.json": "{}"})
    det = detect(str(d))
    assert (det.framework, det.step, det.variant) == ("hf-trainer", 8, "fsdp")
    assert set(det.dcp) == {"pytorch_model_fsdp_0", "optimizer_0"}
    assert "pytorch_model_fsdp_0/.metadata" in det.files("weights")
    assert "optimizer_0/__1_0.distcp" in det.files("optimizer")
    assert det.files("rng") == ("rng_state_0.pth", "rng_state_1.pth")


def test_hf_fsdp_full_and_local_state_dict_files(tmp_path):
    d = tree(tmp_path / "checkpoint-2", {
        "pytorch_model_fsdp.bin": None, "optimizer.bin": None, "scheduler.pt": None,
        "trainer_state.json": "{}", "pytorch_model_fsdp_0_rank1.bin": None})
    det = detect(str(d))
    assert det.framework == "hf-trainer"
    assert set(det.files("weights")) == {"pytorch_model_fsdp.bin", "pytorch_model_fsdp_0_rank1.bin"}
    assert det.files("optimizer") == ("optimizer.bin",)
    assert det.variant == "fsdp"


def test_hf_deepspeed_variant_resolves_latest(tmp_path):
    d = tree(tmp_path / "checkpoint-4", {
        "global_step4": {"mp_rank_00_model_states.pt": None,
                         "bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt": None,
                         "bf16_zero_pp_rank_1_mp_rank_00_optim_states.pt": None},
        "latest": "global_step4\n", "zero_to_fp32.py": None, "rng_state_0.pth": None,
        "rng_state_1.pth": None, "trainer_state.json": "{}", "config.json": "{}"})
    det = detect(str(d))
    assert (det.framework, det.step, det.variant) == ("hf-trainer", 4, "deepspeed")
    assert det.files("weights") == ("global_step4/mp_rank_00_model_states.pt",)
    assert det.files("optimizer") == ("global_step4/bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt",
                                      "global_step4/bf16_zero_pp_rank_1_mp_rank_00_optim_states.pt")
    assert {"latest", "zero_to_fp32.py"} <= set(det.files("other"))
    assert det.problems == ()


def test_hf_deepspeed_latest_naming_a_missing_tag(tmp_path):
    d = tree(tmp_path / "checkpoint-8", {"global_step4": {"mp_rank_00_model_states.pt": None},
                                        "latest": "global_step8", "trainer_state.json": "{}"})
    det = detect(str(d))
    assert det.framework == "hf-trainer"
    assert any("latest names global_step8, which does not exist" in p.message
               for p in det.problems)


def test_hf_save_only_model_has_no_optimizer_role(tmp_path):
    d = tree(tmp_path / "checkpoint-3", {"model.safetensors": None, "trainer_state.json": "{}",
                                        "training_args.bin": None, "config.json": "{}"})
    det = detect(str(d))
    assert det.framework == "hf-trainer"
    assert det.files("optimizer") == () and det.files("scheduler") == ()


def test_hf_xla_sagemaker_peft_and_bin_shards(tmp_path):
    d = tree(tmp_path / "checkpoint-5", {
        "rank0-of-2-pytorch_model.bin": None, "rank1-of-2-pytorch_model.bin": None,
        "rank0-of-2-optimizer.pt": None, "optimizer.pt_0": None, "user_content.pt": None,
        "adapter_model.safetensors": None, "adapter_config.json": "{}",
        "extra": {"adapter_model.safetensors": None},
        "pytorch_model-00001-of-00002.bin": None, "pytorch_model.bin.index.json": "{}",
        "trainer_state.json": "{}"})
    det = detect(str(d))
    weights = set(det.files("weights"))
    assert {"rank0-of-2-pytorch_model.bin", "adapter_model.safetensors",
            "extra/adapter_model.safetensors", "pytorch_model-00001-of-00002.bin",
            "pytorch_model.bin.index.json"} <= weights
    assert set(det.files("optimizer")) == {"rank0-of-2-optimizer.pt", "optimizer.pt_0"}


def test_hf_without_trainer_state_is_still_hf(tmp_path):
    d = tree(tmp_path / "checkpoint-9", {"model.safetensors": None, "optimizer.pt": None})
    det = detect(str(d))
    assert (det.framework, det.step) == ("hf-trainer", 9)
    assert det.files("progress") == ()


def test_accelerate_step_folder(tmp_path):
    d = tree(tmp_path / "step_4", {
        "model.safetensors": None, "model_1.safetensors": None, "optimizer.bin": None,
        "scheduler.bin": None, "random_states_0.pkl": None, "random_states_1.pkl": None,
        "scaler.pt": None, "dl_state_dict.bin": None, "sampler.bin": None,
        "custom_checkpoint_0.pkl": None})
    det = detect(str(d))
    assert (det.framework, det.step) == ("accelerate", 4)
    assert det.files("weights") == ("model.safetensors", "model_1.safetensors")
    assert det.files("rng") == ("random_states_0.pkl", "random_states_1.pkl")
    assert set(det.files("data")) == {"dl_state_dict.bin", "sampler.bin"}
    assert det.files("progress") == ("custom_checkpoint_0.pkl",)


def test_accelerate_checkpoint_counter_and_epoch_names_give_no_step(tmp_path):
    a = detect(str(tree(tmp_path / "checkpoint_3", {"random_states_0.pkl": None})))
    assert (a.framework, a.step) == ("accelerate", None)
    assert "counts saves" in a.step_source
    b = detect(str(tree(tmp_path / "epoch_2", {"random_states_0.pkl": None})))
    assert (b.framework, b.step, b.epoch) == ("accelerate", None, 2)


def test_accelerate_fsdp_and_deepspeed_variants(tmp_path):
    f = detect(str(tree(tmp_path / "fsdp", {"pytorch_model_fsdp_0": dcp(0, 1),
                                            "optimizer_0": dcp(0, 1),
                                            "random_states_0.pkl": None,
                                            "random_states_1.pkl": None})))
    assert (f.framework, f.variant) == ("accelerate", "fsdp")
    assert set(f.dcp) == {"pytorch_model_fsdp_0", "optimizer_0"}
    s = detect(str(tree(tmp_path / "ds", {
        "pytorch_model": {"mp_rank_00_model_states.pt": None,
                          "zero_pp_rank_0_mp_rank_00_optim_states.pt": None},
        "latest": "pytorch_model", "zero_to_fp32.py": None, "random_states_0.pkl": None})))
    assert (s.framework, s.variant) == ("accelerate", "deepspeed")
    assert s.files("optimizer") == ("pytorch_model/zero_pp_rank_0_mp_rank_00_optim_states.pt",)


def test_hf_deepspeed_without_latest_is_said(tmp_path):
    # the Trainer resumes through engine.load_checkpoint(path), which needs `latest`
    d = tree(tmp_path / "checkpoint-4", {"global_step4": {"mp_rank_00_model_states.pt": None},
                                        "trainer_state.json": "{}"})
    det = detect(str(d))
    assert (det.framework, det.variant) == ("hf-trainer", "deepspeed")
    assert det.files("weights") == ("global_step4/mp_rank_00_model_states.pt",)
    assert [p.message for p in det.problems] == ["no readable latest; showing global_step4"]


def test_accelerate_deepspeed_loads_its_tag_by_name(tmp_path):
    # accelerate's load_state passes the tag (pytorch_model) itself: `latest` is not read
    for extra in ({}, {"latest": "global_step9"}):
        d = tree(tmp_path / f"ds{len(extra)}", {
            "pytorch_model": {"mp_rank_00_model_states.pt": None},
            "random_states_0.pkl": None, **extra})
        det = detect(str(d))
        assert (det.framework, det.variant, det.problems) == ("accelerate", "deepspeed", ())
        assert det.files("weights") == ("pytorch_model/mp_rank_00_model_states.pt",)


def test_lightning_file_names(tmp_path):
    for name, step, epoch in (("epoch=3-step=1200.ckpt", 1200, 3), ("last.ckpt", None, None),
                              ("epoch=1-step=10-v1.ckpt", 10, 1),
                              ("model-epoch=2-step=7.ckpt", 7, 2)):
        p = tmp_path / name
        p.write_bytes(b"")
        det = detect(str(p))
        assert (det.framework, det.step, det.epoch) == ("lightning", step, epoch), name
        assert det.files("optimizer") == (name,) and det.files("rng") == ()


def test_lightning_sharded_folder_with_meta_pt(tmp_path):
    d = tree(tmp_path / "epoch=0-step=5.ckpt", {"meta.pt": None, **dcp(0, 1)})
    det = detect(str(d))
    assert (det.framework, det.variant, det.step, det.dcp) == ("lightning", "sharded", 5, ("",))
    assert ".metadata" in det.files("weights")
    assert det.files("progress") == ("meta.pt",)


def test_lightning_deepspeed_folder(tmp_path):
    d = tree(tmp_path / "epoch=1-step=20.ckpt", {
        "latest": "checkpoint", "zero_to_fp32.py": None,
        "checkpoint": {"mp_rank_00_model_states.pt": None,
                       "zero_pp_rank_0_mp_rank_00_optim_states.pt": None}})
    det = detect(str(d))
    assert (det.framework, det.variant, det.step) == ("lightning", "deepspeed", 20)
    assert det.files("progress") == ("checkpoint/mp_rank_00_model_states.pt",)
    assert det.files("optimizer") == ("checkpoint/zero_pp_rank_0_mp_rank_00_optim_states.pt",)


def test_plain_dcp_and_unfinished_dcp(tmp_path):
    ok = detect(str(tree(tmp_path / "dcp", dcp(0, 1, 2))))
    assert (ok.framework, ok.dcp, ok.problems) == ("dcp", ("",), ())
    per_rank = detect(str(tree(tmp_path / "per-rank", {"__0.metadata": None,
                                                       "__0_0.distcp": None})))
    assert per_rank.framework == "dcp" and per_rank.problems == ()
    tmp = detect(str(tree(tmp_path / "tmp", {".metadata.tmp": None, "__0_0.distcp": None})))
    assert tmp.framework == "dcp"
    assert any(".metadata.tmp" in p.message for p in tmp.problems)


def test_torchtitan_step_and_run_root(tmp_path):
    run = tree(tmp_path / "run", {"checkpoint": {"step-5": dcp(0), "step-10": dcp(0, 1)}})
    det = detect(str(run / "checkpoint" / "step-10"))
    assert (det.framework, det.step) == ("torchtitan", 10)
    root = detect(str(run))
    assert (root.framework, root.step) == ("torchtitan", 10)
    assert root.root.endswith("step-10")
    assert any("showing checkpoint/step-10" in p.message for p in root.problems)
    hf = detect(str(tree(tmp_path / "step-3", {"model.safetensors.index.json": "{}",
                                             "model-00001-of-00001.safetensors": None})))
    assert (hf.framework, hf.variant, hf.step) == ("torchtitan", "hf", 3)


def test_deepspeed_root_and_missing_tag(tmp_path):
    run = tree(tmp_path / "ds", {
        "latest": "global_step4", "zero_to_fp32.py": None,
        "global_step2": {"mp_rank_00_model_states.pt": None},
        "global_step4": {"mp_rank_00_model_states.pt": None,
                         "zero_pp_rank_0_mp_rank_00_optim_states.pt": None,
                         "zero_pp_rank_1_mp_rank_00_optim_states.pt": None}})
    det = detect(str(run))
    assert (det.framework, det.step, det.tag) == ("deepspeed", 4, "global_step4")
    assert det.files("weights") == ("global_step4/mp_rank_00_model_states.pt",)
    assert len(det.files("optimizer")) == 2
    (run / "latest").write_text("global_step8")
    bad = detect(str(run))
    assert bad.framework == "deepspeed" and bad.step == 8
    assert any(p.message.startswith("latest names global_step8, which does not exist")
               for p in bad.problems)


def test_deepspeed_zero3_moe_pipeline_and_tag_folder(tmp_path):
    tag = tree(tmp_path / "global_step7", {
        "zero_pp_rank_0_mp_rank_00_model_states.pt": None,
        "zero_pp_rank_1_mp_rank_00_model_states.pt": None,
        "zero_pp_rank_0_mp_rank_00_optim_states.pt": None,
        "zero_pp_rank_1_mp_rank_00_optim_states.pt": None,
        "expp_rank_0_mp_rank_00_optim_states.pt": None,
        "layer_0_expert_0_mp_rank_00_model_states.pt": None,
        "layer_01-model_00-model_states.pt": None})
    det = detect(str(tag))
    assert (det.framework, det.step) == ("deepspeed", 7)
    assert len(det.files("weights")) == 4
    assert "expp_rank_0_mp_rank_00_optim_states.pt" in det.files("optimizer")


def test_deepspeed_universal(tmp_path):
    run = tree(tmp_path / "ds", {
        "latest_universal": "global_step4_universal",
        "global_step4_universal": {"mp_rank_00_model_states.pt": None,
                                   "zero": {"w": {"fp32.pt": None, "exp_avg.pt": None}}}})
    det = detect(str(run))
    assert (det.framework, det.variant, det.step) == ("deepspeed", "universal", 4)
    assert "global_step4_universal/zero/" in det.files("optimizer")


def test_megatron_legacy_root_and_missing_iteration(tmp_path):
    run = tree(tmp_path / "meg", {
        "latest_checkpointed_iteration.txt": "4",
        "iter_0000004": {"mp_rank_00": {"model_optim_rng.pt": None, "distrib_optim.pt": None},
                         "mp_rank_01": {"model_optim_rng.pt": None}}})
    det = detect(str(run))
    assert (det.framework, det.step, det.variant) == ("megatron", 4, "torch")
    assert det.files("rng") == ("iter_0000004/mp_rank_00/model_optim_rng.pt",
                                "iter_0000004/mp_rank_01/model_optim_rng.pt")
    assert "iter_0000004/mp_rank_00/distrib_optim.pt" in det.files("optimizer")
    (run / "latest_checkpointed_iteration.txt").write_text("8")
    bad = detect(str(run))
    assert bad.step == 8
    assert any("names iter_0000008, which does not exist" in p.message for p in bad.problems)
    one = detect(str(run / "iter_0000004" / "mp_rank_00" / "model_optim_rng.pt"))
    assert (one.framework, one.step) == ("megatron", 4)


def test_megatron_torch_dist_release_and_zarr(tmp_path):
    run = tree(tmp_path / "meg", {
        "latest_checkpointed_iteration.txt": "release",
        "release": {"metadata.json": json.dumps({"sharded_backend": "torch_dist"}), **dcp(0, 1)}})
    det = detect(str(run))
    assert (det.framework, det.variant, det.tag, det.dcp) == ("megatron", "torch_dist", "release",
                                                             ("release",))
    assert "release/.metadata" in det.files("weights")
    zarr = tree(tmp_path / "iter_0000002", {"metadata.json": json.dumps(
        {"sharded_backend": "zarr"}), "decoder.weight": {".zarray": "{}"}})
    z = detect(str(zarr))
    assert (z.framework, z.variant, z.step) == ("megatron", "zarr", 2)
    assert any("zarr" in p.message for p in z.problems)


def test_weights_only_and_unknown_folders(tmp_path):
    st = detect(str(tree(tmp_path / "release", {"model.safetensors": None, "config.json": "{}"})))
    assert st.framework == "safetensors"
    junk = tree(tmp_path / "junk", {"notes.txt": "hi", "data.csv": "1,2", "x.pt": None,
                                   "sub": {"y.bin": None}})
    det = detect(str(junk))
    assert det.framework == "unknown" and det.step is None
    assert detect(str(tmp_path / "nope")).framework == "unknown"
    assert detect(str(tree(tmp_path / "empty", {}))).framework == "unknown"


def test_detection_opens_no_pickle(tmp_path, monkeypatch):
    """Names only: a state file that cannot be opened does not change the answer."""
    d = tree(tmp_path / "checkpoint-1", {"optimizer.pt": None, "trainer_state.json": "{}"})
    os.chmod(d / "optimizer.pt", 0)
    import pickle

    monkeypatch.setattr(pickle, "load", lambda *a, **k: (_ for _ in ()).throw(AssertionError))
    monkeypatch.setattr(pickle, "Unpickler", None)
    assert detect(str(d)).framework == "hf-trainer"


# --- the seven components, from real samples ----------------------------------------------------

def statuses(ts) -> dict:
    return {k: c.status for k, c in ts.components.items()}


def check_optimizer(facts: dict, sd: dict) -> None:
    want = expected_optimizer(sd)
    assert facts["param_groups"] == want["groups"]
    assert facts["params"] == sum(g["params"] for g in want["groups"])
    assert facts["params_with_state"] == want["params_with_state"]
    assert facts["state_keys"] == want["state_keys"]
    assert facts["step"] == want["step"]
    assert facts["exp_avg"]["shapes"] == want["shapes"]


def check_scheduler(facts: dict, sd: dict, keys=("last_epoch", "base_lrs", "_last_lr")) -> None:
    for k in keys:
        assert facts[k] == sd[k], k


def test_hf_trainer_single_process(tmp_path):
    ts = open_path(str(RUN6)).training
    state = trainer_state(RUN6)
    assert (ts.framework, ts.step, ts.epoch, ts.ranks) == ("hf-trainer", state["global_step"],
                                                           state["epoch"], 1)
    assert statuses(ts) == {"weights": "ok", "optimizer": "ok", "scheduler": "ok", "rng": "ok",
                            "data": "ok", "progress": "ok", "scaler": "not-needed"}
    c = ts.components
    check_optimizer(c["optimizer"].facts, safe_load(RUN6 / "optimizer.pt"))
    check_scheduler(c["scheduler"].facts, safe_load(RUN6 / "scheduler.pt"))
    assert c["rng"].facts["ranks"] == {"0": sorted(safe_load(RUN6 / "rng_state.pth"))}
    assert c["progress"].facts["global_step"] == state["global_step"]
    assert c["progress"].facts["epoch"] == state["epoch"]
    assert c["progress"].facts["log_history_entries"] == len(state["log_history"])
    assert c["data"].facts["global_step"] == state["global_step"]
    assert c["data"].facts["stored"] is False
    assert c["data"].facts["per_device_train_batch_size"] == 4  # README: batch 4
    assert c["weights"].facts["shards"] == c["weights"].facts["shards_expected"] == 3
    assert c["scaler"].facts["fp16"] is False
    assert {f.name for f in ts.files} == {"optimizer.pt", "scheduler.pt", "rng_state.pth",
                                          "training_args.bin"}
    assert all(c.detail.endswith(".") for c in ts.components.values())


def test_hf_multirank_counts_rng_per_rank():
    ts = open_path(str(HF_MULTIRANK)).training
    assert (ts.framework, ts.step, ts.ranks) == ("hf-trainer", 4, 2)
    assert ts.components["rng"].status == "ok"
    want = {str(r): sorted(safe_load(HF_MULTIRANK / f"rng_state_{r}.pth")) for r in (0, 1)}
    assert ts.components["rng"].facts["ranks"] == want
    check_optimizer(ts.components["optimizer"].facts, safe_load(HF_MULTIRANK / "optimizer.pt"))


def test_hf_multirank_missing_rank_file_is_incomplete(tmp_path):
    d = shutil.copytree(HF_MULTIRANK, tmp_path / "checkpoint-4")
    (d / "rng_state_1.pth").unlink()
    (d / "rng_state_2.pth").write_bytes((d / "rng_state_0.pth").read_bytes())
    ts = open_path(str(d)).training
    assert ts.components["rng"].status == "incomplete"
    assert ts.components["rng"].facts["missing_ranks"] == [1]
    assert "1" in ts.components["rng"].detail


def test_hf_run3_each_checkpoint_and_the_run_folder():
    for n in (2, 4, 6):
        d = HF_RUN3 / f"checkpoint-{n}"
        ts = open_path(str(d)).training
        assert (ts.framework, ts.step) == ("hf-trainer", trainer_state(d)["global_step"]) == (
            "hf-trainer", n)
        check_optimizer(ts.components["optimizer"].facts, safe_load(d / "optimizer.pt"))
        check_scheduler(ts.components["scheduler"].facts, safe_load(d / "scheduler.pt"))
    run = open_path(str(HF_RUN3)).training
    assert run.step == 6 and run.root == str(HF_RUN3 / "checkpoint-6")
    assert any("showing checkpoint-6" in p.message for p in run.problems)


def test_hf_without_scheduler_pt_skips_both(tmp_path):
    d = shutil.copytree(RUN6, tmp_path / "checkpoint-6")
    (d / "scheduler.pt").unlink()
    c = open_path(str(d)).training.components
    assert (c["optimizer"].status, c["scheduler"].status) == ("incomplete", "missing")
    assert "optimizer AND scheduler" in c["scheduler"].detail
    assert "optimizer AND scheduler" in c["optimizer"].detail


def test_hf_interrupted_and_damaged_files(tmp_path, monkeypatch):
    d = shutil.copytree(RUN6, tmp_path / "checkpoint-6")
    (d / "trainer_state.json").unlink()
    (d / "rng_state.pth").unlink()
    raw = (d / "optimizer.pt").read_bytes()
    (d / "optimizer.pt").write_bytes(raw[: len(raw) // 3])
    ts = open_path(str(d)).training
    s = statuses(ts)
    assert (s["progress"], s["data"], s["rng"], s["optimizer"]) == (
        "missing", "missing", "missing", "damaged")
    assert ts.step == 6  # the folder name still says so
    assert any(p.file == "optimizer.pt" for p in ts.problems)
    (d / "trainer_state.json").write_text(json.dumps(trainer_state(RUN6)))
    monkeypatch.setattr(limits, "LIMITS", dataclasses.replace(limits.LIMITS, json_bytes=100))
    ts = open_path(str(d)).training
    assert ts.components["progress"].status == "damaged"
    assert "limit" in ts.components["progress"].detail


def test_accelerate_save_state():
    ts = open_path(str(ACCELERATE)).training
    assert (ts.framework, ts.step, ts.ranks) == ("accelerate", 4, 1)
    assert statuses(ts) == {"weights": "ok", "optimizer": "ok", "scheduler": "ok", "rng": "ok",
                            "data": "missing", "progress": "ok", "scaler": "not-needed"}
    c = ts.components
    check_optimizer(c["optimizer"].facts, safe_load(ACCELERATE / "optimizer.bin"))
    check_scheduler(c["scheduler"].facts, safe_load(ACCELERATE / "scheduler.bin"))
    rs = safe_load(ACCELERATE / "random_states_0.pkl")
    assert c["rng"].facts["ranks"] == {"0": ["cpu", "numpy", "python"]}
    assert c["rng"].facts["micro_step"] == {"0": rs["step"]}
    assert c["progress"].facts["custom"] == {
        "custom_checkpoint_0.pkl": safe_load(ACCELERATE / "custom_checkpoint_0.pkl")}
    assert c["progress"].facts["step_from_name"] == 4
    assert "no global step" in c["progress"].detail


def test_accelerate_without_custom_checkpoint_has_no_progress(tmp_path):
    d = shutil.copytree(ACCELERATE, tmp_path / "checkpoint_7")
    (d / "custom_checkpoint_0.pkl").unlink()
    ts = open_path(str(d)).training
    assert ts.step is None
    assert ts.components["progress"].status == "missing"
    assert "saves no global step" in ts.components["progress"].detail


def test_lightning_ckpt_files():
    for name in ("epoch=0-step=4.ckpt", "last.ckpt"):
        path = LIGHTNING / name
        ck = safe_load(path)
        ts = open_path(str(path)).training
        fit = ck["loops"]["fit_loop"]
        steps = fit["epoch_loop.automatic_optimization.optim_progress"]["optimizer"]["step"]
        assert (ts.framework, ts.step, ts.epoch) == ("lightning", steps["total"]["completed"],
                                                     ck["epoch"])
        assert statuses(ts) == {"weights": "ok", "optimizer": "ok", "scheduler": "ok",
                                "rng": "missing", "data": "missing", "progress": "ok",
                                "scaler": "not-needed"}, name
        c = ts.components
        assert "never saves RNG" in c["rng"].detail
        assert c["weights"].facts["tensors"] == len(ck["state_dict"])
        check_optimizer(c["optimizer"].facts, ck["optimizer_states"][0])
        check_scheduler(c["scheduler"].facts, ck["lr_schedulers"][0],
                        ("last_epoch", "base_lrs", "_last_lr", "step_size", "gamma"))
        batch = fit["epoch_loop.batch_progress"]["current"]["completed"]
        assert c["progress"].facts["batch_in_epoch"] == batch
        assert c["data"].facts["batch_in_epoch"] == batch and batch > 0  # stopped mid-epoch
        assert c["progress"].facts["lightning_version"] == ck["pytorch-lightning_version"]


def test_torchtitan_dcp():
    import io

    import torch
    from torch.distributed.checkpoint import FileSystemReader

    md = FileSystemReader(str(TITAN_STEP)).read_metadata()  # our own sample: plain pickle is fine
    keys = md.state_dict_metadata
    model = [k for k, v in keys.items() if not k.startswith(
        ("optimizer.", "lr_scheduler.", "dataloader.", "train_state.")) and hasattr(v, "size")]
    fqns = {k[len("optimizer.state."):].rsplit(".", 1)[0] for k in keys
            if k.startswith("optimizer.state.")}
    values = {}  # each non-tensor item is a standalone torch.save blob (FORMATS.md "DCP")
    for idx, info in md.storage_data.items():
        if not hasattr(keys[idx.fqn], "size"):
            with open(TITAN_STEP / info.relative_path, "rb") as f:
                f.seek(info.offset)
                values[idx.fqn] = torch.load(io.BytesIO(f.read(info.length)), weights_only=True)
    for path in (TITAN_STEP, TORCHTITAN):
        ts = open_path(str(path)).training
        assert (ts.framework, ts.step, ts.ranks) == ("torchtitan", 10, 2)
        assert statuses(ts) == {"weights": "ok", "optimizer": "ok", "scheduler": "ok",
                                "rng": "missing", "data": "ok", "progress": "ok",
                                "scaler": "not-needed"}
        c = ts.components
        assert c["weights"].facts["tensors"] == len(model)
        assert c["optimizer"].facts["params_with_state"] == len(fqns)
        assert c["optimizer"].facts["state_keys"] == ["exp_avg", "exp_avg_sq", "step"]
        assert c["data"].facts["per_rank"] == ["dp_rank_0", "dp_rank_1"]
        assert c["data"].facts["world_size"] == values["dataloader.dp_world_size"] == ts.ranks
        for r in (0, 1):
            key = f"dp_rank_{r}.next_index"
            assert c["data"].facts["state"][key] == values[f"dataloader.{key}"]
        assert c["progress"].facts["step"] == values["train_state.step"] == ts.step
        assert c["progress"].facts["ntokens_seen"] == values["train_state.ntokens_seen"]
        assert c["scheduler"].facts["last_epoch"] == values["lr_scheduler.last_epoch"]
        assert "never saves RNG" in c["rng"].detail


def test_deepspeed_zero2_fp16():
    tag = DEEPSPEED / (DEEPSPEED / "latest").read_text().strip()
    ms = safe_load(tag / "mp_rank_00_model_states.pt")
    ts = open_path(str(DEEPSPEED)).training
    assert (ts.framework, ts.step, ts.ranks) == ("deepspeed", ms["global_steps"],
                                                 ms["dp_world_size"])
    assert statuses(ts) == {"weights": "ok", "optimizer": "ok", "scheduler": "ok",
                            "rng": "missing", "data": "missing", "progress": "ok", "scaler": "ok"}
    c = ts.components
    assert c["weights"].facts["tensors"] == len(ms["module"])
    assert c["optimizer"].facts["zero_stage"] == 2
    assert c["optimizer"].facts["dp_ranks"] == ms["dp_world_size"]
    assert c["progress"].facts["global_samples"] == ms["global_samples"]
    assert c["progress"].facts["global_steps"] == ms["global_steps"]
    for k, v in ms["lr_scheduler"].items():
        assert c["scheduler"].facts[k] == (list(v) if isinstance(v, tuple) else v), k
    assert c["scaler"].facts["fp16"] is True
    if ms["skipped_steps"] == 0:  # no overflow yet, so the scale is still the initial one
        assert c["scaler"].facts["cur_scale"] == 2 ** ms["ds_config"]["fp16"][
            "initial_scale_power"]
    assert len(os.listdir(tag)) == 3


def test_deepspeed_missing_shard_and_missing_tag(tmp_path):
    run = shutil.copytree(DEEPSPEED, tmp_path / "ds")
    tag = (run / "latest").read_text().strip()
    (run / tag / "zero_pp_rank_1_mp_rank_00_optim_states.pt").unlink()
    c = open_path(str(run)).training.components
    assert c["optimizer"].status == "incomplete"
    assert c["optimizer"].facts["missing_ranks"] == [1]
    (run / "latest").write_text("global_step8")
    ts = open_path(str(run)).training
    assert ts.step == 8
    assert any("latest names global_step8, which does not exist" in p.message
               for p in ts.problems)
    assert ts.components["weights"].status == "missing"


def test_megatron_legacy():
    import argparse

    f = MEGATRON / "iter_0000004" / "mp_rank_00" / "model_optim_rng.pt"
    sd = safe_load_with(f, [argparse.Namespace])
    ts = open_path(str(MEGATRON)).training
    assert (ts.framework, ts.step, ts.ranks) == ("megatron", sd["iteration"], sd["args"].world_size)
    assert statuses(ts) == {"weights": "ok", "optimizer": "ok", "scheduler": "ok", "rng": "ok",
                            "data": "ok", "progress": "ok", "scaler": "ok"}
    c = ts.components
    assert c["weights"].facts["tensors"] == len(sd["model"])
    check_optimizer(c["optimizer"].facts, sd["optimizer"]["optimizer"])
    for k, v in sd["opt_param_scheduler"].items():
        assert c["scheduler"].facts[k] == v, k
    assert c["data"].facts["consumed_train_samples"] == sd["args"].consumed_train_samples
    assert c["scaler"].facts["scale"] == float(sd["optimizer"]["grad_scaler"]["scale"])
    # FORMATS.md "Megatron-LM"
    megatron_rng = {"random_rng_state": "python", "np_rng_state": "numpy", "torch_rng_state": "cpu",
                    "cuda_rng_state": "cuda", "rng_tracker_states": "cuda-tracker"}
    assert c["rng"].facts["ranks"] == {
        "mp_rank_00": sorted(megatron_rng[k] for k in sd["rng_state"][0])}


def test_malicious_optimizer_is_unsafe_and_never_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ts = open_path(str(MALICIOUS)).training
    opt = ts.components["optimizer"]
    assert opt.status == "unsafe"
    assert "posix.system" in opt.detail
    assert any("posix.system" in pf.unsafe for pf in ts.files if hasattr(pf, "unsafe"))
    for where in (tmp_path, MALICIOUS, MALICIOUS.parent, Path.cwd()):
        assert not (where / SENTINEL).exists()


def test_no_torch_import_and_no_execution_in_a_fresh_process(tmp_path):
    script = (
        "import sys, json\n"
        "from ckpt_browser.analysis.opened import open_path\n"
        "out = {}\n"
        "for p in sys.argv[1:]:\n"
        "    ts = open_path(p).training\n"
        "    out[p] = [ts.framework, {k: c.status for k, c in ts.components.items()}]\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in {'torch', 'textual'})\n"
        "print(json.dumps({'heavy': heavy, 'out': out}))\n")
    paths = [RUN6, ACCELERATE, LIGHTNING / "last.ckpt", TITAN_STEP, DEEPSPEED, MEGATRON, MALICIOUS]
    r = subprocess.run([sys.executable, "-c", script, *map(str, paths)], capture_output=True,
                       text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["heavy"] == []
    assert [result["out"][str(p)][0] for p in paths] == [
        "hf-trainer", "accelerate", "lightning", "torchtitan", "deepspeed", "megatron",
        "hf-trainer"]
    assert not (tmp_path / SENTINEL).exists()


def test_hundred_shards_are_listed_not_opened(tmp_path, monkeypatch):
    d = tree(tmp_path / "checkpoint-1", {"trainer_state.json": json.dumps({"global_step": 1}),
                                        "model.safetensors.index.json": "{}",
                                        **{f"model-{i:05d}-of-00100.safetensors": "x"
                                           for i in range(1, 101)}})
    import builtins

    opened = []
    real_open = builtins.open
    monkeypatch.setattr(builtins, "open", lambda f, *a, **k: (opened.append(str(f)),
                                                              real_open(f, *a, **k))[1])
    ts = open_path(str(d)).training
    assert ts.components["weights"].status == "ok"
    assert ts.components["weights"].facts["shards"] == 100
    assert not [f for f in opened if f.endswith(".safetensors")]
    (d / "model-00042-of-00100.safetensors").unlink()
    c = open_path(str(d)).training.components["weights"]
    assert c.status == "incomplete" and "99 of 100" in c.detail


def test_unknown_and_weights_only_folders(tmp_path):
    junk = tree(tmp_path / "junk", {"notes.txt": "hi", "x.pt": "not a pickle"})
    ts = open_path(str(junk)).training
    assert ts.framework == "unknown"
    assert set(ts.components) == set(COMPONENTS)
    assert all(c.status == "missing" for c in ts.components.values())
    rel = open_path(str(RELEASE)).training
    assert rel.framework == "safetensors"
    assert statuses(rel)["weights"] == "ok" and statuses(rel)["optimizer"] == "missing"
    with pytest.raises(PathNotFound):  # nothing there to describe
        _ = open_path(str(tmp_path / "nothing-here")).training


def test_facts_are_json():
    for p in (RUN6, ACCELERATE, LIGHTNING / "last.ckpt", TITAN_STEP, DEEPSPEED, MEGATRON):
        ts = open_path(str(p)).training
        json.dumps({k: [c.status, list(c.files), c.detail, c.facts]
                    for k, c in ts.components.items()}, allow_nan=False)


# --- real DCP layouts written here with torch.distributed.checkpoint (no process group) ----------

def _tiny_training():
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2)
    for _ in range(3):
        model(torch.randn(2, 4)).sum().backward()
        opt.step()
        sched.step()
        opt.zero_grad()
    return model, opt, sched


def _dcp_save(state: dict, folder: Path) -> None:
    import warnings

    import torch.distributed.checkpoint as dcp

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dcp.save(state, checkpoint_id=str(folder))


def test_hf_fsdp_sharded_state_dict(tmp_path):
    import torch

    model, opt, sched = _tiny_training()
    d = tmp_path / "checkpoint-3"
    _dcp_save({"model": model.state_dict()}, d / "pytorch_model_fsdp_0")
    _dcp_save({"optimizer": opt.state_dict()}, d / "optimizer_0")
    torch.save(sched.state_dict(), d / "scheduler.pt")
    shutil.copy(HF_MULTIRANK / "rng_state_0.pth", d / "rng_state_0.pth")
    shutil.copy(HF_MULTIRANK / "rng_state_1.pth", d / "rng_state_1.pth")
    (d / "trainer_state.json").write_text(json.dumps({"global_step": 3, "epoch": 1.0}))
    ts = open_path(str(d)).training
    assert (ts.framework, ts.step, ts.ranks) == ("hf-trainer", 3, 2)
    assert statuses(ts) == {"weights": "ok", "optimizer": "ok", "scheduler": "ok", "rng": "ok",
                            "data": "ok", "progress": "ok", "scaler": "not-needed"}
    c = ts.components
    assert c["weights"].facts["tensors"] == len(model.state_dict())
    assert c["optimizer"].facts["params_with_state"] == len(opt.state_dict()["state"])
    assert c["optimizer"].facts["state_keys"] == ["exp_avg", "exp_avg_sq", "step"]
    assert c["scheduler"].facts["last_epoch"] == sched.last_epoch
    assert {x.folder for x in ts.files if hasattr(x, "entries")} == {"pytorch_model_fsdp_0",
                                                                     "optimizer_0"}
    (d / "optimizer_0" / ".metadata").rename(d / "optimizer_0" / ".metadata.tmp")
    assert open_path(str(d)).training.components["optimizer"].status == "incomplete"


def test_lightning_fsdp_sharded_ckpt_folder(tmp_path):
    import torch

    model, opt, sched = _tiny_training()
    ck = safe_load(LIGHTNING / "last.ckpt")
    d = tmp_path / "epoch=0-step=3.ckpt"
    _dcp_save({"model": model.state_dict(), "optimizer_0": opt.state_dict()}, d)
    meta = {k: v for k, v in ck.items() if k not in ("state_dict", "optimizer_states")}
    torch.save(meta, d / "meta.pt")
    ts = open_path(str(d)).training
    fit = ck["loops"]["fit_loop"]
    assert (ts.framework, ts.step) == ("lightning", fit[
        "epoch_loop.automatic_optimization.optim_progress"]["optimizer"]["step"]["total"][
        "completed"])
    s = statuses(ts)
    assert (s["weights"], s["optimizer"], s["scheduler"], s["rng"], s["progress"]) == (
        "ok", "ok", "ok", "missing", "ok")
    assert ts.components["weights"].facts["tensors"] == len(model.state_dict())
    assert ts.components["optimizer"].facts["params_with_state"] == len(opt.state_dict()["state"])


def test_every_hand_built_layout_reads_without_raising(tmp_path):
    """Empty files everywhere: statuses become damaged/missing/incomplete, never an exception."""
    allowed = {"ok", "missing", "incomplete", "damaged", "unsafe", "not-needed"}
    layouts = {
        "checkpoint-8": {"pytorch_model_fsdp_0": dcp(0, 1), "optimizer_0": dcp(0, 1),
                         "scheduler.pt": None, "rng_state_0.pth": None,
                         "trainer_state.json": "not json"},
        "checkpoint-4": {"global_step4": {"mp_rank_00_model_states.pt": None,
                                          "zero_pp_rank_0_mp_rank_00_optim_states.pt": None},
                         "latest": "global_step4", "trainer_state.json": "{}"},
        "step_2": {"random_states_0.pkl": None, "optimizer.bin": None, "dl_state_dict.bin": None},
        "epoch=0-step=5.ckpt": {"meta.pt": None, **dcp(0)},
        "last.ckpt": {"latest": "checkpoint", "checkpoint": {"mp_rank_00_model_states.pt": None}},
        "step-3": {".metadata.tmp": None, "__0_0.distcp": None},
        "ds": {"latest_universal": "global_step1_universal",
               "global_step1_universal": {"mp_rank_00_model_states.pt": None, "zero": {}}},
        "meg": {"latest_checkpointed_iteration.txt": "2",
                "iter_0000002": {"metadata.json": "{}", **dcp(0)}},
        "meg2": {"latest_checkpointed_iteration.txt": "garbage"},
    }
    for name, spec in layouts.items():
        ts = open_path(str(tree(tmp_path / name, spec))).training
        assert set(ts.components) == set(COMPONENTS), name
        assert {c.status for c in ts.components.values()} <= allowed, name
        assert all(c.detail for c in ts.components.values()), name
    single = tmp_path / "epoch=1-step=2.ckpt"
    single.write_bytes(b"garbage")  # a name is no checkpoint: its content is none
    with pytest.raises(NotACheckpoint):
        _ = open_path(str(single)).training
    single.write_bytes(b"PK\x03\x04" + b"garbage")  # a torch zip cut short is a damaged one
    ts = open_path(str(single)).training
    assert ts.components["optimizer"].status == "damaged"


class _Pwn:
    def __reduce__(self):
        return (os.system, (f"touch {SENTINEL}",))


def test_unsafe_object_inside_a_dcp_item_is_reported_not_run(tmp_path, monkeypatch):
    import torch

    monkeypatch.chdir(tmp_path)
    d = tmp_path / "run" / "step-3"
    _dcp_save({"w": torch.ones(2), "train_state": {"step": 3, "extra": _Pwn()},
               "lr_scheduler": {"last_epoch": 3}}, d)
    ts = open_path(str(d)).training
    assert ts.framework == "torchtitan"
    assert ts.components["progress"].status == "unsafe"
    assert "posix.system" in ts.components["progress"].detail
    assert ts.components["scheduler"].status == "ok"
    assert ts.components["scheduler"].facts["last_epoch"] == 3
    assert not (tmp_path / SENTINEL).exists()


def test_unsafe_optimizer_stays_unsafe_without_scheduler(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    d = shutil.copytree(MALICIOUS, tmp_path / "checkpoint-2")
    (d / "scheduler.pt").unlink()
    c = open_path(str(d)).training.components
    assert (c["optimizer"].status, c["scheduler"].status) == ("unsafe", "missing")
    assert not (tmp_path / SENTINEL).exists()
