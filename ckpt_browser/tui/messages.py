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


@dataclass
class ModulesReady(Message):
    """The whole module tree, built after loading so the module view opens at once."""

    modules: ModuleNode


@dataclass
class FilterReady(Message):
    """A filter pattern's matches are computed; the tree can show them at once."""

    pattern: str
