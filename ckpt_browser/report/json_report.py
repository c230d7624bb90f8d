"""The `inspect --json` document (contract in the README)."""

from __future__ import annotations

import math

from ckpt_browser.model import Checkpoint
from ckpt_browser.standins import HugeInt


def inspect_doc(ckpt: Checkpoint) -> dict:
    totals = ckpt.totals
    source = {"shown_as": ckpt.layout.shown_as} if ckpt.layout.shown_as else {}
    return {
        "path": ckpt.layout.path,
        **source,
        "format": ckpt.layout.format,
        "files": [{"path": f.name, "format": f.format, "size": f.size,
                   "header_bytes": f.header_bytes, "tensors": len(f.tensors), "error": f.error}
                  for f in ckpt.files],
        "tensors": tensor_rows(ckpt),
        "totals": {"tensors": totals.tensors, "params": totals.params, "bytes": totals.bytes,
                   "by_dtype": {str(k): {"tensors": v.tensors, "params": v.params,
                                         "bytes": v.bytes} for k, v in totals.by_dtype.items()},
                   "by_component": {k: {"tensors": v.tensors, "params": v.params,
                                        "bytes": v.bytes}
                                    for k, v in {"weights": totals,
                                                 **ckpt.component_totals}.items()}},
        "problems": [{"severity": p.severity, "file": p.file, "message": p.message}
                     for p in ckpt.problems],
    }


def tensor_rows(ckpt: Checkpoint) -> list[dict]:
    """Every tensor of every file. Safetensors offsets are relative to the data section (as in
    the header); other formats give absolute file offsets, or null where the file does not
    say (a ZeRO-3 placeholder is marked `placeholder`); a DCP tensor is one row at its global
    shape, with its chunks."""
    rows: list[dict] = []
    for f in ckpt.files:
        if f.format == "safetensors":
            # tuples encode as JSON arrays; no copies for 94,000 tensors
            rows.extend({"name": name, "dtype": dtype, "shape": shape, "nbytes": end - begin,
                         "file": file, "offsets": (begin, end), "component": kind}
                        for name, dtype, shape, file, begin, end, _, kind, _, _ in f.tensors)
        elif f.format == "dcp-metadata":
            rows.extend(_dcp_rows(f))
        else:
            rows.extend(_row(t) for t in f.tensors)
    return rows


def _row(t) -> dict:
    row = {"name": t.name, "dtype": t.dtype, "shape": t.shape, "nbytes": t.end - t.begin,
           "file": t.file, "offsets": (t.begin, t.end) if t.located else None,
           "component": t.component}
    if t.placeholder:
        row["placeholder"] = True
    return row


def _dcp_rows(f) -> list[dict]:
    """One row per DCP tensor, at its global shape; its chunks (which rank file holds which
    offsets of it) are a detail of the row."""
    from ckpt_browser.readers.pickle_safe import ITEMSIZE

    d = f.source
    folder = f.name[: -len(".metadata")]
    kinds = {t.name: t.component for t in f.tensors}
    rows = []
    for key, e in d.entries.items():
        if e.kind != "tensor":
            continue
        shape = tuple(e.shape or ())
        rows.append({"name": key, "dtype": e.dtype, "shape": shape,
                     "nbytes": math.prod(shape) * ITEMSIZE.get(e.dtype, 1), "file": f.name,
                     "offsets": None, "component": kinds.get(key, "other"),
                     "chunks": [_chunk(folder, c) for c in e.chunks]})
    return rows


def _chunk(folder: str, c) -> dict:
    placed = c.offset is not None and c.length is not None
    return {"file": folder + (c.file or "?"), "shape": c.sizes, "chunk_offsets": c.offsets,
            "offsets": (c.offset, c.offset + c.length) if placed else None}


def strict(obj):
    """Facts read from files may hold NaN or Infinity (a pickled lr, a JSON epoch), which JSON
    cannot carry: they become the strings "nan", "inf", "-inf". An integer too long to print
    (HugeInt) becomes "an integer of N digits"."""
    if (isinstance(obj, float) and not math.isfinite(obj)) or type(obj) is HugeInt:
        return str(obj)
    if isinstance(obj, dict):
        return {k: strict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [strict(v) for v in obj]
    return obj


def state_doc(training) -> dict:
    """Framework, step, and the seven components (the README's JSON schema plus "facts")."""
    return {
        "framework": training.framework,
        "step": training.step,
        "epoch": strict(training.epoch),
        "ranks": training.ranks,
        "components": {k: {"status": c.status, "files": list(c.files), "detail": c.detail,
                           "facts": strict(c.facts)} for k, c in training.components.items()},
    }


def full_doc(ckpt: Checkpoint, training, timeline=None) -> dict:
    """`inspect --json`: every file and tensor, the totals (weights, then each component),
    the training state and every problem."""
    doc = inspect_doc(ckpt)
    if training is None:
        return doc
    if ckpt.layout.format == "files":
        doc["format"] = training.framework
    doc.update(state_doc(training))
    if training.project:
        doc["project"] = training.project
    seen = {(p.severity, p.file, p.message) for p in ckpt.problems}
    doc["problems"].extend({"severity": p.severity, "file": p.file, "message": p.message}
                           for p in training.problems
                           if (p.severity, p.file, p.message) not in seen)
    if timeline:
        doc["timeline"] = [{"name": e.name, "step": e.step, "mtime": e.mtime, "kind": e.kind,
                            "format": e.format} for e in timeline]
    return doc
