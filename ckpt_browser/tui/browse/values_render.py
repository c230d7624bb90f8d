"""How a tensor's values look under its details: the statistics as a key/value grid and a
histogram of block characters, readable without colour.

Plain Python (Rich, no Textual), like training_details.py.
"""

from __future__ import annotations

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from ckpt_browser.escape import printable
from ckpt_browser.report.stats import values_verdict
from ckpt_browser.report.styles import ALERT, WARN
from ckpt_browser.report.words import full_number, size

HIST_ROWS = 3  # lines of the histogram: 24 heights per bar


def _short(v) -> str:
    if isinstance(v, complex):
        return f"{v.real:.3g}{v.imag:+.3g}j"
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _fraction(part: int, whole: int) -> str:
    if not whole:
        return "-"
    pct = 100 * part / whole
    return f"{'<0.01' if 0 < pct < 0.01 else f'{pct:.2f}'}% ({part:,})"


class Histogram:
    """Bars of block characters, HIST_ROWS lines tall, at most one column per bin (adjacent bins
    add up when the pane is narrower); an empty bin is blank, any other at least one step.
    Labelled axes, readable without colour: the tallest bar's count and 0 on the left (counts),
    the range's edges under the first and last bar (values)."""

    BARS = "▁▂▃▄▅▆▇█"

    def __init__(self, counts: list[int], lo: float, hi: float, rows: int = HIST_ROWS) -> None:
        self.counts, self.lo, self.hi, self.rows = counts, lo, hi, rows

    def bins(self, width: int) -> list[int]:
        group = -(-len(self.counts) // max(width, 1))
        return [sum(self.counts[i:i + group]) for i in range(0, len(self.counts), group)]

    def _layout(self, width: int) -> tuple[int, list[int]]:
        """(width of the count labels, the bins shown) for a pane `width` wide."""
        label = len(f"{max(self.counts, default=0):,}")
        bins = self.bins(width - label - 1)
        return max(len(f"{max(bins, default=0):,}"), 1), bins

    def lines(self, width: int) -> list[str]:
        label, bins = self._layout(width)
        top = max(bins, default=0) or 1
        steps = len(self.BARS) * self.rows
        heights = [max(1, round(c / top * steps)) if c else 0 for c in bins]
        out = []
        for row in reversed(range(self.rows)):
            cells = [h - row * len(self.BARS) for h in heights]
            bars = "".join(" " if n <= 0 else self.BARS[min(n, len(self.BARS)) - 1]
                           for n in cells)
            tick = (f"{max(bins, default=0):,}" if row == self.rows - 1 else
                    "0" if row == 0 else "")
            out.append(f"{tick:>{label}}{'┤' if tick else '│'}{bars}")
        lo, hi = full_number(self.lo), full_number(self.hi)
        gap = len(bins) - len(lo) - len(hi)
        if gap >= 2:  # the edges under the first and last bar
            out.append(" " * (label + 1) + lo + " " * gap + hi)
        else:  # a narrow pane: the range in words, from the margin if it fits no other way
            axis = f"{lo} to {hi}"
            fits = label + 1 + len(axis) <= width
            out.append((" " * (label + 1) if fits else "") + axis)
        return out

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in self.lines(options.max_width):
            yield Text(line, no_wrap=True, overflow="fold")

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        label = len(f"{max(self.counts, default=0):,}") + 1
        return Measurement(1, min(len(self.counts) + label, options.max_width))


def render_stats(stats, title: str = "values") -> Group:
    table = Table.grid(padding=(0, 1))
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    rows = [*((k, full_number(getattr(stats, a))) for k, a in (
                ("min", "min"), ("max", "max"), ("mean", "mean"), ("std", "std"),
                ("abs max", "abs_max"))),
            ("NaN", f"{stats.nan:,}"), ("Inf", f"{stats.inf:,}"),
            ("zeros", _fraction(stats.zeros, stats.numel)),
            ("finite", f"{stats.finite:,} of {stats.numel:,}"),
            ("read", f"{size(stats.bytes_read)} ({stats.bytes_read:,} B)")]
    for k, v in rows:
        table.add_row(k, printable(v))
    # A paragraph, not a table cell: a narrow pane wraps it over a few full-width lines.
    preview = Text.assemble((f"first {len(stats.preview)}:", "bold"), " ",
                            printable(", ".join(map(_short, stats.preview)) or "-"))
    parts = [Text(title, style="bold underline"), table, preview]
    verdict = values_verdict(stats)
    if verdict is not None:  # first, in words: NaN is more than a count in the table
        level, line = verdict
        parts.insert(1, Text(printable(line), style=ALERT if level == "alarm" else WARN))
    if stats.note:
        parts.append(Text(printable(stats.note)))
    if stats.hist and stats.hist_range:
        parts += [Text(""), Text.assemble(("histogram", "bold"),
                                          " of finite values, count up, value across"),
                  Histogram(stats.hist, *stats.hist_range)]
    if getattr(stats, "dequantized", None) is not None:
        parts += [Text(""), render_stats(stats.dequantized, "dequantized values")]
    return Group(*parts)
