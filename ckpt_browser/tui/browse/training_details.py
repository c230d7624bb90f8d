"""Details pane for the training-state tree: components, files, values, DCP entries."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from ckpt_browser import alarms
from ckpt_browser.escape import printable
from ckpt_browser.readers.torchfile import tensor_bytes
from ckpt_browser.report.words import STATUS_STYLE, size, status_word
from ckpt_browser.standins import (
    DcpCheckpoint,
    DcpChunk,
    DcpEntry,
    NumpyArray,
    Opaque,
    PickleFile,
    TensorRef,
    UnsafeCall,
)
from ckpt_browser.tui.browse.refs import Ref
from ckpt_browser.tui.browse.training_tree import (
    describe,
    file_name,
    kids_of,
    optimizer_state_path,
    param_names,
)

MAX_FIELDS = 200  # rows of a container's fields in the details pane

STATE_KINDS = {"component", "file", "value", "dcp-entry", "more"}


def kv(rows) -> Table:
    """Rows of (key, value): keys bold, values escaped (`printable`) and folded."""
    table = Table.grid(padding=(0, 1))
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    for k, v in rows:  # Text, not str: a key or value "[red]" read from a file is not markup
        table.add_row(Text(printable(str(k))), Text(printable(str(v))))
    return table


def _facts(facts: dict) -> Table:
    """Facts as rows of key and value, nested keys indented under their heading: readable
    without colour (a value with no plain word is described, never shown as its repr)."""
    rows: list[tuple[str, str]] = []
    _fact_rows(facts, 0, rows)
    if len(rows) > MAX_FIELDS:
        rows[MAX_FIELDS:] = [("…", f"{len(rows) - MAX_FIELDS:,} more rows")]
    return kv(rows)


def _fact_rows(value, depth: int, rows: list[tuple[str, str]]) -> None:
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, v in items:
        if len(rows) > MAX_FIELDS:
            return  # counted, not drawn: a 300,000-entry dict costs no more than this
        name = "  " * depth + (str(key) if isinstance(value, dict) else f"[{key}]")
        if isinstance(v, (dict, list, tuple)) and not _flat(v):
            rows.append((name, "" if v else describe(v)[0]))
            _fact_rows(v, depth + 1, rows)
        else:
            rows.append((name, _fact(v)))


def _flat(v) -> bool:
    """A short list of plain values, shown on one line: betas 0.9, 0.999."""
    return isinstance(v, (list, tuple)) and len(v) <= 8 and \
        all(x is None or isinstance(x, (bool, int, float, str)) for x in v)


def _fact(v) -> str:
    if isinstance(v, (list, tuple)):
        return ", ".join(map(_fact, v)) or "(none)"
    if v is None or isinstance(v, (bool, int, float, str)):
        return str(v)
    return describe(v)[0]


def state_details(ref: Ref):
    if ref.kind == "component":
        return _component(ref)
    if ref.kind == "file":
        return _file(ref.file)
    if ref.kind == "dcp-entry":
        return _dcp_entry(ref.file, ref.value)
    if ref.kind == "value":
        return _value(ref)
    return Text("")


def _component(ref: Ref):
    comp = ref.component
    if comp is None:
        return Text("State files that no component claims.")
    return Group(
        Text.assemble((comp.kind, "bold"), "  ",
                      (status_word(comp.status), STATUS_STYLE.get(comp.status, ""))),
        Text(printable(comp.detail)),
        Text(""),
        kv([("files", ", ".join(comp.files) or "none")]),
        Text(""),
        _facts(comp.facts),
    )


def _file(f):
    if isinstance(f, PickleFile):
        rows = [("kind", f.kind), ("size", f"{size(f.size)}" if f.size is not None else "?"),
                ("tensors", f"{len(f.tensors):,}")]
        if f.unsafe:
            rows.append(("UNSAFE", "calls " + ", ".join(f.unsafe) + " (not run; shown inert)"))
        parts = [Text(printable(f.name), style="bold"), kv(rows)]
    elif isinstance(f, DcpCheckpoint):
        rows = [("format", "torch.distributed.checkpoint"), ("version", f.version or "?"),
                ("keys", f"{len(f.entries):,}"), ("rank files", ", ".join(
                    f"{n} ({size(s)})" for n, s in sorted(f.files.items())))]
        parts = [Text(printable(file_name(f)), style="bold"), kv(rows)]
    else:
        return Group(Text(printable(str(f)), style="bold"),
                     Text("Read as part of the component (no pickle inside)."))
    problems = getattr(f, "problems", ())
    if problems:
        parts += [Text(""), Text("Problems", style="bold")]
        parts += [Text(printable(f"{alarms.word(p)}: {alarms.message(p)}")) for p in problems]
    return Group(*parts)


def _dcp_entry(dcp: DcpCheckpoint, e: DcpEntry):
    rows = [("key", e.key), ("kind", e.kind)]
    if e.kind == "tensor":
        rows += [("dtype", e.dtype), ("global shape", list(e.shape or ())),
                 ("chunks", len(e.chunks))]
    files = sorted({c.file for c in e.chunks if c.file})
    rows.append(("rank files", ", ".join(files) or "?"))
    return Group(Text(printable(e.key), style="bold"), kv(rows))


def _value(ref: Ref):
    v = ref.value
    where = file_name(ref.file)
    head = Text(printable(ref.path or "(top level)"), style="bold")
    if isinstance(v, TensorRef):
        pf = ref.file if isinstance(ref.file, PickleFile) else PickleFile("", "")
        nbytes, span = tensor_bytes(pf, v)
        rows = [("file", where), ("dtype", v.dtype), ("shape", list(v.shape)),
                ("numel", f"{v.numel:,}"), ("bytes", f"{size(nbytes)} ({nbytes:,} B)"),
                ("storage", f"data/{v.storage_key}, element offset {v.storage_offset:,}")]
        if span is not None:
            length = pf.storages[v.storage_key][1]
            rows.append(("in file", f"{span[0]:,} - {span[1]:,} (record of {length:,} B)"))
        return Group(head, kv(rows))
    if isinstance(v, DcpChunk):
        span = ", ".join(f"{o}:{o + s}" for o, s in zip(v.offsets, v.sizes)) or "whole value"
        rows = [("chunk", span), ("rank file", v.file or "?"),
                ("bytes",
                 f"{v.offset:,} - {v.offset + v.length:,}" if v.offset is not None else "?")]
        return Group(head, kv(rows))
    if isinstance(v, NumpyArray):
        return Group(head, kv([("file", where), ("numpy", f"{v.dtype} {list(v.shape)}")]))
    if isinstance(v, UnsafeCall):
        return Group(head, Text(f"This pickle asks to call {v.qualname} when loaded, which "
                                "could run code. ckpt-browser did not call it; anything that "
                                "loads this file with pickle (torch.load(weights_only=False)) "
                                "would.", style="bold"))
    if isinstance(v, Opaque):
        return Group(head, kv([("file", where), ("class", v.qualname),
                               ("fields", ", ".join(map(str, v.fields)) or "-")]),
                     Text("An object of this class was not built, only described."))
    rows = [("file", where), *_optimizer_rows(ref)]
    kids = kids_of(v)
    if isinstance(v, (dict, list, tuple)):
        rows.append(("holds", f"{len(kids):,} {'keys' if isinstance(v, dict) else 'items'}"))
        body = [(key, describe(child)[0]) for key, child in kids[:MAX_FIELDS]]
        if len(kids) > MAX_FIELDS:
            body.append(("…", f"{len(kids) - MAX_FIELDS:,} more"))
        parts = [head, kv(rows)]
        if body:
            parts += [Text(""), kv(body)]
        return Group(*parts)
    text, _ = describe(v)
    return Group(head, kv([*rows, ("type", type(v).__name__), ("value", text)]))


def _optimizer_rows(ref: Ref) -> list[tuple[str, str]]:
    """Under an optimizer's `state`: what the ids stand for, and each id's parameter."""
    state = optimizer_state_path(ref.component, ref.file)
    if state is None or not ref.path.startswith(state):
        return []
    if ref.path == state:
        return [("ids", ref.component.facts.get("ids") or "ids only")]
    pid = ref.path[len(state) + 1:].split(".", 1)[0]
    name = param_names(ref.component).get(pid)
    return [("parameter", name or "unknown (ids only: see the state above)")]
