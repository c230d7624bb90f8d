"""Diff two checkpoints: structure by name, then (on request) values one tensor at a time.

Weights are compared in `tensors`; every other tensor (optimizer moments, step counters,
RNG states kept as tensors ...) in `state.tensors`, with the same statuses. Names line up after
optional prefix stripping, so a DCP tree or a training dict can be compared with an HF export.
Sharding is not a difference: only names, dtypes, shapes and values are compared.
"""

from __future__ import annotations

import fnmatch
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ckpt_browser.model import Checkpoint, Problem, TrainingState, natural_key
from ckpt_browser.values.locate import TensorLoc

if TYPE_CHECKING:
    from ckpt_browser.analysis.opened import Opened
    from ckpt_browser.values.budget import Plan
    from ckpt_browser.values.state_diff import StateDiff

STATUSES = ("only_in_a", "only_in_b", "shape_changed", "dtype_changed", "values_changed",
            "unchanged")


@dataclass
class Side:
    path: str
    ckpt: Checkpoint | None
    training: TrainingState | None
    locs: list[TensorLoc]
    problems: list[Problem] = field(default_factory=list)


@dataclass
class Row:
    name: str  # after prefix stripping
    status: str
    a: TensorLoc | None
    b: TensorLoc | None
    values: object = None  # compare.ValueDiff once compared
    error: str | None = None  # values could not be read

    @property
    def comparable(self) -> bool:
        return self.a is not None and self.b is not None and self.a.shape == self.b.shape


@dataclass
class Options:
    values: bool = False
    rtol: float = 0.0
    atol: float = 0.0
    strip_a: str = ""
    strip_b: str = ""
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    weights_only: bool = False


@dataclass
class DiffResult:
    a: Side
    b: Side
    options: Options
    rows: list[Row]  # weights
    state_rows: list[Row]  # every other tensor
    state: StateDiff | None  # None: --weights-only, a side without training state, or it failed
    notes: list[str] = field(default_factory=list)
    budget: Plan | None = None  # with --values: the rows it left unread (in errors too)

    @property
    def errors(self) -> int:
        return sum(r.error is not None for r in self.rows + self.state_rows)

    def trouble(self) -> str:
        """The one line saying which values were not compared: the budget's lines (also in
        notes), or how many could not be read."""
        said = [line for _, line in self.budget.groups()] if self.budget else []
        bad = self.errors - (len(self.budget.unread) if self.budget else 0)
        if bad:
            said.insert(0, f"the values of {bad} tensor(s) could not be read; see the report")
        return "; ".join(said)

    @property
    def differs(self) -> bool:
        if any(r.status != "unchanged" for r in self.rows + self.state_rows):
            return True
        return not self.options.weights_only and self.state is not None and self.state.differs


def side_of(opened: Opened) -> Side:
    """One side of a diff, or what `stats` reads: the opened checkpoint's tensors, each with
    where its bytes are."""
    from ckpt_browser.values.locate import all_locs

    ckpt, training = opened.checkpoint, opened.training
    return Side(opened.path, ckpt, training, all_locs(ckpt, training), opened.problems)


def structure(a: Side, b: Side, opts: Options) -> tuple[list[Row], list[Row], list[str]]:
    """Pair tensors by name: (weight rows, state rows, notes)."""
    notes: list[str] = []
    named_a = _named(a.locs, opts.strip_a, opts, notes, "A")
    named_b = _named(b.locs, opts.strip_b, opts, notes, "B")
    rows, state_rows = [], []
    for name in sorted(named_a.keys() | named_b.keys(), key=natural_key):
        la, lb = named_a.get(name), named_b.get(name)
        row = Row(name, _status(la, lb), la, lb)
        weights = (la or lb).component in ("weights", None)
        if weights:
            rows.append(row)
        elif not opts.weights_only:
            state_rows.append(row)
    if named_a and named_b and not any(r.a and r.b for r in rows + state_rows):
        notes.append("no tensor names in common; if one side adds a prefix (model., module., "
                     "state_dict.), pass --strip-prefix-a or --strip-prefix-b")
    return rows, state_rows, notes


