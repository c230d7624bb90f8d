"""Listing a folder the way every walk here does it: bounded, and never into a loop.

A symlink among a folder's children that leads back to the folder itself or to a folder above
it (above where it really is, or above the path it was reached by: `run/a -> ../b` whose
`b/c -> ../run` leads back too) would list the same files again and again. The kernel stops
after 40 links, by which time a run folder's `checkpoint-9 -> .` has been read as its newest
checkpoint. Such a link is left out of the listing and reported: a warning naming the link and
where it points. A folder with more entries than any checkpoint holds is cut, and said to be.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass

from ckpt_browser.model import WARNING, Problem, natural_key

MAX_ENTRIES = 100_000  # names taken from one folder (8,192 DCP ranks write 8,193 files)
MAX_DEPTH = 8  # run folders followed inside run folders (real runs nest one or two)


@dataclass(frozen=True)
class Loop:
    name: str  # the link, in the folder listed
    target: str  # what the link says (readlink)
    back_to: str  # "the folder it is in", "run, a folder above it"

    def words(self) -> str:
        return f"is a symlink to {self.target!r}, which leads back to {self.back_to}: a loop, " \
               "not followed"


@dataclass(frozen=True)
class Listing:
    names: tuple[str, ...]  # natural order, loops left out
    loops: tuple[Loop, ...] = ()
    cut: bool = False  # over MAX_ENTRIES: the rest (in the file system's order) is not listed

    def problems(self, shown: str = "") -> tuple[Problem, ...]:
        """A warning for each loop, and for the cut. `shown` names the folder listed ("run/")
        when the problems go with another folder's checkpoint; else they name the link."""
        found = [Problem(WARNING, None, f"{shown}{loop.name} {loop.words()}") if shown
                 else Problem(WARNING, loop.name, loop.words()) for loop in self.loops]
        if self.cut:
            found.append(Problem(WARNING, None, f"{shown or 'the folder'} holds over "
                                 f"{MAX_ENTRIES:,} entries: only {MAX_ENTRIES:,} of them "
                                 "(in no particular order) are looked at"))
        return tuple(found)


def list_folder(folder: str) -> Listing:
    """The folder's children, bounded and without loops. Raises OSError when it cannot be
    listed (missing, not a folder, no permission)."""
    with os.scandir(folder) as it:
        entries = list(itertools.islice(it, MAX_ENTRIES + 1))
    names, loops = [], []
    back: dict[str, str] | None = None  # worked out at the first symlink only
    for entry in entries[:MAX_ENTRIES]:
        if entry.is_symlink():
            back = back if back is not None else _above(folder)
            loop = _loop(entry, back)
            if loop is not None:
                loops.append(loop)
                continue
        names.append(entry.name)
    names.sort(key=natural_key)
    loops.sort(key=lambda lp: natural_key(lp.name))
    return Listing(tuple(names), tuple(loops), len(entries) > MAX_ENTRIES)


def only_loops(folder: str) -> Loop | None:
    """The first loop when every child of `folder` is a loop (a folder that only leads back,
    such as `b` of `checkpoint-5 -> b`, `b/checkpoint-6 -> ../checkpoint-5`), else None."""
    first, back = None, None
    try:
        with os.scandir(folder) as it:
            for entry in itertools.islice(it, MAX_ENTRIES):
                if not entry.is_symlink():
                    return None
                back = back if back is not None else _above(folder)
                loop = _loop(entry, back)
                if loop is None:
                    return None
                first = first or loop
    except OSError:
        return None
    return first


def loops_back(path: str) -> str:
    """Why the path itself is a loop (a symlink on it leads back to a folder it went through:
    a snapshot linked to its own repo folder), else "". Checked before anything under it is
    walked."""
    if not os.path.isdir(path):
        return ""
    real, here = os.path.realpath(path), os.path.abspath(path)
    parent = os.path.dirname(here)
    while parent != here:
        if os.path.realpath(parent) == real:
            return (f"a loop: it leads back to {os.path.basename(parent) or parent}, a folder "
                    "above it on this path (a symlink on the way points back up)")
        here, parent = parent, os.path.dirname(parent)
    return ""


def _above(folder: str) -> dict[str, str]:
    """Real path -> how to say it, for the folder and every folder above it: above its real
    path, and above the path it was reached by (each of those resolved)."""
    real = os.path.realpath(folder)
    back: dict[str, str] = {}
    for start in (real, os.path.abspath(folder)):
        path = start
        while True:
            r = os.path.realpath(path)
            back.setdefault(r, "the folder it is in" if r == real
                            else f"{os.path.basename(r) or r}, a folder above it")
            parent = os.path.dirname(path)
            if parent == path:
                break
            path = parent
    return back


def _loop(entry: os.DirEntry, back: dict[str, str]) -> Loop | None:
    try:
        if not entry.is_dir():  # follows the link: a file, or dangling, or a loop of links
            return None  # (those are the readers' to report, naming the file)
    except OSError:
        return None
    said = back.get(os.path.realpath(entry.path))
    if said is None:
        return None
    try:
        target = os.readlink(entry.path)
    except OSError:
        target = "?"
    return Loop(entry.name, target, said)
