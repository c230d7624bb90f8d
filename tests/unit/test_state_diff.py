"""state_diff on the real samples (and copies of them with real files swapped in). Expected
numbers come from torch itself: torch.load(weights_only=True) of our own sample files, and DCP's
own metadata reader for the torchtitan sample."""

from __future__ import annotations

import dataclasses
import io
import json
import shutil

import pytest

from ckpt_browser.analysis.opened import open_path
from ckpt_browser.errors import CheckpointError
from ckpt_browser.model import COMPONENTS
from ckpt_browser.values.locate import all_locs
from ckpt_browser.values.state_diff import (
    LrGroup,
    Pair,
    StateDiff,
    StateSide,
    StepCounters,
    state_diff,
)

from .component_helpers import (
    ACCELERATE,
    DEEPSPEED,
    HF_RUN3,
    LIGHTNING,
    MEGATRON,
    TITAN_STEP,
    safe_load,
    safe_load_with,
    trainer_state,
)
from .helpers import SAMPLES

RUN = SAMPLES / "tiny-llama-run"
RUN3, RUN6 = RUN / "checkpoint-3", RUN / "checkpoint-6"


def side(path):
    ts = open_path(str(path)).training
    try:
        ckpt = open_path(str(path)).checkpoint
    except CheckpointError:  # no safetensors here: the state files' tensors only
        ckpt = None
    return ts, all_locs(ckpt, ts)


def diff(a, b, unmoved=None) -> StateDiff:
    (ta, la), (tb, lb) = side(a), side(b)
    out = state_diff(ta, tb, la, lb, unmoved)
    doc = out.to_doc()
    assert json.loads(json.dumps(doc, allow_nan=False)) == doc  # plain JSON values only
    return out


def kinds(out: StateDiff) -> list[str]:
    return [f.kind for f in out.flags]


def counters(steps) -> StepCounters:
    """min/max/count of torch's per-parameter step counters (tensors or plain numbers)."""
    values = [float(s) for s in steps]
    return StepCounters(min(values), max(values), len(values), 0)


def torch_optimizer(sd: dict) -> tuple[list[float], dict]:
    lrs = [float(g["lr"]) for g in sd["param_groups"]]
    return lrs, counters(s["step"] for s in sd["state"].values())


def lr_table(a: list[float], b: list[float]) -> tuple[LrGroup, ...]:
    return tuple(LrGroup(i, x, y) for i, (x, y) in enumerate(zip(a, b)))


def hf_expected(folder) -> tuple[list[float], dict, int]:
    lrs, steps = torch_optimizer(safe_load(folder / "optimizer.pt"))
    return lrs, steps, safe_load(folder / "scheduler.pt")["last_epoch"]


# --- HF Trainer -----------------------------------------------------------------------------------

def test_hf_tiny_llama_step_3_to_6():
    out = diff(RUN3, RUN6)
    lr3, steps3, last3 = hf_expected(RUN3)
    lr6, steps6, last6 = hf_expected(RUN6)
    for got, folder in ((out.a, RUN3), (out.b, RUN6)):
        st = trainer_state(folder)
        assert got == StateSide("hf-trainer", st["global_step"], st["epoch"], 1)
    assert (out.a.step, out.b.step) == (3, 6)
    assert out.lr == lr_table(lr3, lr6) and len(lr3) == 2
    assert lr3 == safe_load(RUN3 / "scheduler.pt")["_last_lr"]  # the current lr, not initial_lr
    assert out.optimizer_steps == Pair(steps3, steps6)
    assert (steps3.max, steps6.max, steps6.params) == (3, 6, 21)
    assert out.scheduler_last_epoch == Pair(last3, last6) == Pair(3, 6)
    assert list(out.components) == list(COMPONENTS)
    assert out.components["optimizer"] == Pair("ok", "ok")
    assert out.components["scaler"] == Pair("not-needed", "not-needed")
    assert out.flags == () and out.notes == ()
    assert out.differs  # the step and the lr moved


