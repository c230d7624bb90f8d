"""Pilot tests: `v` reads the highlighted tensor's values in a worker, shows progress, then the
statistics under its details; Esc cancels; unreadable bytes are an in-app message."""

import os
import threading

import pytest
import torch
from safetensors.torch import load_file, save_file
from textual.widgets import Input, ProgressBar

from ckpt_browser.producers.layout import open_layout
from ckpt_browser.tui.app import make_app
from ckpt_browser.tui.browse.tree import CheckpointTree
from ckpt_browser.tui.browse.values_panel import ValuesPanel
from ckpt_browser.tui.browse.values_render import Histogram
from ckpt_browser.values import read as values_read
from ckpt_browser.values import stats as values_stats
from tests.tui.conftest import SAMPLES, go_to, loaded, plain


def panel(app) -> ValuesPanel:
    return app.query_one(ValuesPanel)


def notes(app) -> list[str]:
    return [str(n.message) for n in app._notifications]


def cursor(app):
    return app.query_one(CheckpointTree).cursor_node.data


async def down_to(pilot, match, key: str = "down", limit: int = 300):
    """Press Down (or Up) until the highlighted node matches, as a person would."""
    for _ in range(limit):
        if match(cursor(pilot.app)):
            return
        await pilot.press(key)
    raise AssertionError("no such node")


def assert_matches(stats, t: torch.Tensor) -> None:
    t = t.double().flatten()
    assert stats.numel == t.numel() and stats.finite == t.numel()
    for got, want in ((stats.min, t.min()), (stats.max, t.max()), (stats.mean, t.mean())):
        assert got == pytest.approx(float(want), rel=1e-6)
    assert stats.std == pytest.approx(float(t.std()), rel=1e-6)
    assert stats.preview == pytest.approx(t[:8].tolist())
    assert sum(stats.hist) == t.numel()


@pytest.fixture
def counted(monkeypatch):
    """Counts tensor_stats calls: a cached result must not be computed again."""
    calls = []
    real = values_stats.tensor_stats

    def counting(loc, *args, **kwargs):
        calls.append(loc.name)
        return real(loc, *args, **kwargs)

    monkeypatch.setattr(values_stats, "tensor_stats", counting)
    return calls


async def test_safetensors_tensor_values_match_torch_and_stay_cached(sample_app, counted):
    app = sample_app("tiny-llama-release")
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        await go_to(app, pilot, "model-00001-of-00003.safetensors")
        await pilot.press("right", "down")  # lm_head.weight in model-00001
        ref = cursor(app)
        assert ref.kind == "tensor" and ref.tensor.name == "lm_head.weight"
        await pilot.press("v")
        await loaded(app, pilot)
        stats = panel(app).session.results[("weights", ref.shard, "lm_head.weight")]
        want = load_file(SAMPLES / "tiny-llama-release" / ref.shard)["lm_head.weight"]
        assert_matches(stats, want)
        assert stats.nan == stats.inf == 0 and stats.bytes_read == want.numel() * 4
        shown = plain(panel(app).query_one("#values-result"))
        for word in ("min", "max", "mean", "std", "abs max", "NaN", "Inf", "zeros", "finite",
                     "read", "first 8", "histogram"):
            assert word in shown
        lo, hi = stats.hist_range
        assert f"{lo:.6g}" in shown and f"{hi:.6g}" in shown  # the histogram's edges
        assert "lm_head.weight" in plain(app.query_one("#details-body"))  # usual details stay

        await pilot.press("down")  # another tensor: no values shown for it
        assert not panel(app).has_class("-result")
        await pilot.press("up", "v")  # back: shown again, not recomputed
        await loaded(app, pilot)
        assert panel(app).has_class("-result") and counted == ["lm_head.weight"]


async def test_module_view_tensor(sample_app):
    app = sample_app("tiny-llama-release")
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        await pilot.press("m")
        await loaded(app, pilot)
        await pilot.press("right")
        await down_to(pilot, lambda r: r.kind == "tensor")
        ref = cursor(app)
        await pilot.press("v")
        await loaded(app, pilot)
        stats = panel(app).session.results[("weights", ref.tensor.file, ref.tensor.name)]
        assert_matches(stats, load_file(SAMPLES / "tiny-llama-release" / ref.tensor.file)[
            ref.tensor.name])


async def test_optimizer_tensor_in_training_view(sample_app):
    app = sample_app("tiny-llama-run/checkpoint-3")
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        # optimizer -> optimizer.pt -> state -> 0 -> exp_avg
        await pilot.press("t", "down", "right", "down", "right", "down", "right", "down", "right")
        await down_to(pilot, lambda r: r.path == "state.0.exp_avg")
        await pilot.press("v")
        await loaded(app, pilot)
        stats = panel(app).session.results[("state", "optimizer.pt", "state.0.exp_avg")]
        saved = torch.load(SAMPLES / "tiny-llama-run/checkpoint-3/optimizer.pt",
                           weights_only=True)
        assert_matches(stats, saved["state"][0]["exp_avg"])
        assert "histogram" in plain(panel(app).query_one("#values-result"))


