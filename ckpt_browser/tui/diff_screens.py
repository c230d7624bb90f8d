"""The diff's windows: keys (`?`), problems and notes (`p`), the training state (`i`)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ckpt_browser.report.diff import state_lines
from ckpt_browser.escape import printable
from ckpt_browser.tui.diff_rows import LABELS, NOT_COMPARED, UNREADABLE
from ckpt_browser.tui.screens.problems import problems_text
from ckpt_browser.values.diff import Side

KEYS = [
    ("up / down", "move in the table"),
    ("pgup / pgdn", "a page up / down (home / end: the first / last row)"),
    ("v", "compare the values of every tensor both sides have"),
    ("c", "compare the values of the highlighted tensor only"),
    ("escape", "cancel a comparison (what is compared stays) / close a window"),
    ("f", "filter by status: all, changed, then each status present"),
    ("s", "sort by name <-> largest max|diff| first"),
    ("t", "table: weights <-> training-state tensors (optimizer moments ...)"),
    ("i", "training state: step, epoch, learning rate, components, flags"),
    ("p", "problems found in A and B, notes on the comparison"),
    ("ctrl+p", "command palette: every action by name"),
    ("?", "this help"),
    ("q", "quit"),
]

STATUS_WORDS = [
    (LABELS["only_in_a"], "only in A (absent from B)"),
    (LABELS["only_in_b"], "only in B (absent from A)"),
    (LABELS["shape_changed"], "the shape differs (values are not compared)"),
    (LABELS["dtype_changed"], "the dtype differs (values compared as numbers)"),
    (LABELS["values_changed"], "same dtype and shape, values differ"),
    (LABELS["unchanged"], "same dtype, shape and values"),
    (NOT_COMPARED, "same dtype and shape; values not compared yet (v or c)"),
    (UNREADABLE, "the values could not be read (the details say why)"),
]


def _table(title: str, rows) -> Table:
    table = Table(title=title, box=None, padding=(0, 2), title_justify="left")
    table.add_column("key", style="bold", no_wrap=True)
    table.add_column("meaning")
    for key, what in rows:
        table.add_row(key, what)
    return table


class DiffHelpScreen(ModalScreen[None]):
    BINDINGS = [("escape", "dismiss", "Close"), ("question_mark", "dismiss", "Close"),
                ("q", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="modal-box"):
            yield Static(_table("ckpt-browser diff: keys", KEYS))
            yield Static(_table("status column", STATUS_WORDS), classes="gap")
            yield Static("Sharding is not a difference: tensors are paired by name. Values "
                         "are read only on request, block by block.", classes="dim-note")


class TextScreen(ModalScreen[None]):
    """A scrollable window of text; the keys that open one (p, i) close it."""

    BINDINGS = [("escape", "dismiss", "Close"), ("q", "dismiss", "Close"),
                ("p", "dismiss", "Close"), ("i", "dismiss", "Close")]

    def __init__(self, title: str, body: Text) -> None:
        super().__init__()
        self.title_text, self.body = title, body

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="modal-box"):
            yield Static(Text(self.title_text, style="bold"))
            yield Static(self.body, classes="text-body")


def problems_body(a: Side, b: Side, notes: list[str]) -> Text:
    text = Text()
    for which, side in (("A", a), ("B", b)):
        text.append(f"{which}: {printable(side.path)} ({len(side.problems)} problem(s))\n",
                    style="bold")
        text.append_text(problems_text(side.problems))
        text.append("\n")
    text.append("Notes on the comparison\n", style="bold")
    text.append("\n".join(printable(n) for n in notes) if notes else "none")
    return text


def state_body(state: dict) -> Text:
    """The training-state comparison, one fact a line."""
    if not state:
        return Text("No training-state comparison: one side (or both) has no training state, "
                    "or it could not be read (p lists problems).")
    text = Text()
    for line, role in state_lines(state, every_component=True):
        if role == "flag":
            text.append(f"! {printable(line)}\n", style="bold")
        elif role == "note":
            text.append(f"note: {printable(line)}\n", style="dim")
        else:
            text.append(printable(line) + "\n")
    return text