def test_swapped_order_says_the_step_went_back():
    out = diff(RUN6, RUN3)
    assert kinds(out) == ["step_went_back"]
    message = out.flags[0].message
    assert "6" in message and "3" in message


@pytest.mark.parametrize("path", [RUN6, HF_RUN3 / "checkpoint-4", TITAN_STEP, DEEPSPEED,
                                  MEGATRON, ACCELERATE, LIGHTNING / "last.ckpt"],
                         ids=lambda p: p.name)
def test_a_checkpoint_against_itself_has_no_flags(path):
    out = diff(path, path)
    assert out.flags == ()
    assert out.a == out.b and out.optimizer_steps.a == out.optimizer_steps.b
    assert all(g.a == g.b for g in out.lr)
    assert not out.differs


def test_hf_run3_chain_2_4_6():
    folders = [HF_RUN3 / f"checkpoint-{n}" for n in (2, 4, 6)]
    expected = [hf_expected(f) for f in folders]
    for (fa, ea), (fb, eb) in [((folders[0], expected[0]), (folders[1], expected[1])),
                               ((folders[1], expected[1]), (folders[2], expected[2])),
                               ((folders[0], expected[0]), (folders[2], expected[2]))]:
        out = diff(fa, fb)
        assert (out.a.step, out.b.step) == (trainer_state(fa)["global_step"],
                                            trainer_state(fb)["global_step"])
        assert out.lr == lr_table(ea[0], eb[0])
        assert out.optimizer_steps == Pair(ea[1], eb[1])
        assert out.scheduler_last_epoch == Pair(ea[2], eb[2])
        assert out.flags == ()
    assert [e[1].max for e in expected] == [2, 4, 6]


# --- other frameworks -----------------------------------------------------------------------------

def test_lightning_best_and_last():
    a, b = LIGHTNING / "epoch=0-step=4.ckpt", LIGHTNING / "last.ckpt"
    out = diff(a, b)
    for key, path in (("a", a), ("b", b)):
        ck = safe_load(path)
        lrs, steps = torch_optimizer(ck["optimizer_states"][0])
        assert [getattr(g, key) for g in out.lr] == lrs
        assert getattr(out.optimizer_steps, key) == steps
        assert getattr(out.scheduler_last_epoch, key) == ck["lr_schedulers"][0]["last_epoch"]
        facts = getattr(out, key)
        assert facts.step == ck["global_step"] and facts.framework == "lightning"
    assert out.flags == ()


def _titan_items() -> dict:
    import torch
    from torch.distributed.checkpoint import FileSystemReader

    md = FileSystemReader(str(TITAN_STEP)).read_metadata()  # our own sample
    values = {}  # each item, tensor or not, is a standalone torch.save blob (FORMATS.md "DCP")
    for idx, info in md.storage_data.items():
        if idx.fqn.endswith((".lr", ".step")) or idx.fqn == "lr_scheduler.last_epoch":
            with open(TITAN_STEP / info.relative_path, "rb") as f:
                f.seek(info.offset)
                values[idx.fqn] = torch.load(io.BytesIO(f.read(info.length)), weights_only=True)
    return values


def test_torchtitan_against_itself():
    values = _titan_items()
    out = diff(TITAN_STEP, TITAN_STEP)
    lrs = list(dict.fromkeys(float(v) for k, v in values.items()
                             if k.startswith("optimizer.param_groups.") and k.endswith(".lr")))
    steps = counters(v for k, v in values.items() if k.startswith("optimizer.state."))
    assert out.lr == lr_table(lrs, lrs)
    assert out.optimizer_steps == Pair(steps, steps) and steps.params == 12
    assert out.scheduler_last_epoch.a == values["lr_scheduler.last_epoch"] == 10
    assert out.a == StateSide("torchtitan", 10, None, 2)
    assert any("DCP keeps param-group settings per parameter" in n for n in out.notes)
    assert out.flags == ()


