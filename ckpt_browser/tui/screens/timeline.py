"""A folder of checkpoints: pick one, newest first."""

from __future__ import annotations

import time

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from ckpt_browser.escape import printable


def entry_text(e) -> Text:
    step = f"{e.counter}{e.step}" if e.step is not None else ""
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(e.mtime))
    return Text.assemble((f"{printable(e.name):<34}", "bold"), f" {step:<13} ", (when, "dim"),
                         (f"  {e.format}", "dim"))


class TimelineScreen(ModalScreen[str | None]):
    """Returns the chosen checkpoint's path through dismiss()."""

    BINDINGS = [("escape", "dismiss_none", "Close")]

    def __init__(self, folder: str, entries) -> None:
        super().__init__()
        self.folder = folder
        self.entries = entries

    def compose(self) -> ComposeResult:
        with Vertical(id="timeline-box", classes="modal-box"):
            yield Static(Text(f"{len(self.entries)} checkpoints in {printable(self.folder)}, "
                              "newest first: Enter opens one", style="bold"))
            yield OptionList(*[Option(entry_text(e), id=str(i))
                               for i, e in enumerate(self.entries)], id="timeline-list")

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.entries[int(event.option.id)].path)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
