"""`v`: a tensor's values, under its details. A worker reads the bytes in blocks and reports
progress; handlers show a progress bar, then the statistics (values_render.py draws them).
Results stay for the session; Esc cancels a running read."""

from __future__ import annotations

import time
from dataclasses import dataclass

from rich.text import Text
from textual import on, work
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import ProgressBar, Static
from textual.worker import Worker

from ckpt_browser.escape import printable
from ckpt_browser.report.words import count
from ckpt_browser.tui.browse.messages import ValuesFound
from ckpt_browser.tui.browse.model import BrowseModel
from ckpt_browser.tui.browse.refs import Ref
from ckpt_browser.tui.browse.values_render import render_stats
from ckpt_browser.tui.browse.values_session import (
    StatsJob,
    ValuesSession,
    not_a_tensor,
    tensor_key,
    within_budget,
)
from ckpt_browser.tui.common.workers import ForLoad, ForwardsWorkerErrors, current_load

PROGRESS_EVERY = 0.1  # seconds between progress messages: at most ~10 a second


# -- the panel -----------------------------------------------------------------------------
class ValuesPanel(ForwardsWorkerErrors, Vertical):
    """Lives in the details pane, under the highlighted node's details."""

    # Messages from the worker. `load` is their job: one replaced by a newer job (another
    # tensor, another checkpoint) is stale, and @current_load drops it.
    @dataclass
    class Progress(ForLoad):
        done: int  # elements read
        total: int

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, ValuesPanel.Progress) and message.load is self.load

    @dataclass
    class Done(ForLoad):
        stats: object  # values.stats.Stats

    @dataclass
    class Failed(ForLoad):
        error: str  # names the file and the problem

    @dataclass
    class Cancelled(ForLoad):
        pass

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.session: ValuesSession | None = None
        self.ref: Ref | None = None
        self._worker: Worker | None = None
        self._pinned = False  # keep the values scrolled into view (after `v`)

    def compose(self):
        yield Static(id="values-status")
        yield ProgressBar(show_eta=False, id="values-progress")
        yield Static(id="values-result")

    def on_unmount(self) -> None:
        if self.session is not None and self.session.job is not None:
            self.session.job.cancel.set()  # quitting mid-read: the worker stops at its next block

    def show(self, model: BrowseModel, ref: Ref | None) -> None:
        """The details pane shows `ref` now (of `state`: another checkpoint starts afresh)."""
        if self.session is None or self.session.model is not model:
            self.cancel()
            self.session = ValuesSession(model)
        if tensor_key(ref) != tensor_key(self.ref):
            self._pinned = False  # another node: its details start at the top as usual
        self.ref = ref
        self._refresh()

    # -- actions ----------------------------------------------------------------------------
    def start(self, ref: Ref | None) -> None:
        """`v`: compute a tensor's values, unless known or being computed."""
        key = tensor_key(ref)
        session = self.session
        if key is None or session is None:
            self.notify(not_a_tensor(ref), title="Values", timeout=5)
            return
        if key not in session.results and (session.job is None or session.job.key != key):
            if session.job is not None:
                session.job.cancel.set()  # one read at a time: the newest wins
            session.notes.pop(key, None)
            session.job = StatsJob(key, key[2])
            self._worker = self.compute(session, session.job)
            self._refresh()
        self._reveal()

    def cancel(self) -> bool:
        """Esc: stop the running read; False when nothing runs."""
        job = self.session.job if self.session is not None else None
        if job is None:
            return False
        job.cancel.set()
        self._show_progress()
        return True

    def _reveal(self) -> None:
        """Scroll the details so the values start at the top, and keep them there while they
        settle: showing them may add the pane's scrollbar, which rewraps the text above."""
        self._pinned = True
        self.call_after_refresh(self._scroll_to_top)

    def on_resize(self) -> None:
        if self._pinned:
            self.call_after_refresh(self._scroll_to_top)

    def _scroll_to_top(self) -> None:
        self.scroll_visible(animate=False, top=True, immediate=True)

    @property
    def running(self) -> bool:
        return self.session is not None and self.session.job is not None

    # -- the worker computes ----------------------------------------------------------------
    @work(thread=True, exclusive=True, exit_on_error=False, group="values")
    def compute(self, session: ValuesSession, job: StatsJob) -> None:
        from ckpt_browser.values.read import Cancelled, ValuesError
        from ckpt_browser.values.stats import tensor_stats

        last = 0.0

        def progress(done: int, total: int) -> None:
            nonlocal last
            now = time.monotonic()
            if done >= total or now - last >= PROGRESS_EVERY:
                last = now
                self.post_message(self.Progress(job, done, total))

        try:
            loc = session.locate(job.key)
            scale = session.scale_of(job.key, loc)
            refused = within_budget(loc, scale)
            if refused:
                self.post_message(self.Failed(job, refused))
                return
            stats = tensor_stats(loc, job.cancel, progress)
            if scale is not None:  # FP8 with block scales: the values it stands for too
                from ckpt_browser.values.dequant import dequantized_stats

                stats.dequantized = dequantized_stats(loc, scale, job.cancel, progress)
        except Cancelled:
            self.post_message(self.Cancelled(job))
        except ValuesError as e:
            self.post_message(self.Failed(job, str(e)))
        else:
            self.post_message(self.Done(job, stats))

    # -- handlers mutate ----------------------------------------------------------------------
    @property
    def load(self) -> StatsJob | None:
        """The running job: messages about any other are stale."""
        return self.session.job if self.session is not None else None

    def _end(self, job: StatsJob, note: str | None = None) -> None:
        self.session.job = None
        if note is not None:
            self.session.notes[job.key] = note
        self._refresh()
        if tensor_key(self.ref) == job.key:
            self._reveal()

    @on(Progress)
    @current_load
    def _progress(self, message: Progress) -> None:
        message.load.done, message.load.total = message.done, message.total
        self._show_progress()

    @on(Done)
    @current_load
    def _done(self, message: Done) -> None:
        from ckpt_browser.values.stats import unsound

        key = message.load.key
        self.session.results[key] = message.stats
        self._end(message.load)
        wrong = unsound(message.stats)
        if wrong:  # the screen makes it a problem of the tensor's file
            self.post_message(ValuesFound(self.session.model, key[1], key[2], wrong))

    @on(Cancelled)
    @current_load
    def _cancelled(self, message: Cancelled) -> None:
        self._end(message.load, "values: cancelled (press v to read again)")
        self.notify(printable(f"{message.load.name}: cancelled"), title="Values", timeout=4)

    @on(Failed)
    @current_load
    def _failed(self, message: Failed) -> None:
        self._fail(message.load, message.error)

    failure_title = "Cannot read values"

    def recover(self, worker: Worker, why: str) -> None:
        """A bug, not an unreadable file: the App says so; the panel ends the job."""
        job = self.session.job if self.session is not None else None
        if worker is self._worker and job is not None:
            self._end(job, f"values: cannot be read: {why}")

    def _fail(self, job: StatsJob, error: str) -> None:
        self._end(job, f"values: cannot be read: {error}")
        self.notify(printable(error), title="Cannot read values", severity="error", timeout=10)

    # -- looks --------------------------------------------------------------------------------
    def _refresh(self) -> None:
        session, key = self.session, tensor_key(self.ref)
        stats = session.results.get(key) if session and key else None
        note = session.notes.get(key) if session and key else None
        self.set_class(self.running, "-running")
        self.set_class(stats is not None, "-result")
        # below 100 columns the details pane, under the tree, grows while it shows values
        self.screen.set_class(self.running or stats is not None, "-values")
        if stats is not None:
            self.query_one("#values-result", Static).update(render_stats(stats))
        if self.running:
            self._show_progress()
        else:
            self.set_class(bool(note), "-status")
            self.query_one("#values-status", Static).update(Text(printable(note or "")))

    def _show_progress(self) -> None:
        job = self.session.job
        if job is None:
            return
        mine = tensor_key(self.ref) == job.key
        what = "values" if mine else f"values of {job.name}"
        if job.cancel.is_set():
            line = f"{what}: cancelling…"
        elif job.total:
            line = f"{what}: {count(job.done)} of {count(job.total)} elements (Esc cancels)"
        else:
            line = f"{what}: starting… (Esc cancels)"
        self.set_class(True, "-status")
        self.query_one("#values-status", Static).update(Text(printable(line)))
        if job.total:
            self.query_one(ProgressBar).update(total=job.total, progress=job.done)
        else:
            self.query_one(ProgressBar).update(total=None, progress=0)
