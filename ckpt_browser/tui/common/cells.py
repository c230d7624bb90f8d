"""Fitting text into columns: names are cut in the middle, where a checkpoint's names repeat,
so the start (which model part) and the end (layer, expert, leaf) both stay readable."""

from __future__ import annotations

import re

from rich.cells import cell_len
from rich.measure import Measurement
from rich.text import Text

ELLIPSIS = "…"
_NUMBER = re.compile(r"(?<![0-9])[0-9]+(?![0-9])")


def cut_right(text: str, width: int) -> str:
    return text if len(text) <= width else text[:max(width - 1, 0)] + ELLIPSIS[:width]


def _splits_number(text: str, i: int) -> bool:
    return 0 < i < len(text) and text[i - 1].isdigit() and text[i].isdigit()


def cut_middle(text: str, width: int) -> str:
    """Cut a name in the middle, never from the left: the start says which part of the model,
    the end which layer, expert and leaf. The cut moves a few cells rather than halve a number,
    and prefers a word's end: `model.layers.61.mlp.experts.255.down_proj.weight` in 38 cells is
    `model.layers.61.…255.down_proj.weight`."""
    if len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    keep = width - 1
    mid, reach = keep // 2, keep // 3
    best, best_cost = mid, None
    for head in range(mid - reach, mid + reach + 1):  # a few dozen steps per visible row
        tail = len(text) - (keep - head)
        cost = abs(head - mid)
        cost += 100 * (_splits_number(text, head) + _splits_number(text, tail))
        cost += 40 * len(_NUMBER.findall(text, head, tail))  # a layer number cut out whole
        cost += 4 * (head > 0 and text[head].isalnum())  # the head ends a word
        cost += 4 * text[tail - 1].isalnum()  # the tail starts one
        if best_cost is None or cost < best_cost:
            best, best_cost = head, cost
    if best_cost is None or best_cost >= 100:
        best = mid  # no cut near the middle keeps every number whole: plain halves
    return text[:best] + ELLIPSIS + text[len(text) - (keep - best):]


def fit_name(text: str, width: int) -> str:
    """A dotted tensor name in `width` cells, keeping every number and the leaf: the parts
    before the last number shrink to their first letter (the most generic, from the left),
    then those between it and the leaf, so `model.layers.3.mlp.experts.255.down_proj.weight`
    in 33 cells is `m.l.3.m.e.255.down_proj.weight`, where cutting the middle hid the expert
    (`model.layers.3.…down_proj.weight`); what still does not fit is cut in the middle."""
    if len(text) <= width or "." not in text:
        return cut_middle(text, width)
    parts = text.split(".")
    leaf = len(parts) - 2  # the leaf: `down_proj.weight`, `kv_a_proj_with_mqa.weight_scale_inv`
    order = [i for i, p in enumerate(parts[:max(leaf, 1)]) if len(p) > 1 and not p.isdigit()]
    length = len(text)
    for i in order:
        length -= len(parts[i]) - 1
        parts[i] = parts[i][0]
        if length <= width:
            return ".".join(parts)
    return cut_middle(".".join(parts), width)


_PIECE = re.compile(r"[^/_, ]*(?:[/_]|, ?| |$)")


class PathText:
    """Text that wraps after `/`, `_`, `, ` or a space, never inside a piece of a name
    (`global_step4/zero_pp_rank_0_mp_rank_00_optim_states.pt` breaks as `..._mp_rank_00_` /
    `optim_states.pt`, not `..._optim_s` / `tates.pt`); a piece wider than the column folds."""

    def __init__(self, text: str, style: str = "") -> None:
        self.text, self.style = text, style
        self.pieces = [p for p in _PIECE.findall(text) if p] or [text]

    def __rich_measure__(self, console, options) -> Measurement:
        widest = max(cell_len(p.rstrip()) for p in self.pieces)
        return Measurement(min(widest, options.max_width), cell_len(self.text))

    def __rich_console__(self, console, options):
        width = max(options.max_width, 1)
        line = ""
        for piece in self.pieces:
            if line and cell_len(line + piece.rstrip()) > width:
                yield from self._fold(line.rstrip(), width)
                line = ""
            line += piece
        yield from self._fold(line.rstrip(), width)

    def _fold(self, line: str, width: int):
        for i in range(0, max(len(line), 1), width):
            yield Text(line[i:i + width], style=self.style)
