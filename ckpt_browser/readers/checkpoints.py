"""Checkpoint names and "the newest": one table of the step-folder and file names the
frameworks write, and one ordering, used by detection (a run folder opens its newest
checkpoint) and by the timeline (a folder of checkpoints, newest first).

Names, upstream: HF Trainer `checkpoint-{global_step}` (transformers `trainer.py`,
PREFIX_CHECKPOINT_DIR); torchtitan `step-{step}` (`torchtitan/components/checkpoint.py`);
accelerate `checkpoint_{iteration}` with automatic naming, a save counter
(`accelerator.py` save_state); DeepSpeed `global_step{N}` (`runtime/engine.py`); Megatron
`iter_{:07d}` (`megatron/training/checkpointing.py`); Lightning `epoch={epoch}-step={step}.ckpt`,
`-vN` on a clash, and `last.ckpt` (`callbacks/model_checkpoint.py`). See FORMATS.md.
"""

from __future__ import annotations

import os
import re
import stat
import threading
from collections import OrderedDict
from dataclasses import dataclass, replace

from ckpt_browser.model import WARNING, Problem, natural_key
from ckpt_browser.readers.regular import missing_reason
from ckpt_browser.readers.walk import list_folder, only_loops

# (kind, name pattern, what its number counts)
NAMES: tuple[tuple[str, re.Pattern, str], ...] = tuple(
    (kind, re.compile(f"^{pattern}$"), counts) for kind, pattern, counts in (
        ("checkpoint-N", r"checkpoint-(\d+)", "step"),  # HF Trainer
        ("step-N", r"step-(\d+)", "step"),  # torchtitan
        ("step_N", r"step_(\d+)", "step"),  # accelerate examples
        ("global_stepN", r"global_step(\d+)(?:_universal)?", "step"),  # DeepSpeed
        ("iter_N", r"iter_(\d{7})", "step"),  # Megatron
        ("epoch_N", r"epoch_(\d+)", "epoch"),  # accelerate examples
        ("checkpoint_N", r"checkpoint_(\d+)", "save"),  # accelerate: a save counter
    ))
LIGHTNING = "lightning .ckpt"
_LIGHTNING_PARTS = re.compile(r"(?:^|[-_])epoch=(\d+)|(?:^|[-_])step=(\d+)")
_NUMBERLESS = re.compile(r"^(last(-v\d+)?\.ckpt|release)$")  # Lightning's last, Megatron's release
# Folders that hold step folders one level down: torchtitan's checkpoint/,
# accelerate's checkpoints/.
NESTING = ("checkpoint", "checkpoints")
_COUNTS = {kind: counts for kind, _, counts in NAMES}
COUNTER_WORD = {"step": "step ", "epoch": "epoch ", "save": "save #"}


def _lightning(name: str) -> tuple[int | None, int | None]:
    """(step, epoch) in a Lightning `.ckpt` file name such as `epoch=3-step=1200-v1.ckpt`."""
    step = epoch = None
    if name.endswith(".ckpt"):
        for m in _LIGHTNING_PARTS.finditer(name[:-5]):
            if m.group(1) is not None:
                epoch = int(m.group(1))
            else:
                step = int(m.group(2))
    return step, epoch


def name_number(name: str) -> tuple[int | None, str | None, str]:
    """(number, kind, what the number counts) when `name` is a checkpoint's name, else
    (None, None, ""). `last.ckpt` and `release` are checkpoints without a number."""
    for kind, pattern, counts in NAMES:
        m = pattern.match(name)
        if m:
            return int(m.group(1)), kind, counts
    step, epoch = _lightning(name)
    if step is not None:
        return step, LIGHTNING, "step"
    if epoch is not None:
        return epoch, LIGHTNING, "epoch"
    if _NUMBERLESS.match(name):
        return None, name, ""
    return None, None, ""