def _named(locs: list[TensorLoc], strip: str, opts: Options, notes: list[str],
           side: str) -> dict[str, TensorLoc]:
    out: dict[str, TensorLoc] = {}
    dupes = 0
    for loc in locs:
        if opts.weights_only and loc.component not in ("weights", None):
            continue
        name = loc.key or loc.name  # a weight by its parameter name, anything else by its part
        if strip and name.startswith(strip):
            name = name[len(strip):]
        elif strip and loc.name.startswith(strip):
            name = loc.name[len(strip):]
        if opts.include and not any(fnmatch.fnmatchcase(name, g) for g in opts.include):
            continue
        if any(fnmatch.fnmatchcase(name, g) for g in opts.exclude):
            continue
        if name in out:
            dupes += 1
            continue
        out[name] = loc
    if dupes:
        notes.append(f"{side} names {dupes:,} tensor(s) twice (in different files); the first "
                     "of each is compared")
    return out


def _status(a: TensorLoc | None, b: TensorLoc | None) -> str:
    if b is None:
        return "only_in_a"
    if a is None:
        return "only_in_b"
    if a.shape != b.shape:
        return "shape_changed"
    if a.dtype != b.dtype:
        return "dtype_changed"
    return "unchanged"


def compare_values(rows: list[Row], opts: Options, cancel: threading.Event | None = None,
                   progress: Callable[[int, int, str], None] | None = None) -> Plan:
    """Fill row.values (and the status) for every comparable row, in file order, within the
    values budget: a row left out gets its reason as row.error, and the plan returned says
    which and why. progress(bytes done, bytes total, name). Raises Cancelled."""
    from ckpt_browser.values.budget import plan
    from ckpt_browser.values.compare import compare
    from ckpt_browser.values.read import ValuesError

    todo = [r for r in rows if r.comparable and r.values is None and r.error is None]
    todo.sort(key=lambda r: (r.a.pieces[0].path, r.a.pieces[0].offset) if r.a.pieces else ("", 0))
    pairs = [(r.a, r.b) for r in todo]
    row_of = {id(pair): r for pair, r in zip(pairs, todo)}
    budget = plan(pairs)
    for items, why in budget.reasons():
        for pair in items:
            row_of[id(pair)].error = f"not read: {why}"
    todo = [row_of[id(pair)] for pair in budget.admitted]
    total = sum(r.a.nbytes + r.b.nbytes for r in todo)
    done = 0
    for row in todo:
        size = row.a.nbytes + row.b.nbytes

        def step(k: int, n: int, base=done, size=size, name=row.name) -> None:
            if progress:
                progress(base + (size * k // n if n else size), total, name)

        try:
            row.values = compare(row.a, row.b, opts.rtol, opts.atol, cancel, step)
        except ValuesError as e:
            row.error = str(e)
        else:
            if row.status == "unchanged" and not row.values.close:
                row.status = "values_changed"
        done += size
        if progress:
            progress(done, total, row.name)
    return budget


def diff(a: Side, b: Side, opts: Options, cancel: threading.Event | None = None,
         progress: Callable[[int, int, str], None] | None = None) -> DiffResult:
    rows, state_rows, notes = structure(a, b, opts)
    budget = None
    if opts.values:
        budget = compare_values(rows + state_rows, opts, cancel, progress)
        notes += [line for _, line in budget.groups()]
    unmoved = ([r.name for r in rows if r.values is not None and r.values.bitwise_equal]
               if opts.values else None)
    state = None
    if not opts.weights_only and a.training is not None and b.training is not None:
        from ckpt_browser.values.state_diff import state_diff

        state = state_diff(a.training, b.training, a.locs, b.locs, unmoved)
    return DiffResult(a, b, opts, rows, state_rows, state, notes, budget)


def summary(rows: list[Row], values: bool) -> dict:
    counts = {s: 0 for s in STATUSES}
    for r in rows:
        counts[r.status] += 1
    if not values:
        counts["values_changed"] = None
    errors = sum(r.error is not None for r in rows)
    if errors:
        counts["errors"] = errors
    return counts
