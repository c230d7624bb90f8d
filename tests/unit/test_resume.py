"""`ckpt-browser check`: one resume verdict with findings (FORMATS.md "Resume verdict").

Every framework sample gets its exact JSON asserted; damage is made on copies in tmp_path (a
deleted RNG file, a missing scheduler, a truncated shard, a DCP chunk map with a gap written
back with torch's own metadata classes ...), and `--world-size N` is asked for each framework
that stores per-rank state. The CLI's exit codes are checked in real subprocesses.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

from ckpt_browser.analysis.resume import resume_report, resume_reports, tiling_problem
from ckpt_browser.model import COMPONENTS
from ckpt_browser.standins import DcpChunk

from .helpers import REPO, SAMPLES
from .resume_helpers import (
    MULTIRANK,
    RUN3_6,
    TITAN,
    check_json,
    comp,
    copy,
    doc,
    edit_dcp_metadata,
    finding,
    fsdp_checkpoint,
    run_check,
    sample_doc,
)

NOT_EXACT = "the resume will not be bit-exact"
WARM = ("Only a warm start from the weights is possible: expect a loss spike while Adam's "
        "moments rebuild; for a true resume use a checkpoint with usable optimizer state.")
RNG_AFTER = f"So {NOT_EXACT}; save the RNG states yourself if it must be."
DATA_AFTER = f"So {NOT_EXACT}."
SHARD_LOST = ("the model cannot be loaded without it, so nothing can resume from this "
              "checkpoint; copy it again from where the run saved it, or resume from an earlier "
              "checkpoint.")
DCP_BROKEN = ("torch.distributed.checkpoint cannot load the model, so nothing can resume from "
              "this checkpoint")


# --- expected components, written out ------------------------------------------------------------

def hf(weights: dict, n_params: int, step: int, lr: str, last_lr: str, rng: dict, batch: str,
       progress: str) -> dict:
    """An HF Trainer checkpoint as the samples hold it (AdamW, LambdaLR, fp32)."""
    return {
        "weights": weights,
        "optimizer": comp("ok", ["optimizer.pt"], f"optimizer.pt holds optimizer state for "
                          f"{n_params} of {n_params} parameters in 2 param groups (exp_avg, "
                          f"exp_avg_sq, step), at optimizer step {step}, lr {lr}."),
        "scheduler": comp("ok", ["scheduler.pt"], f"scheduler.pt holds the LR schedule position "
                          f"(last_epoch {step}; _step_count {step + 1}; base_lrs [0.001, 0.001]; "
                          f"_last_lr [{last_lr}, {last_lr}])."),
        "rng": rng,
        "data": comp("ok", ["trainer_state.json", "training_args.bin"], f"not stored: on resume "
                     f"the Trainer skips the batches implied by global step {step}, which replays "
                     f"the same order only with the same seed (1234), batch size ({batch} x 1 "
                     "accumulation), data and world size."),
        "progress": comp("ok", ["trainer_state.json"], progress),
        "scaler": comp("not-needed", [], "no scaler.pt and training_args has fp16=False: no "
                       "GradScaler to restore (bf16 and fp32 need none)."),
    }


def hf_rng(files: list[str]) -> dict:
    n = len(files)
    return comp("ok", files, f"RNG state for {n} rank{'s' if n > 1 else ''} (cpu, numpy, python), "
                "restored right after the data skip on resume; with a different number of "
                "processes the Trainer silently skips that restore.")


ONE_FILE_12 = comp("ok", ["model.safetensors"], "model.safetensors: 12 tensors; its header "
                   "checks out.")
RUN3_6_COMPONENTS = hf(ONE_FILE_12, 12, 6, "0", "0", hf_rng(["rng_state.pth"]), "4",
                       "trainer_state.json: global step 6 of 6, epoch 1.5.")
MULTIRANK_COMPONENTS = hf(ONE_FILE_12, 12, 4, "0.000571429", "0.000571429",
                          hf_rng(["rng_state_0.pth", "rng_state_1.pth"]), "2",
                          "trainer_state.json: global step 4 of 8, epoch 0.666667.")
RELEASE_FILES = ["model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                 "model-00003-of-00003.safetensors", "model.safetensors.index.json"]
WEIGHTS_ONLY_FOLDER = "a weights-only folder: no training state, so this can only warm-start a run."
NO_TRAINING_STATE = {k: comp("missing", [], WEIGHTS_ONLY_FOLDER) for k in
                     ("optimizer", "scheduler", "rng", "data", "progress")}
NO_TRAINING_STATE["scaler"] = comp("not-needed", [], "weights only: there is no run to resume.")
NO_TRAINING_STATE_FINDING = finding(
    "error", "optimizer", None, f"{WEIGHTS_ONLY_FOLDER} (This holds for optimizer, scheduler, "
    f"rng, data, progress.) {WARM}")
TITAN_FILES = [".metadata", "__0_0.distcp", "__1_0.distcp"]
TITAN_RNG = ("torchtitan never saves RNG state: random streams (dropout, sampling) restart on "
             "resume.")
TITAN_COMPONENTS = {
    "weights": comp("ok", TITAN_FILES, "12 model tensors in DCP (2 rank files)."),
    "optimizer": comp("ok", TITAN_FILES, "DCP holds optimizer state for 12 parameters (exp_avg, "
                      "exp_avg_sq, step), reshardable to another number of ranks."),
    "scheduler": comp("ok", TITAN_FILES, "lr_scheduler.last_epoch is 10 (torchtitan schedules are "
                      "stateless lambdas, so this is all they need)."),
    "rng": comp("missing", [], TITAN_RNG),
    "data": comp("ok", TITAN_FILES, "data-loader position for 2 data-parallel ranks "
                 "(dp_world_size 2); resuming on a different number of ranks loses or refuses "
                 "it."),
    "progress": comp("ok", TITAN_FILES, "train_state.step is 10, 160 tokens seen by rank 0 "
                     "(each rank counts its own)."),
    "scaler": comp("not-needed", [], "torchtitan trains in bf16/fp32 and has no grad scaler."),
}
TITAN_RNG_FINDING = finding("warning", "rng", None, f"{TITAN_RNG} {RNG_AFTER}")
DS_MODEL = "global_step4/mp_rank_00_model_states.pt"
DS_SHARDS = [f"global_step4/zero_pp_rank_{r}_mp_rank_00_optim_states.pt" for r in (0, 1)]
DS_RNG = ("DeepSpeed saves no RNG state: the resumed run draws different random numbers "
          "(dropout, sampling) unless the script saved them.")
DS_DATA = ("DeepSpeed saves no data-loader position: the script must skip the 16 samples already "
           "seen itself, or the data restarts from the beginning.")
DS_FINDINGS = [finding("warning", "rng", None, f"{DS_RNG} {RNG_AFTER}"),
               finding("warning", "data", None, f"{DS_DATA} {DATA_AFTER}")]
MEGATRON_FILE = "iter_0000004/mp_rank_00/model_optim_rng.pt"


def expected(path: str, fmt: str, verdict: str, step, ranks, components: dict,
             findings: list[dict]) -> dict:
    assert list(components) == list(COMPONENTS)
    return {"path": path, "format": fmt, "verdict": verdict, "step": step, "ranks": ranks,
            "components": components, "findings": findings}


# --- every framework sample: the exact JSON ------------------------------------------------------

def test_tiny_llama_run_is_exact():
    weights = comp("ok", RELEASE_FILES, "3 safetensors shards, 21 tensors; every header and the "
                   "index check out.")
    want = expected("sample_checkpoints/tiny-llama-run/checkpoint-6", "hf-trainer", "exact", 6, 1,
                    hf(weights, 21, 6, "0", "0", hf_rng(["rng_state.pth"]), "4",
                       "trainer_state.json: global step 6 of 6, epoch 1.5."), [])
    assert sample_doc("tiny-llama-run/checkpoint-6") == want


def test_tiny_llama_release_is_weights_only():
    weights = comp("ok", RELEASE_FILES, "3 safetensors shards, 21 tensors; every header and the "
                   "index check out.")
    want = expected("sample_checkpoints/tiny-llama-release", "safetensors", "weights-only", None,
                    None, {"weights": weights, **NO_TRAINING_STATE}, [NO_TRAINING_STATE_FINDING])
    assert sample_doc("tiny-llama-release") == want


def test_tiny_llama_damaged_is_broken_by_a_truncated_and_a_missing_shard():
    weights = comp("damaged", ["model-00001-of-00003.safetensors",
                               "model-00003-of-00003.safetensors", "model.safetensors.index.json"],
                   "2 weight files cannot be read (model-00001-of-00003.safetensors, "
                   "model-00002-of-00003.safetensors): the model cannot be loaded.")
    want = expected("sample_checkpoints/tiny-llama-damaged", "safetensors", "broken", None, None,
                    {"weights": weights, **NO_TRAINING_STATE}, [
        finding("error", "weights", "model-00001-of-00003.safetensors",
                "model-00001-of-00003.safetensors is damaged (truncated: tensors need 32,896 data "
                f"bytes but the file holds 32,796 (100 missing)): {SHARD_LOST}"),
        finding("error", "weights", "model-00002-of-00003.safetensors",
                "model-00002-of-00003.safetensors is missing (the index maps 9 tensors to this "
                "file; none can be read: model.layers.0.mlp.down_proj.weight, "
                "model.layers.0.mlp.gate_proj.weight, model.layers.0.mlp.up_proj.weight, "
                "model.layers.0.post_attention_layernorm.weight, "
                f"model.layers.0.self_attn.k_proj.weight and 4 more): {SHARD_LOST}"),
        NO_TRAINING_STATE_FINDING])
    assert sample_doc("tiny-llama-damaged") == want


def test_hf_multirank_is_exact():
    want = expected(f"sample_checkpoints/{MULTIRANK}", "hf-trainer", "exact", 4, 2,
                    MULTIRANK_COMPONENTS, [])
    assert sample_doc(MULTIRANK) == want


def test_hf_run3_checkpoint_2_is_exact():
    want = expected("sample_checkpoints/hf-run3/checkpoint-2", "hf-trainer", "exact", 2, 1,
                    hf(ONE_FILE_12, 12, 2, "0.0008", "0.0008", hf_rng(["rng_state.pth"]), "4",
                       "trainer_state.json: global step 2 of 6, epoch 0.5."), [])
    assert sample_doc("hf-run3/checkpoint-2") == want


def test_torchtitan_is_inexact_because_it_never_saves_rng():
    want = expected(f"sample_checkpoints/{TITAN}", "torchtitan", "inexact", 10, 2,
                    TITAN_COMPONENTS, [TITAN_RNG_FINDING])
    assert sample_doc(TITAN) == want


def test_lightning_is_inexact_no_rng_and_a_mid_epoch_loader_without_state():
    ckpt = "epoch=0-step=4.ckpt"
    rng = ("Lightning never saves RNG state: dropout and sampling after the resume differ from "
           "an uninterrupted run.")
    data = ("saved mid-epoch (4 batches in) with a loader that is not stateful: Lightning warns "
            "and replays the epoch from its first batch.")
    want = expected(f"sample_checkpoints/lightning/{ckpt}", "lightning", "inexact", 4, None, {
        "weights": comp("ok", [ckpt], f"4 model tensors in {ckpt}."),
        "optimizer": comp("ok", [ckpt], f"{ckpt} holds optimizer state for 4 of 4 parameters in "
                          "1 param group (exp_avg, exp_avg_sq, step), at optimizer step 4, lr "
                          "0.0025."),
        "scheduler": comp("ok", [ckpt], f"{ckpt} holds the LR schedule position (last_epoch 4; "
                          "_step_count 5; base_lrs [0.01]; _last_lr [0.0025])."),
        "rng": comp("missing", [], rng),
        "data": comp("missing", [ckpt], data),
        "progress": comp("ok", [ckpt], "loops.fit_loop: global step 4, epoch 0, 4 batches into "
                         "the epoch."),
        "scaler": comp("not-needed", [], "no MixedPrecision scaler state: the run did not use "
                       "16-mixed precision (bf16 and fp32 need no scaler)."),
    }, [finding("warning", "rng", None, f"{rng} {RNG_AFTER}"),
        finding("warning", "data", ckpt, f"{data} {DATA_AFTER}")])
    assert sample_doc(f"lightning/{ckpt}") == want


def test_accelerate_is_inexact_without_a_data_loader_position():
    data = ("accelerate saved no data-loader position (no dl_state_dict.bin; "
            "use_stateful_dataloader was off): the data restarts at the epoch start unless the "
            "script calls skip_first_batches.")
    want = expected("sample_checkpoints/accelerate-state/step_4", "accelerate", "inexact", 4, 1, {
        "weights": comp("ok", ["model.safetensors"], "model.safetensors: 4 tensors; its header "
                        "checks out."),
        "optimizer": comp("ok", ["optimizer.bin"], "optimizer.bin holds optimizer state for 4 of 4 "
                          "parameters in 1 param group (exp_avg, exp_avg_sq, step), at optimizer "
                          "step 4, lr 0.01."),
        "scheduler": comp("ok", ["scheduler.bin"], "scheduler.bin holds the LR schedule position "
                          "(last_epoch 4; _step_count 5; base_lrs [0.01]; _last_lr [0.01])."),
        "rng": comp("ok", ["random_states_0.pkl"], "RNG state for 1 rank (cpu, numpy, python), "
                    "restored by load_state (a failure there is only logged at info level)."),
        "data": comp("missing", [], data),
        "progress": comp("ok", ["custom_checkpoint_0.pkl"], "accelerate saves no global step, but "
                         "custom_checkpoint_0.pkl (registered by your script) holds global_step "
                         "4, epoch 0."),
        "scaler": comp("not-needed", [], "no scaler.pt: accelerate writes one only when an fp16 "
                       "GradScaler exists, so none is needed unless the run used fp16."),
    }, [finding("warning", "data", None, f"{data} {DATA_AFTER}")])
    assert sample_doc("accelerate-state/step_4") == want


DS_COMPONENTS = {
    "weights": comp("ok", [DS_MODEL], f"4 model tensors in {DS_MODEL} (the 16-bit module; the "
                    "fp32 master copy is in the optimizer state)."),
    "optimizer": comp("ok", DS_SHARDS, "ZeRO-2 optimizer state in 2 shards (one per "
                      "data-parallel rank; resume needs the same 2 ranks or a universal "
                      "conversion), fp32 master weights included."),
    "scheduler": comp("ok", [DS_MODEL], f"{DS_MODEL} holds the LR schedule position "
                      "(last_batch_iteration 3)."),
    "rng": comp("missing", [], DS_RNG),
    "data": comp("missing", [], DS_DATA),
    "progress": comp("ok", [DS_MODEL], "global step 4, 16 samples seen, 0 steps skipped for "
                     "fp16 overflow."),
    "scaler": comp("ok", DS_SHARDS[:1], f"{DS_SHARDS[0]} holds the fp16 loss scaler (scale 256), "
                   "so the resumed run keeps its loss scale instead of re-probing from the "
                   "default."),
}


def test_deepspeed_is_inexact_no_rng_and_no_data_position():
    want = expected("sample_checkpoints/deepspeed-run", "deepspeed", "inexact", 4, 2,
                    DS_COMPONENTS, DS_FINDINGS)
    assert sample_doc("deepspeed-run") == want


MEGATRON_COMPONENTS = {
    "weights": comp("ok", [MEGATRON_FILE], f"16 model tensors in {MEGATRON_FILE}."),
    "optimizer": comp("ok", [MEGATRON_FILE], f"{MEGATRON_FILE} holds optimizer state for 16 of "
                      "16 parameters in 2 param groups (exp_avg, exp_avg_sq, step), at optimizer "
                      "step 4, lr 0.000775."),
    "scheduler": comp("ok", [MEGATRON_FILE], f"{MEGATRON_FILE} holds the LR schedule position "
                      "(max_lr 0.001; min_lr 0.0001; lr_warmup_steps 8; num_steps 16)."),
    "rng": comp("ok", [MEGATRON_FILE], "RNG state for 1 model-parallel rank (cpu, cuda, "
                "cuda-tracker, numpy, python); restored unless --finetune or --no-load-rng."),
    "data": comp("ok", [MEGATRON_FILE], "args.consumed_train_samples is 16: the data loader "
                 "resumes right after those samples."),
    "progress": comp("ok", [MEGATRON_FILE], "iteration 4."),
    "scaler": comp("ok", [MEGATRON_FILE], f"{MEGATRON_FILE} (optimizer.grad_scaler) holds the "
                   "fp16 loss scaler (scale 65536), so the resumed run keeps its loss scale "
                   "instead of re-probing from the default."),
}


def test_megatron_is_exact():
    want = expected("sample_checkpoints/megatron-run", "megatron", "exact", 4, 2,
                    MEGATRON_COMPONENTS, [])
    assert sample_doc("megatron-run") == want


MALICIOUS_OPTIMIZER = ("optimizer.pt asks to run posix.system (runs a command) when unpickled "
                       "(not run here); torch.load(weights_only=False) would execute it.")
HF_NO_RNG = ("no rng_state*.pth: the Trainer only logs an info line and the resumed run draws "
             "different random numbers (dropout, sampling).")


def test_malicious_optimizer_is_unsafe_and_counts_as_missing():
    want = expected("sample_checkpoints/malicious", "hf-trainer", "weights-only", 2, None, {
        "weights": ONE_FILE_12,
        "optimizer": comp("unsafe", ["optimizer.pt"], MALICIOUS_OPTIMIZER),
        "scheduler": comp("ok", ["scheduler.pt"], "scheduler.pt holds the LR schedule position "
                          "(last_epoch 2; _step_count 3; base_lrs [0.001, 0.001]; _last_lr "
                          "[0.0008, 0.0008])."),
        "rng": comp("missing", [], HF_NO_RNG),
        "data": comp("ok", ["trainer_state.json"], "not stored: on resume the Trainer skips the "
                     "batches implied by global step 2, which replays the same order only with "
                     "the same seed, batch size, data and world size."),
        "progress": comp("ok", ["trainer_state.json"], "trainer_state.json: global step 2 of 6, "
                         "epoch 0.5."),
        "scaler": comp("not-needed", [], "no scaler.pt and the Trainer writes one only for fp16 "
                       "mixed precision: no GradScaler to restore (bf16 and fp32 need none)."),
    }, [finding("error", "optimizer", "optimizer.pt", f"{MALICIOUS_OPTIMIZER} It counts as "
                f"missing: its contents are never used. {WARM}"),
        finding("warning", "rng", None, f"{HF_NO_RNG} {RNG_AFTER}")])
    assert sample_doc("malicious") == want


def test_malicious_check_runs_nothing(tmp_path):
    """In a scratch working folder, where `touch ckpt-browser-PWNED` would land."""
    code, got = check_json(str(SAMPLES / "malicious"), cwd=tmp_path)
    assert code == 4 and got["verdict"] == "weights-only"
    assert got["components"]["optimizer"]["status"] == "unsafe"
    assert not (tmp_path / "ckpt-browser-PWNED").exists()
    assert not (REPO / "ckpt-browser-PWNED").exists()
    assert os.listdir(tmp_path) == []


# --- damage made on copies ---------------------------------------------------------------------

def test_missing_rng_file_makes_hf_inexact(tmp_path):
    d = copy(RUN3_6, tmp_path)
    (d / "rng_state.pth").unlink()
    got = doc(d, base=tmp_path)
    want = expected("copy/checkpoint-6", "hf-trainer", "inexact", 6, None,
                    {**RUN3_6_COMPONENTS, "rng": comp("missing", [], HF_NO_RNG)},
                    [finding("warning", "rng", None, f"{HF_NO_RNG} {RNG_AFTER}")])
    assert got == want


RANK_GAP = ("RNG state for rank {r} is missing: those ranks restart their random streams, so "
            "dropout and shuffling differ from an uninterrupted run.")


def rank_lost(r: int) -> dict:
    return finding("warning", "rng", f"rng_state_{r}.pth", f"rng_state_{r}.pth is missing: rank "
                   f"{r} will start from a fresh RNG, so data order and dropout diverge from the "
                   f"original run; {NOT_EXACT}.")


@pytest.mark.parametrize("gone", [0, 1])
def test_a_rank_gap_in_rng_files_names_the_missing_file(tmp_path, gone):
    """rng_state_0.pth gone: a gap below rank 1. rng_state_1.pth gone: a lone rng_state_0.pth,
    which the Trainer writes only with 2 or more processes."""
    d = copy(MULTIRANK, tmp_path)
    (d / f"rng_state_{gone}.pth").unlink()
    kept = f"rng_state_{1 - gone}.pth"
    got = doc(d, base=tmp_path)
    rng = comp("incomplete", [kept], RANK_GAP.format(r=gone))
    want = expected("copy/checkpoint-4", "hf-trainer", "inexact", 4, 2,
                    {**MULTIRANK_COMPONENTS, "rng": rng}, [rank_lost(gone)])
    assert got == want


def test_three_ranks_with_the_middle_one_deleted(tmp_path):
    d = copy(MULTIRANK, tmp_path)
    shutil.copy(d / "rng_state_0.pth", d / "rng_state_2.pth")
    (d / "rng_state_1.pth").unlink()
    got = doc(d, base=tmp_path)
    assert (got["verdict"], got["ranks"]) == ("inexact", 3)
    assert got["components"]["rng"] == comp("incomplete", ["rng_state_0.pth", "rng_state_2.pth"],
                                            RANK_GAP.format(r=1))
    assert got["findings"] == [rank_lost(1)]


def test_missing_optimizer_is_a_warm_start(tmp_path):
    d = copy(RUN3_6, tmp_path)
    (d / "optimizer.pt").unlink()
    got = doc(d, base=tmp_path)
    opt = ("no optimizer state (saved with save_only_model=True?): Adam's moments restart from "
           "zero, so this is a warm start, not a resume.")
    sched = ("scheduler.pt is here but no optimizer file: HF Trainer loads neither unless both "
             "exist, so the LR schedule restarts.")
    want = expected("copy/checkpoint-6", "hf-trainer", "weights-only", 6, 1, {
        **RUN3_6_COMPONENTS, "optimizer": comp("missing", [], opt),
        "scheduler": comp("incomplete", ["scheduler.pt"], sched)}, [
        finding("error", "optimizer", None, f"{opt} {WARM}"),
        finding("warning", "scheduler", "scheduler.pt", f"{sched} The learning rate after the "
                f"resume differs from the original run's, so {NOT_EXACT}.")])
    assert got == want


def test_missing_scheduler_means_hf_loads_no_optimizer_either(tmp_path):
    d = copy(RUN3_6, tmp_path)
    (d / "scheduler.pt").unlink()
    got = doc(d, base=tmp_path)
    opt = ("optimizer.pt is here but scheduler.pt is not: HF Trainer skips the optimizer AND "
           "scheduler load unless both exist, so both restart fresh.")
    sched = ("no scheduler.pt: HF Trainer skips the optimizer AND scheduler load unless both "
             "optimizer.pt and scheduler.pt exist, so the LR schedule and Adam's moments both "
             "restart.")
    want = expected("copy/checkpoint-6", "hf-trainer", "weights-only", 6, 1, {
        **RUN3_6_COMPONENTS,
        "optimizer": comp("incomplete", ["optimizer.pt"], opt),
        "scheduler": comp("missing", [], sched)}, [
        finding("error", "optimizer", "optimizer.pt", f"{opt} {WARM}"),
        finding("warning", "scheduler", None, f"{sched} The learning rate after the resume "
                f"differs from the original run's, so {NOT_EXACT}.")])
    assert got == want


def test_no_progress_record_means_the_resume_fails(tmp_path):
    """trainer_state.json is written last: without it the save did not finish, and the
    Trainer's resume reads it first and stops (tests/resume: FileNotFoundError), so only the
    weights can be used."""
    d = copy(RUN3_6, tmp_path)
    (d / "trainer_state.json").unlink()
    got = doc(d, base=tmp_path)
    data = ("the Trainer stores no data-loader position and derives it from trainer_state.json's "
            "global_step, which is unreadable or missing: the data would restart from the first "
            "batch.")
    progress = ("no trainer_state.json, which the Trainer writes last: the save was probably "
                "interrupted. Trainer.train(resume_from_checkpoint=...) reads it before "
                "anything else and fails without it (FileNotFoundError in transformers 5; some "
                "older releases restarted at global step 0 instead).")
    want = expected("copy/checkpoint-6", "hf-trainer", "weights-only", 6, 1, {
        **RUN3_6_COMPONENTS, "data": comp("missing", ["training_args.bin"], data),
        "progress": comp("missing", [], progress)}, [
        finding("error", "progress", "trainer_state.json", f"{progress} So the resume fails at "
                "once: write the file again (its global_step and log), or start a new run from "
                "these weights."),
        finding("warning", "data", "training_args.bin", f"{data} {DATA_AFTER}")])
    assert got == want


def test_truncated_shard_is_broken(tmp_path):
    d = copy("tiny-llama-run/checkpoint-6", tmp_path)
    shard = d / "model-00002-of-00003.safetensors"
    os.truncate(shard, shard.stat().st_size - 1000)
    got = doc(d, base=tmp_path)
    assert got["verdict"] == "broken"
    assert got["components"]["weights"] == comp(
        "damaged", RELEASE_FILES, "1 weight file cannot be read "
        "(model-00002-of-00003.safetensors): the model cannot be loaded.")
    assert got["findings"] == [finding(
        "error", "weights", "model-00002-of-00003.safetensors",
        "model-00002-of-00003.safetensors is damaged (truncated: tensors need 37,120 data bytes "
        f"but the file holds 36,120 (1,000 missing)): {SHARD_LOST}")]
    assert {k: v["status"] for k, v in got["components"].items() if k != "weights"} == {
        "optimizer": "ok", "scheduler": "ok", "rng": "ok", "data": "ok", "progress": "ok",
        "scaler": "not-needed"}


def test_missing_shard_is_broken_and_the_weights_incomplete(tmp_path):
    d = copy("tiny-llama-run/checkpoint-6", tmp_path)
    (d / "model-00003-of-00003.safetensors").unlink()
    got = doc(d, base=tmp_path)
    assert got["verdict"] == "broken"
    assert got["components"]["weights"] == comp(
        "incomplete", RELEASE_FILES[:2] + RELEASE_FILES[3:], "1 weight file cannot be read "
        "(model-00003-of-00003.safetensors): the model cannot be loaded.")
    [f] = got["findings"]
    assert (f["severity"], f["component"], f["file"]) == (
        "error", "weights", "model-00003-of-00003.safetensors")
    assert f["message"].startswith("model-00003-of-00003.safetensors is missing (the index maps "
                                   "9 tensors to this file; none can be read: ")
    assert f["message"].endswith(SHARD_LOST)


def test_torch_weights_with_a_storage_record_missing_are_broken(tmp_path):
    """pytorch_model.bin whose zip lacks one data/ record the pickle needs."""
    import torch
    from safetensors.torch import load_file

    d = copy(RUN3_6, tmp_path)
    torch.save(load_file(str(d / "model.safetensors")), d / "full.bin")
    (d / "model.safetensors").unlink()
    with zipfile.ZipFile(d / "full.bin") as src, \
            zipfile.ZipFile(d / "pytorch_model.bin", "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            if not info.filename.endswith("/data/3"):
                dst.writestr(info, src.read(info))
    (d / "full.bin").unlink()
    got = doc(d, base=tmp_path)
    assert got["verdict"] == "broken"
    weights = got["components"]["weights"]
    assert (weights["status"], weights["files"]) == ("damaged", ["pytorch_model.bin"])
    assert "storage record data/3 is missing" in weights["detail"]
    assert [(f["severity"], f["component"], f["file"]) for f in got["findings"]] == [
        ("error", "weights", "pytorch_model.bin")]


def test_truncated_optimizer_is_a_warm_start(tmp_path):
    d = copy(RUN3_6, tmp_path)
    os.truncate(d / "optimizer.pt", 3000)
    got = doc(d, base=tmp_path)
    detail = ("optimizer.pt could not be read: truncated zip: no central directory at the end of "
              "the file (an interrupted save?).")
    assert got["verdict"] == "weights-only"
    assert got["components"]["optimizer"] == comp("damaged", ["optimizer.pt"], detail)
    assert got["findings"] == [finding("error", "optimizer", "optimizer.pt", f"{detail} {WARM}")]


def test_an_optimizer_saved_for_another_model_is_a_warm_start(tmp_path):
    """tiny-llama-run's optimizer (21 parameters) beside hf-run3's 12-tensor model."""
    d = copy(RUN3_6, tmp_path)
    shutil.copy(SAMPLES / "tiny-llama-run" / "checkpoint-6" / "optimizer.pt", d / "optimizer.pt")
    got = doc(d, base=tmp_path)
    assert got["verdict"] == "weights-only"
    assert got["findings"] == [finding(
        "error", "optimizer", "optimizer.pt", "the optimizer's param_groups list 21 parameters "
        "but the weights hold only 12 tensors: it was saved for a different model or parameter "
        "split, and loading it fails or pairs moments with the wrong weights: only a warm start "
        "from the weights is safe.")]


def test_deepspeed_missing_zero_shard_is_a_warm_start(tmp_path):
    d = copy("deepspeed-run", tmp_path)
    (d / DS_SHARDS[1]).unlink()
    got = doc(d, base=tmp_path)
    assert got["verdict"] == "weights-only"
    assert got["components"]["optimizer"]["status"] == "incomplete"
    assert got["findings"][0] == finding(
        "error", "optimizer", DS_SHARDS[1], f"{DS_SHARDS[1]} is missing: DeepSpeed needs the "
        "optimizer shard of every data-parallel rank (rank 1 here) and cannot load the optimizer "
        "state without it, so only a warm start from the weights is possible; copy the shard "
        "again or resume from an earlier checkpoint.")
    assert got["findings"][1:] == DS_FINDINGS


def test_deepspeed_latest_naming_a_missing_tag_is_broken(tmp_path):
    d = copy("deepspeed-run", tmp_path)
    (d / "latest").write_text("global_step8")
    got = doc(d, base=tmp_path)
    assert got["verdict"] == "broken"
    assert got["findings"] == [finding(
        "error", "weights", "latest", "latest names global_step8, which does not exist; the "
        "newest tag folder here is global_step4: the framework loads what latest names, so the "
        "resume fails; point it at a checkpoint that exists, or name one explicitly when "
        "resuming.")]


def titan_damaged(status: str, detail: str, files: list[str]) -> dict:
    """A torchtitan folder whose DCP cannot be used: five components share the reader's error."""
    return {k: comp(status, files, detail) if k != "rng" else comp("missing", [], TITAN_RNG)
            for k in COMPONENTS}


