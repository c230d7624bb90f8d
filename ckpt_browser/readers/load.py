"""Read every shard header of a layout, in batches, cancellable."""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ckpt_browser.model import Checkpoint, Layout, ShardInfo
from ckpt_browser.readers.safetensors import read_header


@contextmanager
def paused_gc():
    """Headers make ~100,000 small acyclic objects; the cyclic collector would rescan
    them over and over (a third of the run time on a 94,000-tensor checkpoint)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def iter_shards(layout: Layout, cancel: threading.Event | None = None,
                batch: int = 8) -> Iterator[list[ShardInfo]]:
    """Yield shard headers in batches so a UI can show progress; stop when cancelled."""
    pending: list[ShardInfo] = []
    for name in layout.files:
        if cancel is not None and cancel.is_set():
            return
        with paused_gc():
            pending.append(read_header(os.path.join(layout.root, name), name))
        if len(pending) >= batch:
            yield pending
            pending = []
    if pending:
        yield pending


def finish(layout: Layout, shards: list[ShardInfo]) -> Checkpoint:
    """Assemble a Checkpoint and run the cross-checks once every header is in."""
    from ckpt_browser.analysis.integrity import cross_check

    problems = list(layout.problems)
    for shard in shards:
        problems.extend(shard.problems)
    with paused_gc():
        problems.extend(cross_check(layout, shards))
    return Checkpoint(layout, tuple(shards), tuple(problems))


def load_checkpoint(path: str, cancel: threading.Event | None = None,
                    on_batch: Callable[[int, int], None] | None = None) -> Checkpoint:
    from ckpt_browser.readers.layout import open_layout

    layout = open_layout(path)
    shards: list[ShardInfo] = []
    for got in iter_shards(layout, cancel):
        shards.extend(got)
        if on_batch:
            on_batch(len(shards), len(layout.files))
    return finish(layout, shards)
