"""`ckpt-browser A B`: two checkpoints side by side, tensor by tensor.

Layout, top to bottom: the summary (both paths, counts per status, the training step A -> B and
the first flag), the tensor table, a progress line while values are compared, the details of
the highlighted row, the footer. Workers pair names and compare values; handlers update widgets.
"""

from __future__ import annotations

import threading
import time

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Footer, Input, Label, ProgressBar
from textual.worker import Worker

from ckpt_browser.escape import printable
from ckpt_browser.tui.common.filter_input import FilterInput
from ckpt_browser.tui.common.workers import ForwardsWorkerErrors
from ckpt_browser.tui.diff import rows as diff_rows
from ckpt_browser.tui.diff.jobs import CompareJob, load_diff, pending, restate
from ckpt_browser.tui.diff.messages import CompareDone, CompareProgress, DiffLoaded
from ckpt_browser.tui.diff.panes import DiffDetails, DiffSummary
from ckpt_browser.tui.diff.table import DiffTable
from ckpt_browser.tui.diff.windows import DiffHelpScreen, TextScreen, problems_body, state_body
from ckpt_browser.tui.keys import DIFF, bindings
from ckpt_browser.values.diff import DiffResult, Options, Row, Side

PROGRESS_EVERY = 0.1  # seconds between progress messages from the compare worker
SUMMARY_EVERY = 1.0  # seconds between recounts of the statuses while comparing


