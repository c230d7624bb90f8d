"""NO_COLOR=1 and 16-colour terminals: every status stays readable. Textual greys each colour to
its brightness under NO_COLOR, so red text became #3b3b3b on #1b1b1b (contrast 1.5) and
`! MISSING` and the error line vanished; a 16-colour terminal (TERM=xterm or screen, here
TEXTUAL_COLOR_SYSTEM=standard) turned the footer's keys into bright red on bright black
(contrast 1.0), so there the app draws with the terminal's own palette (xterm's, to measure)."""

from __future__ import annotations

import io

import pytest
from rich.color import Color
from rich.console import Console
from rich.terminal_theme import DEFAULT_TERMINAL_THEME as XTERM

from tests.tui.conftest import loaded


def _luminance(colour) -> float:
    def channel(c: int) -> float:
        c = c / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = colour
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def contrasts(app) -> list[tuple[str, float]]:
    """(text, contrast ratio) of every segment of text on screen; a terminal's own colours
    (ANSI numbers, its default foreground and background) as xterm's palette has them."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor", legacy_windows=False)
    found = []
    for segment in console.render(app.screen._compositor.render_update(full=True)):
        style = segment.style
        if not segment.text.strip() or style is None:
            continue
        fg = (style.color or Color.default()).get_truecolor(XTERM, foreground=True)
        bg = (style.bgcolor or Color.default()).get_truecolor(XTERM, foreground=False)
        if style.reverse:
            fg, bg = bg, fg
        light, dark = sorted((_luminance(fg), _luminance(bg)), reverse=True)
        found.append((segment.text, (light + 0.05) / (dark + 0.05)))
    return found


def readable(app, word: str) -> float:
    """The lowest contrast of the segments that hold `word` (fails if none does)."""
    hits = [c for text, c in contrasts(app) if word in text]
    assert hits, f"{word!r} is not on screen"
    return min(hits)


TERMINALS = {"colour": {}, "NO_COLOR": {"NO_COLOR": "1"},
             "16 colours": {"TEXTUAL_COLOR_SYSTEM": "standard"},
             # both at once (NO_COLOR=1 TERM=xterm) drew black on black
             "NO_COLOR, 16 colours": {"NO_COLOR": "1", "TEXTUAL_COLOR_SYSTEM": "standard"}}


def terminal(monkeypatch, kind: str) -> None:
    for var, value in TERMINALS[kind].items():
        monkeypatch.setenv(var, value)


@pytest.mark.parametrize("kind", TERMINALS)
async def test_bad_states_readable_on_every_terminal(sample_app, monkeypatch, kind):
    terminal(monkeypatch, kind)
    app = sample_app("tiny-llama-damaged")
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        assert app.no_color is kind.startswith("NO_COLOR")
        assert (app.theme == "ansi-dark") is (kind == "16 colours")
        for word in ("MISSING", "DAMAGED", "error(s)", "BROKEN"):
            assert readable(app, word) >= 4.5, word  # WCAG AA for normal text
        for word in ("Filter", "Resume", "Quit"):  # the footer's keys and what they do
            assert readable(app, word) >= 4.5, word


@pytest.mark.parametrize("kind", TERMINALS)
async def test_the_cursor_row_is_readable_on_every_terminal(sample_app, monkeypatch, kind):
    """The highlighted row, its name and the columns after it (dim elsewhere): Textual's
    cursor was light text on $primary (3.8, and 2.5 for a dim column)."""
    terminal(monkeypatch, kind)
    app = sample_app()
    async with app.run_test(size=(120, 24)) as pilot:
        await loaded(app, pilot)
        for key in ("down", "down", "right", "down"):  # lm_head.weight, columns shown
            await pilot.press(key)
            await loaded(app, pilot)
        assert readable(app, "lm_head.weight") >= 4.5
        assert readable(app, "[128, 32]") >= 4.5 and readable(app, "16.0 KiB") >= 4.5


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


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_readme_screenshots_no_color_16_colours(snap_compare, sample_app, monkeypatch, size):
    """The README's screenshots: the damaged sample under NO_COLOR=1 on a 16-colour terminal
    (TERM=xterm), at the design size and at 120x40, the resume window open."""
    for var, value in TERMINALS["NO_COLOR, 16 colours"].items():
        monkeypatch.setenv(var, value)
    app = sample_app("tiny-llama-damaged")

    async def run_before(pilot):
        await loaded(pilot.app, pilot)
        await pilot.press("down", "down", "r")
        await loaded(pilot.app, pilot)

    assert snap_compare(app, terminal_size=size, run_before=run_before)
