"""A folder of checkpoints: pick one, newest first."""

from __future__ import annotations

import time

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from ckpt_browser.escape import printable
from ckpt_browser.tui.common.modals import CloseableModal


def entry_text(e) -> Text:
    step = f"{e.counter}{e.step}" if e.step is not None else ""
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(e.mtime))
    return Text.assemble((f"{printable(e.name):<34}", "bold"), f" {step:<13} ", (when, "dim"),
                         (f"  {e.format}", "dim"))


class TimelineScreen(CloseableModal[tuple[str, str] | None]):
    """Returns ("open" or "diff", the chosen checkpoint's path) through dismiss(), or None."""

    also_closes = ("c",)
    BINDINGS = [("d", "diff", "Diff against this")]

    def __init__(self, folder: str, entries, compare: bool = False) -> None:
        super().__init__()
        self.folder = folder
        self.entries = entries
        self.compare = compare  # Enter diffs rather than opens

    def compose(self) -> ComposeResult:
        with Vertical(id="timeline-box", classes="modal-box"):
            what = "Enter diffs one against the open checkpoint" if self.compare else \
                "Enter opens one, d diffs it against the open one"
            n = len(self.entries)
            yield Static(Text(f"{n} checkpoint{'s' if n != 1 else ''} in "
                              f"{printable(self.folder)}, newest first: {what}", style="bold"))
            yield OptionList(*[Option(entry_text(e), id=str(i))
                               for i, e in enumerate(self.entries)], id="timeline-list")

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(("diff" if self.compare else "open", self.entries[int(event.option.id)].path))

    def action_diff(self) -> None:
        index = self.query_one(OptionList).highlighted
        if index is not None:
            self.dismiss(("diff", self.entries[index].path))