def test_dcp_rank_file_removed_is_broken(tmp_path):
    d = copy(TITAN, tmp_path)
    (d / "__1_0.distcp").unlink()
    got = doc(d, base=tmp_path)
    reader = "the metadata places 199 item(s) in __1_0.distcp, which does not exist"
    detail = f"the DCP folder . is not usable: missing: {reader}."
    comps = titan_damaged("damaged", detail, [".metadata", "__0_0.distcp"])
    want = expected("copy/step-10", "torchtitan", "broken", 10, None, comps, [
        finding("error", "weights", "__1_0.distcp", f"__1_0.distcp is missing ({reader}): "
                f"{DCP_BROKEN}; copy the rank files again or resume from an earlier checkpoint."),
        TITAN_RNG_FINDING])
    assert got == want


def test_dcp_rank_file_cut_short_is_broken(tmp_path):
    d = copy(TITAN, tmp_path)
    os.truncate(d / "__1_0.distcp", 3000)
    got = doc(d, base=tmp_path)
    assert got["verdict"] == "broken"
    first = got["findings"][0]
    assert (first["severity"], first["component"], first["file"]) == (
        "error", "weights", "__1_0.distcp")
    assert first["message"].startswith("__1_0.distcp is 3,000 bytes but the metadata places ")


def test_dcp_without_metadata_did_not_finish(tmp_path):
    d = copy(TITAN, tmp_path)
    (d / ".metadata").rename(d / ".metadata.tmp")
    got = doc(d, base=tmp_path)
    assert got["verdict"] == "broken"
    assert got["components"]["weights"]["status"] == "incomplete"
    assert got["findings"][0] == finding(
        "error", "weights", ".metadata", ".metadata: incomplete: no .metadata (DCP writes it "
        "last); found .metadata.tmp: the save stopped while writing it: "
        f"{DCP_BROKEN}; copy the rank files again or resume from an earlier checkpoint.")


