"""`e`: the open checkpoint's weights to safetensors, as `ckpt-browser export` writes them.

Asks for a new or empty folder, then writes in a worker (a line above the footer shows how
far; Esc cancels and removes what was written). A damaged or unsafe checkpoint is refused
with its findings, as the command refuses it without --partial.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

from rich.text import Text
from textual import work
from textual.message import Message

from ckpt_browser.escape import printable
from ckpt_browser.report.words import plural, size
from ckpt_browser.tui.browse.model import BrowseModel
from ckpt_browser.tui.browse.values_check import ProgressLine
from ckpt_browser.tui.common.workers import ForLoad

MAX_SHARD = 5 * 2**30  # the command's default
PROGRESS_EVERY = 0.1  # seconds between progress messages


@dataclass(eq=False)
class ExportJob:
    model: BrowseModel
    out: str
    cancel: threading.Event = field(default_factory=threading.Event)
    done: int = 0
    total: int = 0


@dataclass
class ExportProgress(ForLoad):
    done: int
    total: int

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ExportProgress) and message.load is self.load


@dataclass
class ExportDone(ForLoad):
    line: str
    ok: bool


def run(job: ExportJob, plan, created: bool, post) -> None:
    """The worker: write, or remove what was written when it fails or is cancelled."""
    from ckpt_browser.export.write import WriteError, abandon, configs, write
    from ckpt_browser.values.read import Cancelled, ValuesError

    layout = job.model.layout
    last = [0.0]

    def progress(done: int, total: int, name: str) -> None:
        now = time.monotonic()
        if now - last[0] >= PROGRESS_EVERY or done == total:
            last[0] = now
            post(ExportProgress(job, done, total))

    from ckpt_browser.export.plan import config_folder

    extras, notes = configs(layout.root if os.path.isdir(layout.path) else None,
                            config_folder(plan), plan.adapter)
    try:
        written = write(plan, job.out, MAX_SHARD, progress, job.cancel, extras)
    except Cancelled:
        abandon(job.out, created)
        post(ExportDone(job, f"cancelled: nothing left in {job.out}", False))
    except (WriteError, ValuesError, OSError) as e:
        abandon(job.out, created)
        post(ExportDone(job, f"not written: {e}", False))
    except BaseException:
        abandon(job.out, created)
        raise
    else:
        tied = sum(i.same_as is not None for i in plan.items)
        line = (f"{job.out}: {plural(written.tensors, 'tensor')}, {size(written.nbytes)} in "
                f"{plural(len(written.weights), 'safetensors file')}")
        if tied:
            line += f"; {plural(tied, 'tied name')} stored once"
        if extras:
            line += f"; copied {', '.join(n for n, _ in extras)}"
        post(ExportDone(job, "; ".join([line, *notes]), True))


class ExportAction:
    """A mixin of BrowseScreen: the action, its prompt, the worker and its line."""

    _export: ExportJob | None = None

    def action_export(self) -> None:
        from ckpt_browser.tui.common.modals import PathPrompt

        if not self.model.loaded:
            self.notify("The files are still being read: export once they are.",
                        title="Export", timeout=5)
            return
        if self._export is not None:
            self.notify("Already exporting (Esc cancels).", title="Export", timeout=4)
            return
        self.app.push_screen(PathPrompt("Export the weights as safetensors into which new "
                                        "folder?", placeholder="a new or empty folder"),
                             self._export_to)

    def _export_to(self, out: str | None) -> None:
        from ckpt_browser.errors import CheckpointError
        from ckpt_browser.export.plan import Options, plan
        from ckpt_browser.export.write import NoRoom, prepare_out, room_for

        if not out:
            return
        out = os.path.expanduser(out)
        layout = self.model.layout
        try:
            p = plan(self.model.checkpoint, Options(), layout.path)
            if not p.whole:
                first = [x.line() for x in p.problems[:2]] + \
                    [f"{n}: {why}" for n, why in p.left_out[:2]]
                self.notify(printable("Not exported: the checkpoint is damaged or unsafe. " +
                                      " · ".join(first) + " (the command's --partial writes "
                                      "the readable weights)"),
                            title="Export", severity="error", timeout=15, markup=False)
                return
            room_for(out, p.nbytes)
            created = prepare_out(out, layout.root, os.path.isdir(layout.path))
        except NoRoom as e:
            self.notify(printable(f"Not exported: it needs {size(e.needed)}, and {e.where} "
                                  f"has {size(e.free)} free"), title="Export",
                        severity="error", timeout=10, markup=False)
            return
        except CheckpointError as e:
            self.notify(printable(str(e)), title="Export", severity="error", timeout=10,
                        markup=False)
            return
        self._export = ExportJob(self.model, out, total=p.nbytes)
        self._show_export()
        self.export_weights(self._export, p, created)

    def cancel_export(self) -> bool:
        if self._export is None:
            return False
        self._export.cancel.set()
        self._show_export()
        return True

    @work(thread=True, exclusive=True, exit_on_error=False, group="export")
    def export_weights(self, job: ExportJob, plan, created: bool) -> None:
        try:
            run(job, plan, created, self.post_message)
        except Exception as e:  # a bug: the App says so; the line must not stay
            self.post_message(ExportDone(job, f"stopped: {type(e).__name__}: {e}", False))
            raise

    def on_export_progress(self, message: ExportProgress) -> None:
        job = message.load
        if job is self._export:
            job.done, job.total = message.done, message.total
            self._show_export()

    def on_export_done(self, message: ExportDone) -> None:
        if message.load is not self._export:
            return
        self._export = None
        self._show_export()
        self.notify(printable(message.line), title="Export", timeout=12, markup=False,
                    severity="information" if message.ok else "warning")

    def _show_export(self) -> None:
        bars = self.query("#export-bar")
        if not bars:  # unmounting
            return
        bar, job = bars.first(ProgressLine), self._export
        bar.set_class(job is not None, "-running")
        if job is None:
            return
        if job.cancel.is_set():
            line = "exporting: cancelling…"
        else:
            pct = 100 * job.done // job.total if job.total else 0
            line = (f"exporting to {job.out}: {pct}%, {size(job.done)} of {size(job.total)} "
                    "(Esc cancels)")
        bar.update(Text(printable(line)))
