"""Tree labels and detail texts as Rich Text: words first, colour only as a hint."""

from __future__ import annotations

from rich.text import Text

from ckpt_browser.analysis.modules import ModuleNode, leaf_name
from ckpt_browser.escape import printable
from ckpt_browser.model import TensorInfo
from ckpt_browser.report.styles import ALERT, WARN
from ckpt_browser.report.words import count, plural, size, size_cell
from ckpt_browser.tui.common.cells import cut_middle

STATE_WORDS = {"reading": "reading…", "ok": "", "damaged": "DAMAGED", "missing": "MISSING",
               "warning": "warning", "unsafe": "UNSAFE", "unread": "NOT READ"}


def shard_label(name: str, state: str, tensors: int, nbytes: int | None, shown: int | None,
                fmt: str = "safetensors") -> Text:
    """State word first, so it survives a narrow terminal cutting the line; the format is
    named when it is not safetensors (it is what the content is, whatever the name says)."""
    text = Text()
    if state in ("damaged", "missing", "warning", "unsafe", "unread"):
        text.append(f"! {STATE_WORDS[state]} ",
                    style=ALERT if state != "warning" else WARN)
    text.append(printable(name), style="bold")
    if state == "reading":
        text.append("  reading…", style="dim")
        return text
    if state in ("missing", "unread"):
        return text
    kind = "" if fmt == "safetensors" else f"  {fmt}"
    if not tensors and fmt != "safetensors":
        text.append(f"{kind}  {size(nbytes)}" if nbytes is not None else kind, style="dim")
        return text
    counted = plural(tensors, "tensor")
    if shown is not None:  # "7/9 tensors" under a filter
        counted = f"{shown:,}/{counted}"
    text.append(f"{kind}  {counted}  {size(nbytes)}", style="dim")
    return text


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


def column_widths(rows) -> tuple[int, int, int]:
    """Widths of the dtype, shape and size columns over sibling rows (bounded: a shard of
    10,000 tensors is measured on its first thousand)."""
    dtype_w = shape_w = size_w = 0
    for _, dtype, shape, nbytes in rows[:1000]:
        dtype_w, shape_w, size_w = (max(dtype_w, len(dtype)), max(shape_w, len(shape)),
                                    max(size_w, len(nbytes)))
    return dtype_w, shape_w, size_w


def tensor_row(cells: tuple[str, str, str, str], widths: tuple[int, int, int],
               width: int) -> Text:
    """One tensor as aligned columns in `width` cells: the name takes what the others leave
    and is cut in the middle; shape and size are right-aligned. A row wider than its
    siblings (a rare long shape) takes its own room from the name."""
    name, dtype, shape, nbytes = cells
    dtype_w, shape_w, size_w = (max(w, len(c)) for w, c in zip(widths, cells[1:]))
    rest = "  ".join(cell for cell, w in ((dtype.ljust(dtype_w), dtype_w),
                                          (shape.rjust(shape_w), shape_w),
                                          (nbytes.rjust(size_w), size_w)) if w)
    name_w = max(width - len(rest) - 2, 8)
    return Text.assemble(cut_middle(name, name_w).ljust(name_w), ("  " + rest, "dim"))


def tensor_label(t: TensorInfo | str, short: bool = False) -> Text:
    """The label stored on the node (and used where no width is known): name, then the rest."""
    name, dtype, shape, nbytes = tensor_cells(t, short)
    return Text.assemble(name, ("  " + " ".join(p for p in (dtype, shape, nbytes) if p), "dim"))


def module_label(m: ModuleNode) -> Text:
    return Text.assemble((printable(m.name), "bold"), (f"  {count(m.totals.params)} params  "
                                             f"{size(m.totals.bytes)}", "dim"))
