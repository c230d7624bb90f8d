"""The diff screen's text panes: the summary on top, the details of the highlighted row below.

Text builders are plain functions of the rows and sides (tests read them without an app);
the widgets only call them with the width they have.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.widgets import Static

from ckpt_browser import alarms
from ckpt_browser.escape import printable
from ckpt_browser.report.styles import ALERT
from ckpt_browser.report.words import full_number, short_number
from ckpt_browser.tui.browse.summary import short_path
from ckpt_browser.tui.diff import rows as diff_rows
from ckpt_browser.values.diff import Row, Side

if TYPE_CHECKING:
    from ckpt_browser.values.state_diff import StateDiff

WORDS = {"only_in_a": "only in A", "only_in_b": "only in B", "shape_changed": "shape changed",
         "dtype_changed": "dtype changed (values compared as numbers)",
         "values_changed": "values changed", "unchanged": "same values",
         "not_compared": "same dtype and shape",
         "unreadable": "values unreadable"}


# -- summary ---------------------------------------------------------------------------------
def side_line(which: str, side: Side, width: int) -> Text:
    t = side.training
    facts = [] if t is None else [t.framework] + ([f"step {t.step}"] if t.step is not None else [])
    errors = sum(p.severity == "error" for p in side.problems)
    warnings = len(side.problems) - errors
    tail = " · ".join(facts)
    trouble = ""
    if side.problems:
        said = alarms.phrase(side.problems)
        trouble = f" · {said}: {errors} error(s), {warnings} warning(s) (p)" if errors else \
            f" · {warnings} warning(s) (p)"
    room = max(20, width - len(tail) - len(trouble) - 8)
    text = Text(f"{which}  ", style="bold")
    text.append(short_path(printable(side.path), room), style="bold")
    text.append(f"  {tail}" if tail else "")
    text.append(trouble, style=ALERT if errors else "bold")
    return text


def counts_line(title: str, rows: list[Row], comparing: bool) -> Text:
    c = diff_rows.counts(rows)
    text = Text(f"{title} {c['all']:,}: ", style="bold")
    if not rows:
        text.append("none on either side", style="dim")
        return text
    parts = [f"{c[k]:,} {w}" for k, w in diff_rows.COUNT_WORDS if c[k]]
    text.append(" · ".join(parts))
    if c["not_compared"] and not comparing:
        text.append("  (v compares values)", style="dim")
    return text


def state_line(state: StateDiff | None, a: Side, b: Side) -> Text | None:
    """Step A -> B and the first flag, in words; `i` shows the whole comparison. Without a
    comparison, the steps the sides' training states give."""
    ta, tb = a.training, b.training
    if ta is None and tb is None:
        return None
    text = Text("state: ", style="bold")
    if state is None:
        text.append(f"step {_v(ta.step if ta else None)} -> {_v(tb.step if tb else None)}")
        text.append(" · no training-state comparison", style="dim")
        return text
    text.append(f"step {_v(state.a.step)} -> {_v(state.b.step)}")
    ea, eb = state.a.epoch, state.b.epoch
    if ea is not None or eb is not None:
        text.append(f" · epoch {_v(ea)} -> {_v(eb)}")
    flags = state.flags
    if flags:
        text.append(f"\n! {printable(flags[0].message)}", style="bold")
        if len(flags) > 1:
            text.append(f" (+{len(flags) - 1} more: i)", style="dim")
    else:
        text.append(" · no flags (i: details)", style="dim")
    return text


def _v(x) -> str:
    if x is None:
        return "?"
    return f"{x:g}" if isinstance(x, float) else str(x)


def summary_text(a: Side, b: Side, rows: list[Row] | None, state_rows: list[Row],
                 state: StateDiff | None, comparing: bool, width: int,
                 failed: str | None = None) -> Text:
    """`rows` None: the names are still being paired, or that failed (`failed` says why)."""
    text = Text()
    text.append_text(side_line("A", a, width))
    text.append("\n")
    text.append_text(side_line("B", b, width))
    if rows is None:
        if failed:
            text.append(f"\ncould not pair the tensor names: {printable(failed)}",
                        style=ALERT)
        else:
            text.append("\ncomparing tensor names…", style="dim")
        return text
    text.append("\n")
    text.append_text(counts_line("weights", rows, comparing))
    if state_rows:
        text.append("\n")
        text.append_text(counts_line("state tensors", state_rows, comparing))
    line = state_line(state, a, b)
    if line is not None:
        text.append("\n")
        text.append_text(line)
    return text


class DiffSummary(Static):
    def show(self, *args, failed: str | None = None) -> None:
        self._args, self._failed = args, failed
        self.update(summary_text(*args, self.app.size.width, failed))

    def on_resize(self) -> None:
        if hasattr(self, "_args"):
            self.show(*self._args, failed=self._failed)


# -- details ---------------------------------------------------------------------------------
def _side_text(which: str, loc, row_name: str) -> Text:
    text = Text(f"{which}  ", style="bold")
    if loc is None:
        text.append("absent", style="dim")
        return text
    text.append(f"{diff_rows.spec(loc)} · {printable(loc.file)} · {loc.component or 'tensor'}")
    if loc.name != row_name:
        text.append(f" · named {printable(loc.name)}")
    if loc.problem:
        text.append(f" · unreadable: {printable(loc.problem)}", style=ALERT)
    return text


def _values_text(row: Row) -> Text:
    v = row.values
    if row.error:
        return Text(f"values unreadable: {printable(row.error)}", style=ALERT)
    if v is None:
        if row.comparable:
            return Text("values not compared (v: all tensors, c: this one)", style="dim")
        return Text("values: not comparable (absent on one side, or shapes differ)", style="dim")
    head = "values: same" if v.close else "values differ"
    text = Text(head, style="bold")
    n = short_number
    text.append(f" · max|diff| {n(v.max_abs_diff)} · mean|diff| {n(v.mean_abs_diff)}"
                f" · rel L2 {n(v.rel_l2)} · cosine {full_number(v.cosine)}\n")
    text.append(f"bitwise equal: {'yes' if v.bitwise_equal else 'no'}"
                f" · NaN/Inf mismatched: {v.nonfinite_mismatch:,}"
                f" · {v.compared:,} elements compared")
    return text


def details_text(row: Row | None) -> Text:
    if row is None:
        return Text("No tensor here: change the filter (f) or the table (t).", style="dim")
    kind = "unreadable" if row.error else diff_rows.kind(row)
    text = Text(printable(row.name), style="bold")
    text.append(f"  ({WORDS.get(kind, kind)})\n")
    text.append_text(_side_text("A", row.a, row.name))
    text.append("\n")
    text.append_text(_side_text("B", row.b, row.name))
    text.append("\n")
    text.append_text(_values_text(row))
    return text


class DiffDetails(Static):
    def show(self, row: Row | None) -> None:
        self.row = row
        self.update(details_text(row))
