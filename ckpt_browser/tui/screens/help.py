"""`?`: the keys, in words."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

KEYS = [
    ("up / down", "move in the tree"),
    ("right / left", "expand / collapse (left again: go to the parent)"),
    ("enter / space", "toggle the highlighted node"),
    ("m", "switch the tree: by file <-> by module"),
    ("t", "training state: optimizer, scheduler, RNG, data, progress, scaler"),
    ("r", "resume check: the verdict, the seven components, findings (Enter shows the file)"),
    ("c", "another checkpoint of the same folder (when opened on a folder of them)"),
    ("/", "filter tensor names (substring, or glob such as layers.*.q_proj*)"),
    ("v", "values of the highlighted tensor: min, max, mean, std, NaN/Inf, zeros, histogram"),
    ("escape", "stop reading values / clear the filter / close this window"),
    ("p", "list every problem found"),
    ("tab", "move focus between the tree and the details"),
    ("ctrl+p", "command palette: every action by name"),
    ("z", "quiz: sharding and resumable training, with questions about this checkpoint"),
    ("?", "this help"),
    ("q", "quit"),
]


class HelpScreen(ModalScreen[None]):
    BINDINGS = [("escape", "dismiss", "Close"), ("question_mark", "dismiss", "Close"),
                ("q", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        table = Table(title="ckpt-browser keys", box=None, padding=(0, 2))
        table.add_column("key", style="bold", no_wrap=True)
        table.add_column("action")
        for key, what in KEYS:
            table.add_row(key, what)
        with VerticalScroll(id="help-box", classes="modal-box"):
            yield Static(table)
            yield Static("Only v reads tensor bytes (one tensor, in blocks). Nothing here runs "
                         "code from the checkpoint.", classes="dim-note")
