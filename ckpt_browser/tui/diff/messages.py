"""Messages from the diff workers to the app (small dataclasses)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.message import Message

from ckpt_browser.values.diff import DiffResult, Side

if TYPE_CHECKING:
    from ckpt_browser.values.state_diff import StateDiff


@dataclass
class DiffLoaded(Message):
    """Both sides opened, names paired, statuses set, the training state compared."""

    a: Side
    b: Side
    result: DiffResult


@dataclass
class CompareProgress(Message):
    """Bytes of tensor values read so far; a newer one replaces a queued one."""

    done: int
    total: int
    name: str

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, CompareProgress)


@dataclass
class CompareDone(Message):
    """A values comparison ended: finished, cancelled, or failed (`error`)."""

    compared: int  # tensors with values now
    todo: int  # tensors the run set out to compare
    cancelled: bool = False
    error: str | None = None
    # the training state compared again, now knowing which weights moved
    state: StateDiff | None = None
