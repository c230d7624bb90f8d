"""Each key is described once (tui/keys.py): the footer, the palette, the help window and the
README's key tables all come from it, so they cannot disagree."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ckpt_browser.tui.common.help import HelpScreen
from ckpt_browser.tui.keys import BROWSE, DIFF, readme_table
from tests.tui.conftest import loaded, plain

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_tables() -> list[str]:
    """The Markdown tables under the README's "Keys in the browser" heading."""
    text = README.read_text(encoding="utf-8")
    section = text.split("### Keys in the browser", 1)[1].split("\n## ", 1)[0]
    return [m.group(0).strip() for m in re.finditer(r"(?:^\|.*\|\n)+", section, re.M)]


def test_the_readme_key_tables_are_the_key_tables():
    assert readme_tables() == [readme_table(BROWSE), readme_table(DIFF)]


@pytest.mark.parametrize("keys", [BROWSE, DIFF], ids=["browse", "diff"])
def test_every_action_exists_and_every_key_is_explained(keys):
    from ckpt_browser.tui.browse.screen import BrowseScreen
    from ckpt_browser.tui.diff.screen import DiffScreen

    screen = BrowseScreen if keys is BROWSE else DiffScreen
    for k in keys:
        assert k.help, k
        if k.action and not k.action.startswith("app."):
            assert hasattr(screen, f"action_{k.action}"), k


async def test_footer_palette_and_help_come_from_the_table(sample_app):
    app = sample_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        footer = {b.description: b.key for b in app.screen.BINDINGS if b.show}
        assert footer == {k.footer: (k.bind or k.shown) for k in BROWSE if k.footer}
        titles = {c.title for c in app.get_system_commands(app.screen)}
        offered = {k.palette for k in BROWSE if k.palette}
        # Cancel values only while reading; c is offered on one checkpoint too (it says so)
        assert titles >= offered - {"Cancel values"}
        assert "Cancel values" not in titles
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        shown = plain(app.screen.query_one(".text-body"))
        for k in BROWSE:
            if not k.palette_only:
                assert k.shown in shown


def footer_line(app) -> str:
    return app.screen._compositor.render_strips()[-1].text


async def footer_after(app, pilot, *keys: str) -> str:
    for key in keys:
        await pilot.press(key)
    await app.workers.wait_for_complete()
    await pilot.pause()
    return footer_line(app)


def shown(line: str, labels) -> list[str]:
    """The labels of BROWSE's footer keys that `line` shows, each with its key before it."""
    out = []
    for k in BROWSE:
        if k.footer and f"{'esc' if k.shown == 'escape' else k.shown} {k.footer}" in line:
            out.append(k.footer)
    return out


@pytest.mark.parametrize("width", [80, 100])
async def test_the_footer_shows_the_focused_panes_keys_whole(sample_app, width):
    """80x24 is the design size: the footer shows, whole, the keys of the pane that has the
    focus (the table's sort in the table), says where the rest are, and keeps quit."""
    from ckpt_browser.tui.browse.screen import FOOTER

    app = sample_app()
    async with app.run_test(size=(width, 24)) as pilot:
        await loaded(app, pilot)
        assert shown(footer_line(app), BROWSE) == list(FOOTER["tree"])
        assert shown(await footer_after(app, pilot, "l"), BROWSE) == list(FOOTER["table"])
        assert shown(await footer_after(app, pilot, "tab"), BROWSE) == list(FOOTER["details"])
        assert shown(await footer_after(app, pilot, "slash"), BROWSE) == ["Clear"]
        line = await footer_after(app, pilot, "w", "e", "i", "g", "h", "t", "enter")
        assert "n Next" in line and "s Sort" in line and "q Quit" in line
        line = await footer_after(app, pilot, "escape", "l")
        assert "n Next" not in line and "s Sort" not in line and "l Table" in line


async def test_keys_left_out_of_the_footer_still_work(sample_app):
    from ckpt_browser.tui.common.problems import ProblemsScreen
    from ckpt_browser.tui.common.quiz import QuizScreen

    app = sample_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        line = footer_line(app)
        assert "Problems" not in line and "Quiz" not in line
        await pilot.press("p")
        assert isinstance(app.screen, ProblemsScreen)
        await pilot.press("escape")
        await pilot.press("z")
        assert isinstance(app.screen, QuizScreen)


async def test_a_wide_footer_adds_the_other_screens(sample_app):
    app = sample_app()
    async with app.run_test(size=(160, 40)) as pilot:
        await loaded(app, pilot)
        line = footer_line(app)
        for word in ("p Problems", "z Quiz", "d Diff", "e Export", "l Table", "q Quit"):
            assert word in line
        assert "c Checkpoints" not in line  # one checkpoint, not a folder of them


async def test_a_window_s_footer_shows_its_own_keys(sample_app):
    """Under a window the screen's keys do nothing: its footer says the window's instead."""
    app = sample_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        line = await footer_after(app, pilot, "r")  # the resume window
        assert "f All files" in line and "esc Close" in line and "Filter" not in line
        line = await footer_after(app, pilot, "escape", "p")  # the problems window
        assert "esc Close" in line and "Filter" not in line
        line = await footer_after(app, pilot, "escape")
        assert "/ Filter" in line
