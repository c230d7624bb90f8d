"""Messages from the loading worker to the app (small dataclasses)."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from ckpt_browser.analysis.modules import ModuleNode
from ckpt_browser.model import Checkpoint, ResumeReport, FileInfo, TrainingState
from ckpt_browser.tui.state import BrowseState


@dataclass
class HeadersRead(Message):
    """A batch of shard headers has been read."""

    state: BrowseState  # which load this belongs to: a newer checkpoint may be open
    batch: list[FileInfo]


@dataclass
class LoadFinished(Message):
    """Every header is read and the cross-checks have run."""

    state: BrowseState
    checkpoint: Checkpoint


@dataclass
class ModulesReady(Message):
    """The whole module tree, built after loading so the module view opens at once."""

    state: BrowseState
    modules: ModuleNode


@dataclass
class FilterReady(Message):
    """A filter pattern's matches are computed; the tree can show them at once."""

    pattern: str


@dataclass
class TrainingRead(Message):
    """The training state (optimizer, scheduler, RNG ...) has been read."""

    state: BrowseState
    training: TrainingState
    resume: ResumeReport | None
