"""The "Training state" tree: components, their files, and what the files hold.

Plain Python (Rich text, no Textual): the tree widget asks for one level at a time.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from rich.text import Text

from ckpt_browser import alarms
from ckpt_browser.analysis.roles import component_of
from ckpt_browser.escape import printable
from ckpt_browser.model import COMPONENTS, TrainingState, natural_key
from ckpt_browser.parts.mapping import main_shape
from ckpt_browser.readers.pickle_safe import ITEMSIZE
from ckpt_browser.report.styles import ALERT
from ckpt_browser.report.words import STATUS_STYLE, plural, size, status_word
from ckpt_browser.standins import (
    DcpCheckpoint,
    DcpEntry,
    HugeInt,
    NumpyArray,
    Opaque,
    PickleFile,
    TensorRef,
    UnsafeCall,
)
from ckpt_browser.tui.browse.refs import Ref
from ckpt_browser.tui.common.filter import name_matcher

MAX_CHILDREN = 500  # a 625-int RNG tuple or a 10,000-entry params list stays one screenful

@dataclass(frozen=True)
class Item:
    label: Text
    ref: Ref
    expandable: bool


def file_name(f) -> str:
    if isinstance(f, PickleFile):
        return f.name
    if isinstance(f, DcpCheckpoint):
        return f.folder or "."
    return str(f)


def holds(f, name: str) -> bool:
    """Whether a DCP folder read stands for the file `name` (its .metadata or a rank file)."""
    if not isinstance(f, DcpCheckpoint):
        return False
    members = (".metadata", *f.files)
    return name in (os.path.join(f.folder, m) if f.folder else m for m in members)


def _by_name(training: TrainingState) -> dict:
    """File name -> what was read from it; a DCP folder answers for its .metadata and rank files."""
    by_name = {}
    for f in training.files:
        by_name[file_name(f)] = f
        if isinstance(f, DcpCheckpoint):
            for member in (".metadata", *f.files):
                by_name[os.path.join(f.folder, member) if f.folder else member] = f
    return by_name


def component_items(training: TrainingState) -> list[Item]:
    items = []
    for kind in COMPONENTS:
        comp = training.components.get(kind)
        if comp is None:
            continue
        label = Text.assemble((f"{kind:<10}", "bold"), (f" {status_word(comp.status):<10}",
                                                         STATUS_STYLE.get(comp.status, "")),
                              (" " + printable(", ".join(comp.files)), "dim"))
        items.append(Item(label, Ref("component", component=comp), bool(comp.files)))
    by_name = _by_name(training)
    claimed = {id(by_name[n]) for c in training.components.values()
               for n in c.files if n in by_name}
    others = [f for f in training.files if id(f) not in claimed]
    if others:
        items.append(Item(Text("other files", style="bold"), Ref("component", file=others), True))
    return items


def file_items(training: TrainingState, ref: Ref) -> list[Item]:
    if ref.component is None:  # "other files"
        files = ref.file
    else:
        by_name = _by_name(training)
        files, seen = [], set()
        for name in ref.component.files:
            f = by_name.get(name, name)
            if id(f) not in seen:  # a DCP folder stands for its .metadata and rank files
                seen.add(id(f))
                files.append(f)
    items = []
    kind = ref.component.kind if ref.component is not None else None
    for f in files:
        parts = [p for p in training.parts.get(file_name(f), ()) if p.kind == kind and p.path]
        node = _at(f.obj, parts[0].path) if isinstance(f, PickleFile) and len(parts) == 1 else None
        if node is not None:  # the part that holds this component, not the whole file
            label = Text.assemble((printable(parts[0].path), "bold"),
                                  (f"  in {printable(file_name(f))}: {printable(parts[0].what)}",
                                   "dim"))
            items.append(Item(label, Ref("value", file=f, path=parts[0].path, value=node,
                                         component=ref.component), True))
            continue
        label = Text(printable(file_name(f)), style="bold")
        said = alarms.words(getattr(f, "problems", ()), bool(getattr(f, "unsafe", ())))
        if said:  # "! UNSAFE", "! DAMAGED" or both
            label = Text.assemble((f"! {', '.join(said)} ", ALERT), label)
        if isinstance(f, PickleFile):
            label.append(f"  {f.kind}, {plural(len(f.tensors), 'tensor')}", style="dim")
        elif isinstance(f, DcpCheckpoint):
            label.append(f"  DCP, {plural(len(f.entries), 'key')}, "
                         f"{plural(len(f.files), 'rank file')}", style="dim")
        items.append(Item(label, Ref("file", file=f, component=ref.component),
                          isinstance(f, (PickleFile, DcpCheckpoint))))
    return items


def _at(obj, path: str):
    """The value at a dotted path (as readers.torchfile.walk names it); None if not found.
    A key may hold dots itself: the longest key that matches is taken."""
    node, rest = obj, path
    while rest:
        kids = dict(kids_of(node))
        key = next((k for k in sorted(kids, key=len, reverse=True)
                    if rest == k or rest.startswith(k + ".")), None)
        if key is None:
            return None
        node, rest = kids[key], rest[len(key) + 1:]
    return node


def kids_of(value) -> list[tuple[str, object]]:
    if isinstance(value, dict):
        return [(str(k), v) for k, v in value.items()]
    if isinstance(value, (list, tuple)):
        return [(str(i), v) for i, v in enumerate(value)]
    if isinstance(value, Opaque):
        return list(value.fields.items()) or [(str(i), v) for i, v in enumerate(value.args)]
    return []


def describe(value) -> tuple[str, str]:
    """(text, style) describing a value on one line."""
    if isinstance(value, TensorRef):
        nbytes = value.numel * ITEMSIZE.get(value.dtype, 1)
        return f"{value.dtype} {list(value.shape)} {size(nbytes)}", "cyan"
    if isinstance(value, NumpyArray):
        return f"numpy {value.dtype} {list(value.shape)}", "cyan"
    if isinstance(value, UnsafeCall):
        return f"UNSAFE call {value.qualname}(…) — not run", ALERT
    if isinstance(value, Opaque):
        return f"<{value.qualname}>", "magenta"
    if isinstance(value, dict):
        return f"{{{len(value)} keys}}", "dim"
    if isinstance(value, list):
        return f"[{len(value)} items]", "dim"
    if isinstance(value, tuple):
        return f"({len(value)} items)", "dim"
    if isinstance(value, (bytes, bytearray)):
        return f"{len(value):,} bytes", "dim"
    if isinstance(value, HugeInt):
        return str(value), ""
    if value is not None and not isinstance(value, (bool, int, float, complex, str)):
        return f"<{type(value).__name__}>", "magenta"  # never a dataclass's repr
    text = repr(value)
    return (text if len(text) <= 60 else text[:57] + "…"), ""


def value_label(key: str, value, note: str = "") -> Text:
    text, style = describe(value)
    label = Text.assemble((printable(key), "bold"), "  ", (printable(text), style))
    if note:
        label.append(f"  {printable(note)}", style="italic")
    return label


def _leaves(value, prefix: str):
    """(dotted path, leaf) pairs, for the filter's flat list."""
    kids = kids_of(value)
    if not kids:
        yield prefix, value
        return
    for key, child in kids:
        yield from _leaves(child, f"{prefix}.{key}" if prefix else key)


