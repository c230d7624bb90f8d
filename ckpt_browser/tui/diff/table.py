"""The diff's tensor table: status, name, dtype/shape (A -> B when they differ), max|diff|.

A user of the common VTable (only the visible rows are formatted). At 80 columns the name gets
what one dtype/shape column leaves: one cell for both sides, "A -> B" only when they differ,
keeps `model.layers.61.mlp.experts.255.down_proj.weight` readable (its layer and expert).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.style import Style
from rich.text import Text

from ckpt_browser.escape import printable
from ckpt_browser.report.styles import ALERT
from ckpt_browser.report.words import short_number
from ckpt_browser.tui.common.cells import fit_name
from ckpt_browser.tui.common.vtable import Column, VTable
from ckpt_browser.tui.diff import rows as diff_rows
from ckpt_browser.values.diff import Row

STATUS_W, DIFF_W, SPEC_MIN, SPEC_MAX = 8, 9, 13, 19
STYLES = {"only_in_a": "bold #ff8787", "only_in_b": "green", "shape_changed": "yellow",
          "dtype_changed": "yellow", "values_changed": "yellow", "unchanged": "dim",
          "not_compared": "", "unreadable": ALERT}


class DiffTable(VTable[Row]):
    """Rows of a diff, one line each, under a fixed header line."""

    SLASH_ACTION = "filter_names"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.spec_w = SPEC_MIN

    def rows_changed(self) -> None:
        """Wide enough for the widest dtype/shape among the first thousand rows, capped."""
        widest = max((len(diff_rows.spec_pair(r)) for r in self.rows[:1000]), default=SPEC_MIN)
        self.spec_w = max(SPEC_MIN, min(SPEC_MAX, widest))

    def columns(self) -> Sequence[Column]:
        return (Column("status", STATUS_W), Column("name", cut=fit_name),
                Column("dtype/shape", self.spec_w),
                Column("max|diff|", DIFF_W, align="right"))

    def cells(self, row: Row) -> Sequence[str]:
        v = row.values
        d = "err" if row.error else "" if v is None else short_number(v.max_abs_diff)
        return diff_rows.label(row), printable(row.name), diff_rows.spec_pair(row), d

    def style_row(self, row: Row, text: Text, sizes: Sequence[int]) -> None:
        style = STYLES["unreadable"] if row.error else STYLES.get(diff_rows.kind(row), "")
        if style:
            text.stylize(Style.parse(style), 0, STATUS_W)  # a hint: the words say it
