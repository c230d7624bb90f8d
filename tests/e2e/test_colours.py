"""Colour is only a hint, in every combination a terminal can be set up with: NO_COLOR, TERM
(xterm, xterm-256color, linux, screen, dumb) and COLORTERM. The app runs in tmux, as over SSH,
and every cell holding text is read back with the SGR codes tmux keeps for it: no text may be
drawn in its own background colour (NO_COLOR with TERM=xterm drew nearly every cell 30;40,
black on black)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.tmux import TMUX, Terminal

SAMPLES = Path(__file__).resolve().parents[2] / "sample_checkpoints"
pytestmark = pytest.mark.skipif(TMUX is None and not os.environ.get("CI"),
                                reason="tmux not installed (CI installs it)")

SETUPS = [{"TERM": term, **extra} for term in ("xterm", "xterm-256color", "linux", "screen",
                                                "dumb")
          for extra in ({}, {"NO_COLOR": "1"})]
SETUPS.append({"TERM": "xterm-256color", "COLORTERM": "truecolor"})
SETUPS.append({"TERM": "xterm", "COLORTERM": "truecolor", "NO_COLOR": "1"})
SGR = re.compile(r"\x1b\[([0-9;:]*)m")


def _colour(params: list[str], i: int) -> tuple[object, int]:
    """A 38/48 colour starting at params[i] (the 5;n or 2;r;g;b after it), and how many
    parameters it took."""
    if params[i + 1:i + 2] == ["5"]:
        return ("index", int(params[i + 2])), 3
    if params[i + 1:i + 2] == ["2"]:
        return ("rgb", tuple(int(x) for x in params[i + 2:i + 5])), 5
    return DEFAULT_FG, 1


# a terminal's own default colours, as a dark terminal (the usual over SSH) has them: text in
# ANSI black on the default background is black on black there
DEFAULT_FG, DEFAULT_BG = ("index", 7), ("index", 0)


def cells(screen: str):
    """(character, foreground, background) of every cell with text, as a terminal keeps them;
    reverse video swaps the two, as a terminal draws it."""
    fg: object = DEFAULT_FG
    bg: object = DEFAULT_BG
    reverse = False
    for line in screen.splitlines():
        pos = 0
        for m in [*SGR.finditer(line), None]:
            end = m.start() if m else len(line)
            for ch in line[pos:end]:
                if ch.strip():
                    yield (ch, bg, fg) if reverse else (ch, fg, bg)
            if m is None:
                break
            pos = m.end()
            params = m.group(1).replace(":", ";").split(";") if m.group(1) else ["0"]
            i = 0
            while i < len(params):
                p = int(params[i] or 0)
                step = 1
                if p == 0:
                    fg, bg, reverse = DEFAULT_FG, DEFAULT_BG, False
                elif p == 7:
                    reverse = True
                elif p == 27:
                    reverse = False
                elif 30 <= p <= 37 or 90 <= p <= 97:
                    fg = ("index", p - 30 if p < 90 else p - 82)
                elif 40 <= p <= 47 or 100 <= p <= 107:
                    bg = ("index", p - 40 if p < 100 else p - 92)
                elif p == 39:
                    fg = DEFAULT_FG
                elif p == 49:
                    bg = DEFAULT_BG
                elif p in (38, 48):
                    colour, step = _colour(params, i)
                    if p == 38:
                        fg = colour
                    else:
                        bg = colour
                i += step


@pytest.mark.parametrize("env", SETUPS, ids=lambda e: "+".join(f"{k}={v}" for k, v in e.items()))
def test_no_text_in_its_own_background(env, tmp_path):
    term = Terminal(tmp_path / "rc")
    try:
        term.start(["tiny-llama-damaged"], cwd=SAMPLES, env=env)
        term.wait_for("MISSING model-00002-of-00003")  # the tree is read and drawn
        screen = term.screen(escapes=True)
        drawn = list(cells(screen))
        assert len(drawn) > 300, screen
        hidden = "".join(ch for ch, fg, bg in drawn if fg == bg)
        assert not hidden, f"{len(hidden)} characters drawn in their background colour: " \
                           f"{hidden[:80]!r}"
        term.keys("q")
        assert term.exit_code() == 0
    finally:
        term.close()