def drop_second_chunk(key: str):
    def edit(metadata):
        md = metadata.state_dict_metadata[key]
        assert [tuple(c.offsets) for c in md.chunks] == [(0, 0), (4, 0)]  # rows split by rank
        md.chunks = md.chunks[:1]
    return edit


def test_dcp_chunk_map_with_a_gap_in_a_weight_is_broken(tmp_path):
    d = copy(TITAN, tmp_path)
    key = "layers.0.attention.wq.weight"
    edit_dcp_metadata(d, drop_second_chunk(key))
    got = doc(d, base=tmp_path)
    why = "its chunks cover 32 of its 64 elements, a gap of 32"
    want = expected("copy/step-10", "torchtitan", "broken", 10, 2, {
        **TITAN_COMPONENTS,
        "weights": comp("damaged", TITAN_FILES, f"1 tensor in .metadata do not tile their shape "
                        f"(first: {key}, {why})."),
    }, [finding("error", "weights", ".metadata", f"tensor {key} in .metadata: {why}: "
                f"{DCP_BROKEN}; the metadata does not describe a whole tensor: resume from an "
                "earlier checkpoint."),
        TITAN_RNG_FINDING])
    assert got == want


def test_dcp_chunk_map_with_a_gap_in_the_optimizer_is_a_warm_start(tmp_path):
    d = copy(TITAN, tmp_path)
    key = "optimizer.state.layers.0.attention.wq.weight.exp_avg"
    edit_dcp_metadata(d, drop_second_chunk(key))
    got = doc(d, base=tmp_path)
    assert got["verdict"] == "weights-only"
    assert got["components"]["weights"]["status"] == "ok"
    assert got["components"]["optimizer"]["status"] == "damaged"
    assert got["findings"][0] == finding(
        "error", "optimizer", ".metadata", f"tensor {key} in .metadata: its chunks cover 32 of its "
        "64 elements, a gap of 32: the optimizer state cannot be loaded, so only a warm start "
        "from the weights is possible; the metadata does not describe a whole tensor: resume "
        "from an earlier checkpoint.")


