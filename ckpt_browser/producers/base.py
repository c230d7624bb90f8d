"""What every producer shares: the Producer interface, the Detection it returns, and the
small helpers its rules use (roles from names, the tiny marker files some frameworks write).

A producer is a library that writes checkpoints (a training framework, a project). Each is one
module of this package behind one `Producer`; `producers.PRODUCERS` orders them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from ckpt_browser.model import ERROR, Component, Finding, Problem, TrainingState, natural_key
from ckpt_browser.parts.common import Found
from ckpt_browser.parts.files import StateFiles, read_json
from ckpt_browser.readers.regular import open_regular
from ckpt_browser.readers.walk import list_folder
from ckpt_browser.standins import PickleFile

MAX_MARKER = 4096  # a pointer file (Producer.pointers) holds one short line
OTHER = "other"  # role for files that hold no resume state (config, training_args.bin ...)
NOT_EXACT = "the resume will not be bit-exact"


@dataclass(frozen=True)
class Detection:
    """What the names in a checkpoint say. File names are relative to `root`."""

    path: str  # as the user gave it
    root: str  # folder the names below are relative to
    framework: str  # a Producer's id, or "unknown"
    step: int | None = None
    step_source: str = ""  # "folder name checkpoint-6", "latest names global_step4" ...
    epoch: int | None = None  # from `epoch=E-step=S.ckpt` or `epoch_N`
    variant: str = ""  # which of its producer's layouts, in its own words ("fsdp", "sharded" ...)
    roles: dict[str, tuple[str, ...]] = field(default_factory=dict)  # component kind -> files
    dcp: tuple[str, ...] = ()  # DCP folders relative to root ("" is root itself)
    tag: str = ""  # the folder a pointer file names (a tag, an iteration), relative to root
    problems: tuple[Problem, ...] = ()

    def files(self, role: str) -> tuple[str, ...]:
        return self.roles.get(role, ())


@dataclass(frozen=True)
class Seen:
    """What a producer is shown: a folder and its names, or one file and its name. The step
    is read from the names already (the folder's name; a file's own .ckpt name or its
    folder's)."""

    path: str
    root: str  # `path` for a folder, the folder holding it for a file
    names: list[str]  # the folder's names, or [the file's name]
    step: int | None = None
    epoch: int | None = None
    source: str = ""
    # (step, epoch, source) any name says, by every producer's step names
    # (names.step_from_name): a folder a pointer file names can be named anything
    read_step: Callable[[str], tuple[int | None, int | None, str]] = lambda name: (None, None, "")

    @property
    def is_file(self) -> bool:
        return self.path != self.root

    @property
    def base(self) -> str:
        return os.path.basename(os.path.abspath(self.path))


@dataclass(frozen=True)
class StepName:
    """A checkpoint name a producer writes: `pattern`'s group 1 is the number, and `counts`
    says what it counts ("step", "epoch", "save"; "" for a name without one, like last.ckpt).
    `split` reads (step, epoch) from a name that holds both (epoch=E-step=S)."""

    kind: str
    pattern: re.Pattern
    counts: str
    split: Callable[[str], tuple[int | None, int | None]] | None = None


class EngineParts(Protocol):
    """An engine's save as another producer's builder reads it (Engine.parts)."""

    model_files: list[str]
    optim_files: list[str]
    states: PickleFile | None  # the file holding the engine's own record
    ms: dict  # that record's fields (the outer trainer's own state may be in it)

    @property
    def world(self) -> int | None: ...  # the data-parallel size it was saved on

    def owns(self, name: str) -> bool: ...  # one of the engine's model files
    def weights(self, fs: StateFiles, files) -> Component: ...
    def optimizer(self, fs: StateFiles, universal) -> Component: ...
    def scheduler(self, fs: StateFiles) -> Component: ...
    def scaler(self, fs: StateFiles) -> Component: ...


@dataclass(frozen=True)
class Engine:
    """A producer whose save another producer's folder holds: trainers that hand saving to
    an engine, which writes its own pointer and tag folder inside theirs. The outer producer
    finds it through ENGINES, never by name; its detection's `variant` is then the engine's
    id."""

    id: str
    name: str  # for people
    marker: str  # the file that names its tag folder
    # save_dir(seen, tags, pointer): the folder is the engine's save dir, its tag folders
    # named by `tags`: the engine's detection (roles relative to the folder), or None when it
    # holds no engine save. `pointer`: the outer resume loads the tag the marker names.
    save_dir: Callable[[Seen, re.Pattern, bool], Detection | None]
    parts: Callable[[Detection, StateFiles, Found], EngineParts]


ENGINES: list[Engine] = []  # the registry's engines, in its order (producers/__init__ fills it)


def engine_parts(det: Detection, fs: StateFiles, out: Found) -> EngineParts | None:
    """The engine save a detection nests (its variant is the engine's id), read."""
    for e in ENGINES:
        if det.variant == e.id:
            return e.parts(det, fs, out)
    return None


def engine_save(seen: Seen, tags: re.Pattern, pointer: bool = True) -> Detection | None:
    """The first engine whose save the folder holds."""
    for e in ENGINES:
        found = e.save_dir(seen, tags, pointer)
        if found is not None:
            return found
    return None


def engine_names() -> str:
    return " or ".join(f"{e.marker} ({e.name})" for e in ENGINES)


@dataclass(frozen=True)
class Producer:
    """One library's rules. `claims(seen)`: these names are its own (registry order decides
    between two that claim); `roles(seen)`: which file holds which part of the state.
    `rank_names`: its per-rank files or folders, group 1 the rank. `rng_file(rank, n)`: the
    RNG file that rank reads when n processes resume, for a producer that writes one each."""

    id: str
    claims: Callable[[Seen], bool]
    roles: Callable[[Seen], Detection]
    step_names: tuple[StepName, ...] = ()
    rank_names: re.Pattern | None = None
    rng_file: Callable[[int, int], str] | None = None
    # reads the seven components from the files `roles` named; None: by content (parts.content)
    build: Callable[[Detection, StateFiles], Found] | None = None
    # one torch file whose top-level keys (`keys`) are this producer's, whatever its name:
    # the detection to read it by; None when the keys are not its own
    own_file: Callable[[Detection, str, set[str]], Detection | None] | None = None
    # Its own resume rules, each a list of findings. Every producer's run on every checkpoint
    # (a producer's optimizer shards nested in another's folder are still its own), so each
    # answers only for what is its own, by facts or by ts.framework.
    # rank_checks(components): per-rank files its resume cannot do without
    rank_checks: Callable[[dict[str, Component]], list[Finding]] | None = None
    # world_checks(ts, components, n): resuming on n processes (--world-size)
    world_checks: Callable[[TrainingState, dict[str, Component], int], list[Finding]] | None \
        = None
    # scheduler_at(ts, last_epoch): where its resume expects the LR scheduler's last_epoch to
    # be, and why, e.g. (120, "global step 120"); None: no expectation. Asked only of the
    # checkpoint's own producer, with its step known.
    scheduler_at: Callable[[TrainingState, int], tuple[int, str] | None] | None = None
    # per_epoch(ts, value): its schedulers step once per epoch, and `value` is that count
    per_epoch: Callable[[TrainingState, int], bool] | None = None
    weights_only: bool = False  # it writes weights and never training state (safetensors)
    # files that make a folder one checkpoint of its own, never a folder of several
    marks: tuple[str, ...] = ()
    # of those, the ones that name the checkpoint its resume loads (an error in one leaves the
    # resume nothing to load)
    pointers: tuple[str, ...] = ()
    nests: tuple[str, ...] = ()  # folders that hold its step folders one level down
    engine: Engine | None = None  # it saves inside other producers' folders too


def rx(*patterns: str) -> re.Pattern:
    return re.compile("^(?:" + "|".join(patterns) + ")$")


def step_name(kind: str, pattern: str, counts: str = "step") -> StepName:
    return StepName(kind, re.compile(f"^{pattern}$"), counts)


def listdir(folder: str) -> list[str]:
    """The folder's names, bounded, without links that loop back (the layout reports those)."""
    try:
        return list(list_folder(folder).names)
    except OSError:
        return []


def isdir(folder: str, name: str) -> bool:
    return os.path.isdir(os.path.join(folder, name))


# --- names and order ---------------------------------------------------------------------------

def number_in(name: str, step_names) -> tuple[int | None, StepName | None]:
    """The number in `name` and the step name it matches, by the producers' `step_names`."""
    for s in step_names:
        if s.pattern.match(name):
            if s.split is not None:
                step, epoch = s.split(name)
                return (step if step is not None else epoch), s
            m = s.pattern.match(name)
            return (int(m.group(1)) if m and m.groups() else None), s
    return None, None


def newest_name(names, step_names) -> str:
    """The newest of several checkpoint names in one folder (the tag or iteration folders
    a pointer file chooses from): highest number, then the name."""
    def order(name: str) -> tuple:
        number = number_in(name, step_names)[0]
        return (number if number is not None else -1, natural_key(name))

    return max(names, key=order)


# --- roles -------------------------------------------------------------------------------------

def match_roles(table: dict[str, re.Pattern], names: list[str], prefix: str = "") -> dict:
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


# --- resume rules ------------------------------------------------------------------------------

def facts_of(ts: TrainingState, kind: str) -> dict:
    """A component's facts, when they still describe what is on disk (ok or incomplete)."""
    c = ts.components.get(kind)
    return c.facts if c is not None and c.status in ("ok", "incomplete") else {}


def per_update(ts: TrainingState, last_epoch: int) -> tuple[int, str]:
    """scheduler_at of a producer that steps the scheduler once per optimizer update."""
    return ts.step or 0, f"global step {ts.step}"


MAX_LISTED = 8  # missing ranks named one finding each; the rest counted in one


def missing_ranks(facts: dict, kind: str, severity, what: str) -> tuple[list[int], list[Finding]]:
    """The first missing ranks (facts["missing_ranks"]), to name one finding each, and a
    finding that counts the rest (the facts list the first ones and count them all)."""
    ranks = list(facts.get("missing_ranks") or ())
    count = facts.get("missing_rank_count", len(ranks))
    more = []
    if count > MAX_LISTED:
        upto = f" to {ranks[-1]}" if count == len(ranks) else " on"
        more.append(Finding(severity, kind, None, f"{count - MAX_LISTED:,} more {what} are "
                            f"missing (ranks {ranks[MAX_LISTED]}{upto})."))
    return ranks[:MAX_LISTED], more


# --- marker files ------------------------------------------------------------------------------

def small_json(path: str) -> dict | None:
    """A small JSON object a producer's names point at (a config.json), or None."""
    return read_json(path, MAX_MARKER * 16)[0]


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


def dangling(marker: str, tag: str, folders=(), noun: str = "tag", here: str = "",
             step_names=()) -> Problem:
    """`marker` names a folder that is not here (in `here`, when given: or is no folder that
    can be followed); `folders` are the ones that are, named by `step_names`."""
    newest = f"; the newest {noun} folder here is {newest_name(folders, step_names)}" \
        if folders else ""
    what = "is not a folder that can be followed (a file, or a link that loops back)" \
        if here and os.path.lexists(os.path.join(here, tag)) else "does not exist"
    return Problem(ERROR, marker, f"{marker} names {tag}, which {what}{newest}")
