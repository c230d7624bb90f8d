"""A folder of several checkpoints (`output_dir/`, `runs/`) as a timeline, newest first."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace

from ckpt_browser.model import natural_key
from ckpt_browser.readers.layout import MARKER_FILES

# Checkpoint folder and file names the frameworks write (catalog sections 1-6).
_STEP_NAMES = [
    ("checkpoint-N", re.compile(r"^checkpoint-(\d+)$")),  # HF Trainer
    ("step-N", re.compile(r"^step-(\d+)$")),  # torchtitan
    ("step_N", re.compile(r"^step_(\d+)$")),  # accelerate examples
    ("checkpoint_N", re.compile(r"^checkpoint_(\d+)$")),  # accelerate: a save counter
    ("epoch_N", re.compile(r"^epoch_(\d+)$")),  # accelerate examples: an epoch
    ("global_stepN", re.compile(r"^global_step(\d+)$")),  # DeepSpeed
    ("iter_N", re.compile(r"^iter_(\d{7})$")),  # Megatron
    ("lightning .ckpt", re.compile(r"^(?:.*[-_])?step=(\d+)(?:-v\d+)?\.ckpt$")),
]
_OTHER = re.compile(r"^(last(-v\d+)?\.ckpt|release)$")
# Folders that hold step folders one level down: torchtitan's checkpoint/, accelerate's checkpoints/.
_NESTING = ("checkpoint", "checkpoints")


@dataclass(frozen=True)
class TimelineEntry:
    path: str
    name: str  # relative to the timeline folder
    step: int | None
    mtime: float
    kind: str  # which naming rule matched, e.g. "checkpoint-N"
    format: str = ""  # the framework that wrote it, from its file names

    @property
    def counter(self) -> str:
        """What the number means: not every framework's number is a training step."""
        return {"checkpoint_N": "save #", "epoch_N": "epoch "}.get(self.kind, "step ")


def step_of(name: str) -> tuple[int | None, str | None]:
    """(number, rule) when a file or folder name looks like a checkpoint, else (None, None)."""
    for kind, rule in _STEP_NAMES:
        m = rule.match(name)
        if m:
            return int(m.group(1)), kind
    if _OTHER.match(name):
        return None, name
    return None, None


def _entries(folder: str, prefix: str = "") -> list[TimelineEntry]:
    found = []
    try:
        names = os.listdir(folder)
    except OSError:
        return found
    for name in names:
        path = os.path.join(folder, name)
        step, kind = step_of(name)
        if kind is not None:
            try:
                mtime = os.stat(path).st_mtime
            except OSError:
                continue
            found.append(TimelineEntry(path, prefix + name, step, mtime, kind))
        elif (name in _NESTING and os.path.isdir(path) and not os.path.islink(path)
              and not prefix):
            found.extend(_entries(path, prefix=name + "/"))
    return found


def find_checkpoints(folder: str) -> list[TimelineEntry]:
    """Checkpoints inside a folder, newest first (highest step, then latest write)."""
    from ckpt_browser.readers.frameworks import detect

    entries = [replace(e, format=detect(e.path).framework) for e in _entries(folder)]
    entries.sort(key=lambda e: (e.step if e.step is not None else -1, e.mtime,
                                natural_key(e.name)), reverse=True)
    return entries


_MARKERS = (*MARKER_FILES, ".metadata", "meta.pt")


def is_timeline(folder: str) -> bool:
    """A folder of checkpoints rather than a checkpoint: no weights or markers of its own,
    and at least one child named like a checkpoint."""
    if not os.path.isdir(folder):
        return False
    try:
        names = os.listdir(folder)
    except OSError:
        return False
    if any(n in _MARKERS or n.endswith((".safetensors", ".index.json", ".bin", ".pt", ".pth"))
           for n in names):
        return False
    return bool(_entries(folder))  # names only: the caller lists them (and detects each) once
