"""The one way to open a path: `open_checkpoint(path)` reads every file by its content and
tags every tensor with its component. The CLI, the TUI, diff, stats, the quiz and remote
mirrors all go through here; the TUI, which shows files as they arrive, calls `iter_tagged`
and then `finish` with what it read."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

from ckpt_browser.analysis.content.tag import tag_files
from ckpt_browser.model import Checkpoint, FileInfo, Layout
from ckpt_browser.producers.layout import open_layout
from ckpt_browser.readers import finish, iter_files


def open_checkpoint(path: str, cancel: threading.Event | None = None,
                    on_batch: Callable[[int, int], None] | None = None) -> Checkpoint:
    """Every file at `path`, read by content. Raises CheckpointError when nothing there can
    be read as a checkpoint; damage inside is recorded as problems."""
    layout = open_layout(path)
    files: list[FileInfo] = []
    for got in iter_tagged(layout, cancel):
        files.extend(got)
        if on_batch:
            on_batch(len(files), len(layout.files))
    return finish(layout, files)


def iter_tagged(layout: Layout, cancel: threading.Event | None = None,
                batch: int = 8) -> Iterator[list[FileInfo]]:
    """The files in batches, as `readers.iter_files` reads them, each tensor tagged with its
    component; `readers.finish` makes the Checkpoint of them."""
    for got in iter_files(layout, cancel, batch):
        yield tag_files(layout, got)
