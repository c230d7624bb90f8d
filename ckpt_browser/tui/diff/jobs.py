"""What the diff app's workers run: plain Python, no Textual (tests call it directly)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ckpt_browser.values.diff import DiffResult, Options, Row, Side

if TYPE_CHECKING:
    from ckpt_browser.values.state_diff import StateDiff


def load_diff(a: Side, b: Side, opts: Options) -> DiffResult:
    """Pair names and compare the training state; values wait for `v`. A failing state
    comparison must not cost the tensor table."""
    from ckpt_browser.values.diff import diff, structure

    try:
        return diff(a, b, replace(opts, values=False))
    except Exception as e:  # noqa: BLE001 - the state comparison is an extra
        rows, state_rows, notes = structure(a, b, opts)
        return DiffResult(a, b, opts, rows, state_rows, None,
                          notes + [f"training state not compared: {e}"])


def pending(rows: list[Row]) -> list[Row]:
    """Rows whose values a comparison would read (as compare_values picks them)."""
    return [r for r in rows if r.comparable and r.values is None and r.error is None]


def restate(result: DiffResult) -> StateDiff | None:
    """A new training-state comparison once every weight is compared: it can then say which
    weights did not move (result.state is left as it is). None when there is nothing new to
    say."""
    a, b = result.a, result.b
    if result.options.weights_only or a.training is None or b.training is None:
        return None
    if pending(result.rows):
        return None
    from ckpt_browser.values.state_diff import state_diff

    unmoved = [r.name for r in result.rows if r.values is not None and r.values.bitwise_equal]
    return state_diff(a.training, b.training, a.locs, b.locs, unmoved)


@dataclass(eq=False)
class CompareJob:
    """The rows one comparison reads (weights first, then state tensors) and its cancel.
    Its repr is short: @work describes a worker by repr(args), 2 s for 94,000 Rows."""

    groups: list[list[Row]]
    cancel: threading.Event = field(default_factory=threading.Event)

    def __repr__(self) -> str:
        return f"CompareJob({self.todo:,} tensors)"

    @property
    def todo(self) -> int:
        return sum(len(g) for g in self.groups)

    @property
    def compared(self) -> int:
        return sum(r.values is not None for g in self.groups for r in g)

    def run(self, opts: Options, progress: Callable[[int, int, str], None],
            every: float = 0.1) -> None:
        """Compare every group; progress(bytes done, bytes total, name) at most once per
        `every` seconds. Raises values.read.Cancelled."""
        from ckpt_browser.values.diff import compare_values

        sizes = [sum(r.a.nbytes + r.b.nbytes for r in g) for g in self.groups]
        total, offset, last = sum(sizes), 0, [0.0]

        def step(done: int, _total: int, name: str) -> None:
            now = time.monotonic()
            if now - last[0] >= every:
                last[0] = now
                progress(offset + done, total, name)

        for group, size in zip(self.groups, sizes):
            compare_values(group, opts, self.cancel, step)
            offset += size
