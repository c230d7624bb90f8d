"""NO_COLOR=1: every status stays readable. Textual greys each colour to its brightness, so red
text became #3b3b3b on #1b1b1b (contrast 1.5) and `! MISSING` and the error line vanished."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from tests.tui.conftest import loaded


def _luminance(colour) -> float:
    def channel(c: int) -> float:
        c = c / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = colour.get_truecolor()
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def contrasts(app) -> list[tuple[str, float]]:
    """(text, contrast ratio) of every segment on screen that has both colours set."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor", legacy_windows=False)
    found = []
    for segment in console.render(app.screen._compositor.render_update(full=True)):
        style = segment.style
        if not segment.text.strip() or style is None or style.color is None \
                or style.bgcolor is None:
            continue
        fg, bg = (style.bgcolor, style.color) if style.reverse else (style.color, style.bgcolor)
        light, dark = sorted((_luminance(fg), _luminance(bg)), reverse=True)
        found.append((segment.text, (light + 0.05) / (dark + 0.05)))
    return found


def readable(app, word: str) -> float:
    """The lowest contrast of the segments that hold `word` (fails if none does)."""
    hits = [c for text, c in contrasts(app) if word in text]
    assert hits, f"{word!r} is not on screen"
    return min(hits)


@pytest.mark.parametrize("colour", [True, False], ids=["colour", "NO_COLOR"])
async def test_bad_states_readable_with_and_without_colour(sample_app, monkeypatch, colour):
    if not colour:
        monkeypatch.setenv("NO_COLOR", "1")
    app = sample_app("tiny-llama-damaged")
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        assert app.no_color is not colour
        for word in ("MISSING", "DAMAGED", "error(s)", "BROKEN"):
            assert readable(app, word) >= 4.5, word  # WCAG AA for normal text


def test_no_color_damaged_80x24(snap_compare, sample_app, monkeypatch):
    """The damaged sample under NO_COLOR: the error line and BROKEN in reverse video, `!
    DAMAGED` and `! MISSING` in the tree, the focused panel drawn with a heavy line."""
    monkeypatch.setenv("NO_COLOR", "1")
    app = sample_app("tiny-llama-damaged")

    async def run_before(pilot):
        await loaded(pilot.app, pilot)
        await pilot.press("down", "down")
        await loaded(pilot.app, pilot)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)