def step_of(name: str) -> tuple[int | None, str | None]:
    """(number, kind) for the timeline."""
    number, kind, _ = name_number(name)
    return number, kind


def step_from_name(name: str) -> tuple[int | None, int | None, str]:
    """(step, epoch, source) for detection: only a number that counts steps is a step."""
    number, kind, counts = name_number(name)
    if kind == LIGHTNING:
        step, epoch = _lightning(name)
        return step, epoch, f"file name {name}"
    if number is None:
        return None, None, ""
    if counts == "step":
        return number, None, f"folder name {name}"
    if counts == "epoch":
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
        counts = name_number(os.path.basename(self.name))[2] if self.kind == LIGHTNING \
            else _COUNTS.get(self.kind, "step")
        return COUNTER_WORD.get(counts, "step ")


def newest_first(entries: list[TimelineEntry]) -> list[TimelineEntry]:
    """The one ordering: highest number first (a numberless `last.ckpt` after them); at the
    same number a mid-epoch save (timm's recovery-E-B) before the end of that epoch, then
    the latest write, then the name."""
    return sorted(entries, key=lambda e: (e.step if e.step is not None else -1,
                                          not os.path.basename(e.name).startswith("recovery-"),
                                          e.mtime, natural_key(e.name)), reverse=True)


def newest_name(names) -> str:
    """The newest of several checkpoint names in one folder (DeepSpeed tags, Megatron
    iterations), by the same rule: highest number, then the name."""
    def order(name: str) -> tuple:
        number = name_number(name)[0]
        return (number if number is not None else -1, natural_key(name))

    return max(names, key=order)


@dataclass(frozen=True)
class Found:
    """The checkpoints named in a run folder, and what walking it found wrong."""

    entries: list[TimelineEntry]
    problems: tuple[Problem, ...] = ()


_WALKED: OrderedDict[tuple, Found] = OrderedDict()  # the last few walks, by folder and mtime
_WALKED_LOCK = threading.Lock()  # the browser's workers walk from threads


def checkpoints_in(folder: str, prefix: str = "") -> Found:
    """Children of `folder` named like checkpoints (one nesting level down too), unordered,
    from names alone: nothing is opened. Each real folder once. A link that leads back to the
    folder or above it, a folder holding only such links, and a link that leads nowhere are
    problems, never checkpoints. The same folder, unchanged since (its mtime), is not walked
    again: each checkpoint of a run opened or checked walks its run folder, and a run of
    10,000 checkpoints took a second a walk."""
    try:
        st = os.stat(folder)
    except OSError:
        return Found([])
    # the entries' paths start with `folder` as given: the same folder named another way
    # (relative, from another cwd) is another key, or it would get the other's paths
    key = (folder, os.getcwd() if not os.path.isabs(folder) else "", prefix, st.st_dev,
           st.st_ino, st.st_mtime_ns)
    with _WALKED_LOCK:
        hit = _WALKED.get(key)
    if hit is None:
        hit = _walk(folder, prefix)
        with _WALKED_LOCK:
            _WALKED[key] = hit
            while len(_WALKED) > 16:
                _WALKED.popitem(last=False)
    return Found(list(hit.entries), hit.problems)


def _walk(folder: str, prefix: str) -> Found:
    try:
        listing = list_folder(folder)
    except OSError:
        return Found([])
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
    return Found(_once(found), tuple(problems))


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


def find_checkpoints(folder: str) -> list[TimelineEntry]:
    """Checkpoints inside a folder, newest first, each with the framework that wrote it."""
    from ckpt_browser.readers.frameworks import detect

    return newest_first([replace(e, format=detect(e.path).framework)
                         for e in named_checkpoints(folder)])


def is_timeline(folder: str) -> bool:
    """A folder of checkpoints rather than a checkpoint: no weights or markers of its own,
    and at least one child named like a checkpoint."""
    from ckpt_browser.readers.layout import MARKER_FILES

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
