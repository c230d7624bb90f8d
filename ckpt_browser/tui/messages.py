"""Messages from the loading worker to the app (small dataclasses)."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from ckpt_browser.analysis.modules import ModuleNode
from ckpt_browser.model import Checkpoint, ShardInfo


@dataclass
class HeadersRead(Message):
    """A batch of shard headers has been read."""

    batch: list[ShardInfo]


@dataclass
class LoadFinished(Message):
    """Every header is read and the cross-checks have run."""

    checkpoint: Checkpoint
    modules: ModuleNode


@dataclass
class FilterReady(Message):
    """A filter pattern's matches are computed; the tree can show them at once."""

    pattern: str
