"""Messages from the browse screen's workers (small dataclasses). `load` is the BrowseModel
of the checkpoint they were read for: a newer checkpoint may be open when they arrive."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from ckpt_browser.analysis.modules import ModuleNode
from ckpt_browser.model import Checkpoint, FileInfo, ResumeReport, TrainingState
from ckpt_browser.tui.common.workers import ForLoad


@dataclass
class HeadersRead(ForLoad):
    """A batch of shard headers has been read."""

    batch: list[FileInfo]


@dataclass
class LoadFinished(ForLoad):
    """Every header is read and the cross-checks have run."""

    checkpoint: Checkpoint


@dataclass
class ModulesReady(ForLoad):
    """The whole module tree, built after loading so the module view opens at once."""

    modules: ModuleNode


@dataclass
class FilterReady(Message):
    """A filter pattern's matches are computed; the tree can show them at once."""

    pattern: str


@dataclass
class TrainingRead(ForLoad):
    """The training state (optimizer, scheduler, RNG ...) has been read."""

    training: TrainingState
    resume: ResumeReport | None


@dataclass
class ValuesFound(ForLoad):
    """`v` found NaN or Inf in a tensor's values (its file, its name, unsound's words)."""

    file: str
    name: str
    wrong: list[str]