def test_dcp_chunks_that_overlap_are_broken(tmp_path):
    """A third chunk across the rank boundary, stored where rank 1's chunk is."""
    from torch.distributed.checkpoint.metadata import ChunkStorageMetadata, MetadataIndex

    d = copy(TITAN, tmp_path)
    key = "tok_embeddings.weight"

    def edit(metadata):
        md = metadata.state_dict_metadata[key]
        half = md.size[0] // 2
        assert [list(c.offsets) for c in md.chunks] == [[0, 0], [half, 0]]
        offsets = type(md.size)([half - 1, 0])
        md.chunks.append(ChunkStorageMetadata(offsets=offsets,
                                              sizes=type(md.size)([2, md.size[1]])))
        where = metadata.storage_data[MetadataIndex(key, md.chunks[1].offsets)]
        metadata.storage_data[MetadataIndex(key, offsets)] = where

    edit_dcp_metadata(d, edit)
    got = doc(d, base=tmp_path)
    assert got["verdict"] == "broken"
    assert got["components"]["weights"]["status"] == "damaged"
    assert got["findings"][0] == finding(
        "error", "weights", ".metadata", f"tensor {key} in .metadata: the chunks at [0, 0] and "
        f"[7, 0] overlap: {DCP_BROKEN}; the metadata does not describe a whole tensor: resume "
        "from an earlier checkpoint.")


