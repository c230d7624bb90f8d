"""The `inspect --json` document (contract in the README)."""

from __future__ import annotations

from ckpt_browser.model import Checkpoint


def inspect_doc(ckpt: Checkpoint) -> dict:
    totals = ckpt.totals
    return {
        "path": ckpt.layout.path,
        "format": ckpt.layout.format,
        "files": [{"path": s.name, "size": s.size, "header_bytes": s.header_bytes,
                   "tensors": len(s.tensors), "error": s.error} for s in ckpt.shards],
        "tensors": [{"name": t.name, "dtype": t.dtype, "shape": list(t.shape),
                     "nbytes": t.end - t.begin, "file": t.file, "offsets": [t.begin, t.end]}
                    for t in ckpt.tensors],
        "totals": {"tensors": totals.tensors, "params": totals.params, "bytes": totals.bytes,
                   "by_dtype": {k: {"tensors": v.tensors, "params": v.params, "bytes": v.bytes}
                                for k, v in totals.by_dtype.items()}},
        "problems": [{"severity": p.severity, "file": p.file, "message": p.message}
                     for p in ckpt.problems],
    }