def value_items(file, path: str, value, pattern: str = "", component=None) -> list[Item]:
    if pattern and not path:  # filtering: a flat list of matching leaves
        match = name_matcher(pattern)
        pairs = [(p, v) for p, v in _leaves(value, "") if match(p)]
    else:
        pairs = [(f"{path}.{k}" if path else k, v) for k, v in kids_of(value)]
    state = optimizer_state_path(component, file)
    names = param_names(component) if path and path == state else {}
    items = []
    for full, child in pairs[:MAX_CHILDREN]:
        key = full if pattern and not path else full.rsplit(".", 1)[-1]
        note = names.get(key, "") if names else ""
        if full == state and not pattern:
            note = "by parameter name" if param_names(component) else "ids only"
        elif path and path == state and not note:
            moment = main_shape(child)
            note = f"exp_avg {list(moment)}" if moment is not None else ""
        items.append(Item(value_label(key, child, note),
                          Ref("value", file=file, path=full, value=child, component=component),
                          bool(kids_of(child))))
    if len(pairs) > MAX_CHILDREN:
        items.append(Item(Text(f"… {len(pairs) - MAX_CHILDREN:,} more", style="dim"),
                          Ref("more"), False))
    return items


def optimizer_state_path(component, file) -> str | None:
    """The dotted path of the optimizer's `state` in `file`, when the component says where
    its state_dict is (parts.optimizer_names)."""
    if component is None or component.kind != "optimizer":
        return None
    facts = component.facts
    if "path" not in facts or file_name(file) != facts.get("file"):
        return None
    return f"{facts['path']}.state" if facts["path"] else "state"


def param_names(component) -> dict[str, str]:
    """Each optimizer id's parameter name, where certain (parts.mapping)."""
    if component is None or component.kind != "optimizer":
        return {}
    return component.facts.get("param_names") or {}


def dcp_items(dcp: DcpCheckpoint, pattern: str = "", training: TrainingState | None = None,
              kind: str | None = None) -> list[Item]:
    """A DCP folder's keys; under a component, only the keys that belong to it."""
    match = name_matcher(pattern)
    metadata = os.path.join(dcp.folder, ".metadata") if dcp.folder else ".metadata"
    items = []
    for key in sorted(dcp.entries, key=natural_key):
        if not match(key) or (kind and component_of(training, metadata, key) != kind):
            continue
        e = dcp.entries[key]
        if e.kind == "tensor":
            desc = f"{e.dtype} {list(e.shape or ())}  {len(e.chunks)} chunk(s)"
        else:
            desc = f"bytes {size(sum(c.length or 0 for c in e.chunks))}"
        items.append(Item(Text.assemble((printable(key), "bold"), "  ", (desc, "dim")),
                          Ref("dcp-entry", file=dcp, path=key, value=e), bool(e.chunks)))
    return items


def chunk_items(dcp: DcpCheckpoint, entry: DcpEntry) -> list[Item]:
    items = []
    for c in entry.chunks:
        where = ", ".join(f"{o}:{o + s}" for o, s in zip(c.offsets, c.sizes)) or "whole"
        rng = f"@ {c.offset:,}, {size(c.length)}" if c.offset is not None else "(no byte range)"
        items.append(Item(Text(f"[{where}] in {c.file or '?'} {rng}"),
                          Ref("value", file=dcp, path=entry.key, value=c), False))
    return items


def children(training: TrainingState, ref: Ref, pattern: str = "") -> list[Item]:
    """One level of the training-state tree below `ref`."""
    if ref.kind == "component":
        return file_items(training, ref)
    if ref.kind == "file":
        if isinstance(ref.file, DcpCheckpoint):
            return dcp_items(ref.file, pattern, training,
                             ref.component.kind if ref.component else None)
        if isinstance(ref.file, PickleFile):
            return value_items(ref.file, "", ref.file.obj, pattern, ref.component)
        return []
    if ref.kind == "dcp-entry":
        return chunk_items(ref.file, ref.value)
    if ref.kind == "value":
        return value_items(ref.file, ref.path, ref.value, component=ref.component)
    return []