# --- the chunk-tiling rule itself --------------------------------------------------------------

def chunks(*boxes):
    return tuple(DcpChunk(tuple(o), tuple(s), "__0_0.distcp", 0, 1) for o, s in boxes)


@pytest.mark.parametrize("shape, boxes, why", [
    ((8, 6), [((0, 0), (4, 6)), ((4, 0), (4, 6))], None),  # rows
    ((8, 6), [((0, 0), (8, 3)), ((0, 3), (8, 3))], None),  # columns
    ((4, 4), [((0, 0), (2, 2)), ((0, 2), (2, 2)), ((2, 0), (2, 2)), ((2, 2), (2, 2))], None),
    ((), [((), ())], None),  # a scalar
    ((0, 5), [], None),  # an empty tensor needs no chunk
    ((0, 5), [((0, 0), (0, 5))], None),
    ((8, 6), [((0, 0), (4, 6))], "its chunks cover 24 of its 48 elements, a gap of 24"),
    ((8, 6), [((0, 0), (5, 6)), ((4, 0), (4, 6))], "the chunks at [0, 0] and [4, 0] overlap"),
    ((8, 6), [((0, 0), (4, 6)), ((4, 0), (5, 6))],
     "the chunk at [4, 0] of size [5, 6] reaches past the shape [8, 6]"),
    ((8, 6), [((0,), (8,))], "a chunk at [0] has 1 dimensions, the tensor 2"),
    ((), [((), ()), ((), ())], "the chunks at [] and [] overlap"),
    ((4, 4), [((0, 0), (2, 4)), ((2, 0), (2, 2)), ((1, 2), (3, 2))],
     "the chunks at [0, 0] and [1, 2] overlap"),
    (None, [((0,), (1,))], "the metadata gives no global shape"),
])
def test_tiling_problem(shape, boxes, why):
    assert tiling_problem(shape, chunks(*boxes)) == why


