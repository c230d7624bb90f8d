"""What every framework's detection shares: the Detection record, steps read from names,
sorting names into roles, and reading the tiny marker files some frameworks write."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from ckpt_browser.model import ERROR, Problem
from ckpt_browser.readers.checkpoints import newest_name
from ckpt_browser.readers.regular import open_regular
from ckpt_browser.readers.walk import list_folder

MAX_MARKER = 4096  # `latest` and the Megatron tracker hold one short line
OTHER = "other"  # role for files that hold no resume state (config, training_args.bin ...)

FRAMEWORKS = ("hf-trainer", "accelerate", "lightning", "torchtitan", "dcp", "deepspeed",
              "megatron", "safetensors", "torch", "unknown")


@dataclass(frozen=True)
class Detection:
    """What the names in a checkpoint say. File names are relative to `root`."""

    path: str  # as the user gave it
    root: str  # folder the names below are relative to
    framework: str  # one of FRAMEWORKS
    step: int | None = None
    step_source: str = ""  # "folder name checkpoint-6", "latest names global_step4" ...
    epoch: int | None = None  # from `epoch=E-step=S.ckpt` or `epoch_N`
    variant: str = ""  # "fsdp", "deepspeed", "sharded", "universal", "torch_dist", "torch" ...
    roles: dict[str, tuple[str, ...]] = field(default_factory=dict)  # component kind -> files
    dcp: tuple[str, ...] = ()  # DCP folders relative to root ("" is root itself)
    tag: str = ""  # DeepSpeed tag / Megatron iteration folder, relative to root
    problems: tuple[Problem, ...] = ()

    def files(self, role: str) -> tuple[str, ...]:
        return self.roles.get(role, ())


def rx(*patterns: str) -> re.Pattern:
    return re.compile("^(?:" + "|".join(patterns) + ")$")


def listdir(folder: str) -> list[str]:
    """The folder's names, bounded, without links that loop back (the layout reports those)."""
    try:
        return list(list_folder(folder).names)
    except OSError:
        return []


def isdir(folder: str, name: str) -> bool:
    return os.path.isdir(os.path.join(folder, name))


# --- roles -------------------------------------------------------------------------------------

def classify(table: dict[str, re.Pattern], names: list[str], prefix: str = "") -> dict:
    roles: dict[str, tuple[str, ...]] = {}
    for role, pattern in table.items():
        hits = tuple(prefix + n for n in names if pattern.match(n))
        if hits:
            roles[role] = hits
    return roles


def with_other(roles: dict, names: list[str], prefix: str = "") -> dict:
    used = {f for files in roles.values() for f in files}
    rest = tuple(prefix + n for n in names if prefix + n not in used and not n.startswith("."))
    if rest:
        roles = {**roles, OTHER: roles.get(OTHER, ()) + rest}
    return roles


def add(roles: dict, role: str, files) -> None:
    files = tuple(files)
    if files:
        roles[role] = roles.get(role, ()) + tuple(f for f in files if f not in roles.get(role, ()))


# --- marker files ------------------------------------------------------------------------------

def read_marker(folder: str, name: str) -> tuple[str, Problem | None]:
    try:
        with open_regular(os.path.join(folder, name)) as f:
            raw = f.read(MAX_MARKER + 1)
    except OSError as e:
        return "", Problem(ERROR, name, f"cannot read it: {e.strerror or e}")
    if len(raw) > MAX_MARKER:
        return "", Problem(ERROR, name, f"is over {MAX_MARKER:,} bytes; a marker holds one line")
    text = raw.decode("utf-8", "replace").strip()
    if not text or "/" in text or "\\" in text or text in (".", ".."):
        return "", Problem(ERROR, name, f"holds {text!r}, not a folder name")
    return text, None


def dangling(marker: str, tag: str, folders=(), noun: str = "tag", here: str = "") -> Problem:
    """`marker` names a folder that is not here (in `here`, when given: or is no folder that
    can be followed); `folders` are the ones that are."""
    newest = f"; the newest {noun} folder here is {newest_name(folders)}" \
        if folders else ""
    what = "is not a folder that can be followed (a file, or a link that loops back)" \
        if here and os.path.lexists(os.path.join(here, tag)) else "does not exist"
    return Problem(ERROR, marker, f"{marker} names {tag}, which {what}{newest}")