def test_deepspeed_tag_folder_and_run_root():
    import torch

    class StandIn:
        def __init__(self, *args, **kwargs):
            self.args = args

    tag = DEEPSPEED / "global_step4"
    lrs, steps = None, []
    for r in (0, 1):  # ZeRO-2: one optimizer partition per data-parallel rank
        f = tag / f"zero_pp_rank_{r}_mp_rank_00_optim_states.pt"
        names = torch.serialization.get_unsafe_globals_in_checkpoint(f)
        sd = safe_load_with(f, [(StandIn, n) for n in names if n.startswith("deepspeed.")])
        base = sd["optimizer_state_dict"]["base_optimizer_state"]
        lrs = lrs or [float(g["lr"]) for g in base["param_groups"]]
        steps += [s["step"] for s in base["state"].values()]
    ms = safe_load(tag / "mp_rank_00_model_states.pt")
    out = diff(tag, DEEPSPEED)
    assert out.lr == lr_table(lrs, lrs)
    assert out.optimizer_steps == Pair(counters(steps), counters(steps))
    assert counters(steps).params == 2
    lbi = ms["lr_scheduler"]["last_batch_iteration"]
    assert out.scheduler_last_epoch == Pair(lbi, lbi)
    assert lbi == ms["global_steps"] - 1  # DeepSpeed's schedulers count from -1
    assert out.a.step == ms["global_steps"] and out.a.ranks == ms["dp_world_size"]
    assert any("last_batch_iteration" in n for n in out.notes)
    assert out.flags == ()


def test_megatron_scheduler_counts_samples():
    import argparse

    sd = safe_load_with(MEGATRON / "iter_0000004" / "mp_rank_00" / "model_optim_rng.pt",
                        [argparse.Namespace])
    lrs, steps = torch_optimizer(sd["optimizer"]["optimizer"])
    out = diff(MEGATRON, MEGATRON)
    assert out.lr == lr_table(lrs, lrs)
    assert out.optimizer_steps.a == steps
    assert out.scheduler_last_epoch == Pair(None, None)
    assert any(f"num_steps {sd['opt_param_scheduler']['num_steps']}" in n
               for n in out.notes)
    assert out.a.step == sd["iteration"]


def test_accelerate():
    lrs, steps = torch_optimizer(safe_load(ACCELERATE / "optimizer.bin"))
    out = diff(ACCELERATE, ACCELERATE)
    assert out.lr == lr_table(lrs, lrs)
    assert out.optimizer_steps.b == steps
    assert out.scheduler_last_epoch.a == safe_load(ACCELERATE / "scheduler.bin")["last_epoch"]


# --- telling cases, from real files swapped between real checkpoints -----------------------------

def test_optimizer_state_from_an_earlier_step(tmp_path):
    bad = shutil.copytree(RUN6, tmp_path / "checkpoint-6")
    shutil.copy(RUN3 / "optimizer.pt", bad / "optimizer.pt")
    out = diff(RUN3, bad)
    assert "optimizer_not_advanced" in kinds(out)
    assert out.optimizer_steps.b.max == out.optimizer_steps.a.max == 3
    flag = next(f for f in out.flags if f.kind == "optimizer_not_advanced")
    assert all(n in flag.message for n in ("3", "6"))
    # the stale optimizer also carries step 3's lr while the scheduler is saved
    assert "lr_unchanged" in kinds(out)
    assert "optimizer_not_advanced" not in kinds(diff(bad, bad))


