"""Tree labels and detail texts as Rich Text: words first, colour only as a hint."""

from __future__ import annotations

from rich.text import Text

from ckpt_browser.analysis.modules import ModuleNode, leaf_name
from ckpt_browser.escape import printable
from ckpt_browser.model import TensorInfo
from ckpt_browser.report.styles import ALERT, WARN
from ckpt_browser.report.words import count, plural, size, size_cell
from ckpt_browser.tui.common.cells import cut_middle, fit_name

STATE_WORDS = {"reading": "reading…", "ok": "", "damaged": "DAMAGED", "missing": "MISSING",
               "warning": "warning", "unsafe": "UNSAFE", "unsafe-damaged": "UNSAFE, DAMAGED",
               "unread": "NOT READ"}


MIN_TENSOR_NAME = 24  # a tensor row drops its dtype, then its shape, to keep this much name


def fitted(head: Text, name: str, tails: list[str], width: int | None,
           tail_style: str = "dim") -> Text:
    """head, name, then the tails, in `width` cells (None: all of it). The name says which
    file or module a row is, so it stays whole: the last tails are dropped until it fits, and
    only a name longer than the row is cut (in the middle). What is shown is whole."""
    tails = [t for t in tails if t]
    if width is not None:
        def left() -> int:
            return width - head.cell_len - sum(len(t) for t in tails)

        while tails and left() < len(name):
            tails.pop()
        name = cut_middle(name, max(left(), 1))
    text = head.copy()
    text.append(name, style="bold")
    text.append("".join(tails), style=tail_style)
    return text


def shard_label(name: str, state: str, tensors: int, nbytes: int | None, shown: int | None,
                fmt: str = "safetensors", width: int | None = None, tail: str = "dim") -> Text:
    """State word first, so it survives a narrow terminal cutting the line; the format is
    named when it is not safetensors (it is what the content is, whatever the name says).
    With a width, the row fits it as `fitted` says: the name whole, the counts that fit."""
    head = Text()
    if state in ("damaged", "missing", "warning", "unsafe", "unsafe-damaged", "unread"):
        head.append(f"! {STATE_WORDS[state]} ",
                    style=ALERT if state != "warning" else WARN)
    name = printable(name)
    if state == "reading":
        return fitted(head, name, ["  reading…"], width, tail_style=tail)
    if state in ("missing", "unread"):
        return fitted(head, name, [], width, tail_style=tail)
    kind = "" if fmt == "safetensors" else f"  {fmt}"
    if not tensors and fmt != "safetensors":
        return fitted(head, name, [kind, f"  {size(nbytes)}" if nbytes is not None else ""],
                      width, tail_style=tail)
    counted = plural(tensors, "tensor")
    if shown is not None:  # "7/9 tensors" under a filter
        counted = f"{shown:,}/{counted}"
    return fitted(head, name, [kind, f"  {counted}", f"  {size(nbytes)}"], width, tail_style=tail)


def tensor_cells(t: TensorInfo | str, short: bool = False) -> tuple[str, str, str, str]:
    """(name, dtype, shape, size) as the tree's columns show them; a name known from the index
    only has no header to say the rest."""
    if isinstance(t, str):
        return printable(leaf_name(t) if short else t), "", "(no header)", ""
    name = printable(leaf_name(t.name) if short else t.name)
    if t.component != "weights":
        name += f" ({t.component})"
    shape = "[" + ", ".join(str(d) for d in t.shape) + "]"
    return name, printable(t.dtype or "?"), shape, size_cell(t.nbytes)


def column_widths(rows) -> tuple[int, int, int, int]:
    """Widths of the name, dtype, shape and size columns over sibling rows (bounded: a shard
    of 10,000 tensors is measured on its first thousand)."""
    name_w = dtype_w = shape_w = size_w = 0
    for name, dtype, shape, nbytes in rows[:1000]:
        name_w, dtype_w, shape_w, size_w = (max(name_w, len(name)), max(dtype_w, len(dtype)),
                                            max(shape_w, len(shape)), max(size_w, len(nbytes)))
    return name_w, dtype_w, shape_w, size_w


def tensor_row(cells: tuple[str, str, str, str], widths: tuple[int, int, int, int],
               width: int, tail: str = "dim") -> Text:
    """One tensor as aligned columns in `width` cells, never more: the name takes what the
    others leave and is cut in the middle; shape and size are right-aligned. Where the
    siblings' names would be cut below MIN_TENSOR_NAME cells (a narrow pane), the dtype and
    then the shape are left out, for all of them alike: the details pane and the `l` table
    show them. A row wider than its siblings (a rare long shape) takes its own room from the
    name."""
    name, dtype, shape, nbytes = cells
    names_w = widths[0]
    dtype_w, shape_w, size_w = (max(w, len(c)) for w, c in zip(widths[1:], cells[1:]))
    columns = [(dtype.ljust(dtype_w), dtype_w), (shape.rjust(shape_w), shape_w),
               (nbytes.rjust(size_w), size_w)]
    columns = [cell for cell, w in columns if w]
    need = min(names_w, MIN_TENSOR_NAME)
    while len(columns) > 1 and width - len("  ".join(columns)) - 2 < need:
        columns.pop(0)
    rest = "  ".join(columns)
    name_w = max(width - len(rest) - 2, 1)
    return Text.assemble(fit_name(name, name_w).ljust(name_w), ("  " + rest, tail))


def tensor_label(t: TensorInfo | str, short: bool = False) -> Text:
    """The label stored on the node (and used where no width is known): name, then the rest."""
    name, dtype, shape, nbytes = tensor_cells(t, short)
    return Text.assemble(name, ("  " + " ".join(p for p in (dtype, shape, nbytes) if p), "dim"))


def module_label(m: ModuleNode, width: int | None = None, tail: str = "dim") -> Text:
    return fitted(Text(), printable(m.name),
                  [f"  {count(m.totals.params)} params", f"  {size(m.totals.bytes)}"], width,
                  tail_style=tail)
