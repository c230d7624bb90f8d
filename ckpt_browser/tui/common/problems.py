"""`p`: every problem, one per line, naming the file; an unsafe one says UNSAFE where the
others say their severity."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from ckpt_browser import alarms
from ckpt_browser.escape import printable
from ckpt_browser.report.words import SEVERITY_STYLE
from ckpt_browser.tui.common.modals import TextModal

MAX_SHOWN = 1_000  # problems drawn in the window; an index of 100,000 missing files has 200,000


def problems_text(problems) -> Text:
    if not problems:
        return Text("No problems found.")
    text = Text()
    for p in problems[:MAX_SHOWN]:
        text.append(f"{alarms.word(p):8}", style=SEVERITY_STYLE.get(p.severity, "bold"))
        text.append(f"{printable(p.file or '-')}: ", style="bold")
        text.append(printable(alarms.message(p)) + "\n")
    if len(problems) > MAX_SHOWN:
        text.append(f"... and {len(problems) - MAX_SHOWN:,} more (inspect --json lists them "
                    "all)\n", style="bold")
    return text


def notice(problems) -> tuple[str, str]:
    """The title ("UNSAFE", "Damaged", "UNSAFE and damaged") and the words of the notice
    that errors were found: the files that would run code first."""
    errors = alarms.errors(problems)
    text = f"{len(errors)} error(s) found: press p to list them"
    unsafe = list(dict.fromkeys(p.file or "a file" for p in errors if alarms.is_unsafe(p)))
    if unsafe:
        names = ", ".join(unsafe[:3]) + (" ..." if len(unsafe) > 3 else "")
        text = f"{printable(names)} would run code if loaded (nothing was run). {text}"
    return alarms.title(errors), text


class ProblemsScreen(TextModal):
    """Stays current: the browser calls `show` when reading finds more problems."""

    def __init__(self, problems, reading: bool = False) -> None:
        super().__init__(_title(problems, reading), problems_text(problems), closes=("p",),
                         box_id="problems-box", body_id="problems-list")
        self.problems = problems

    def show(self, problems, reading: bool = False) -> None:
        self.problems = problems
        self.query_one(".modal-title", Static).update(Text(_title(problems, reading),
                                                           style="bold"))
        self.query_one("#problems-list", Static).update(problems_text(problems))


def _title(problems, reading: bool) -> str:
    said = alarms.phrase(problems)
    return (f"Problems ({len(problems)})" + (f" · {said}" if said else "")
            + (" · still reading, more may come" if reading else ""))
