"""A reader that raises (a bug, not a bad file) becomes an in-app error where "reading…" was,
and the app stays browsable: never an endless "reading…"."""

from __future__ import annotations

from textual.worker import WorkerFailed

import ckpt_browser.analysis.components as components
import ckpt_browser.tui.browse.screen as browser_app
import ckpt_browser.tui.diff.screen as diff_app_module
from ckpt_browser.analysis.opened import open_path
from ckpt_browser.tui.app import make_diff_app
from ckpt_browser.tui.browse.summary import Summary
from ckpt_browser.tui.browse.tree import CheckpointTree
from ckpt_browser.tui.diff.panes import DiffSummary
from ckpt_browser.values.diff import Options, side_of
from tests.tui.conftest import SAMPLES, plain

SIZE = (100, 30)


def boom(*args, **kwargs):
    raise RuntimeError("boom [not markup")


async def until(app, pilot, shown) -> None:
    """Let the workers finish (a failed one raises from wait_for_complete) until the screen
    shows what `shown` looks for: the screen's state, never a clock."""
    for _ in range(200):
        try:
            await app.workers.wait_for_complete()
        except WorkerFailed:
            pass
        await pilot.pause()
        if shown():
            return
    raise AssertionError("the screen never settled")


def labels(tree) -> str:
    return "\n".join(str(n.label) for n in tree.root.children)


async def test_headers_failing_say_so_and_the_app_stays_usable(sample_app, monkeypatch):
    monkeypatch.setattr(browser_app, "iter_tagged", boom)
    app = sample_app()
    async with app.run_test(size=SIZE) as pilot:
        await until(app, pilot, lambda: "stopped" in plain(app.query_one(Summary)))
        summary = plain(app.query_one(Summary))
        assert "stopped: RuntimeError: boom [not markup" in summary
        assert "reading…" not in summary
        assert "training state: not read: RuntimeError" in summary
        tree = app.query_one(CheckpointTree)
        assert "NOT READ" in labels(tree) and "reading" not in labels(tree)
        await pilot.press("t")  # the training view says why instead of waiting
        await pilot.pause()
        assert "could not be read: RuntimeError: boom" in labels(tree)
        await pilot.press("f")
        await pilot.pause()
        assert app.is_running


async def test_training_state_failing_leaves_the_weights_browsable(sample_app, monkeypatch):
    monkeypatch.setattr(components, "training_state", boom)
    app = sample_app()
    async with app.run_test(size=SIZE) as pilot:
        await until(app, pilot, lambda: "not read" in plain(app.query_one(Summary)))
        summary = plain(app.query_one(Summary))
        assert "training state: not read: RuntimeError: boom" in summary
        assert "reading…" not in summary
        tree = app.query_one(CheckpointTree)
        assert "model.safetensors" in labels(tree) and "NOT READ" not in labels(tree)
        await pilot.press("t")
        await pilot.pause()
        assert "could not be read: RuntimeError: boom" in labels(tree)


async def test_diff_pairing_failing_is_shown(monkeypatch):
    monkeypatch.chdir(SAMPLES)
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    monkeypatch.setattr(diff_app_module, "load_diff", boom)
    app = make_diff_app(side_of(open_path("tiny-llama-run/checkpoint-3")),
                        side_of(open_path("tiny-llama-run/checkpoint-6")), Options())
    async with app.run_test(size=(80, 24)) as pilot:
        await until(app, pilot, lambda: "could not" in plain(app.query_one(DiffSummary)))
        assert "could not pair the tensor names: RuntimeError: boom [not markup" in \
            plain(app.query_one(DiffSummary))
        assert app.is_running
