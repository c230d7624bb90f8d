"""Tree labels and detail texts as Rich Text: words first, colour only as a hint."""

from __future__ import annotations

from rich.text import Text

from ckpt_browser.analysis.modules import ModuleNode, leaf_name
from ckpt_browser.escape import printable
from ckpt_browser.model import TensorInfo
from ckpt_browser.report.words import count, size

STATE_WORDS = {"reading": "reading…", "ok": "", "damaged": "DAMAGED", "missing": "MISSING",
               "warning": "warning", "unsafe": "UNSAFE", "unread": "NOT READ"}


def shard_label(name: str, state: str, tensors: int, nbytes: int | None, shown: int | None,
                fmt: str = "safetensors") -> Text:
    """State word first, so it survives a narrow terminal cutting the line; the format is
    named when it is not safetensors (it is what the content is, whatever the name says)."""
    text = Text()
    if state in ("damaged", "missing", "warning", "unsafe", "unread"):
        text.append(f"! {STATE_WORDS[state]} ",
                    style="bold red" if state != "warning" else "bold yellow")
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
    counted = f"{shown:,}/{tensors:,}" if shown is not None else f"{tensors:,}"
    text.append(f"{kind}  {counted} tensors  {size(nbytes)}", style="dim")
    return text


def tensor_label(t: TensorInfo | str, short: bool = False) -> Text:
    if isinstance(t, str):  # known from the index only
        return Text.assemble(printable(leaf_name(t) if short else t), ("  (no header)", "dim"))
    shape = "[" + ", ".join(str(d) for d in t.shape) + "]"
    kind = "" if t.component == "weights" else f" {t.component}"
    return Text.assemble(printable(leaf_name(t.name) if short else t.name),
                         (f"  {t.dtype} {shape} {size(t.nbytes)}{kind}", "dim"))


def module_label(m: ModuleNode) -> Text:
    return Text.assemble((printable(m.name), "bold"), (f"  {count(m.totals.params)} params  "
                                             f"{size(m.totals.bytes)}", "dim"))
