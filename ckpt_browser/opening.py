"""What the user typed, made into the checkpoint to open: a URL becomes its local mirror, a
folder of checkpoints its newest (or the one asked for). Used by the CLI's commands."""

from __future__ import annotations

import os

from ckpt_browser.diagnostics import Progress
from ckpt_browser.errors import UsageError


def local_path(path: str, args) -> str:
    """A URL becomes its local mirror (headers only); anything else stays as it is."""
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


def diff_side(path: str, which: str):
    from ckpt_browser.values.diff import open_side

    _, entries = pick(path, None)
    if entries:
        names = ", ".join(e.name for e in entries[:6])
        raise UsageError(path, f"{which} is a folder of several checkpoints ({names}); "
                         "name one of them")
    return open_side(path)
