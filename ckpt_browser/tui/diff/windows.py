"""The diff's windows: keys (`?`), problems and notes (`p`), the training state (`i`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text

from ckpt_browser.escape import printable
from ckpt_browser.report.diff import state_lines
from ckpt_browser.tui.common.help import HelpScreen
from ckpt_browser.tui.common.modals import TextModal
from ckpt_browser.tui.common.problems import problems_text
from ckpt_browser.tui.diff.rows import LABELS, NOT_COMPARED, UNREADABLE
from ckpt_browser.tui.keys import DIFF
from ckpt_browser.values.diff import Side

if TYPE_CHECKING:
    from ckpt_browser.values.state_diff import StateDiff

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


def _statuses() -> Table:
    table = Table(title="status column", box=None, padding=(0, 2), title_justify="left")
    table.add_column("status", style="bold", no_wrap=True)
    table.add_column("meaning")
    for word, what in STATUS_WORDS:
        table.add_row(word, what)
    return table


class DiffHelpScreen(HelpScreen):
    def __init__(self) -> None:
        super().__init__(DIFF, "ckpt-browser diff: keys", extra=(Text(), _statuses()),
                         note="Sharding is not a difference: tensors are paired by name. Values "
                              "are read only on request, block by block.")


class TextScreen(TextModal):
    """A scrollable window of text; the keys that open one (p, i) close it."""

    def __init__(self, title: str, body: Text) -> None:
        super().__init__(title, body, closes=("p", "i"))


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


def state_body(state: StateDiff | None) -> Text:
    """The training-state comparison, one fact a line."""
    if state is None:
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
