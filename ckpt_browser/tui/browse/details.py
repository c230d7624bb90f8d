"""Right pane: everything known about the highlighted node."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from ckpt_browser.escape import printable
from ckpt_browser.model import Totals
from ckpt_browser.readers.safetensors import MAGIC_LEN
from ckpt_browser.report.words import SEVERITY_STYLE, count, size
from ckpt_browser.tui.browse.model import BrowseModel
from ckpt_browser.tui.browse.refs import Ref
from ckpt_browser.tui.browse.training_details import STATE_KINDS, kv, state_details
from ckpt_browser.tui.browse.values_panel import ValuesPanel


def _by_dtype(totals: Totals) -> Text:
    """One line per dtype: narrow panes wrap words, not table columns."""
    text = Text()
    for k, v in totals.by_dtype.items():
        text.append(f"{k}", style="bold")
        text.append(f": {v.tensors:,} tensors, {count(v.params)} params, {size(v.bytes)}\n")
    return text


def _problems(problems) -> Text:
    text = Text()
    for p in problems:
        text.append(f"{p.severity.upper()}: ", style=SEVERITY_STYLE.get(p.severity, "bold"))
        text.append(printable(p.message) + "\n")
    return text


def render(model: BrowseModel, ref: Ref | None):
    if ref is None or ref.kind == "root":
        return Text("Highlight a node to see its details.")
    if ref.kind == "tensor":
        return _tensor(model, ref)
    if ref.kind == "shard":
        return _shard(model, ref.shard)
    if ref.kind in STATE_KINDS:
        return state_details(ref)
    m = ref.module
    return Group(Text(printable(m.path), style="bold"),
                 kv([("tensors", f"{m.totals.tensors:,}"),
                     ("params", f"{m.totals.params:,} ({count(m.totals.params)})"),
                     ("bytes", f"{m.totals.bytes:,} ({size(m.totals.bytes)})")]),
                 Text(""), Text("by dtype", style="bold"), _by_dtype(m.totals))


def _tensor(model: BrowseModel, ref: Ref):
    t = ref.tensor
    if isinstance(t, str):
        shard = model.shards.get(ref.shard)
        why = "its header has not been read yet" if shard is None else \
            f"the file could not be read: {shard.error}" if not shard.ok else \
            "the file does not contain it"
        return Group(Text(printable(t), style="bold"),
                     Text(printable(f"The index maps this tensor to {ref.shard}, but {why}.")))
    shard = model.shards.get(t.file)
    rows = [("dtype", str(t.dtype)),
            ("shape", "[" + ", ".join(str(d) for d in t.shape) + "]"),
            ("numel", f"{t.numel:,} ({count(t.numel)})"),
            ("bytes", f"{t.nbytes:,} ({size(t.nbytes)})")]
    if shard is not None and shard.format != "safetensors":
        rows += [("part of", t.component), ("file", f"{printable(t.file)} ({shard.format})")]
        if shard.format == "dcp-metadata":
            rows.append(("where", "in the rank files, chunk by chunk (t: the DCP keys)"))
        elif t.placeholder:
            rows.append(("in file", "a 0-element placeholder: ZeRO-3 keeps its values in the "
                                    "optim_states files (zero_to_fp32.py rebuilds it)"))
        elif t.located:
            rows.append(("in file", f"{t.begin:,} - {t.end:,} (bytes from the file start)"))
        else:
            rows.append(("in file", "? (the file does not say where its storage is)"))
        return Group(Text(printable(t.name), style="bold"), kv(rows))
    start = MAGIC_LEN + shard.header_bytes if shard and shard.header_bytes is not None else None
    file_range = f"{start + t.begin:,} - {start + t.end:,}" if start is not None else "?"
    rows += [("shard", printable(t.file)),
             ("offsets", f"{t.begin:,} - {t.end:,} (in the data section)"),
             ("in file", f"{file_range} (bytes from the file start)")]
    if t.component != "weights":
        rows.append(("part of", t.component))
    return Group(Text(printable(t.name), style="bold"), kv(rows))


def _shard(model: BrowseModel, name: str):
    shard = model.shards.get(name)
    if shard is None:
        return Group(Text(printable(name), style="bold"), Text("Reading the file…"))
    rows = [("format", shard.format + (f" ({printable(shard.detail)})" if shard.detail else "")),
            ("file size", f"{size(shard.size)} ({shard.size:,} B)"
                          if shard.size is not None else "missing")]
    if shard.format == "safetensors":
        rows.append(("header", f"{shard.header_bytes:,} bytes"
                     if shard.header_bytes is not None else "?"))
    if shard.tensors or shard.format == "safetensors":
        rows += [("tensors", f"{len(shard.tensors):,}"),
                 ("params", f"{count(shard.totals.params)} ({shard.totals.params:,})"),
                 ("bytes", f"{size(shard.totals.bytes)} ({shard.totals.bytes:,} B)")]
    for k, v in (shard.metadata or {}).items():
        rows.append((printable(f"meta {k}"), printable(v)))
    parts = [Text(printable(name), style="bold"), kv(rows)]
    if shard.parts:
        parts += [Text(""), Text("holds (read by content)", style="bold"),
                  kv([(printable(p.path or "(the whole file)"), f"{p.kind}: {printable(p.what)}")
                      for p in shard.parts])]
    problems = model.shard_problems(name)
    parts += [Text(""), Text("Problems" if problems else "No problems found.", style="bold")]
    if problems:
        parts.append(_problems(problems))
    if shard.tensors:
        parts += [Text(""), Text("by dtype", style="bold"), _by_dtype(shard.totals)]
    return Group(*parts)


class Details(VerticalScroll, can_focus=True):
    def __init__(self, model: BrowseModel, **kwargs) -> None:
        super().__init__(**kwargs)
        self.model = model
        self.ref: Ref | None = None

    def compose(self):
        yield Static(id="details-body")
        yield ValuesPanel(id="values")  # `v`: the tensor's values, under its details

    @property
    def values(self) -> ValuesPanel:
        return self.query_one(ValuesPanel)

    def show(self, ref: Ref | None) -> None:
        if ref is not self.ref:
            self.scroll_home(animate=False)  # another node's facts start at their top
        self.ref = ref
        self.query_one("#details-body", Static).update(render(self.model, ref))
        self.values.show(self.model, ref)
