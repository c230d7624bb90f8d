"""A folder of checkpoints: pick one, newest first. One row each (name, step, resume verdict,
framework) in columns that fit the window; the verdicts are checked in the background and
fill in as each is known."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option
from textual.worker import get_current_worker

from ckpt_browser.analysis.resume import CHECKED  # the newest checked; older: "not checked"
from ckpt_browser.escape import printable
from ckpt_browser.report.words import VERDICT_STYLE, verdict_word
from ckpt_browser.tui.common.cells import cut_middle, cut_right
from ckpt_browser.tui.common.modals import CloseableModal

STEP_W, VERDICT_W, FRAMEWORK_W, GAP = 11, 12, 11, 2  # "WEIGHTS-ONLY" is 12 cells
PENDING, NOT_CHECKED, UNREADABLE = "…", "not checked", "unreadable"
HINT = "Enter opens it · d diffs it against the open one · Esc closes"
HINT_COMPARE = "Enter diffs it against the open one · Esc closes"


def columns(name: str, step: str, verdict: Text | str, framework: str, width: int) -> Text:
    """One line of `width` cells: the name takes what the other columns leave and is cut in
    the middle (`checkpoint-1…00` keeps both ends); nothing wraps."""
    name_w = max(width - STEP_W - VERDICT_W - FRAMEWORK_W - 3 * GAP, 8)
    text = Text(no_wrap=True, overflow="crop")
    text.append(cut_middle(name, name_w).ljust(name_w + GAP), style="bold")
    text.append(cut_right(step, STEP_W).ljust(STEP_W + GAP))
    verdict = verdict if isinstance(verdict, Text) else Text(verdict)
    verdict.truncate(VERDICT_W, overflow="ellipsis", pad=True)
    text.append_text(verdict)
    text.append(" " * GAP + cut_right(framework, FRAMEWORK_W))
    return text


def verdict_cell(verdict: str | None) -> Text:
    """The verdict word in its style; "…" while it is checked, words for what is not known."""
    if verdict is None:
        return Text(PENDING)
    if verdict in (NOT_CHECKED, UNREADABLE):
        return Text(verdict)
    return Text(verdict_word(verdict), style=VERDICT_STYLE.get(verdict, "bold"))  # type: ignore[call-overload]


def entry_row(e, verdict: str | None, width: int) -> Text:
    step = f"{e.counter}{e.step}" if e.step is not None else "-"
    return columns(printable(e.name), step, verdict_cell(verdict), printable(e.format or "?"),
                   width)


class TimelineScreen(CloseableModal[tuple[str, str] | None]):
    """Returns ("open" or "diff", the chosen checkpoint's path) through dismiss(), or None."""

    also_closes = ("c",)
    BINDINGS = [("d", "diff", "Diff against this")]

    @dataclass
    class Checked(Message):
        """The resume verdict of entry `index` (a verdict, or UNREADABLE)."""

        index: int
        verdict: str

    def __init__(self, folder: str, entries, compare: bool = False) -> None:
        super().__init__()
        self.folder = folder
        self.entries = entries
        self.compare = compare  # Enter diffs rather than opens
        self.verdicts: list[str | None] = [None if i < CHECKED else NOT_CHECKED
                                           for i in range(len(entries))]

    def compose(self) -> ComposeResult:
        n = len(self.entries)
        width = self._width()
        with Vertical(id="timeline-box", classes="modal-box"):
            yield Static(Text(f"{n} checkpoint{'s' if n != 1 else ''} in "
                              f"{printable(self.folder)}, newest first", style="bold"))
            yield Static(self._heading(width), id="timeline-heading")
            yield OptionList(*[Option(entry_row(e, v, width), id=str(i)) for i, (e, v)
                               in enumerate(zip(self.entries, self.verdicts))],
                             id="timeline-list")
            yield Static(HINT_COMPARE if self.compare else HINT, id="timeline-hint")

    def _width(self) -> int:
        """The list's content width: measured once laid out, else what the box CSS gives
        (90% of the terminal up to 100, less the box's and the list's borders and padding,
        and the scrollbar when the rows overflow)."""
        if self.is_mounted:
            measured = self.query_one(OptionList).scrollable_content_region.width
            if measured > 0:
                return measured
        box = min(100, self.app.size.width * 9 // 10) - 4
        return box - 4 - (2 if len(self.entries) > 18 else 0)

    def _heading(self, width: int) -> Text:
        """The column names over the rows (shifted past the list's border and padding)."""
        return Text("  ") + columns("checkpoint", "step", "resume", "framework", width)

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()
        self.call_after_refresh(self._fit)
        self._check_all()

    def on_resize(self) -> None:
        self.call_after_refresh(self._fit)

    def _fit(self) -> None:
        """Redraw every row at the laid-out width (the first draw had to guess it)."""
        width = self._width()
        self.query_one("#timeline-heading", Static).update(self._heading(width))
        listing = self.query_one(OptionList)
        for i, (e, v) in enumerate(zip(self.entries, self.verdicts)):
            listing.replace_option_prompt_at_index(i, entry_row(e, v, width))

    @work(thread=True, exclusive=True, exit_on_error=False, group="verdicts")
    def _check_all(self) -> None:
        """The resume check of each entry, newest first, as `check PATH` does it; a closed
        picker stops after the entry being checked."""
        from ckpt_browser.analysis.resume import resume_report
        from ckpt_browser.errors import CheckpointError

        worker = get_current_worker()
        for i, entry in enumerate(self.entries[:CHECKED]):
            if worker.is_cancelled:
                return
            try:
                verdict: str = resume_report(entry.path).verdict
            except CheckpointError:
                verdict = UNREADABLE
            self.post_message(self.Checked(i, verdict))

    @on(Checked)
    def _checked(self, message: Checked) -> None:
        self.verdicts[message.index] = message.verdict
        self.query_one(OptionList).replace_option_prompt_at_index(
            message.index, entry_row(self.entries[message.index], message.verdict,
                                     self._width()))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(("diff" if self.compare else "open", self.entries[int(event.option.id)].path))

    def action_diff(self) -> None:
        index = self.query_one(OptionList).highlighted
        if index is not None:
            self.dismiss(("diff", self.entries[index].path))
