"""`!`: check every weight tensor's values for NaN and Inf, the browser's `stats --check`.

Only on request: a worker reads one tensor at a time (bounded memory, as `stats`), within the
values budget; a line above the footer shows how far it is, Esc stops it (what was found stays),
and it ends with the CLI's summary line as a notice. Each finding, and each one `v` makes,
becomes a problem of its file (`p`), named as found by reading values.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from rich.text import Text
from textual import work
from textual.message import Message
from textual.widgets import Static

from ckpt_browser.escape import printable
from ckpt_browser.report.words import size
from ckpt_browser.tui.browse.messages import ValuesFound
from ckpt_browser.tui.browse.model import BrowseModel
from ckpt_browser.tui.common.workers import ForLoad, current_load

PROGRESS_EVERY = 0.1  # seconds between progress messages


class ProgressLine(Static):
    """One line above the footer while a long job runs: the values check, an export."""

    DEFAULT_CSS = """
    ProgressLine { height: auto; padding: 0 1; background: $boost; display: none; }
    ProgressLine.-running { display: block; }
    """


@dataclass(eq=False)
class CheckJob:
    model: BrowseModel  # the checkpoint it reads
    cancel: threading.Event = field(default_factory=threading.Event)
    tensors: int = 0  # read so far, of `total`
    total: int = 0
    done_bytes: int = 0
    total_bytes: int = 0
    found: int = 0


# Messages from the worker; `load` is their CheckJob (a newer one makes them stale).
@dataclass
class CheckProgress(ForLoad):
    tensors: int
    total: int
    done_bytes: int
    total_bytes: int

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, CheckProgress) and message.load is self.load


@dataclass
class CheckFound(ForLoad):
    found: list[tuple[str, str, list[str]]]  # (file, tensor, unsound's words: "3 NaN")


@dataclass
class CheckDone(ForLoad):
    line: str  # the summary, as `stats --check` ends
    whole: bool = False  # every weight tensor was read (not cancelled, none left out)


def summary_line(checked: int, total: int, found: dict[str, list[str]], bad: int,
                 cancelled: bool, unread: str | None) -> str:
    """`stats --check`'s last line, and what else stopped some tensors being checked."""
    from ckpt_browser.report.stats import check_summary

    line = check_summary(checked, found, False)
    if cancelled:
        line = f"cancelled (Esc) after {checked + bad:,} of {total:,} tensor(s); {line}"
    if bad:
        line += f"; the values of {bad:,} tensor(s) could not be read"
    if unread:
        line += f"; {unread}"
    return line


