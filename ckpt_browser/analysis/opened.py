"""The one opener: `open_path(path)` makes what the user named into the checkpoint to read.

With `run=True` a folder of checkpoints means one of them (the one asked for, else the newest)
and keeps the run's checkpoints as the timeline. The layout is read at once, so a path that
holds nothing fails before a screen is taken; the files and the training state are read on
first use. The CLI's commands, the TUI, resume checks and the quiz open through here; a URL is
mirrored first (`local_path`). The TUI, which shows files as they arrive, streams them with
`iter_tagged` and then `readers.finish`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from functools import cached_property

from ckpt_browser.diagnostics import Progress
from ckpt_browser.errors import UsageError
from ckpt_browser.model import Checkpoint, FileInfo, Layout, Problem, TrainingState
from ckpt_browser.parts.tag import tag_files
from ckpt_browser.producers.layout import open_layout
from ckpt_browser.producers.names import TimelineEntry
from ckpt_browser.readers import finish, iter_files


class Opened:
    """One checkpoint: `path` is the one read (in a folder of checkpoints, the one picked),
    `timeline` that folder's checkpoints newest first (None for one checkpoint)."""

    def __init__(self, path: str, layout: Layout,
                 timeline: list[TimelineEntry] | None = None) -> None:
        self.path, self.layout, self.timeline = path, layout, timeline

    @cached_property
    def checkpoint(self) -> Checkpoint:
        """Every file read by content, each tensor tagged with its component."""
        return finish(self.layout, [f for got in iter_tagged(self.layout) for f in got])

    @cached_property
    def training(self) -> TrainingState:
        from ckpt_browser.analysis.components import training_state

        return training_state(self.checkpoint)

    @property
    def problems(self) -> list[Problem]:
        return list(self.checkpoint.problems) + list(self.training.problems)


def open_path(path: str, choice: str | None = None, *, run: bool = False,
              which: str | None = None) -> Opened:
    """The checkpoint at `path`; raises CheckpointError when nothing there can be read.
    run: a folder of checkpoints means one of them, `choice` (a name or a step) or the newest.
    which: "A" or "B", a side of a diff, where a folder of checkpoints is refused."""
    if not run:
        return Opened(path, open_layout(path))
    chosen, timeline = pick(path, choice)
    if timeline and which:
        names = ", ".join(e.name for e in timeline[:6])
        raise UsageError(path, f"{which} is a folder of several checkpoints ({names}); "
                         "name one of them")
    return Opened(chosen, open_layout(chosen), timeline)


def pick(path: str, choice: str | None):
    """A folder of checkpoints: the one asked for, else the newest. Returns (path, timeline)."""
    from ckpt_browser.analysis.runs import run_entries

    entries = run_entries(path)
    if not entries:
        if choice:
            raise UsageError(path, "--checkpoint applies only to a folder of checkpoints")
        return path, None
    if not choice:
        return entries[0].path, entries
    for e in entries:
        if choice in (e.name, os.path.basename(e.name), str(e.step)):
            return e.path, entries
    raise UsageError(path, f"no checkpoint {choice!r} here; it holds "
                     + ", ".join(e.name for e in entries[:8]))


def local_path(path: str, args) -> str:
    """A URL becomes its local mirror (headers only; `args` says how to fetch: no_cache,
    concurrency, timeout); anything else stays as it is."""
    from ckpt_browser.remote.urls import is_url

    if not is_url(path):
        return path
    from ckpt_browser.readers.hf_cache import offline, offline_snapshot

    if path.startswith("hf://") and offline():
        return offline_snapshot(path)  # as huggingface_hub does offline: the cache only
    from ckpt_browser.remote.mirror import mirror
    from ckpt_browser.remote.urls import public

    with Progress() as progress:
        progress.name = f"reading headers of {public(path)}"
        return mirror(path, cache=not args.no_cache, concurrency=args.concurrency,
                      timeout=args.timeout, progress=progress.update)


def iter_tagged(layout: Layout, cancel: threading.Event | None = None,
                batch: int = 8) -> Iterator[list[FileInfo]]:
    """The files in batches, as `readers.iter_files` reads them, each tensor tagged with its
    component; `readers.finish` makes the Checkpoint of them."""
    for got in iter_files(layout, cancel, batch):
        yield tag_files(layout, got)