def test_tiling_many_column_chunks_is_quick():
    cols = 4096
    boxes = [((0, c), (16, 1)) for c in range(cols)]
    assert tiling_problem((16, cols), chunks(*boxes)) is None
    assert tiling_problem((16, cols), chunks(*boxes[:-1])) == (
        f"its chunks cover {16 * (cols - 1):,} of its {16 * cols:,} elements, a gap of 16")


# --- --world-size N --------------------------------------------------------------------------

def test_world_size_4_on_a_2_rank_hf_checkpoint(tmp_path):
    got = sample_doc(MULTIRANK, world_size=4)
    want = expected(f"sample_checkpoints/{MULTIRANK}", "hf-trainer", "inexact", 4, 2,
                    MULTIRANK_COMPONENTS, [
        finding("warning", "rng", None, "the RNG files were written by 2 processes: on 4 ranks, "
                "ranks 2-3 find no rng_state_2.pth ... rng_state_3.pth and start from a fresh RNG "
                "(the framework only logs it at info level); data order and dropout diverge from "
                f"the original run, so {NOT_EXACT}."),
        finding("warning", "data", None, "the Trainer derives the data position from global step "
                "4 and the number of processes: with 4 instead of 2, each step covers a different "
                "share of the data, so the batches it skips and those it trains on next differ "
                f"from the original run; {NOT_EXACT}.")])
    assert got == want


def test_world_size_equal_to_the_saved_one_changes_nothing():
    assert sample_doc(MULTIRANK, world_size=2) == sample_doc(MULTIRANK)
    assert sample_doc("megatron-run", world_size=2) == sample_doc("megatron-run")
    assert sample_doc("tiny-llama-run/checkpoint-6", world_size=1)["verdict"] == "exact"


def test_world_size_1_on_a_2_rank_hf_checkpoint_reads_no_rng_file():
    got = sample_doc(MULTIRANK, world_size=1)
    assert got["verdict"] == "inexact"
    assert got["findings"][0]["message"].startswith(
        "the RNG files were written by 2 processes: on 1 rank, rank 0 finds no rng_state.pth and "
        "starts from a fresh RNG (the framework only logs it at info level); rng_state_0.pth, "
        "rng_state_1.pth are not read;")


def test_deepspeed_on_1_rank_needs_a_universal_conversion():
    got = sample_doc("deepspeed-run", world_size=1)
    want = expected("sample_checkpoints/deepspeed-run", "deepspeed", "weights-only", 4, 2,
                    DS_COMPONENTS, [finding(
        "error", "optimizer", DS_SHARDS[0], "the ZeRO optimizer state is split into 2 shards, one "
        "per data-parallel rank; DeepSpeed refuses to load it on 1 data-parallel rank (\"The "
        "checkpoint being loaded used a DP world size of 2 but the current world size is 1\"). "
        "Convert it first: python deepspeed/checkpoint/ds_to_universal.py --input_folder "
        "<save_dir>/global_step4 --output_folder <save_dir>/global_step4_universal, then load "
        "with \"checkpoint\": {\"load_universal\": true}; without that only the weights load "
        "(load_module_only), a warm start."), *DS_FINDINGS])
    assert got == want
    assert sample_doc("deepspeed-run", world_size=2) == sample_doc("deepspeed-run")


