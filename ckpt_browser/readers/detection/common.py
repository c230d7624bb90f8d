"""What every framework's detection shares: the Detection record, steps read from names,
sorting names into roles, and reading the tiny marker files some frameworks write."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from ckpt_browser.readers.regular import open_regular
from ckpt_browser.model import ERROR, Problem, natural_key

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


STEP_DIRS = [  # (regex, what the number counts)
    (re.compile(r"^checkpoint-(\d+)$"), "step"),
    (re.compile(r"^step-(\d+)$"), "step"),
    (re.compile(r"^step_(\d+)$"), "step"),
    (re.compile(r"^global_step(\d+)(?:_universal)?$"), "step"),
    (re.compile(r"^iter_(\d{7})$"), "step"),
    (re.compile(r"^epoch_(\d+)$"), "epoch"),
    (re.compile(r"^checkpoint_(\d+)$"), "save"),  # accelerate: a save counter, not a step
]
LIGHTNING_NAME = re.compile(r"(?:^|[-_])epoch=(\d+)|(?:^|[-_])step=(\d+)")


def listdir(folder: str) -> list[str]:
    try:
        return sorted(os.listdir(folder), key=natural_key)
    except OSError:
        return []


def isdir(folder: str, name: str) -> bool:
    return os.path.isdir(os.path.join(folder, name))


def step_from_name(name: str) -> tuple[int | None, int | None, str]:
    """(step, epoch, source) from a checkpoint folder or file name."""
    for pattern, what in STEP_DIRS:
        m = pattern.match(name)
        if m:
            n = int(m.group(1))
            if what == "step":
                return n, None, f"folder name {name}"
            if what == "epoch":
                return None, n, f"folder name {name}"
            return None, None, f"folder name {name} counts saves, not steps"
    if name.endswith(".ckpt"):
        step = epoch = None
        for m in LIGHTNING_NAME.finditer(name[:-5]):
            if m.group(1) is not None:
                epoch = int(m.group(1))
            else:
                step = int(m.group(2))
        if step is not None or epoch is not None:
            return step, epoch, f"file name {name}"
    return None, None, ""


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


def dangling(marker: str, tag: str, folders=(), noun: str = "tag") -> Problem:
    """`marker` names a folder that is not here; `folders` are the ones that are."""
    newest = f"; the newest {noun} folder here is {max(folders, key=natural_key)}" \
        if folders else ""
    return Problem(ERROR, marker, f"{marker} names {tag}, which does not exist{newest}")
