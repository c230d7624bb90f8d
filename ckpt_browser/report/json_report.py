"""The `inspect --json` document (contract in the README)."""

from __future__ import annotations

import math
import os

from ckpt_browser.model import Checkpoint


def inspect_doc(ckpt: Checkpoint) -> dict:
    totals = ckpt.totals
    return {
        "path": ckpt.layout.path,
        "format": ckpt.layout.format,
        "files": [{"path": s.name, "size": s.size, "header_bytes": s.header_bytes,
                   "tensors": len(s.tensors), "error": s.error} for s in ckpt.shards],
        # tuples encode as JSON arrays; no copies for 94,000 tensors
        "tensors": [{"name": name, "dtype": dtype, "shape": shape, "nbytes": end - begin,
                     "file": file, "offsets": (begin, end)}
                    for name, dtype, shape, file, begin, end, _ in ckpt.tensors],
        "totals": {"tensors": totals.tensors, "params": totals.params, "bytes": totals.bytes,
                   "by_dtype": {k: {"tensors": v.tensors, "params": v.params, "bytes": v.bytes}
                                for k, v in totals.by_dtype.items()}},
        "problems": [{"severity": p.severity, "file": p.file, "message": p.message}
                     for p in ckpt.problems],
    }


def strict(obj):
    """Facts read from files may hold NaN or Infinity (a pickled lr, a JSON epoch), which JSON
    cannot carry: they become the strings "nan", "inf", "-inf"."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    if isinstance(obj, dict):
        return {k: strict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [strict(v) for v in obj]
    return obj


def state_doc(training) -> dict:
    """Framework, step, and the seven components (issue 4's schema plus "facts")."""
    return {
        "framework": training.framework,
        "step": training.step,
        "epoch": strict(training.epoch),
        "ranks": training.ranks,
        "components": {k: {"status": c.status, "files": list(c.files), "detail": c.detail,
                           "facts": strict(c.facts)} for k, c in training.components.items()},
    }


def state_tensors(training) -> list[dict]:
    """Tensors inside torch files and DCP folders, listed like safetensors ones."""
    from ckpt_browser.analysis.roles import component_of
    from ckpt_browser.readers.pickle_safe import ITEMSIZE
    from ckpt_browser.readers.standins import DcpCheckpoint, PickleFile
    from ckpt_browser.readers.torchfile import tensor_bytes

    rows = []
    for f in training.files:
        if isinstance(f, PickleFile):
            for path, t in f.tensors:
                nbytes, offsets = tensor_bytes(f, t)
                rows.append({"name": path, "dtype": t.dtype, "shape": t.shape, "nbytes": nbytes,
                             "file": f.name, "offsets": offsets,
                             "component": component_of(training, f.name, path)})
        elif isinstance(f, DcpCheckpoint):
            prefix = f"{f.folder}/" if f.folder else ""
            metadata = prefix + ".metadata"
            for key, e in f.entries.items():
                if e.kind != "tensor":
                    continue
                itemsize = ITEMSIZE.get(e.dtype, 1)
                for c in e.chunks:
                    numel = 1
                    for d in c.sizes:
                        numel *= d
                    rows.append({"name": key, "dtype": e.dtype, "shape": c.sizes,
                                 "nbytes": numel * itemsize, "file": prefix + (c.file or "?"),
                                 "offsets": (c.offset, c.offset + c.length)
                                 if c.offset is not None else None,
                                 "global_shape": e.shape, "chunk_offsets": c.offsets,
                                 "component": component_of(training, metadata, key)})
    return rows


def full_doc(ckpt: Checkpoint, training, timeline=None) -> dict:
    """`inspect --json`: the weights document plus training state; totals count weights only
    (safetensors tensors and state-file tensors that belong to the weights component)."""
    doc = inspect_doc(ckpt)
    if training is None:
        return doc
    extra = state_tensors(training)
    doc["tensors"].extend(extra)
    if not ckpt.layout.files:
        doc["format"] = training.framework
    totals = doc["totals"]
    seen = set()
    for t in extra:
        if t["component"] != "weights":
            continue
        params = 1
        for d in t["shape"]:
            params *= d
        # a DCP tensor is listed per chunk, in several rank files: count it once
        where = os.path.dirname(t["file"]) if "global_shape" in t else t["file"]
        first = (where, t["name"]) not in seen
        seen.add((where, t["name"]))
        row = totals["by_dtype"].setdefault(t["dtype"], {"tensors": 0, "params": 0, "bytes": 0})
        row["tensors"] += first
        row["params"] += params
        row["bytes"] += t["nbytes"]
        totals["tensors"] += first
        totals["params"] += params
        totals["bytes"] += t["nbytes"]
    # a DCP entry without properties has no dtype: sort it as a string, never compare None
    totals["by_dtype"] = dict(sorted(totals["by_dtype"].items(), key=lambda kv: str(kv[0])))
    doc.update(state_doc(training))
    doc["problems"].extend({"severity": p.severity, "file": p.file, "message": p.message}
                           for p in training.problems)
    if timeline:
        doc["timeline"] = [{"name": e.name, "step": e.step, "mtime": e.mtime, "kind": e.kind,
                            "format": e.format} for e in timeline]
    return doc
