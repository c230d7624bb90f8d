"""The README's text copy of the screen is rendered here, so it cannot go stale: the browser at
80x24 on the bundled sample as `ckpt-browser` with no PATH opens it, one shard expanded.

After an intended change of the screen:
    CKPT_BROWSER_UPDATE_README=1 python -m pytest tests/tui/test_readme_screen.py
rewrites the block between the markers (review the diff and commit README.md).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from ckpt_browser.producers.layout import open_layout
from ckpt_browser.samples import SHOWN_AS, default_sample
from ckpt_browser.tui.app import make_app
from tests.tui.conftest import loaded

README = Path(__file__).resolve().parents[2] / "README.md"
BEGIN = "<!-- screen: rendered by tests/tui/test_readme_screen.py -->"
END = "<!-- screen: end -->"
KEYS = ("down", "down", "right", "down")  # the first shard opened, its second tensor


async def screen_text() -> str:
    layout = dataclasses.replace(open_layout(default_sample()), shown_as=SHOWN_AS)
    app = make_app(layout)
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        for key in KEYS:
            await pilot.press(key)
            await loaded(app, pilot)
        lines = [strip.text.rstrip() for strip in app.screen._compositor.render_strips()]
    return "\n".join(lines).rstrip("\n")


def readme_block(text: str) -> str:
    return f"{BEGIN}\n```\n{text}\n```\n{END}"


async def test_readme_screen_is_the_rendered_screen(monkeypatch):
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    text = await screen_text()
    assert "bundled sample (tiny-llama-run/checkpoint-6)" in text  # not a site-packages path
    readme = README.read_text(encoding="utf-8")
    start, end = readme.index(BEGIN), readme.index(END) + len(END)
    if os.environ.get("CKPT_BROWSER_UPDATE_README"):
        README.write_text(readme[:start] + readme_block(text) + readme[end:], encoding="utf-8")
        return
    assert readme[start:end] == readme_block(text), (
        "the README's screen is stale: CKPT_BROWSER_UPDATE_README=1 python -m pytest "
        "tests/tui/test_readme_screen.py rewrites it")


def test_no_path_opens_the_bundled_sample_under_its_name(monkeypatch):
    """`ckpt-browser` alone: the layout handed to the app is named, a given PATH is not."""
    import ckpt_browser.tui.app as tui_app
    from ckpt_browser.cli import main

    opened = []

    class NotRun:
        return_code = 0

        def run(self):
            pass

    monkeypatch.setattr(tui_app, "make_app", lambda layout, timeline=None: opened.append(layout)
                        or NotRun())
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)  # as in a terminal
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    assert main([]) == 0
    assert main([default_sample()]) == 0
    assert [layout.shown_as for layout in opened] == [SHOWN_AS, ""]
