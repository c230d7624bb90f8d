"""`p`: every problem, one per line, naming the file."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ckpt_browser.escape import printable


def problems_text(problems) -> Text:
    if not problems:
        return Text("No problems found.")
    text = Text()
    for p in problems:
        text.append(f"{p.severity.upper():8}", style="bold red" if p.severity == "error" else "bold")
        text.append(f"{printable(p.file or '-')}: ", style="bold")
        text.append(printable(p.message) + "\n")
    return text


class ProblemsScreen(ModalScreen[None]):
    BINDINGS = [("escape", "dismiss", "Close"), ("p", "dismiss", "Close"), ("q", "dismiss", "Close")]

    def __init__(self, problems) -> None:
        super().__init__()
        self.problems = problems

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="problems-box", classes="modal-box"):
            yield Static(Text(f"Problems ({len(self.problems)})", style="bold"))
            yield Static(problems_text(self.problems), id="problems-list")
