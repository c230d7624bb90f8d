"""The checkpoints in a run folder, from names alone: its children named like checkpoints
(names.py), one nesting level down too, each real folder once; what walking it finds wrong.
"""

from __future__ import annotations

import os
import stat
import threading
from collections import OrderedDict
from dataclasses import dataclass, replace

from ckpt_browser.model import WARNING, Problem, natural_key
from ckpt_browser.producers import PRODUCERS
from ckpt_browser.producers.names import TimelineEntry, newest_first, step_of
from ckpt_browser.readers.regular import missing_reason
from ckpt_browser.readers.walk import list_folder, only_loops

# Folders that hold step folders one level down, and files that make a folder one checkpoint
# (never a run folder), by the producers that write them
NESTING = tuple(dict.fromkeys(n for p in PRODUCERS for n in p.nests))
MARKER_FILES = tuple(dict.fromkeys(m for p in PRODUCERS for m in p.marks))


@dataclass(frozen=True)
class Walked:
    """The checkpoints named in a run folder, and what walking it found wrong."""

    entries: list[TimelineEntry]
    problems: tuple[Problem, ...] = ()


_WALKED: OrderedDict[tuple, Walked] = OrderedDict()  # the last few walks, by folder and mtime
_WALKED_LOCK = threading.Lock()  # the browser's workers walk from threads


def checkpoints_in(folder: str, prefix: str = "") -> Walked:
    """Children of `folder` named like checkpoints (one nesting level down too), unordered,
    from names alone: nothing is opened. Each real folder once. A link that leads back to the
    folder or above it, a folder holding only such links, and a link that leads nowhere are
    problems, never checkpoints. The same folder, unchanged since (its mtime), is not walked
    again: each checkpoint of a run opened or checked walks its run folder, and a run of
    10,000 checkpoints took a second a walk."""
    try:
        st = os.stat(folder)
    except OSError:
        return Walked([])
    # the folder as given too: the entries hold paths under it (a relative one is relative)
    key = (folder, os.path.abspath(folder), prefix, st.st_dev, st.st_ino, st.st_mtime_ns)
    with _WALKED_LOCK:
        hit = _WALKED.get(key)
    if hit is None:
        hit = _walk(folder, prefix)
        with _WALKED_LOCK:
            _WALKED[key] = hit
            while len(_WALKED) > 16:
                _WALKED.popitem(last=False)
    return Walked(list(hit.entries), hit.problems)


def _walk(folder: str, prefix: str) -> Walked:
    try:
        listing = list_folder(folder)
    except OSError:
        return Walked([])
    shown = f"{os.path.basename(os.path.abspath(folder))}/"
    # the loops a search for checkpoints would go into (other links are no timeline's concern)
    followed = replace(listing, loops=tuple(lp for lp in listing.loops
                                            if lp.name in NESTING or step_of(lp.name)[1]))
    problems = list(followed.problems(shown))
    found: list[TimelineEntry] = []
    for name in listing.names:
        path = os.path.join(folder, name)
        step, kind = step_of(name)
        if kind is not None:
            try:
                st = os.stat(path)
            except OSError:
                if os.path.islink(path):  # a loop of links, or a link to nothing
                    problems.append(Problem(WARNING, None, f"{shown}{name} "
                                            f"{missing_reason(path)}: not a checkpoint"))
                continue
            loop = only_loops(path) if stat.S_ISDIR(st.st_mode) else None
            if loop is not None:
                problems.append(Problem(WARNING, None, f"{shown}{name} holds only links back "
                                        f"({loop.name} {loop.words()}): not a checkpoint"))
                continue
            found.append(TimelineEntry(path, prefix + name, step, st.st_mtime, kind))
        elif (name in NESTING and os.path.isdir(path) and not os.path.islink(path)
              and not prefix):  # one level down only
            inner = checkpoints_in(path, prefix=name + "/")
            found.extend(inner.entries)
            problems.extend(inner.problems)
    return Walked(_once(found), tuple(problems))


def _once(entries: list[TimelineEntry]) -> list[TimelineEntry]:
    """A link to a checkpoint listed beside it is that checkpoint again: each real folder
    once, under its own name (not the link's). Two links to one file both stay: the Hugging
    Face cache links identical files to one blob."""
    links = {e.path for e in entries if os.path.islink(e.path)}
    if not links:
        return entries  # no two names of one folder lead to one place
    kept, taken = [], set()
    for e in sorted(entries, key=lambda e: (e.path in links, natural_key(e.name))):
        real = os.path.realpath(e.path)
        if real in taken:
            continue
        kept.append(e)
        if e.path not in links or os.path.isdir(e.path):
            taken.add(real)
    return kept


def named_checkpoints(folder: str, prefix: str = "") -> list[TimelineEntry]:
    """checkpoints_in without the problems."""
    return checkpoints_in(folder, prefix).entries


def run_problems(folder: str) -> tuple[Problem, ...]:
    """What walking a run folder finds wrong (loops, links to nothing, a cut listing)."""
    return checkpoints_in(folder).problems


def newest(folder: str) -> tuple[TimelineEntry, int] | None:
    """The newest named checkpoint in `folder` and how many there are, or None."""
    entries = newest_first(named_checkpoints(folder))
    return (entries[0], len(entries)) if entries else None


def is_timeline(folder: str) -> bool:
    """A folder of checkpoints rather than a checkpoint: no weights or markers of its own,
    and at least one child named like a checkpoint."""
    if not os.path.isdir(folder):
        return False
    try:
        names = list_folder(folder).names
    except OSError:
        return False
    if any(n in (*MARKER_FILES, ".metadata", "meta.pt")
           or n.endswith((".safetensors", ".index.json", ".bin", ".pt", ".pth")) for n in names):
        return False
    return bool(named_checkpoints(folder))  # names only: the caller detects each once
