"""The diff's tensor table: a Line API widget that draws only the visible rows.

Textual's DataTable measures and stores every cell: 94,000 rows took 8-17 s to paint and as
long again to refill after a filter change. Here a row is formatted when it scrolls into view,
so filtering or sorting 94,000 rows costs one list operation and one repaint.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.events import Click
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ckpt_browser.escape import printable
from ckpt_browser.report.words import short_number
from ckpt_browser.tui.diff import rows as diff_rows
from ckpt_browser.values.diff import Row

STATUS_W, DIFF_W, SPEC_MIN, SPEC_MAX = 8, 9, 13, 20
HEADER = ("status", "name", "A dtype/shape", "B dtype/shape", "max|diff|")
STYLES = {"only_in_a": "red", "only_in_b": "green", "shape_changed": "yellow",
          "dtype_changed": "yellow", "values_changed": "yellow", "unchanged": "dim",
          "not_compared": "", "unreadable": "bold red"}


def cut_left(text: str, width: int) -> str:
    """Keep a name's end (layer number, leaf), where names differ."""
    return text if len(text) <= width else "…" + text[len(text) - width + 1:]


def cut_right(text: str, width: int) -> str:
    return text if len(text) <= width else text[:max(width - 1, 0)] + "…"


class DiffTable(ScrollView, can_focus=True):
    """Rows of a diff, one line each, under a fixed header line."""

    COMPONENT_CLASSES = {"difftable--header", "difftable--cursor"}
    DEFAULT_CSS = """
    DiffTable { overflow-x: hidden; }
    DiffTable > .difftable--header { text-style: bold; }
    DiffTable > .difftable--cursor { background: $block-cursor-background;
                                      color: $block-cursor-foreground; text-style: bold; }
    DiffTable:blur > .difftable--cursor { background: $block-cursor-blurred-background;
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

        row: Row | None

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.rows: list[Row] = []
        self.cursor = 0
        self.spec_w = SPEC_MIN

    @property
    def current(self) -> Row | None:
        return self.rows[self.cursor] if self.rows else None

    def set_rows(self, rows: list[Row], keep: Row | None = None) -> None:
        """Show `rows`; the cursor stays on `keep` when it is among them, else goes to the top."""
        self.rows = rows
        index = {id(r): i for i, r in enumerate(rows)}.get(id(keep), 0) if keep else 0
        self.spec_w = self._spec_width(rows)
        self.virtual_size = Size(self.size.width, len(rows) + 1)
        self._go(index, force=True)
        self.refresh()

    def _spec_width(self, rows: list[Row]) -> int:
        """Wide enough for the widest dtype/shape among the first thousand rows, capped."""
        sample = rows[:1000]
        widest = max((len(diff_rows.spec(loc)) for r in sample for loc in (r.a, r.b)),
                     default=SPEC_MIN)
        return max(SPEC_MIN, min(SPEC_MAX, widest))

    # -- the cursor ------------------------------------------------------------------------
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
            self.post_message(self.Highlighted(self.current))

    def on_click(self, event: Click) -> None:
        if event.y >= 1:
            self._go(round(self.scroll_y) + event.y - 1)

    def on_resize(self) -> None:
        self.virtual_size = Size(self.size.width, len(self.rows) + 1)
        self._go(self.cursor)

    # -- drawing ---------------------------------------------------------------------------
    @property
    def _width(self) -> int:
        return self.scrollable_content_region.width  # without the scrollbar

    def _widths(self) -> tuple[int, int, int, int, int]:
        """A cursor mark, then the columns one space apart; the name takes what is left."""
        name_w = max(self._width - 1 - STATUS_W - 2 * self.spec_w - DIFF_W - 4, 8)
        return STATUS_W, name_w, self.spec_w, self.spec_w, DIFF_W

    def _line(self, cells: tuple[str, ...], cut=None) -> str:
        w = self._widths()
        status, name, a, b, d = cells
        parts = (cut_right(status, w[0]).ljust(w[0]), (cut or cut_left)(name, w[1]).ljust(w[1]),
                 cut_right(a, w[2]).ljust(w[2]), cut_right(b, w[3]).ljust(w[3]),
                 cut_right(d, w[4]).rjust(w[4]))
        return " ".join(parts)  # the caller adds the cursor mark

    def render_line(self, y: int) -> Strip:
        width = self._width
        if y == 0:
            style = self.get_component_rich_style("difftable--header")
            header = " " + self._line(HEADER, cut_right)
            return Strip([Segment(header.ljust(width)[:width], style)])
        i = round(self.scroll_y) + y - 1
        if i >= len(self.rows):
            return Strip.blank(width, self.rich_style)
        row = self.rows[i]
        text = Text(">" if i == self.cursor else " ").append_text(self._row_text(row))
        if i == self.cursor:
            text.stylize(self.get_component_rich_style("difftable--cursor"))
        segments = list(text.render(self.app.console))
        return Strip(segments, text.cell_len).crop_extend(0, width, self.rich_style) \
            .apply_style(self.rich_style)

    def _row_text(self, row: Row) -> Text:
        v = row.values
        d = "err" if row.error else "" if v is None else short_number(v.max_abs_diff)
        line = self._line((diff_rows.label(row), printable(row.name), diff_rows.spec(row.a),
                           diff_rows.spec(row.b), d))
        text = Text(line)
        style = STYLES["unreadable"] if row.error else STYLES.get(diff_rows.kind(row), "")
        if style:
            text.stylize(Style.parse(style), 0, STATUS_W)  # a hint: the words say it
        return text
