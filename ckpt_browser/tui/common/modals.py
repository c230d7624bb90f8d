"""The windows over a screen: one base that closes on Esc, q and the key that opened it,
and a text window on top of it."""

from __future__ import annotations

from typing import Generic, TypeVar

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Input, Static

from ckpt_browser.tui.keys import Key

T = TypeVar("T")


class CloseableModal(ModalScreen[T], Generic[T]):
    """Esc and q close it (q must never quit the app from a window), and so does the key
    that opened it (`also_closes`). Its own footer covers the screen's below, whose keys do
    not work while it is open: it shows the window's keys (`esc Close`, its BINDINGS)."""

    also_closes: tuple[str, ...] = ()

    def __init__(self) -> None:
        super().__init__()
        for key in ("escape", "q", *self.also_closes):
            self._bindings.bind(key, "close", "Close", show=key == "escape")

    def on_mount(self) -> None:
        self.mount(Footer(compact=True))

    def action_close(self) -> None:
        self.dismiss(None)


class TextModal(CloseableModal[None]):
    """A scrollable window: a bold title, a body, an optional note under it."""

    def __init__(self, title: str, body: RenderableType, *, closes: tuple[str, ...] = (),
                 note: str = "", box_id: str | None = None, body_id: str | None = None) -> None:
        self.also_closes = closes
        super().__init__()
        self.title_text, self.body, self.note = title, body, note
        self.box_id, self.body_id = box_id, body_id

    def compose(self) -> ComposeResult:
        with VerticalScroll(id=self.box_id, classes="modal-box"):
            if self.title_text:
                yield Static(Text(self.title_text, style="bold"), classes="modal-title")
            yield Static(self.body, id=self.body_id, classes="text-body")
            if self.note:
                yield Static(self.note, classes="dim-note")


class PathPrompt(CloseableModal[str | None]):
    """One line to type a path into; Enter returns it, Esc closes with None."""

    def __init__(self, question: str,
                 placeholder: str = "path to a checkpoint folder or file") -> None:
        super().__init__()
        self.question, self.placeholder = question, placeholder

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="modal-box"):
            yield Static(Text(self.question, style="bold"))
            yield Input(placeholder=self.placeholder, id="path-prompt")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)


def keys_table(title: str, keys: tuple[Key, ...]) -> Table:
    """The help window's table, from the screen's key table."""
    table = Table(title=title, box=None, padding=(0, 2), title_justify="left")
    table.add_column("key", style="bold", no_wrap=True)
    table.add_column("action")
    for k in keys:
        if not k.palette_only:
            table.add_row(k.shown, Text(k.help.replace("`", "")))
    return table

