"""A folder of checkpoints opens as a timeline, newest first; the CLI takes the newest."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ckpt_browser.producers.names import step_of
from ckpt_browser.producers.recognise import find_checkpoints
from ckpt_browser.producers.timeline import is_timeline

SAMPLES = Path(__file__).resolve().parents[2] / "sample_checkpoints"


@pytest.mark.parametrize("name, step, kind", [
    ("checkpoint-1500", 1500, "checkpoint-N"),
    ("step-2000", 2000, "step-N"),
    ("step_40", 40, "step_N"),
    ("checkpoint_3", 3, "checkpoint_N"),
    ("epoch_2", 2, "epoch_N"),
    ("global_step800", 800, "global_stepN"),
    ("iter_0004000", 4000, "iter_N"),
    ("epoch=3-step=1200.ckpt", 1200, "lightning .ckpt"),
    ("epoch=3-step=1200-v1.ckpt", 1200, "lightning .ckpt"),
    ("last.ckpt", None, "last.ckpt"),
])
def test_checkpoint_names_the_frameworks_write(name, step, kind):
    assert step_of(name) == (step, kind)


@pytest.mark.parametrize("name", ["checkpoint", "runs", "model.safetensors", "iter_12",
                                  "checkpoint-", "global_step"])
def test_other_names_are_not_checkpoints(name):
    assert step_of(name) == (None, None)


def test_newest_first_by_step_not_by_name(tmp_path):
    for name in ("checkpoint-900", "checkpoint-1000", "checkpoint-50"):
        (tmp_path / name).mkdir()
    (tmp_path / "runs").mkdir()  # not a checkpoint
    assert [e.name for e in find_checkpoints(str(tmp_path))] == [
        "checkpoint-1000", "checkpoint-900", "checkpoint-50"]
    assert is_timeline(str(tmp_path))


def test_torchtitan_and_accelerate_nest_their_step_folders(tmp_path):
    (tmp_path / "checkpoint" / "step-10").mkdir(parents=True)
    (tmp_path / "checkpoint" / "step-20").mkdir()
    assert [(e.name, e.step) for e in find_checkpoints(str(tmp_path))] == [
        ("checkpoint/step-20", 20), ("checkpoint/step-10", 10)]


def test_a_checkpoint_is_not_a_timeline():
    run = SAMPLES / "tiny-llama-run"
    assert is_timeline(str(run))
    assert not is_timeline(str(run / "checkpoint-6"))  # has weights and trainer_state.json
    assert not is_timeline(str(SAMPLES / "tiny-llama-release"))


def test_same_step_newer_write_comes_first(tmp_path):
    a, b = tmp_path / "epoch=0-step=5.ckpt", tmp_path / "last.ckpt"
    a.write_bytes(b"x")
    b.write_bytes(b"x")
    os.utime(a, (1_000_000, 1_000_000))
    names = [e.name for e in find_checkpoints(str(tmp_path))]
    assert names == ["epoch=0-step=5.ckpt", "last.ckpt"]  # a step beats no step


def _run(*args):
    return subprocess.run([sys.executable, "-m", "ckpt_browser", *args], capture_output=True,
                          text=True, timeout=60)


def test_cli_takes_the_newest_and_lists_the_timeline():
    r = _run("inspect", "--json", str(SAMPLES / "tiny-llama-run"))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["path"].endswith("checkpoint-6")
    assert [e["name"] for e in doc["timeline"]] == ["checkpoint-6", "checkpoint-3"]


def test_cli_checkpoint_option_picks_by_name_or_step():
    for choice in ("checkpoint-3", "3"):
        r = _run("inspect", "--json", "--checkpoint", choice, str(SAMPLES / "tiny-llama-run"))
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["path"].endswith("checkpoint-3")


def test_cli_unknown_checkpoint_is_a_usage_error():
    r = _run("inspect", "--checkpoint", "checkpoint-99", str(SAMPLES / "tiny-llama-run"))
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "checkpoint-99" in r.stderr and "checkpoint-6" in r.stderr


def test_each_entry_says_which_framework_wrote_it():
    entries = find_checkpoints(str(SAMPLES / "hf-run3"))
    assert [(e.name, e.format) for e in entries] == [
        ("checkpoint-6", "hf-trainer"), ("checkpoint-4", "hf-trainer"),
        ("checkpoint-2", "hf-trainer")]
    (titan,) = find_checkpoints(str(SAMPLES / "torchtitan-run"))
    assert (titan.name, titan.step, titan.format) == ("checkpoint/step-10", 10, "torchtitan")


@pytest.mark.parametrize("names", [
    ["checkpoint_0", "checkpoint_1", "checkpoint_10"],  # accelerate's save counter
    ["global_step4", "global_step12_universal"],
    ["epoch=1.ckpt", "epoch=3.ckpt", "epoch=2.ckpt"],  # Lightning without steps
    ["checkpoint/step-5", "step-9"],  # torchtitan's nest beside a step folder
    ["epoch=0-step=5.ckpt", "last.ckpt"],
])
def test_detection_opens_the_checkpoint_the_timeline_puts_first(tmp_path, names):
    """One rule for "the newest": a run folder opens what its timeline lists first."""
    from ckpt_browser.producers.recognise import detect

    for name in names:
        path = tmp_path / name
        if name.endswith(".ckpt"):
            path.write_bytes(b"x")
        else:
            path.mkdir(parents=True)
    first = find_checkpoints(str(tmp_path))[0]
    opened = detect(str(tmp_path))
    assert opened.path == first.path
    assert f"showing {first.name}, the latest" in opened.problems[0].message


def test_a_walk_remembered_for_a_relative_path_is_not_given_for_the_absolute_one(tmp_path,
                                                                                  monkeypatch):
    """The walks are remembered: the entries of `run` walked from its parent hold paths
    relative to there, wrong once the working folder changes (a flaky TUI test showed it)."""
    from ckpt_browser.producers.timeline import checkpoints_in

    (tmp_path / "run" / "checkpoint-1").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert [e.path for e in checkpoints_in("run").entries] == [os.path.join("run",
                                                                            "checkpoint-1")]
    absolute = str(tmp_path / "run")
    assert [e.path for e in checkpoints_in(absolute).entries] == [
        os.path.join(absolute, "checkpoint-1")]