async def test_dcp_tensor_in_training_view(sample_app, tmp_path):
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    app = sample_app("torchtitan-run/checkpoint/step-10")
    key = "optimizer.state.layers.0.attention.wk.weight.exp_avg"
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        await pilot.press("t", "slash", *"wk.weight.exp_avg", "enter")  # fewer keys to pass
        await loaded(app, pilot)
        await pilot.press("down", "right", "down", "right")  # optimizer -> the DCP folder
        await down_to(pilot, lambda r: r.kind == "dcp-entry" and r.path == key)
        await pilot.press("v")
        await loaded(app, pilot)
        stats = panel(app).session.results[("state", ".metadata", key)]
    dcp_to_torch_save(SAMPLES / "torchtitan-run/checkpoint/step-10", tmp_path / "full.pt")
    assert_matches(stats, flat(torch.load(tmp_path / "full.pt", weights_only=True))[key])


def flat(tree, prefix: str = "") -> dict:
    """A nested state dict's leaves by dotted key, as DCP names them."""
    if not isinstance(tree, dict):
        return {prefix: tree}
    out = {}
    for k, v in tree.items():
        out.update(flat(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


def _one_file(tmp_path, monkeypatch, tensors: dict):
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    save_file(tensors, str(tmp_path / "model.safetensors"))
    return tmp_path / "model.safetensors"


async def test_esc_cancels_a_running_read_then_clears_the_filter(tmp_path, monkeypatch):
    _one_file(tmp_path, monkeypatch, {"big": torch.randn(1 << 20)})
    hold = threading.Event()
    hold.set()
    real = values_read.iter_blocks

    def gated(loc, block_bytes, cancel):  # small blocks; the first run waits after one block
        for i, block in enumerate(real(loc, 64 * 1024, cancel)):
            yield block
            if i == 0 and hold.is_set():
                cancel.wait(30)

    monkeypatch.setattr(values_stats, "iter_blocks", gated)
    app = make_app(open_layout(str(tmp_path)))
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        await pilot.press("right", "down", "v")
        job = panel(app).session.job
        for _ in range(3000):  # until the first block's progress is shown (torch loads first)
            if job.done:
                break
            await pilot.pause(0.01)
        bar = panel(app).query_one(ProgressBar)
        assert panel(app).has_class("-running") and bar.display
        assert bar.total == 1 << 20 and 0 < bar.progress < bar.total
        assert "of 1.0M elements" in plain(panel(app).query_one("#values-status"))

        await pilot.press("escape")
        await loaded(app, pilot)
        assert app.is_running and panel(app).session.job is None
        assert "cancelled" in plain(panel(app).query_one("#values-status"))
        assert any("cancelled" in n for n in notes(app))
        assert not panel(app).session.results and not panel(app).has_class("-running")

        hold.clear()
        await pilot.press("v")  # again, to the end
        await loaded(app, pilot)
        stats = panel(app).session.results[("weights", "model.safetensors", "big")]
        assert stats.numel == 1 << 20 and "cancelled" not in plain(
            panel(app).query_one("#values-status"))

        await pilot.press("slash", *"big", "enter")
        await loaded(app, pilot)
        await pilot.press("escape")  # no read running: Esc clears the filter as before
        await loaded(app, pilot)
        assert app.query_one("#filter", Input).value == ""
        assert not app.screen.has_class("-filtering")


async def test_v_on_a_node_that_is_not_a_tensor(sample_app, counted):
    app = sample_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        assert cursor(app).kind == "shard"
        await pilot.press("v")
        await loaded(app, pilot)
        assert any("Highlight a tensor" in n for n in notes(app))
        assert counted == [] and panel(app).session.job is None


async def test_truncated_file_is_an_in_app_error(tmp_path, monkeypatch):
    path = _one_file(tmp_path, monkeypatch, {"a": torch.randn(100, 100), "b": torch.ones(1000)})
    os.truncate(path, os.path.getsize(path) - 2000)  # the last tensor's bytes are cut
    app = make_app(open_layout(str(tmp_path)))
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        await pilot.press("right")
        shard = app.query_one(CheckpointTree).cursor_node
        last = max((c.data.tensor for c in shard.children), key=lambda t: t.end)
        await down_to(pilot, lambda r: r.kind == "tensor" and r.tensor is last)
        await pilot.press("v")
        await loaded(app, pilot)
        assert app.is_running and panel(app).session.job is None
        errors = [str(n.message) for n in app._notifications if n.severity == "error"
                  and "values" in n.title.lower()]
        assert errors and "model.safetensors" in errors[0] and "truncated" in errors[0]
        assert "cannot be read" in plain(panel(app).query_one("#values-status"))
        assert "Traceback" not in errors[0]
        first = next(c.data.tensor for c in shard.children if c.data.tensor is not last)
        await down_to(pilot, lambda r: r.kind == "tensor" and r.tensor is first, "up")
        await pilot.press("v")  # the app still works: an intact tensor reads
        await loaded(app, pilot)
        assert ("weights", "model.safetensors", first.name) in panel(app).session.results


async def test_an_unexpected_failure_is_a_message_too(sample_app, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(values_stats, "tensor_stats", broken)
    app = sample_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        await go_to(app, pilot, "model-00001-of-00003.safetensors")
        await pilot.press("right", "down", "v")
        await loaded(app, pilot)
        assert app.is_running and panel(app).session.job is None
        assert any("RuntimeError: boom" in n for n in notes(app))
        await pilot.press("escape")  # nothing runs any more: Esc is the filter's again
        assert app.is_running


async def test_values_is_in_the_command_palette_only_then_cancel_is_not(sample_app):
    app = sample_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Values" in titles and "Cancel values" not in titles


def test_histogram_is_readable_without_colour():
    h = Histogram([0, 1, 32, 64, 32, 1, 0, 0], -1.0, 1.0, rows=2)
    lines = h.lines(11)  # 2 columns of count labels, the axis, 8 bars
    assert lines[:2] == ["64┤   █    ", " 0┤ ▁███▁  "]  # empty bins blank, tiny ones visible
    assert lines[2] == "   -1     1"  # the value range under the first and last bar
    assert h.bins(4) == [1, 96, 33, 0]  # narrower than the bins: neighbours add up
    assert h.lines(7)[0] == "96┤ █  "  # so the count label is the tallest shown bar's
    assert Histogram([5, 9, 2], 0.0, 3.0).lines(8)[1] == " │▅█ "  # rows between: no label
    assert Histogram([5, 9, 2], 0.0, 3.0).lines(8)[3] == "  0 to 3"  # too narrow for the edges
    assert Histogram([5, 9, 2], -0.125, 3.0).lines(8)[3] == "-0.125 to 3"  # from the margin


async def test_histogram_axes_name_counts_and_values(sample_app):
    """At 80x24 the pane shows the counts (the tallest bar's, and 0) on the left and the
    value range under the bars, in words and characters, no colour needed."""
    app = sample_app("tiny-llama-release")
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        await go_to(app, pilot, "model-00001-of-00003.safetensors")
        await pilot.press("right", "down", "v")  # lm_head.weight
        await loaded(app, pilot)
        ref = cursor(app)
        stats = panel(app).session.results[("weights", ref.shard, ref.tensor.name)]
        lines = plain(panel(app).query_one("#values-result")).splitlines()
        head = next(i for i, line in enumerate(lines) if line.startswith("histogram"))
        assert "count up, value across" in " ".join(lines[head:head + 2])
        start = next(i for i in range(head, len(lines)) if "┤" in lines[i])
        top, middle, bottom, axis = (line.rstrip() for line in lines[start:start + 4])
        label, bars = top.split("┤")
        assert max(stats.hist) <= int(label.replace(",", "")) <= sum(stats.hist)
        assert "█" in bars and middle.strip().startswith("│")
        assert bottom.split("┤")[0].strip() == "0"
        lo, hi = axis.replace(" to ", " ").split()  # a narrow pane says "lo to hi"
        assert (float(lo), float(hi)) == pytest.approx(stats.hist_range, rel=1e-6)


def test_values_80x24(snap_compare, sample_app):
    async def run_before(pilot):
        await loaded(pilot.app, pilot)
        await pilot.press("down", "down", "right", "down", "v")  # the first shard's first tensor
        await loaded(pilot.app, pilot)

    assert snap_compare(sample_app(), terminal_size=(80, 24), run_before=run_before)


async def test_fp8_weight_shows_raw_and_dequantized_values(tmp_path, monkeypatch):
    """v on a DeepSeek-V3 style FP8 weight beside its weight_scale_inv shows the stored
    values, then the dequantized ones (weight x its 128x128 block's scale), as torch gets."""
    torch.manual_seed(0)
    weight = (torch.randn(200, 130) * 3).to(torch.float8_e4m3fn)
    scale = torch.rand(2, 2) + 0.5
    _one_file(tmp_path, monkeypatch, {"proj.weight": weight, "proj.weight_scale_inv": scale})
    app = make_app(open_layout(str(tmp_path / "model.safetensors")))
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        await go_to(app, pilot, "model.safetensors")
        await pilot.press("right")
        await down_to(pilot, lambda r: r.kind == "tensor" and r.tensor.name == "proj.weight")
        await pilot.press("v")
        await loaded(app, pilot)
        ref = cursor(app)
        stats = panel(app).session.results[("weights", ref.shard, "proj.weight")]
        full = scale.repeat_interleave(128, 0).repeat_interleave(128, 1)[:200, :130]
        want = weight.double() * full.double()
        assert stats.max == pytest.approx(float(weight.float().max()))
        assert stats.dequantized.max == pytest.approx(float(want.max()), rel=1e-9)
        assert stats.dequantized.mean == pytest.approx(float(want.mean()), rel=1e-9)
        shown = plain(panel(app).query_one("#values-result"))
        assert "dequantized values" in shown and "weight_scale_inv" in shown