def test_a_fresh_adamw_is_said_to_be_before_its_first_step(tmp_path):
    """An AdamW saved before its first step has empty `state` (torch fills it lazily): that
    is what the note says, not 'not an Adam-style optimizer'."""
    import torch

    fresh = shutil.copytree(RUN6, tmp_path / "checkpoint-6")
    params = [torch.nn.Parameter(torch.zeros(2)) for _ in range(21)]
    opt = torch.optim.AdamW(params, lr=1e-3)
    assert opt.state_dict()["state"] == {}
    torch.save(opt.state_dict(), fresh / "optimizer.pt")
    out = diff(RUN3, fresh)
    said = " ".join(out.notes)
    assert "no per-parameter state yet (saved before its first step)" in said, out.notes
    assert "not an Adam-style optimizer" not in said


def test_scheduler_state_from_an_earlier_step(tmp_path):
    bad = shutil.copytree(RUN6, tmp_path / "checkpoint-6")
    shutil.copy(RUN3 / "scheduler.pt", bad / "scheduler.pt")
    out = diff(RUN3, bad)
    assert kinds(out).count("scheduler_behind") == 2  # behind B's step, and did not advance
    assert out.scheduler_last_epoch == Pair(3, 3)
    messages = " ".join(f.message for f in out.flags)
    assert "last_epoch is 3" in messages and "stayed at 3" in messages
    # on one side alone: last_epoch 3 at global step 6
    assert kinds(diff(bad, bad)) == ["scheduler_behind"]
    assert "scheduler_behind" not in kinds(diff(RUN3, RUN6))


def test_frozen_weights():
    out = diff(RUN3, RUN6, unmoved=["model.norm.weight"])
    assert kinds(out) == ["frozen"]
    flag = out.flags[0]
    assert flag.tensors == ("model.norm.weight",) and flag.component is None
    assert "did not change between step 3 and step 6 (frozen?)" in flag.message
    assert flag.to_doc() == {"kind": "frozen", "message": flag.message,
                             "tensors": ["model.norm.weight"]}
    names = [f"model.layers.{i}.weight" for i in range(25)]
    flag = diff(RUN3, RUN6, unmoved=names).flags[0]
    assert flag.message.startswith("25 weight tensors") and flag.tensors == tuple(names[:20])
    assert diff(RUN3, RUN6, unmoved=None).flags == ()
    assert diff(RUN3, RUN6, unmoved=[]).flags == ()
    assert diff(RUN6, RUN6, unmoved=["model.norm.weight"]).flags == ()  # same step


def test_scheduler_lost_and_gained(tmp_path):
    bad = shutil.copytree(RUN6, tmp_path / "checkpoint-6")
    (bad / "scheduler.pt").unlink()
    out = diff(RUN3, bad)
    lost = [f for f in out.flags if f.kind == "component_lost"]
    assert [f.component for f in lost] == ["scheduler"] and lost[0].tensors is None
    assert lost[0].to_doc() == {"kind": "component_lost", "message": lost[0].message,
                                "component": "scheduler"}
    assert out.components["scheduler"] == Pair("ok", "missing")
    assert out.scheduler_last_epoch.b is None
    back = diff(bad, RUN3)
    assert [f.component for f in back.flags if f.kind == "component_gained"] == ["scheduler"]


def test_unreadable_counters_are_counted():
    (ta, la), (tb, lb) = side(RUN3), side(RUN6)
    broken = [dataclasses.replace(loc, problem="damaged for this test")
              if loc.name in ("state.0.step", "state.1.step") else loc for loc in lb]
    out = state_diff(ta, tb, la, broken)
    assert out.optimizer_steps.b == StepCounters(min=6, max=6, params=19, unreadable=2)
    assert any("2 optimizer step counters not readable" in n for n in out.notes)


def test_without_locations_the_facts_give_the_counters():
    (ta, _), (tb, _) = side(RUN3), side(RUN6)
    out = state_diff(ta, tb, [], [])
    assert out.optimizer_steps.a == StepCounters(min=3, max=3, params=21, unreadable=0)
    assert out.optimizer_steps.b.max == 6
    assert out.flags == ()


