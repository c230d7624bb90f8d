"""The run picker (c): one row per checkpoint with its step, resume verdict and framework, in
columns that fit 80 columns; the verdicts fill in from a worker. And c on one checkpoint."""

from __future__ import annotations

import threading

from ckpt_browser.producers.layout import open_layout
from ckpt_browser.producers.recognise import find_checkpoints
from ckpt_browser.tui.app import make_app
from ckpt_browser.tui.browse.timeline import HINT, TimelineScreen
from tests.tui.conftest import SAMPLES, loaded


def run_app(monkeypatch, folder: str = "hf-run3"):
    monkeypatch.chdir(SAMPLES)  # relative paths: no absolute path on screen
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    entries = find_checkpoints(folder)
    return make_app(open_layout(entries[0].path), (folder, entries))


async def picked(app, pilot):
    """Wait until the picker is on top and holds every verdict it checks (its worker starts
    only once the picker is mounted, after the browser's own first workers)."""
    for _ in range(50):
        await loaded(app, pilot)
        screen = app.screen
        if isinstance(screen, TimelineScreen) and None not in screen.verdicts:
            break
    await pilot.pause()


def rows(screen) -> list[str]:
    listing = screen.query_one("#timeline-list")
    return [listing.get_option_at_index(i).prompt.plain for i in range(listing.option_count)]


async def test_rows_fit_80_columns_with_step_verdict_and_framework(monkeypatch):
    app = run_app(monkeypatch)
    async with app.run_test(size=(80, 24)) as pilot:
        await picked(app, pilot)
        screen = app.screen
        assert isinstance(screen, TimelineScreen)
        width = screen.query_one("#timeline-list").scrollable_content_region.width
        lines = rows(screen)
        assert [line.split()[:4] for line in lines] == [
            ["checkpoint-6", "step", "6", "EXACT"], ["checkpoint-4", "step", "4", "EXACT"],
            ["checkpoint-2", "step", "2", "EXACT"]]
        assert all(line.rstrip().endswith("hf-trainer") for line in lines)
        assert all(len(line) <= width for line in lines), (width, lines)
        listing = screen.query_one("#timeline-list")
        assert listing.virtual_size.height == 3  # one line per checkpoint: nothing wrapped
        hint = screen.query_one("#timeline-hint").render()
        assert "d diffs it against the open one" in str(hint) and HINT in str(hint)


async def test_verdicts_fill_in_as_each_is_checked(monkeypatch):
    """Held on an Event, the worker has checked nothing: every row says "…"; released, the
    rows show each verdict."""
    import ckpt_browser.analysis.resume as resume

    release = threading.Event()
    real = resume.resume_report

    def held(path, world_size=None):
        assert release.wait(10)
        return real(path, world_size)

    monkeypatch.setattr(resume, "resume_report", held)
    app = run_app(monkeypatch)
    async with app.run_test(size=(80, 24)) as pilot:
        while not isinstance(app.screen, TimelineScreen):
            await pilot.pause()
        await pilot.pause()
        assert all(line.split()[3] == "…" for line in rows(app.screen)), rows(app.screen)
        release.set()
        await picked(app, pilot)
        assert [line.split()[3] for line in rows(app.screen)] == ["EXACT"] * 3


async def test_c_on_a_single_checkpoint_says_so(sample_app):
    """c was blocked by check_action and did nothing; now it answers with a notice."""
    app = sample_app("tiny-llama-release")
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        await pilot.press("c")
        await pilot.pause()
        assert not isinstance(app.screen, TimelineScreen)
        assert [n.message for n in app._notifications] == [
            "This is a single checkpoint, not a folder of them."]


def test_picker_80x24(snap_compare, monkeypatch):
    app = run_app(monkeypatch)
    assert snap_compare(app, terminal_size=(80, 24),
                        run_before=lambda pilot: picked(pilot.app, pilot))
