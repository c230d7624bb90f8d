"""Every tensor of the checkpoint as one table: name, dtype, shape, size, file.

The rows are computed off the UI thread (`table_rows`: the `/` filter, then one `sorted`);
the widget, a VTable, formats only the rows on screen, so 94,000 tensors scroll and re-sort
as fast as 20.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from textual import work

from ckpt_browser.escape import printable
from ckpt_browser.model import TensorInfo, natural_key
from ckpt_browser.report.words import size
from ckpt_browser.tui.browse.details import Details
from ckpt_browser.tui.browse.model import BrowseModel
from ckpt_browser.tui.browse.refs import Ref
from ckpt_browser.tui.browse.summary import matched_sums
from ckpt_browser.tui.common.cells import cut_middle, fit_name
from ckpt_browser.tui.common.vtable import Column, VTable
from ckpt_browser.tui.common.workers import ForLoad, current_load

# (key, words) in the order `s` cycles through them
SORTS = (("name", "name"), ("size", "size, largest first"), ("dtype", "dtype"),
         ("file", "file"))
SORT_WORDS = dict(SORTS)
DTYPE_W, SIZE_W, FILE_W, SHAPE_MIN, SHAPE_MAX = 7, 10, 12, 7, 16
_SHARD = re.compile(r"(\d+)-of-(\d+)\.[A-Za-z]+$")


def next_sort(sort: str) -> str:
    keys = [k for k, _ in SORTS]
    return keys[(keys.index(sort) + 1) % len(keys)]


class NameOrder:
    """The name-sorted rows of the last (model, pattern, files read): three of the four sorts
    start from them, so cycling `s` sorts 92,000 names once, not each time."""

    def __init__(self) -> None:
        self._key: tuple = (None, None, None)
        self._rows: list[TensorInfo] = []

    def of(self, model: BrowseModel, pattern: str, tensors: list[TensorInfo]) -> list[TensorInfo]:
        key = (model, pattern, model.done)
        if not (key[0] is self._key[0] and key[1:] == self._key[1:]):
            self._rows = sorted(tensors, key=lambda t: natural_key(t.name))
            self._key = key
        return self._rows


def table_rows(model: BrowseModel, pattern: str, sort: str,
               order: NameOrder | None = None) -> list[TensorInfo]:
    """The tensors read so far that match `pattern`, in `sort` order (ties by name). Runs in a
    worker: the natural name sort of 92,000 names takes about 0.3 s (once, with `order`)."""
    tensors = [t for name in model.layout.files for t in model.tensors_of(name, pattern)
               if not isinstance(t, str)]  # a name only the index gives has no dtype yet
    if sort == "file":
        return tensors  # the files' order, and each file's tensors by name already
    by_name = (order or NameOrder()).of(model, pattern, tensors)
    if sort == "size":
        return sorted(by_name, key=lambda t: -t.nbytes)
    if sort == "dtype":
        return sorted(by_name, key=lambda t: t.dtype or "")
    return list(by_name)  # the table's list, not the cache's


def shape_cell(t: TensorInfo) -> str:
    return "[" + ",".join(map(str, t.shape)) + "]"


def file_cell(name: str, width: int) -> str:
    """A shard by its number, "2 of 163" (the details pane has the file's name); another
    file by its name, cut in the middle."""
    m = _SHARD.search(name)
    if m:
        short = f"{int(m[1])} of {int(m[2])}"
        if len(short) <= width:
            return short
    return cut_middle(name, width)


class TensorTable(VTable[TensorInfo]):
    """The tensor table; `sort` and the rows are set by the screen."""

    SLASH_ACTION = "filter"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.sort = "name"  # the sort asked for
        self.shown_sort: str | None = None  # the sort of the rows on screen
        self.name_order = NameOrder()  # used by one worker at a time (exclusive)
        self.shape_w = SHAPE_MIN

    def rows_changed(self) -> None:
        """Wide enough for the widest shape among the first thousand rows, capped."""
        widest = max((len(shape_cell(t)) for t in self.rows[:1000]), default=SHAPE_MIN)
        self.shape_w = max(SHAPE_MIN, min(SHAPE_MAX, widest))

    def columns(self) -> Sequence[Column]:
        return (Column("name", cut=fit_name, min_width=12), Column("dtype", DTYPE_W),
                Column("shape", self.shape_w, cut=cut_middle), Column("size", SIZE_W, "right"),
                Column("file", FILE_W, cut=file_cell))

    def cells(self, row: TensorInfo) -> Sequence[str]:
        return (printable(row.name), printable(row.dtype or "?"), shape_cell(row),
                size(row.nbytes), printable(row.file))


@dataclass
class TableReady(ForLoad):
    """The table's rows for a filter pattern and a sort, computed off the UI thread."""

    pattern: str
    sort: str
    rows: list[TensorInfo]


class TableView:
    """The browse screen's table mode (`l`, `s`), kept apart from the tree's code.

    The screen (a BrowseScreen) calls `reload_table()` when what the table lists may have
    changed (a checkpoint opened, headers read, the filter applied); the rest is here."""

    model: BrowseModel
    load: BrowseModel

    @property
    def table(self) -> TensorTable:
        return self.query_one(TensorTable)  # type: ignore[attr-defined]

    @property
    def table_shown(self) -> bool:
        return self.has_class("-table")  # type: ignore[attr-defined]

    @property
    def main_pane(self):
        """The pane the cursor lives in: the table or the tree."""
        return self.table if self.table_shown else self.query_one("#tree")  # type: ignore

    def table_ref(self) -> Ref | None:
        t = self.table.current
        return Ref("tensor", t.file, t) if t is not None else None

    def cursor_ref(self) -> Ref | None:
        """What the cursor is on (the table's row, or the tree's node): read from the widget,
        not the details, since keys typed ahead ("down", "v") can come before the details
        hear of the move."""
        if self.table_shown:
            return self.table_ref()
        node = self.query_one("#tree").cursor_node  # type: ignore[attr-defined]
        return node.data if node is not None else None

    def action_toggle_table(self) -> None:
        shown = not self.table_shown
        self.set_class(shown, "-table")  # type: ignore[attr-defined]
        details = self.query_one(Details)  # type: ignore[attr-defined]
        if shown:
            self.reload_table()
            details.show(self.table_ref())
        else:
            details.show(self.cursor_ref())
        self.main_pane.focus()

    def action_cycle_sort(self) -> None:
        if not self.table_shown:
            self.notify("s sorts the tensor table: l shows it.", timeout=4)  # type: ignore
            return
        self.table.sort = next_sort(self.table.sort)
        self.reload_table()

    def table_next_match(self, step: int) -> bool:
        """n / N in the table: it lists only the matches, so the next row (wrapping); False
        when the tree is shown."""
        table = self.table
        if not self.table_shown or not table.rows:
            return False
        table.action_move(step if 0 <= table.cursor + step < len(table.rows)
                          else -table.cursor if step > 0 else len(table.rows))
        self.model.match_at, self.model.match_count = table.cursor, len(table.rows)
        self.query_one("#summary").refresh_summary()  # type: ignore[attr-defined]
        return True

    def reload_table(self) -> None:
        if self.table_shown:
            self._title_table()
            self.compute_table(self.model, self.model.pattern, self.table.sort)

    @work(thread=True, exclusive=True, exit_on_error=False, group="table")
    def compute_table(self, model: BrowseModel, pattern: str, sort: str) -> None:
        self.post_message(TableReady(model, pattern, sort,  # type: ignore[attr-defined]
                                     table_rows(model, pattern, sort,
                                                self.table.name_order)))

    @current_load
    def on_table_ready(self, message: TableReady) -> None:  # a mixin: @on is for widgets
        table = self.table
        if (message.pattern, message.sort) != (self.model.pattern, table.sort):
            return  # a newer one is coming
        # the cursor stays on its tensor when the filter changes; a new sort starts at its top
        keep = table.current if table.shown_sort == message.sort else None
        table.set_rows(message.rows, keep=keep)
        table.shown_sort = message.sort
        self._title_table()

    def _title_table(self) -> None:
        table = self.table
        n = len(table.rows)
        what = f"{n:,} tensors matching {printable(self.model.pattern)!r}" if self.model.pattern \
            else f"all {n:,} tensors"
        if self.model.pattern and n:
            what += f" ({matched_sums(self.model.match_counts())})"
        reading = "" if self.model.loaded else \
            f" · read {self.model.done}/{self.model.total} files, more when all are"
        table.border_title = f"{what} · sort: {SORT_WORDS[table.sort]} (s){reading}"

    def on_vtable_highlighted(self, event: VTable.Highlighted) -> None:
        if isinstance(event.table, TensorTable) and self.table_shown:
            self.query_one(Details).show(self.table_ref())  # type: ignore[attr-defined]