def test_weights_only_side_has_unknowns_not_flags():
    out = diff(SAMPLES / "tiny-llama-release", RUN6)
    assert out.a.framework == "safetensors" and out.a.step is None
    assert out.optimizer_steps.a is None and all(g.a is None for g in out.lr)
    assert {f.kind for f in out.flags} == {"component_gained"}
    assert any("training step is unknown" in n for n in out.notes)


# --- the StateDiff as `diff --json` writes it -----------------------------------------------------

def test_to_doc_is_the_json_state_object():
    from ckpt_browser.analysis.opened import open_path
    from ckpt_browser.report.diff import diff_doc
    from ckpt_browser.values.diff import Options, side_of
    from ckpt_browser.values.diff import diff as diff_sides

    result = diff_sides(side_of(open_path(str(RUN3))), side_of(open_path(str(RUN6))), Options())
    out = result.state
    doc = diff_doc(result)["state"]
    assert list(doc) == ["a", "b", "components", "lr", "optimizer_steps",
                         "scheduler_last_epoch", "flags", "notes", "differs", "summary", "tensors"]
    assert {k: v for k, v in doc.items() if k not in ("summary", "tensors")} == out.to_doc()
    assert doc["a"] == {"framework": "hf-trainer", "step": 3, "epoch": out.a.epoch, "ranks": 1}
    assert doc["lr"][0] == {"group": 0, "a": out.lr[0].a, "b": out.lr[0].b}
    assert doc["optimizer_steps"]["b"] == {"min": 6, "max": 6, "params": 21, "unreadable": 0}
    assert doc["scheduler_last_epoch"] == {"a": 3, "b": 6}
    assert doc["components"]["rng"] == {"a": "ok", "b": "ok"}
    assert doc["differs"] is True and result.differs


def test_no_training_state_no_state_diff():
    from ckpt_browser.analysis.opened import open_path
    from ckpt_browser.report.diff import diff_doc, diff_text
    from ckpt_browser.values.diff import Options, side_of
    from ckpt_browser.values.diff import diff as diff_sides

    result = diff_sides(side_of(open_path(str(RUN3))), side_of(open_path(str(RUN6))),
                        Options(weights_only=True))
    assert result.state is None and not result.differs
    assert set(diff_doc(result)["state"]) == {"summary", "tensors"}
    assert "training state:" not in diff_text(result)


def test_differs_is_steps_epochs_statuses_and_lrs_not_flags():
    same = diff(RUN6, RUN6, unmoved=["model.norm.weight"])
    assert not same.differs and same.to_doc()["differs"] is False
    for change in ({"a": dataclasses.replace(same.a, epoch=0.5)},
                   {"components": {**same.components, "rng": Pair("ok", "missing")}},
                   {"lr": (dataclasses.replace(same.lr[0], b=0.5),) + same.lr[1:]}):
        assert dataclasses.replace(same, **change).differs, change
    counters_moved = Pair(same.optimizer_steps.a, dataclasses.replace(same.optimizer_steps.b,
                                                                      max=7))
    assert not dataclasses.replace(same, optimizer_steps=counters_moved).differs


def test_restate_returns_a_new_state_diff_and_leaves_the_first():
    from ckpt_browser.analysis.opened import open_path
    from ckpt_browser.tui.diff.jobs import restate
    from ckpt_browser.values.diff import Options, compare_values, side_of
    from ckpt_browser.values.diff import diff as diff_sides

    result = diff_sides(side_of(open_path(str(RUN3))), side_of(open_path(str(RUN6))), Options())
    first = result.state
    assert restate(result) is None  # the weights' values are not compared yet
    compare_values(result.rows, result.options)
    again = restate(result)
    assert result.state is first and isinstance(again, StateDiff) and again is not first
    assert again.differs == first.differs
    assert (again.a, again.b, again.lr, again.components) == (first.a, first.b, first.lr,
                                                               first.components)
    unmoved = [r.name for r in result.rows if r.values.bitwise_equal]
    assert ("frozen" in kinds(again)) == bool(unmoved)
