"""Baseline for `ckpt-browser diff A B --values`: the straightforward numpy script.

Usage: python benchmarks/baseline_diff.py [--shortcut] A B

A and B are sharded safetensors folders (model.safetensors.index.json) or single .safetensors
files. It parses every shard header itself (json), and for each tensor name present in both
with the same shape reads both tensors in 8 MiB chunks with os.pread, converts each chunk to
float32 with numpy (BF16: view as uint16, widen to uint32, shift left 16, view as float32;
F16 with astype), and computes max |a - b|, mean |a - b|, rel L2 = ||a - b|| / ||a|| and
cosine. Element-wise work (a - b, |d|, products) is in float32; every sum accumulates in
float64 (np.sum(..., dtype=np.float64) per chunk, Python floats across chunks). Not np.dot on
float32 arrays: BLAS sdot accumulates in float32, ~1e-5 relative off on a few million
elements, which moves a cosine of 0.9987 in its fourth digit. Prints a JSON summary.

By default there is NO bitwise shortcut: every chunk is converted and measured, even when its
bytes are identical. This is the "not deliberately slow, not deliberately clever" reference.

--shortcut adds the one trick that matters: a chunk whose raw bytes are equal on both sides
(same dtype, np.array_equal on the raw bytes) is not converted; its contribution to ||a||,
||b|| and a.b (all equal to sum a^2 there) is computed in a second pass only if some other
chunk of the same tensor differed, so a bitwise-identical tensor costs reading both sides and
a memcmp. That is the same algorithm `ckpt_browser.values.compare` uses, in plain numpy.

Only BF16, F16 and F32 are handled, and NaN/Inf get no special treatment (the benchmark's
checkpoints have none).
"""

import json
import math
import os
import sys

import numpy as np

CHUNK_BYTES = 8 * 2**20
NUMPY = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16}
ITEMSIZE = {"F32": 4, "F16": 2, "BF16": 2}


def tensors_of(path):
    """name -> (file, dtype, shape, absolute offset, nbytes), from the headers alone."""
    if os.path.isdir(path):
        index = os.path.join(path, "model.safetensors.index.json")
        if os.path.exists(index):
            with open(index) as f:
                files = sorted(set(json.load(f)["weight_map"].values()))
        else:
            files = sorted(n for n in os.listdir(path) if n.endswith(".safetensors"))
        files = [os.path.join(path, n) for n in files]
    else:
        files = [path]
    out = {}
    for file in files:
        with open(file, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(n))
        for name, t in header.items():
            if name == "__metadata__":
                continue
            begin, end = t["data_offsets"]
            out[name] = (file, t["dtype"], tuple(t["shape"]), 8 + n + begin, end - begin)
    return out


def pread_exact(fd, length, offset):
    buf = os.pread(fd, length, offset)
    while len(buf) < length:
        more = os.pread(fd, length - len(buf), offset + len(buf))
        if not more:
            raise OSError(f"short read at {offset + len(buf)}")
        buf += more
    return buf


def to_f32(raw, dtype):
    x = np.frombuffer(raw, dtype=NUMPY[dtype])
    if dtype == "BF16":
        return (x.astype(np.uint32) << 16).view(np.float32)
    return x if dtype == "F32" else x.astype(np.float32)


class Fds(dict):
    def __missing__(self, path):
        fd = self[path] = os.open(path, os.O_RDONLY)
        return fd


def compare(ta, tb, fds, shortcut):
    (fa, da, shape, oa, _), (fb, db, _, ob, _) = ta, tb
    numel = math.prod(shape)
    per_chunk = CHUNK_BYTES // max(ITEMSIZE[da], ITEMSIZE[db])
    max_abs = sum_abs = dd = aa = bb = ab = 0.0
    equal_chunks = []  # (element start, count) whose bytes were identical (--shortcut)
    for start in range(0, numel, per_chunk):
        k = min(per_chunk, numel - start)
        ra = pread_exact(fds[fa], k * ITEMSIZE[da], oa + start * ITEMSIZE[da])
        rb = pread_exact(fds[fb], k * ITEMSIZE[db], ob + start * ITEMSIZE[db])
        if shortcut and da == db and np.array_equal(np.frombuffer(ra, np.uint8),
                                                    np.frombuffer(rb, np.uint8)):
            equal_chunks.append((start, k))
            continue
        x, y = to_f32(ra, da), to_f32(rb, db)
        d = x - y
        ad = np.abs(d)
        max_abs = max(max_abs, float(ad.max()))
        sum_abs += float(ad.sum(dtype=np.float64))
        dd += float(np.sum(d * d, dtype=np.float64))
        aa += float(np.sum(x * x, dtype=np.float64))
        bb += float(np.sum(y * y, dtype=np.float64))
        ab += float(np.sum(x * y, dtype=np.float64))
    if shortcut and equal_chunks:
        if len(equal_chunks) * per_chunk >= numel:  # every chunk identical
            return {"bitwise_equal": True, "max_abs_diff": 0.0, "mean_abs_diff": 0.0,
                    "rel_l2": 0.0, "cosine": 1.0}
        for start, k in equal_chunks:  # the identical stretches still count toward the norms
            x = to_f32(pread_exact(fds[fa], k * ITEMSIZE[da], oa + start * ITEMSIZE[da]), da)
            s = float(np.sum(x * x, dtype=np.float64))
            aa += s
            bb += s
            ab += s
    rel = math.sqrt(dd) / math.sqrt(aa) if aa > 0 else (0.0 if dd == 0 else None)
    cos = ab / math.sqrt(aa * bb) if aa > 0 and bb > 0 else None
    if cos is not None:
        cos = max(-1.0, min(1.0, cos))
    return {"bitwise_equal": False, "max_abs_diff": max_abs,
            "mean_abs_diff": sum_abs / numel if numel else None, "rel_l2": rel, "cosine": cos}


def main(argv):
    shortcut = "--shortcut" in argv
    paths = [a for a in argv if a != "--shortcut"]
    if len(paths) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    a, b = tensors_of(paths[0]), tensors_of(paths[1])
    fds = Fds()
    results = {}
    try:
        # in A's file order, as the CLI does
        for name in sorted(a.keys() & b.keys(), key=lambda n: a[n][0::3]):
            if a[name][2] != b[name][2]:
                continue
            if a[name][1] not in NUMPY or b[name][1] not in NUMPY:
                results[name] = {"error": f"dtype {a[name][1]} / {b[name][1]} not handled"}
                continue
            results[name] = compare(a[name], b[name], fds, shortcut)
            results[name]["dtypes"] = [a[name][1], b[name][1]]
    finally:
        for fd in fds.values():
            os.close(fd)
    doc = {"a": paths[0], "b": paths[1], "shortcut": shortcut,
           "only_in_a": sorted(a.keys() - b.keys()), "only_in_b": sorted(b.keys() - a.keys()),
           "compared": len(results), "bytes": sum(a[n][4] + b[n][4] for n in results),
           "tensors": results}
    sys.stdout.write(json.dumps(doc) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
