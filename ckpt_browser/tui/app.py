"""The one App: the browse screen and the diff screen run in it, so a diff can be opened
from the browser and closed back to it. The App owns what both share: the stylesheet, the
command palette and the one handler for a worker that failed."""

from __future__ import annotations

import os
from collections.abc import Iterable

from textual.app import App, SystemCommand
from textual.screen import Screen
from textual.worker import Worker

from ckpt_browser.escape import printable
from ckpt_browser.model import Layout
from ckpt_browser.tui.keys import Key


class CkptApp(App[int]):
    TITLE = "ckpt-browser"
    CSS_PATH = ["common.tcss", "browse/browse.tcss", "diff/diff.tcss"]

    def __init__(self, first: Screen) -> None:
        super().__init__()
        self.first = first
        self.title = first.TITLE or self.TITLE  # "ckpt-browser diff" when the diff runs alone

    def on_mount(self) -> None:
        # A 16-colour terminal turns the theme's greys and oranges into its nearest ANSI
        # colours: the footer's keys became bright red on bright black (contrast 1.0). The
        # ANSI theme draws with the terminal's own palette, which its user made readable.
        # Not under NO_COLOR: Textual greys every colour by its brightness there, and the
        # terminal's own palette has none to grey (it came out black on black, 30;40).
        if sixteen_colours(self) and not self.no_color:
            self.theme = "ansi-dark"

    def get_default_screen(self) -> Screen:
        return self.first

    def worker_failed(self, worker: Worker) -> None:
        """Every failed worker ends here (a bug, not a bad file: those are findings): the
        screen or panel that ran it repairs its view, and the message is shown in the app,
        which keeps running."""
        error = worker.error
        why = printable(f"{type(error).__name__}: {error}")[:300]
        recover = getattr(worker.node, "recover", None)
        if recover is not None:
            recover(worker, why)
        title = getattr(worker.node, "failure_title", "Error")
        self.notify(f"Stopped: {why}", title=title, severity="error", timeout=15, markup=False)

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield from palette_commands(screen, getattr(screen, "KEYS", ()))


def sixteen_colours(app: App) -> bool:
    """A terminal of 16 colours: as Rich finds it from TERM and COLORTERM (TERM=xterm or
    screen), or as TEXTUAL_COLOR_SYSTEM=standard says. A headless app (the tests) has no
    terminal to ask."""
    if os.environ.get("TEXTUAL_COLOR_SYSTEM") == "standard":
        return True
    return not app.is_headless and app.console.color_system in ("standard", "windows")


def palette_commands(screen: Screen, keys: Iterable[Key]) -> Iterable[SystemCommand]:
    """The palette's entries: each key with a palette title, with its help and its key,
    when the screen offers that action now."""
    for k in keys:
        if not k.palette or not k.action or k.action.startswith("app."):
            continue
        if screen.check_action(k.action, ()) is False:
            continue
        yield SystemCommand(k.palette, f"{k.help.replace('`', '')} ({k.shown})",
                            getattr(screen, f"action_{k.action}"))


def make_app(layout: Layout, timeline: tuple[str, list] | None = None) -> CkptApp:
    """The browser on a checkpoint (and the folder of checkpoints it came from)."""
    from ckpt_browser.tui.browse.screen import BrowseScreen

    return CkptApp(BrowseScreen(layout, timeline))


def make_diff_app(a, b, opts=None) -> CkptApp:
    """`ckpt-browser A B`: the diff on its own."""
    from ckpt_browser.tui.diff.screen import DiffScreen

    return CkptApp(DiffScreen(a, b, opts))