def read_all(job: CheckJob, post) -> None:
    """The worker's loop: every weight tensor of the checkpoint, one at a time."""
    from ckpt_browser.values.budget import bytes_to_read, plan
    from ckpt_browser.values.locate import all_locs
    from ckpt_browser.values.read import Cancelled, ValuesError
    from ckpt_browser.values.stats import tensor_stats, unsound

    locs = [x for x in all_locs(job.model.checkpoint) if x.component in ("weights", None)]
    todo = plan([(loc,) for loc in locs])
    locs = [loc for loc, in todo.admitted]
    total = bytes_to_read(locs)
    found: dict[str, list[str]] = {}
    pending: list[tuple[str, str, list[str]]] = []  # found since the last progress message
    bad = before = checked = 0
    last = 0.0

    def tell(i: int, done: int, force: bool = False) -> None:
        """Progress, and what was found since: batched, so a checkpoint of 90,000 tensors
        full of NaN redraws the problems a few times a second, not 90,000 times."""
        nonlocal last
        now = time.monotonic()
        if force or now - last >= PROGRESS_EVERY:
            last = now
            if pending:
                post(CheckFound(job, pending.copy()))
                pending.clear()
            post(CheckProgress(job, i, len(locs), done, total))

    cancelled = False
    for i, loc in enumerate(locs):
        tell(i, before, force=i == 0)

        def step(done: int, numel: int, i: int = i, start: int = before,
                 nbytes: int = loc.nbytes) -> None:
            tell(i, start + (nbytes * done // numel if numel else nbytes))

        try:
            s = tensor_stats(loc, job.cancel, step)
        except Cancelled:
            cancelled = True
            break
        except ValuesError:
            bad += not loc.placeholder  # as `stats`: a ZeRO-3 placeholder is not damage
            checked += loc.placeholder
        else:
            checked += 1
            wrong = unsound(s)
            if wrong:
                found[f"{loc.file}:{loc.name}"] = wrong
                pending.append((loc.file, loc.name, wrong))
        before += loc.nbytes
        if job.cancel.is_set():
            cancelled = i + 1 < len(locs)
            break
    tell(checked + bad, before, force=True)
    post(CheckDone(job, summary_line(checked, len(locs), found, bad, cancelled,
                                     todo.message()),
                   whole=not (cancelled or bad or todo.unread)))


class ValuesCheck:
    """A mixin of BrowseScreen: the action, the worker, the bar and what findings change; it
    reads the screen's model, tree and summary and refreshes its details and problems."""

    _check: CheckJob | None = None

    def action_check_values(self) -> None:
        model = self.model
        if not model.loaded:
            self.notify("The files are still being read: check the values once they are.",
                        title="Check values", timeout=5)
            return
        if self._check is not None:
            self.notify("Already checking the values (Esc cancels).",
                        title="Check values", timeout=4)
            return
        self._check = CheckJob(model)
        self._show_check()
        self.check_values(self._check)

    def cancel_check(self) -> bool:
        """Esc: stop the check after the tensor being read; False when none runs."""
        if self._check is None:
            return False
        self._check.cancel.set()
        self._show_check()
        return True

    @work(thread=True, exclusive=True, exit_on_error=False, group="check")
    def check_values(self, job: CheckJob) -> None:
        try:
            read_all(job, self.post_message)
        except Exception as e:  # a bug: the App says so; the bar must not run on forever
            self.post_message(CheckDone(job, f"stopped: {type(e).__name__}: {e}"))
            raise

    # -- handlers mutate (named, not @on: a mixin's @on is not seen by Textual) ----------
    def on_check_progress(self, message: CheckProgress) -> None:
        job = message.load
        if job is self._check:
            job.tensors, job.total = message.tensors, message.total
            job.done_bytes, job.total_bytes = message.done_bytes, message.total_bytes
            self._show_check()

    def on_check_found(self, message: CheckFound) -> None:
        job = message.load
        if job is self._check and job.model is self.model:
            job.found += len(message.found)
            self._record(message.found)
            self._show_check()

    def on_check_done(self, message: CheckDone) -> None:
        job = message.load
        if job is not self._check:
            return
        self._check = None
        self._show_check()
        if job.model is self.model:
            press = ": press p to list them" if job.found else ""
            ok = message.whole and not job.found
            self.notify(printable(message.line) + press, title="Check values",
                        severity="information" if ok else "warning", timeout=10)

    @current_load
    def on_values_found(self, message: ValuesFound) -> None:
        """`v` found NaN or Inf in one tensor (said once: the check may have found it)."""
        if self._record([(message.file, message.name, message.wrong)]):
            self.notify(printable(f"{message.name}: {', '.join(message.wrong)}: press p to list "
                                  "problems"), title="Values", severity="warning", timeout=8)

    def _record(self, found: list[tuple[str, str, list[str]]]) -> list[str]:
        """Make findings problems of their files, and show them wherever problems show;
        the files of those that were new."""
        files = [file for file, name, wrong in found
                 if self.model.found_in_values(file, name, wrong)]
        if files:
            self._tree.relabel(dict.fromkeys(files))
            self._summary.refresh_summary()
            self._refresh_details()
            self._refresh_problems()
        return files

    def _show_check(self) -> None:
        bars = self.query("#check-bar")  # not the export's line
        if not bars:  # unmounting
            return
        bar, job = bars.first(ProgressLine), self._check
        bar.set_class(job is not None, "-running")
        if job is None:
            return
        if job.cancel.is_set():
            line = "checking values: cancelling…"
        elif not job.total:
            line = "checking values: starting… (Esc cancels)"
        else:
            line = (f"checking values: {job.tensors:,} of {job.total:,} tensors, "
                    f"{size(job.done_bytes)} of {size(job.total_bytes)}")
            if job.found:
                line += f" · {job.found:,} with NaN or Inf so far"
            line += " (Esc cancels)"
        bar.update(Text(line))
