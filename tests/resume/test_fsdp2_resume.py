"""The FSDP2 sample's verdict, proven by resuming it on 2 CPU ranks.

`ckpt-browser check` calls sample_checkpoints/torchtitan-run/checkpoint/step-10 INEXACT: weights,
optimizer, scheduler, data position and progress are there (required, "ok"), the RNG state is not
(torchtitan never saves it). fsdp2_worker.py restores the sample as torchtitan does, with the
generator's own model, optimizer, scheduler, data and step, on 2 gloo ranks (one spawn, both ranks
in the same two processes), and this test checks that:

- resuming gives the uninterrupted run's losses exactly (each rank's loss, every step), and
  resuming from the same state saved on this machine gives its weights and optimizer state bit
  for bit;
- leaving out any component the tool calls required changes the losses, except the progress
  counter, which changes no loss but how many steps the resumed run trains;
- the missing RNG is real: with dropout, a resume without the RNG state gives other losses, and
  restoring the RNG state (the only thing added) gives the same ones.

The sample ends its 10-step schedule: the generator's linear decay, not clamped past its end,
gives lr factors 0, -1/8, -1/4, -3/8 for steps 11 to 14. The K steps after the resume train
with those (lr 0, then small negative), which is still training that every part of the state
feeds; step 11's loss comes before any update, so only weights and data can change it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

from ckpt_browser.analysis.resume import resume_report  # noqa: E402
from tests.resume.fsdp2_worker import ABLATIONS  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_checkpoints" / "torchtitan-run" / "checkpoint" / "step-10"
WORKER = Path(__file__).with_name("fsdp2_worker.py")
K = 4  # steps trained after the resume


@pytest.fixture(scope="module")
def report():
    return resume_report(str(SAMPLE))


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("fsdp2")
    out = tmp / "result.json"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONHASHSEED="0")
    proc = subprocess.run(
        [sys.executable, str(WORKER), str(SAMPLE), str(tmp / "scratch"), str(out), str(K)],
        env=env, cwd=tmp, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(out.read_text())


def after_save(runs: dict) -> list:
    """The uninterrupted run's losses for the steps after the saved one (11 .. 10 + K)."""
    return runs["uninterrupted"][runs["saved_step"]:]


def test_the_tool_calls_the_sample_inexact_for_the_rng_alone(report):
    assert report.verdict == "inexact"
    statuses = {kind: c.status for kind, c in report.components.items()}
    assert {k for k, s in statuses.items() if s == "ok"} == set(ABLATIONS)
    assert {k for k, s in statuses.items() if s not in ("ok", "not-needed")} == {"rng"}
    assert statuses["rng"] == "missing"
    assert [f.component for f in report.findings] == ["rng"]


def test_the_uninterrupted_run_reproduces_the_sample(runs):
    # Same code, same torch: every value of the sample's state at step 10 (199 per rank: the
    # model, optimizer, scheduler, loader and train_state entries) is the uninterrupted run's,
    # up to float32 rounding. Bit for bit where the sample was made; on another CPU a few
    # parameters differ in their last bit (kernels round differently), never more.
    assert runs["step10_values"] == 199
    assert runs["step10_vs_sample"]["max_abs_diff"] <= 1e-6
    assert len(runs["uninterrupted"]) == runs["saved_step"] + K


def test_resuming_the_sample_gives_the_uninterrupted_losses(runs):
    assert runs["resumed_from_step"] == runs["saved_step"]
    assert runs["resumed"] == after_save(runs)  # exactly, both ranks, every step


def test_resuming_the_same_state_saved_here_is_bit_exact(runs):
    assert runs["resumed_own_save"] == after_save(runs)
    assert runs["resumed_own_save_final_vs_uninterrupted"] == {"keys": [], "max_abs_diff": 0.0}


@pytest.mark.parametrize("component", ["weights", "optimizer", "scheduler", "data"])
def test_leaving_out_a_required_component_changes_the_losses(runs, component):
    ablated = runs[f"without_{component}"]
    assert runs[f"without_{component}_from_step"] == runs["saved_step"]
    assert len(ablated) == K
    assert ablated != after_save(runs)


def test_leaving_out_the_progress_counter_retrains_from_step_0(runs):
    # train_state.step feeds no loss (the schedule has its own last_epoch, the loader its own
    # position): the first K losses are the right ones. But the loop runs until the step
    # reaches the total, so the resumed run trains 10 + K steps instead of K.
    ablated = runs["without_progress"]
    assert runs["without_progress_from_step"] == 0
    assert ablated[:K] == after_save(runs)
    assert len(ablated) == runs["saved_step"] + K
    assert ablated != after_save(runs)


def test_the_missing_rng_matters_once_something_draws_from_it(runs):
    tail = runs["dropout_uninterrupted"][runs["saved_step"]:]
    assert runs["dropout_resumed_without_rng"] != tail
    assert runs["dropout_resumed_with_rng"] == tail
