"""Checkpoint names and "the newest": every producer's step names in one table, and one
ordering, used by detection (a run folder opens its newest checkpoint) and by the timeline
(a folder of checkpoints, newest first). Each producer's module says where upstream its
names come from; FORMATS.md lists them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ckpt_browser.model import natural_key
from ckpt_browser.producers import PRODUCERS
from ckpt_browser.producers.base import number_in

STEP_NAMES = tuple(s for p in PRODUCERS for s in p.step_names)
_COUNTS = {s.kind: s.counts for s in STEP_NAMES}
_SPLIT = {s.kind for s in STEP_NAMES if s.split is not None}  # names holding step and epoch
COUNTER_WORD = {"step": "step ", "epoch": "epoch ", "save": "save #"}


def name_number(name: str) -> tuple[int | None, str | None, str]:
    """(number, kind, what the number counts) when `name` is a checkpoint's name, else
    (None, None, ""). `last.ckpt` and `release` are checkpoints without a number (their kind
    is the name itself)."""
    number, s = number_in(name, STEP_NAMES)
    if s is None:
        return None, None, ""
    if not s.counts:
        return None, name, ""
    if s.split is not None:
        return number, s.kind, "step" if s.split(name)[0] is not None else "epoch"
    return number, s.kind, s.counts


def step_of(name: str) -> tuple[int | None, str | None]:
    """(number, kind) for the timeline."""
    number, kind, _ = name_number(name)
    return number, kind


def step_from_name(name: str) -> tuple[int | None, int | None, str]:
    """(step, epoch, source) for detection: only a number that counts steps is a step."""
    number, s = number_in(name, STEP_NAMES)
    if s is not None and s.split is not None:
        step, epoch = s.split(name)
        return step, epoch, f"file name {name}"
    if number is None or s is None:
        return None, None, ""
    if s.counts == "step":
        return number, None, f"folder name {name}"
    if s.counts == "epoch":
        return None, number, f"folder name {name}"
    return None, None, f"folder name {name} counts saves, not steps"


@dataclass(frozen=True)
class TimelineEntry:
    path: str
    name: str  # relative to the timeline folder
    step: int | None  # the number in its name (or in its contents): see `counter`
    mtime: float
    kind: str  # which naming rule matched, e.g. "checkpoint-N"
    format: str = ""  # the framework that wrote it, from its file names

    @property
    def counter(self) -> str:
        """What the number means: not every framework's number is a training step."""
        counts = name_number(os.path.basename(self.name))[2] if self.kind in _SPLIT \
            else _COUNTS.get(self.kind, "step")
        return COUNTER_WORD.get(counts, "step ")


def newest_first(entries: list[TimelineEntry]) -> list[TimelineEntry]:
    """The one ordering: highest number first (a numberless `last.ckpt` after them); at the
    same number a mid-epoch save (timm's recovery-E-B) before the end of that epoch, then
    the latest write, then the name."""
    return sorted(entries, key=lambda e: (e.step if e.step is not None else -1,
                                          not os.path.basename(e.name).startswith("recovery-"),
                                          e.mtime, natural_key(e.name)), reverse=True)

