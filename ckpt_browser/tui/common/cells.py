"""Fitting text into columns: names are cut in the middle, where a checkpoint's names repeat,
so the start (which model part) and the end (layer, expert, leaf) both stay readable."""

from __future__ import annotations

ELLIPSIS = "…"


def cut_middle(text: str, width: int) -> str:
    """`model.layers.61.mlp.experts.255.down_proj.weight` in 30 cells:
    `model.layer…255.down_proj.weight`; the end gets three fifths, it is what differs."""
    if len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    keep = width - 1
    head = keep * 2 // 5
    return text[:head] + ELLIPSIS + text[len(text) - (keep - head):]


def cut_right(text: str, width: int) -> str:
    return text if len(text) <= width else text[:max(width - 1, 0)] + ELLIPSIS[:width]
