"""`d` in the browser: the diff of the open checkpoint against another, in the same app, and
q back to the browser where it was."""

from __future__ import annotations

from ckpt_browser.producers.layout import open_layout
from ckpt_browser.producers.recognise import find_checkpoints
from ckpt_browser.tui.app import make_app
from ckpt_browser.tui.browse.screen import BrowseScreen
from ckpt_browser.tui.browse.timeline import TimelineScreen
from ckpt_browser.tui.common.modals import PathPrompt
from ckpt_browser.tui.diff.panes import DiffSummary
from ckpt_browser.tui.diff.screen import DiffScreen
from tests.tui.conftest import SAMPLES, loaded, plain


async def diffed(app, pilot) -> str:
    """Wait for the diff to pair its names; its summary text."""
    assert isinstance(app.screen, DiffScreen), app.screen_stack
    await loaded(app, pilot)
    assert app.screen.result is not None
    return plain(app.screen.query_one(DiffSummary))


async def test_d_in_a_run_folder_picks_the_other_checkpoint(monkeypatch):
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    folder = str(SAMPLES / "hf-run3")
    entries = find_checkpoints(folder)
    app = make_app(open_layout(entries[0].path), (folder, entries))
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        await pilot.press("escape")  # the picker opens first on a folder of checkpoints
        await pilot.press("d")
        assert isinstance(app.screen, TimelineScreen) and app.screen.compare
        await pilot.press("down", "enter")  # checkpoint-4
        summary = await diffed(app, pilot)
        assert "checkpoint-6" in summary and "checkpoint-4" in summary
        assert "step 6" in summary and "step 4" in summary
        await pilot.press("q")  # back to the browser, which is still on checkpoint-6
        assert isinstance(app.screen, BrowseScreen) and app.is_running
        assert app.first.model.layout.path.endswith("checkpoint-6")


async def test_d_on_a_single_checkpoint_asks_for_a_path(sample_app):
    app = sample_app("tiny-llama-run/checkpoint-6")
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        await pilot.press("d")
        assert isinstance(app.screen, PathPrompt)
        await pilot.press(*"tiny-llama-run/checkpoint-3", "enter")
        summary = await diffed(app, pilot)
        assert "A  tiny-llama-run/checkpoint-6" in summary
        assert "B  tiny-llama-run/checkpoint-3" in summary
        await pilot.press("q")
        assert isinstance(app.screen, BrowseScreen) and app.is_running


async def test_a_path_that_is_no_checkpoint_is_said_in_the_app(sample_app):
    app = sample_app("tiny-llama-run/checkpoint-6")
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        await pilot.press("d", *"no-such-folder", "enter")
        await loaded(app, pilot)
        screen = app.screen
        assert isinstance(screen, DiffScreen) and app.is_running
        assert "no-such-folder" in plain(screen.query_one(DiffSummary))
        await pilot.press("q")
        assert isinstance(app.screen, BrowseScreen)