def test_torchtitan_on_4_ranks_refuses_the_data_loader_state_and_reshards_tensors():
    got = sample_doc(TITAN, world_size=4)
    want = expected(f"sample_checkpoints/{TITAN}", "torchtitan", "inexact", 10, 2,
                    TITAN_COMPONENTS, [
        TITAN_RNG_FINDING,
        finding("warning", "data", None, "dataloader.dp_world_size is 2: torchtitan refuses to "
                "load the data-loader state on another data-parallel size (4 if every rank is "
                "data-parallel). Add \"dataloader\" to checkpoint.exclude_from_loading to "
                f"resume; the data then restarts from the beginning, so {NOT_EXACT}."),
        finding("info", "weights", None, "model and optimizer tensors in DCP are resharded on "
                "load, so 4 ranks can read them.")])
    assert got == want


def test_megatron_on_another_data_parallel_size():
    dp = ("the data-parallel size changes from 2 to {n}: consumed_train_samples carries the data "
          "position over, but each rank's batches and random streams change, so "
          f"{NOT_EXACT}.")
    got = sample_doc("megatron-run", world_size=4)
    want = expected("sample_checkpoints/megatron-run", "megatron", "inexact", 4, 2,
                    MEGATRON_COMPONENTS, [
        finding("warning", "data", None, dp.format(n=4)),
        finding("warning", "data", None, "global_batch_size 4 is not a multiple of "
                "micro_batch_size 2 x 4 data-parallel ranks: Megatron refuses to start until the "
                "batch sizes change, and changing them changes the run.")])
    assert got == want
    assert sample_doc("megatron-run", world_size=1)["findings"] == [
        finding("warning", "data", None, dp.format(n=1))]


def test_megatron_tensor_parallel_degree_that_does_not_divide(tmp_path):
    """A TP=2 legacy checkpoint (args rewritten on a copy with torch) cannot run on 3 ranks."""
    import argparse

    import torch

    d = copy("megatron-run", tmp_path)
    f = d / "iter_0000004" / "mp_rank_00" / "model_optim_rng.pt"
    import numpy as np

    allowed = [argparse.Namespace, np._core.multiarray._reconstruct, np.ndarray, np.dtype,
               type(np.dtype(np.uint32))]
    with torch.serialization.safe_globals(allowed):
        sd = torch.load(f, weights_only=True)
    sd["args"].tensor_model_parallel_size = 2
    torch.save(sd, f)
    got = doc(d, world_size=3, base=tmp_path)
    assert got["verdict"] == "weights-only"
    assert got["findings"] == [finding(
        "error", "optimizer", None, "3 ranks cannot keep tensor-parallel 2 x pipeline-parallel 1, "
        "and this legacy checkpoint is split into 2 model-parallel part(s) that Megatron loads "
        "only with the same degrees: tools/checkpoint/convert.py reshards the weights but not the "
        "optimizer, so that is a warm start.")]


def test_lightning_does_not_record_its_world_size():
    got = sample_doc("lightning/last.ckpt", world_size=2)
    assert got["verdict"] == "inexact"
    assert got["findings"][-1] == finding(
        "info", "data", None, "this checkpoint does not record how many ranks wrote it and holds "
        "nothing per rank, so it loads on 2; if that differs from the original run, batches are "
        f"split differently and {NOT_EXACT}.")


def test_accelerate_on_2_ranks_finds_no_second_rng_file():
    got = sample_doc("accelerate-state/step_4", world_size=2)
    assert got["findings"][0] == finding(
        "warning", "rng", None, "the RNG files were written by 1 process: on 2 ranks, rank 1 finds "
        "no random_states_1.pkl and starts from a fresh RNG (the framework only logs it at info "
        f"level); data order and dropout diverge from the original run, so {NOT_EXACT}.")


# --- a folder of checkpoints -------------------------------------------------------------------

def test_resume_reports_on_a_run_folder_newest_first():
    timeline = resume_reports(str(SAMPLES / "hf-run3"))
    assert [os.path.basename(r.path) for r in timeline.reports] == [
        "checkpoint-6", "checkpoint-4", "checkpoint-2"]
    assert [r.verdict for r in timeline.reports] == ["exact"] * 3
    assert timeline.newest_exact is timeline.reports[0]


def test_newest_exact_skips_a_damaged_newest_checkpoint(tmp_path):
    run = tmp_path / "run"
    for n in (2, 4, 6):
        shutil.copytree(SAMPLES / "hf-run3" / f"checkpoint-{n}", run / f"checkpoint-{n}")
    (run / "checkpoint-6" / "rng_state.pth").unlink()
    os.truncate(run / "checkpoint-4" / "model.safetensors", 100)
    (run / "checkpoint-8").mkdir()  # an empty folder: nothing readable
    timeline = resume_reports(str(run))
    assert [(os.path.basename(r.path), r.verdict) for r in timeline.reports] == [
        ("checkpoint-8", "broken"), ("checkpoint-6", "inexact"), ("checkpoint-4", "broken"),
        ("checkpoint-2", "exact")]
    assert os.path.basename(timeline.newest_exact.path) == "checkpoint-2"
    r = run_check(str(run))
    assert r.returncode == 5 and r.stderr == ""
    lines = r.stdout.splitlines()
    assert lines[0].startswith("checkpoint-8 (the newest of 4) is BROKEN")
    assert lines[1] == "newest checkpoint that resumes exactly: checkpoint-2"
    assert all(set(rep.components) == set(COMPONENTS) for rep in timeline.reports)


def test_check_json_on_a_folder_is_a_list_newest_first():
    code, got = check_json("sample_checkpoints/hf-run3")
    assert code == 0
    assert [d["path"] for d in got] == [f"sample_checkpoints/hf-run3/checkpoint-{n}"
                                        for n in (6, 4, 2)]
    assert got[2] == sample_doc("hf-run3/checkpoint-2")


def test_check_on_a_folder_without_an_exact_checkpoint():
    r = run_check("sample_checkpoints/lightning")
    assert r.returncode == 3
    lines = r.stdout.splitlines()
    assert lines[0] == ("epoch=0-step=4.ckpt (the newest of 2) is INEXACT: training can continue "
                        "from here, but not bit-for-bit")
    assert lines[1] == "no checkpoint here resumes exactly"


# --- the CLI: exit codes, text, JSON -----------------------------------------------------------

@pytest.mark.parametrize("path, code, verdict", [
    ("sample_checkpoints/megatron-run", 0, "exact"),
    (f"sample_checkpoints/{TITAN}", 3, "inexact"),
    ("sample_checkpoints/tiny-llama-release", 4, "weights-only"),
    ("sample_checkpoints/tiny-llama-damaged", 5, "broken"),
])
def test_exit_code_per_verdict(path, code, verdict):
    got_code, got = check_json(path)
    assert (got_code, got["verdict"]) == (code, verdict)
    assert got == sample_doc(path.removeprefix("sample_checkpoints/"))
    r = run_check(path)
    assert r.returncode == code and r.stderr == ""
    words = {"exact": "EXACT: ", "inexact": "INEXACT: ", "weights-only": "WEIGHTS-ONLY: ",
             "broken": "BROKEN: "}[verdict]
    assert r.stdout.splitlines()[0].startswith(words)


