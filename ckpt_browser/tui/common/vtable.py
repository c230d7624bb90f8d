"""A table of many rows on Textual's Line API: only the visible rows are ever formatted.

Textual's DataTable measures and stores every cell: 94,000 rows took 8-17 s to paint and as
long again to refill after a filter change. Here a row becomes text when it scrolls into view,
so filtering or sorting 94,000 rows costs one list operation and one repaint.

A subclass declares its columns (`columns()`) and how a row reads (`cells(row)`); the table
draws a header line, the rows, a cursor, and posts `Highlighted` when the cursor moves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from rich.segment import Segment
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.events import Click
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Input

from ckpt_browser.tui.common.cells import cut_right

R = TypeVar("R")


@dataclass(frozen=True)
class Column:
    title: str
    width: int = 0  # cells; 0: this column takes what the others leave (one per table)
    align: Literal["left", "right"] = "left"
    cut: Callable[[str, int], str] = cut_right
    min_width: int = 8  # for the column that takes the rest


def widths(columns: Sequence[Column], room: int) -> list[int]:
    """Each column's cells in `room` (a cursor mark, then the columns one space apart)."""
    fixed = sum(c.width for c in columns) + len(columns)  # the mark and the gaps
    rest = max(room - fixed, 0)
    return [c.width or max(rest, c.min_width) for c in columns]


def line(columns: Sequence[Column], cells: Sequence[str], sizes: Sequence[int],
         cut: Callable[[str, int], str] | None = None) -> str:
    parts = []
    for col, cell, w in zip(columns, cells, sizes):
        text = (cut or col.cut)(cell, w)
        parts.append(text.rjust(w) if col.align == "right" else text.ljust(w))
    return " ".join(parts)


def type_ahead(widget: Widget, event: events.Key, slash_action: str | None) -> None:
    """Keys typed in one burst ("/q_proj", Enter, "n") are all queued at `widget` before the
    screen's "/" binding runs, so "q" would quit: open the filter here (the screen's
    `slash_action`), in order, hand it the keys behind "/", and take the focus back at Enter,
    so the keys after it are this widget's again (they made the filter "q_projn")."""
    focused = widget.screen.focused
    if focused is widget and event.key == "slash" and slash_action:
        getattr(widget.screen, f"action_{slash_action}")()
    elif isinstance(focused, Input) and event.is_printable:
        focused.insert_text_at_cursor(event.character or "")
    elif isinstance(focused, Input) and event.key == "enter":
        widget.screen.set_focus(widget)  # what the filter's own Enter does on both screens
    else:
        return
    event.stop()
    event.prevent_default()


class VTable(ScrollView, Generic[R], can_focus=True):
    """Rows one line each under a fixed header line; `rows` is a plain list, shown as is."""

    COMPONENT_CLASSES = {"vtable--header", "vtable--cursor"}
    DEFAULT_CSS = """
    VTable { overflow-x: hidden; }
    VTable > .vtable--header { text-style: bold; }
    VTable > .vtable--cursor { background: $block-cursor-background;
                               color: $block-cursor-foreground; text-style: bold; }
    VTable:blur > .vtable--cursor { background: $block-cursor-blurred-background;
                                    text-style: none; }
    """
    BINDINGS = [
        Binding("up", "move(-1)", "Up", show=False),
        Binding("down", "move(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "move(-1e9)", "First", show=False),
        Binding("end", "move(1e9)", "Last", show=False),
    ]

    @dataclass
    class Highlighted(Message):
        """The cursor is on another row (None: the table is empty)."""

        table: VTable
        row: Any

        @property
        def control(self) -> VTable:
            return self.table

    SLASH_ACTION: str | None = None  # the screen's action that opens its name filter

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.rows: list[R] = []
        self.cursor = 0

    def on_key(self, event: events.Key) -> None:
        type_ahead(self, event, self.SLASH_ACTION)

    # -- what a subclass says -------------------------------------------------------------
    def columns(self) -> Sequence[Column]:
        raise NotImplementedError

    def cells(self, row: R) -> Sequence[str]:
        raise NotImplementedError

    def style_row(self, row: R, text: Text, sizes: Sequence[int]) -> None:
        """Colour a formatted row (a hint only: the words must say it)."""

    # -- rows and the cursor ----------------------------------------------------------------
    @property
    def current(self) -> R | None:
        return self.rows[self.cursor] if self.rows else None

    def set_rows(self, rows: list[R], keep: R | None = None) -> None:
        """Show `rows`; the cursor stays on `keep` when it is among them, else goes to the top."""
        self.rows = rows
        index = 0
        if keep is not None:
            index = next((i for i, r in enumerate(rows) if r is keep), 0)
        self.rows_changed()
        self.virtual_size = Size(self.size.width, len(rows) + 1)
        self._go(index, force=True)
        self.refresh()

    def rows_changed(self) -> None:
        """A hook: the rows are new (a subclass may measure them for its columns)."""

    def action_move(self, delta: float) -> None:
        self._go(self.cursor + int(delta))

    def action_page(self, pages: int) -> None:
        self._go(self.cursor + pages * max(self.size.height - 2, 1))

    def _go(self, index: int, force: bool = False) -> None:
        index = max(0, min(index, len(self.rows) - 1)) if self.rows else 0
        old, self.cursor = self.cursor, index
        visible = max(self.size.height - 1, 1)
        top = round(self.scroll_y)
        if index < top:
            self.scroll_to(y=index, animate=False)
        elif index >= top + visible:
            self.scroll_to(y=index - visible + 1, animate=False)
        if force or old != index:
            self.refresh()
            self.post_message(self.Highlighted(self, self.current))

    def on_click(self, event: Click) -> None:
        if event.y >= 1:
            self._go(round(self.scroll_y) + event.y - 1)

    def on_resize(self) -> None:
        self.virtual_size = Size(self.size.width, len(self.rows) + 1)
        self._go(self.cursor)

    # -- drawing ----------------------------------------------------------------------------
    @property
    def room(self) -> int:
        return self.scrollable_content_region.width  # without the scrollbar

    def sizes(self) -> list[int]:
        return widths(self.columns(), self.room)

    def render_line(self, y: int) -> Strip:
        width = self.room
        if y == 0:
            style = self.get_component_rich_style("vtable--header")
            columns = self.columns()
            header = " " + line(columns, [c.title for c in columns], self.sizes(), cut_right)
            return Strip([Segment(header.ljust(width)[:width], style)])
        i = round(self.scroll_y) + y - 1
        if i >= len(self.rows):
            return Strip.blank(width, self.rich_style)
        return self._row_strip(i, width)

    def row_text(self, row: R) -> Text:
        """One row as it is drawn, without the cursor mark."""
        sizes = self.sizes()
        text = Text(line(self.columns(), self.cells(row), sizes))
        self.style_row(row, text, sizes)
        return text

    def _row_strip(self, i: int, width: int) -> Strip:
        text = Text(">" if i == self.cursor else " ").append_text(self.row_text(self.rows[i]))
        if i == self.cursor:
            text.stylize(self.get_component_rich_style("vtable--cursor"))
        segments = list(text.render(self.app.console))
        return Strip(segments, text.cell_len).crop_extend(0, width, self.rich_style) \
            .apply_style(self.rich_style)