class DiffScreen(ForwardsWorkerErrors, Screen):
    TITLE = "ckpt-browser diff"
    KEYS = DIFF  # the footer, the palette and the help window come from it
    BINDINGS = bindings(KEYS)  # footer order; at 80 columns "q Quit" must still show
    comparing: reactive[bool] = reactive(False, init=False)

    def __init__(self, a: Side | str, b: Side | str, opts: Options | None = None) -> None:
        """`a` and `b` are opened sides (the CLI opens them before taking the screen) or
        paths, opened here in the background (a diff started from the browser)."""
        super().__init__()
        self._opened = isinstance(a, Side) and isinstance(b, Side)
        self.a, self.b = (x if isinstance(x, Side) else Side(x, None, None, []) for x in (a, b))
        self.opts = opts or Options()
        self.result: DiffResult | None = None
        self.showing = "weights"  # or "state": which rows the table lists
        self.filter_key = "all"
        self.sort = "name"  # a key of rows.SORTS
        self.pattern = ""  # the `/` name filter
        self._cancel: threading.Event | None = None
        self._last_summary = 0.0
        self._load_error: str | None = None

    def compose(self) -> ComposeResult:
        yield DiffSummary(id="diff-summary")
        yield DiffTable(id="diff-table")
        with Horizontal(id="compare-bar"):
            yield Label("", id="compare-label")
            yield ProgressBar(show_eta=False, id="compare-progress")
        yield DiffDetails(id="diff-details")
        yield FilterInput(lambda: self._table, id="diff-filter")
        yield Footer()

    def on_mount(self) -> None:
        self._details.border_title = "details"
        self._table.loading = True
        self._table.focus()
        self._refresh_summary()
        self._refresh_title()
        self.load()

    def on_unmount(self) -> None:
        if self._cancel is not None:
            self._cancel.set()

    @property
    def _table(self) -> DiffTable:
        return self.query_one(DiffTable)

    @property
    def _details(self) -> DiffDetails:
        return self.query_one(DiffDetails)

    # -- loading -------------------------------------------------------------------------
    @work(thread=True, exclusive=True, exit_on_error=False, group="load")
    def load(self) -> None:
        from ckpt_browser.analysis.opened import open_path
        from ckpt_browser.values.diff import side_of

        a, b = self.a, self.b
        if not self._opened:  # names paired only once both are read
            a, b = side_of(open_path(a.path)), side_of(open_path(b.path))
        self.post_message(DiffLoaded(a, b, load_diff(a, b, self.opts)))

    @on(DiffLoaded)
    def _loaded(self, message: DiffLoaded) -> None:
        self.a, self.b = message.a, message.b
        self.result = message.result
        self._table.loading = False
        self._refresh_view()
        self._refresh_summary()
        if message.result.notes:
            self.notify(" ".join(message.result.notes), title="Note", timeout=10)
        if self.opts.values:
            self.action_values()

    def recover(self, worker: Worker, why: str) -> None:
        self._table.loading = False
        self.comparing = False
        if self.result is None:
            self._load_error = why
            self._refresh_summary()

    def action_close(self) -> None:
        """q: back to the browser when opened from it, else quit."""
        if len(self.app.screen_stack) > 1:
            self.app.pop_screen()
        else:
            self.app.exit()

    # -- the table -----------------------------------------------------------------------
    def _rows(self) -> list[Row]:
        if self.result is None:
            return []
        return self.result.state_rows if self.showing == "state" else self.result.rows

    def _refresh_view(self, keep: bool = False) -> None:
        """Filter and sort the current set again. The cursor goes to the top (a new sort
        shows its first rows), or with `keep` stays on its row when that is still shown."""
        table = self._table
        table.set_rows(diff_rows.view(self._rows(), self.filter_key, self.sort, self.pattern),
                       keep=table.current if keep else None)
        self._refresh_title()

    def _refresh_title(self) -> None:
        what = "state tensors" if self.showing == "state" else "weights"
        sort = diff_rows.SORTS[self.sort]
        shown, total = len(self._table.rows), len(self._rows())
        status = f"filter: {diff_rows.FILTER_WORDS[self.filter_key]} · sort: {sort}"
        if self.pattern:  # the count first: a long title is cut at its end
            self._table.border_title = (f"{what} · {shown:,} of {total:,} rows match "
                                        f"{printable(self.pattern)!r} · {status}")
        else:
            self._table.border_title = f"{what} · {status} · {shown:,} of {total:,}"

    def _refresh_summary(self) -> None:
        r = self.result
        self.query_one(DiffSummary).show(self.a, self.b, r.rows if r else None,
                                         r.state_rows if r else [], r.state if r else None,
                                         self.comparing, failed=self._load_error)
        self._last_summary = time.monotonic()

    @on(DiffTable.Highlighted)
    def _highlighted(self, event: DiffTable.Highlighted) -> None:
        self._details.show(event.row)

    def action_cycle_filter(self) -> None:
        cycle = diff_rows.filter_cycle(self._rows())
        i = cycle.index(self.filter_key) if self.filter_key in cycle else -1
        self.filter_key = cycle[(i + 1) % len(cycle)]
        self._refresh_view()

    def action_toggle_sort(self) -> None:
        order = list(diff_rows.SORTS)
        self.sort = order[(order.index(self.sort) + 1) % len(order)]
        self._refresh_view()
        if self.sort != "name" and not any(r.values for r in self._rows()):
            self.notify("No values compared yet: press v, then the largest differences "
                        "come first.", timeout=5)

    # -- the name filter ---------------------------------------------------------------
    def action_filter_names(self) -> None:
        self.add_class("-filtering")
        # Focus now, not via focus()'s call_later: keys typed right after "/" must reach the
        # input, or "q" would close the screen.
        self.set_focus(self.query_one("#diff-filter", Input))

    @on(Input.Changed, "#diff-filter")
    def _names_changed(self, event: Input.Changed) -> None:
        self.pattern = event.value
        self._refresh_view(keep=True)


    def action_clear_filter(self) -> None:
        """Esc: the filter goes, the cursor stays on the row it was on."""
        self.remove_class("-filtering")
        field = self.query_one("#diff-filter", Input)
        if field.value:
            field.value = ""  # Input.Changed shows every row again
        self._table.focus()

    def action_toggle_set(self) -> None:
        if self.result is not None and not self.result.state_rows and self.showing == "weights":
            self.notify("Neither side has training-state tensors.", timeout=4)
            return
        self.showing = "weights" if self.showing == "state" else "state"
        if self.filter_key not in diff_rows.filter_cycle(self._rows()):
            self.filter_key = "all"
        self._refresh_view()

    # -- values --------------------------------------------------------------------------
    def action_values(self) -> None:
        if self._busy():
            return
        groups = [pending(self.result.rows), pending(self.result.state_rows)]
        if not any(groups):
            self.notify("Every tensor both sides have with the same shape is compared "
                        "already.", timeout=4)
            return
        self._start(groups)

    def action_compare_row(self) -> None:
        row = self._table.current
        if self._busy() or row is None:
            return
        if not row.comparable:
            self.notify("Not comparable: the tensor is absent on one side or its shape "
                        "differs.", timeout=4)
        elif row.values is not None:
            self.notify("Compared already: the details show the result.", timeout=3)
        elif row.error:
            self.notify(f"Unreadable: {row.error}", severity="error", timeout=6)
        else:
            self._start([[row]])

    def _busy(self) -> bool:
        if self.result is None:
            self.notify("Still pairing the tensor names…", timeout=3)
            return True
        if self.comparing:
            self.notify("Comparing already: Esc cancels.", timeout=3)
            return True
        return False

    def _start(self, groups: list[list[Row]]) -> None:
        job = CompareJob(groups)
        self._cancel = job.cancel
        self.comparing = True
        self._say("Esc cancels · comparing values…")
        self.query_one(ProgressBar).update(total=None, progress=0)
        self._refresh_summary()
        self.compare(job)

    def _say(self, line: str) -> None:
        self.query_one("#compare-label", Label).update(
            Text(printable(line), no_wrap=True, overflow="ellipsis"))

    def watch_comparing(self, comparing: bool) -> None:
        self.screen.set_class(comparing, "-comparing")
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """While values are compared the footer offers Esc "Cancel" instead of v "Values"
        (80 columns hold one of them next to "q Quit"); the progress line says "Esc cancels"."""
        if action == "cancel":
            return self.comparing
        if action == "clear_filter":  # Esc cancels a comparison first
            return not self.comparing and (bool(self.pattern) or self.has_class("-filtering"))
        return not self.comparing if action == "values" else True

    @work(thread=True, exclusive=True, exit_on_error=False, group="compare")
    def compare(self, job: CompareJob) -> None:
        from ckpt_browser.values.read import Cancelled

        def progress(done: int, total: int, name: str) -> None:
            self.post_message(CompareProgress(done, total, name))

        try:
            job.run(self.opts, progress, PROGRESS_EVERY)
        except Cancelled:
            self.post_message(CompareDone(job.compared, job.todo, cancelled=True))
            return
        except Exception as e:  # noqa: BLE001 - reported in the app, which keeps running
            self.post_message(CompareDone(job.compared, job.todo, error=str(e)))
            return
        try:
            state = restate(self.result)
        except Exception:  # noqa: BLE001 - the first state comparison stays on screen
            state = None
        self.post_message(CompareDone(job.compared, job.todo, state=state))

    @on(CompareProgress)
    def _progress(self, message: CompareProgress) -> None:
        if not self.comparing:
            return
        self.query_one(ProgressBar).update(total=max(message.total, 1), progress=message.done)
        self._say(f"Esc cancels · comparing {message.name}")
        self._table.refresh()  # statuses change as tensors finish
        self._details.show(self._table.current)
        if time.monotonic() - self._last_summary > SUMMARY_EVERY:
            self._refresh_summary()

    @on(CompareDone)
    def _compare_done(self, message: CompareDone) -> None:
        self.comparing = False
        self._cancel = None
        if message.state is not None and self.result is not None:
            self.result.state = message.state
        self._refresh_view(keep=True)
        self._refresh_summary()
        self._details.show(self._table.current)
        done = f"{message.compared:,} of {message.todo:,} tensor(s) compared"
        if message.cancelled:
            self.notify(f"Cancelled: {done}. v compares the rest.", title="Values", timeout=6)
        elif message.error:
            self.notify(f"{message.error} ({done})", title="Values", severity="error", timeout=15)
        else:
            errors = sum(r.error is not None for r in self._rows())
            tail = f"; {errors:,} unreadable (details say why)" if errors else ""
            self.notify(f"{done}{tail}.", title="Values", timeout=4)

    def action_cancel(self) -> None:
        if self._cancel is not None:
            self._cancel.set()
            self._say("cancelling…")

    # -- windows -------------------------------------------------------------------------
    def action_problems(self) -> None:
        notes = self.result.notes if self.result else []
        self.app.push_screen(TextScreen("Problems and notes", problems_body(self.a, self.b, notes)))

    def action_state_info(self) -> None:
        state = self.result.state if self.result else None
        self.app.push_screen(TextScreen("Training state: A -> B", state_body(state)))

    def action_help(self) -> None:
        self.app.push_screen(DiffHelpScreen())
