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
        footer = {b.key: b.description for b in app.screen.BINDINGS if b.show}
        assert footer == {(k.bind or k.shown): k.footer for k in BROWSE if k.footer}
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
