"""What wrote a checkpoint, its step, and which files hold which part of the state: the first
producer in PRODUCERS that claims the names says. A folder no producer claims may be a run
folder: its newest checkpoint is opened."""

from __future__ import annotations

import os
from dataclasses import replace

from ckpt_browser.model import ERROR, INFO, WARNING, Problem
from ckpt_browser.producers import PRODUCERS
from ckpt_browser.producers.base import OTHER, Detection, Seen, listdir
from ckpt_browser.producers.names import TimelineEntry, newest_first, step_from_name
from ckpt_browser.producers.timeline import named_checkpoints, newest
from ckpt_browser.readers.walk import MAX_DEPTH


def detect(path: str, depth: int = 0) -> Detection:
    """Say which framework wrote `path` (a checkpoint folder or one file). Never raises for
    odd contents; a missing path gives framework "unknown" with an error problem. `depth`:
    how many run folders were gone through to get here (bounded at walk.MAX_DEPTH)."""
    if os.path.isdir(path):
        return _folder(path, depth)
    if os.path.isfile(path):
        return _file(path)
    return Detection(path, path, "unknown",
                     problems=(Problem(ERROR, None, "no such file or folder"),))


def _claimed(seen: Seen) -> Detection | None:
    for producer in PRODUCERS:
        if producer.claims(seen):
            return producer.roles(seen)
    return None


def _file(path: str) -> Detection:
    root, name = os.path.split(path)
    root = root or "."
    parent = os.path.basename(os.path.abspath(root))
    step, epoch, source = step_from_name(name if name.endswith(".ckpt") else parent)
    seen = Seen(path, root, [name], step, epoch, source, step_from_name)
    return _claimed(seen) or Detection(path, root, "unknown", roles={OTHER: (name,)})


def _folder(path: str, depth: int) -> Detection:
    names = listdir(path)
    base = os.path.basename(os.path.abspath(path))
    step, epoch, source = step_from_name(base)
    found = _claimed(Seen(path, path, names, step, epoch, source, step_from_name))
    if found is not None:
        return found
    problems: tuple[Problem, ...] = ()
    if depth < MAX_DEPTH:
        latest = _latest_child(path, depth)
        if latest is not None:
            return latest
    elif newest(path) is not None:
        problems = (Problem(WARNING, None, f"run folders nested over {MAX_DEPTH} deep: the "
                            f"checkpoints in {base} are not looked into"),)
    return Detection(path, path, "unknown", step, source, epoch,
                     roles={OTHER: tuple(names)} if names else {}, problems=problems)


def _latest_child(path: str, depth: int) -> Detection | None:
    """A run folder holding checkpoint-N / step-N ... folders: open the newest."""
    found = newest(path)
    if found is None:
        return None
    entry, count = found
    opened = detect(entry.path, depth + 1)
    note = Problem(INFO, None, f"{count} checkpoints here; showing {entry.name}, the latest"
                   if count > 1 else f"showing {entry.name}, the only checkpoint here")
    return replace(opened, problems=(note,) + opened.problems)


def with_formats(entries: list[TimelineEntry]) -> list[TimelineEntry]:
    """The entries newest first, each with the framework that wrote it."""
    return newest_first([replace(e, format=detect(e.path).framework) for e in entries])


def find_checkpoints(folder: str) -> list[TimelineEntry]:
    """Checkpoints inside a folder, named like checkpoints, newest first, each with the
    framework that wrote it."""
    return with_formats(named_checkpoints(folder))
