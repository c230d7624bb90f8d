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