def test_text_lists_the_seven_components_and_the_findings():
    r = run_check(f"sample_checkpoints/{MULTIRANK}", "--world-size", "4")
    assert r.returncode == 3
    out = r.stdout
    assert out.splitlines()[0] == ("INEXACT: training can continue from here, but not "
                                   "bit-for-bit")
    for kind in COMPONENTS:
        assert f"\n  {kind:<10} " in out
    assert "findings (2)\n  warning rng        the RNG files were written by 2 processes" in out


@pytest.mark.parametrize("args, words", [
    (["--world-size", "0", "sample_checkpoints/megatron-run"], ["--world-size", "usage"]),
    (["--world-size", "two", "sample_checkpoints/megatron-run"], ["--world-size", "'two'"]),
    ([], ["PATH", "usage"]),
    (["no-such-dir"], ["no-such-dir", "no such file or folder"]),
])
def test_usage_errors_exit_2_with_one_line(args, words):
    r = run_check(*args)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.endswith("\n") and r.stderr.count("\n") == 1, r.stderr
    for w in words:
        assert w in r.stderr


def test_check_imports_neither_torch_nor_textual(tmp_path):
    script = ("import sys, io, contextlib, json\nimport ckpt_browser.cli as cli\n"
              "with contextlib.redirect_stdout(io.StringIO()):\n"
              "    codes = [cli.main(['check', p]) for p in sys.argv[1:]]\n"
              "print(json.dumps([codes, sorted(m for m in sys.modules if m.split('.')[0] in "
              "{'torch', 'textual', 'numpy', 'safetensors'})]))")
    paths = [str(SAMPLES / p) for p in ("tiny-llama-run/checkpoint-6", TITAN, "deepspeed-run",
                                        "malicious")]
    r = subprocess.run([sys.executable, "-c", script, *paths], capture_output=True, text=True,
                       cwd=tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [[0, 3, 3, 4], []]


# --- invariants over every report above ---------------------------------------------------------

SEVERITY_FLOOR = {"weights": "error", "optimizer": "error"}


@pytest.mark.parametrize("rel", ["tiny-llama-run/checkpoint-6", "tiny-llama-release",
                                 "tiny-llama-damaged", MULTIRANK, RUN3_6, TITAN,
                                 "lightning/last.ckpt", "accelerate-state/step_4",
                                 "deepspeed-run", "megatron-run", "malicious"])
def test_every_component_that_is_not_fine_has_a_finding(rel):
    rank = {"info": 0, "warning": 1, "error": 2}
    for n in (None, 1, 3):
        got = sample_doc(rel, world_size=n)
        assert list(got["components"]) == list(COMPONENTS)
        for kind, c in got["components"].items():
            if c["status"] in ("ok", "not-needed"):
                continue
            floor = rank[SEVERITY_FLOOR.get(kind, "warning")]
            explained = [f for f in got["findings"] if rank[f["severity"]] >= floor]
            assert explained, (rel, kind)
        severities = {f["severity"] for f in got["findings"]}
        want = ("broken" if any(f["severity"] == "error" and f["component"] == "weights"
                                for f in got["findings"]) else "weights-only"
                if "error" in severities else "inexact" if "warning" in severities else "exact")
        assert got["verdict"] == want, rel
        report = resume_report(str(SAMPLES / rel), n)
        assert report.findings == tuple(sorted(report.findings, key=lambda f: -rank[f.severity]))


# --- other layouts -------------------------------------------------------------------------------

def test_hf_fsdp_dcp_checkpoint_is_exact_and_a_lost_optimizer_rank_file_a_warm_start(tmp_path):
    d = fsdp_checkpoint(tmp_path / "checkpoint-3")
    got = doc(d, base=tmp_path)
    assert (got["verdict"], got["ranks"], got["findings"]) == ("exact", 2, [])
    assert got["components"]["weights"]["files"] == [
        "pytorch_model_fsdp_0/.metadata", "pytorch_model_fsdp_0/__0_0.distcp"]
    assert doc(d, world_size=4, base=tmp_path)["findings"][-1] == finding(
        "info", "weights", None, "model and optimizer tensors in DCP are resharded on load, so 4 "
        "ranks can read them.")
    (d / "optimizer_0" / "__0_0.distcp").unlink()
    got = doc(d, base=tmp_path)
    assert got["verdict"] == "weights-only"
    assert got["components"]["weights"]["status"] == "ok"
    assert got["components"]["optimizer"]["status"] == "damaged"
    [f] = got["findings"]
    assert (f["severity"], f["component"], f["file"]) == (
        "error", "optimizer", "optimizer_0/__0_0.distcp")
    assert f["message"].startswith("optimizer_0/__0_0.distcp is missing (the metadata places ")
    assert f["message"].endswith("the optimizer state cannot be loaded, so only a warm start from "
                                 "the weights is possible; copy the rank files again or resume "
                                 "from an earlier checkpoint.")


@pytest.mark.parametrize("name, spec", [
    ("checkpoint-8", {"pytorch_model_fsdp_0": {".metadata": None, "__0_0.distcp": None},
                      "optimizer_0": {".metadata": None}, "scheduler.pt": None,
                      "rng_state_0.pth": None, "trainer_state.json": "not json"}),
    ("checkpoint-4", {"global_step4": {"mp_rank_00_model_states.pt": None,
                                       "zero_pp_rank_0_mp_rank_00_optim_states.pt": None},
                      "latest": "global_step4", "trainer_state.json": "{}"}),
    ("step_2", {"random_states_0.pkl": None, "optimizer.bin": None, "dl_state_dict.bin": None}),
    ("epoch=0-step=5.ckpt", {"meta.pt": None, ".metadata": None, "__0_0.distcp": None}),
    ("step-3", {".metadata.tmp": None, "__0_0.distcp": None}),
    ("ds", {"latest_universal": "global_step1_universal",
            "global_step1_universal": {"mp_rank_00_model_states.pt": None, "zero": {}}}),
    ("meg", {"latest_checkpointed_iteration.txt": "2",
             "iter_0000002": {"metadata.json": "{}", ".metadata": None, "__0_0.distcp": None}}),
    ("meg2", {"latest_checkpointed_iteration.txt": "garbage"}),
])
def test_odd_layouts_give_a_verdict_never_an_exception(tmp_path, name, spec):
    from .component_helpers import tree

    d = tree(tmp_path / name, spec)
    for n in (None, 2):
        report = resume_report(str(d), n)
        assert report.verdict in ("broken", "weights-only", "inexact")
        assert list(report.components) == list(COMPONENTS)
        assert report.findings and all(f.component in COMPONENTS for f in report.findings)
