"""Minimal baseline for `ckpt-browser inspect --json` on a sharded safetensors checkpoint.

Usage: python benchmarks/baseline_inspect.py PATH

Reads the index and each shard's header with plain json.loads and prints the
same JSON report (every file of the folder with its format, every tensor with its component),
with no validation. It is the floor the real CLI is timed against.
"""

import json
import math
import os
import sys


def main(path):
    with open(os.path.join(path, "model.safetensors.index.json"), "rb") as f:
        weight_map = json.loads(f.read())["weight_map"]
    files, tensors = [], []
    by_dtype = {}
    for name in sorted(set(weight_map.values())):
        with open(os.path.join(path, name), "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(n))
            size = os.fstat(f.fileno()).st_size
        header.pop("__metadata__", None)
        rows = []
        for tname, t in header.items():
            begin, end = t["data_offsets"]
            rows.append((begin, end, tname, t))
        rows.sort(key=lambda r: r[:3])
        for begin, end, tname, t in rows:
            params = math.prod(t["shape"])
            d = by_dtype.setdefault(t["dtype"], {"tensors": 0, "params": 0, "bytes": 0})
            d["tensors"] += 1
            d["params"] += params
            d["bytes"] += end - begin
            tensors.append({"name": tname, "dtype": t["dtype"], "shape": t["shape"],
                            "nbytes": end - begin, "file": name, "offsets": [begin, end],
                            "component": "weights"})
        files.append({"path": name, "format": "safetensors", "size": size, "header_bytes": n,
                      "tensors": len(rows), "error": None})
    # the other files of the folder (config.json, the index) are listed with their format
    shards = set(weight_map.values())
    for name in os.listdir(path):
        if name not in shards and not name.startswith("."):
            with open(os.path.join(path, name), "rb") as f:
                head = f.read(1)
            files.append({"path": name, "format": "json" if head == b"{" else "other",
                          "size": os.path.getsize(os.path.join(path, name)),
                          "header_bytes": None, "tensors": 0, "error": None})
    files.sort(key=lambda f: f["path"])
    by_dtype = dict(sorted(by_dtype.items()))
    totals = {"tensors": len(tensors),
              "params": sum(d["params"] for d in by_dtype.values()),
              "bytes": sum(d["bytes"] for d in by_dtype.values()),
              "by_dtype": by_dtype}
    totals["by_component"] = {"weights": {k: totals[k] for k in ("tensors", "params", "bytes")}}
    report = {"path": path, "format": "safetensors-index", "files": files,
              "tensors": tensors, "totals": totals, "problems": []}
    sys.stdout.write(json.dumps(report) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
