"""Tree labels and detail texts as Rich Text: words first, colour only as a hint."""

from __future__ import annotations

from rich.text import Text

from ckpt_browser.analysis.modules import ModuleNode, leaf_name
from ckpt_browser.model import TensorInfo
from ckpt_browser.report.text import count, size

STATE_WORDS = {"reading": "reading…", "ok": "", "damaged": "DAMAGED", "warning": "warning"}


def shard_label(name: str, state: str, tensors: int, nbytes: int | None, shown: int | None) -> Text:
    text = Text()
    if state in ("damaged", "warning"):
        text.append("! ", style="bold red" if state == "damaged" else "bold yellow")
    text.append(name, style="bold")
    if state == "reading":
        text.append("  reading…", style="dim")
        return text
    counted = f"{shown:,}/{tensors:,}" if shown is not None else f"{tensors:,}"
    text.append(f"  {counted} tensors  {size(nbytes)}", style="dim")
    if state != "ok":
        text.append(f"  {STATE_WORDS[state]}", style="red" if state == "damaged" else "yellow")
    return text


def tensor_label(t: TensorInfo | str, short: bool = False) -> Text:
    if isinstance(t, str):  # known from the index only
        return Text.assemble(leaf_name(t) if short else t, ("  (no header)", "dim"))
    shape = "[" + ", ".join(str(d) for d in t.shape) + "]"
    return Text.assemble(leaf_name(t.name) if short else t.name,
                         (f"  {t.dtype} {shape} {size(t.nbytes)}", "dim"))


def module_label(m: ModuleNode) -> Text:
    return Text.assemble((m.name, "bold"), (f"  {count(m.totals.params)} params  "
                                             f"{size(m.totals.bytes)}", "dim"))
