"""Write two real ~2 GB sharded Llama-like safetensors checkpoints that differ in known ways.

Usage: python benchmarks/make_diff_pair.py OUTDIR

OUTDIR/a and OUTDIR/b are HF layouts (model-0000K-of-0000N.safetensors written with
safetensors.torch.save_file, model.safetensors.index.json with weight_map and
metadata.total_size, config.json). Weights are BF16, norms F32, and the embedding is one
F32 tensor of exactly 1 GiB in a shard of its own on both sides. B is A with:
  - one tensor's dtype changed (BF16 -> F32, the same values),
  - one tensor renamed,
  - 1e-3 Gaussian noise added to a few tensors, and to a few rows of the 1 GiB embedding,
  - a different sharding (other shard boundaries, the embedding's shard last instead of first);
every other tensor is bitwise identical. OUTDIR/expected.json lists these differences.
Values are deterministic (seeded per tensor and per block of rows), generated a block of rows
at a time so the generator holds about one shard (peak RSS ~2 GB, for the 1 GiB embedding's
shard); B's tensors are regenerated from the same seeds, not read back from A. Takes ~30-50 s
on 2 cores. Skipped if OUTDIR already has a complete pair.
"""

import json
import os
import sys
import zlib

import torch
from safetensors.torch import save_file

MARKER = ".make_diff_pair.complete"
VERSION = "1"  # bump when the layout or the values change so old work dirs get rebuilt

HIDDEN = 2048
INTER = 5632
N_LAYERS = 12
N_HEADS = 16
N_KV_HEADS = 4
HEAD_DIM = HIDDEN // N_HEADS
VOCAB = 131072  # F32 [131072, 2048] = exactly 1 GiB
ROWS_PER_BLOCK = 4096  # values are generated (and seeded) this many rows at a time
NOISE = 1e-3

DTYPES = {"BF16": torch.bfloat16, "F32": torch.float32}
ITEMSIZE = {"BF16": 2, "F32": 4}

EMBED = "model.embed_tokens.weight"
DTYPE_CHANGED = "model.layers.2.mlp.gate_proj.weight"  # BF16 in A, F32 in B
RENAMED = ("model.layers.5.self_attn.o_proj.weight", "model.layers.5.self_attn.out_proj.weight")
# name -> rows that get noise (None: the whole tensor)
PERTURBED = {
    "model.layers.0.self_attn.q_proj.weight": None,
    "model.layers.7.mlp.up_proj.weight": None,
    "model.layers.9.self_attn.k_proj.weight": None,
    "model.layers.11.post_attention_layernorm.weight": None,
    EMBED: [(1000, 1004), (70000, 70002), (131070, 131072)],
}
SHARD_BYTES = {"a": 600_000_000, "b": 250_000_000}  # layer shards; the embedding is alone

CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": HIDDEN,
    "intermediate_size": INTER,
    "num_hidden_layers": N_LAYERS,
    "num_attention_heads": N_HEADS,
    "num_key_value_heads": N_KV_HEADS,
    "vocab_size": VOCAB,
    "max_position_embeddings": 8192,
    "rms_norm_eps": 1e-05,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
}


def layer(i):
    p = f"model.layers.{i}"
    yield p + ".input_layernorm.weight", "F32", [HIDDEN]
    yield p + ".self_attn.q_proj.weight", "BF16", [N_HEADS * HEAD_DIM, HIDDEN]
    yield p + ".self_attn.k_proj.weight", "BF16", [N_KV_HEADS * HEAD_DIM, HIDDEN]
    yield p + ".self_attn.v_proj.weight", "BF16", [N_KV_HEADS * HEAD_DIM, HIDDEN]
    yield p + ".self_attn.o_proj.weight", "BF16", [HIDDEN, N_HEADS * HEAD_DIM]
    yield p + ".post_attention_layernorm.weight", "F32", [HIDDEN]
    yield p + ".mlp.gate_proj.weight", "BF16", [INTER, HIDDEN]
    yield p + ".mlp.up_proj.weight", "BF16", [INTER, HIDDEN]
    yield p + ".mlp.down_proj.weight", "BF16", [HIDDEN, INTER]


def layer_tensors():
    for i in range(N_LAYERS):
        yield from layer(i)
    yield "model.norm.weight", "F32", [HIDDEN]


def nbytes(dtype, shape):
    n = ITEMSIZE[dtype]
    for d in shape:
        n *= d
    return n


def seed(name, block, salt=0):
    return zlib.crc32(f"{name}|{block}|{salt}".encode())


def values(name, dtype, shape):
    """A's values of one tensor, generated a block of rows at a time."""
    out = torch.empty(shape, dtype=DTYPES[dtype])
    norm = name.endswith("norm.weight")
    rows = shape[0] if len(shape) > 1 else 1
    flat = out.view(rows, -1)
    for r0 in range(0, rows, ROWS_PER_BLOCK):
        r1 = min(rows, r0 + ROWS_PER_BLOCK)
        g = torch.Generator().manual_seed(seed(name, r0))
        x = torch.randn((r1 - r0, flat.shape[1]), generator=g)
        if norm:
            x.mul_(0.05).add_(1.0)
        else:
            x.mul_(0.02)
        flat[r0:r1].copy_(x)  # rounds to BF16 where the tensor is BF16
    return out


def perturb(name, t):
    """B's values of a perturbed tensor: A's plus NOISE * N(0, 1) on the chosen rows."""
    rows = t.shape[0] if t.dim() > 1 else 1
    flat = t.view(rows, -1)
    spans = PERTURBED[name] or [(0, rows)]
    for k, (r0, r1) in enumerate(spans):
        for s0 in range(r0, r1, ROWS_PER_BLOCK):
            s1 = min(r1, s0 + ROWS_PER_BLOCK)
            g = torch.Generator().manual_seed(seed(name, s0, salt=1 + k))
            noise = torch.randn((s1 - s0, flat.shape[1]), generator=g).mul_(NOISE)
            flat[s0:s1].copy_(flat[s0:s1].float().add_(noise))
    return t


def side_b(name, dtype, shape):
    """B's (name, dtype, shape) for one of A's tensors."""
    if name == DTYPE_CHANGED:
        return name, "F32", shape
    if name == RENAMED[0]:
        return RENAMED[1], dtype, shape
    return name, dtype, shape


def b_values(a_name, a_dtype, shape):
    t = values(a_name, a_dtype, shape)
    if a_name == DTYPE_CHANGED:
        t = t.float()  # exact: every BF16 value is an F32 value
    if a_name in PERTURBED:
        t = perturb(a_name, t)
    return t


def split(tensors, limit):
    shards, cur, size = [], [], 0
    for t in tensors:
        b = nbytes(t[1], t[2])
        if cur and size + b > limit:
            shards.append(cur)
            cur, size = [], 0
        cur.append(t)
        size += b
    if cur:
        shards.append(cur)
    return shards


def write_side(out, which):
    """which: "a" or "b". Returns (number of shards, tensors, total bytes)."""
    os.makedirs(out, exist_ok=True)
    embed = (EMBED, "F32", [VOCAB, HIDDEN])
    layers = split(list(layer_tensors()), SHARD_BYTES[which])
    groups = [[embed]] + layers if which == "a" else layers + [[embed]]
    n = len(groups)
    weight_map, total = {}, 0
    for k, group in enumerate(groups):
        fname = f"model-{k + 1:05d}-of-{n:05d}.safetensors"
        tensors = {}
        for name, dtype, shape in group:  # A's names; B's are derived
            if which == "a":
                tensors[name] = values(name, dtype, shape)
            else:
                tensors[side_b(name, dtype, shape)[0]] = b_values(name, dtype, shape)
        save_file(tensors, os.path.join(out, fname), metadata={"format": "pt"})
        for name, t in tensors.items():
            weight_map[name] = fname
            total += t.numel() * t.element_size()
        del tensors
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2, sort_keys=True)  # as transformers writes it
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(CONFIG, f, indent=2)
    return n, len(weight_map), total


def expected():
    """What `diff A B --values` should report, by status."""
    names = [t[0] for t in [(EMBED,)] + list(layer_tensors())]
    out = {"dtype_changed": [DTYPE_CHANGED], "only_in_a": [RENAMED[0]],
           "only_in_b": [RENAMED[1]], "values_changed": sorted(PERTURBED)}
    special = {DTYPE_CHANGED, RENAMED[0], *PERTURBED}
    out["unchanged"] = sorted(n for n in names if n not in special)
    return out


def main(argv):
    if len(argv) != 1:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    out = argv[0]
    marker = os.path.join(out, MARKER)
    if os.path.exists(marker) and open(marker).read() == VERSION:
        print(f"{out}: already complete")
        return 0
    os.makedirs(out, exist_ok=True)
    if os.path.exists(marker):
        os.remove(marker)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    for which in ("a", "b"):
        side = os.path.join(out, which)
        if os.path.isdir(side):  # a partial earlier run: start that side afresh
            for name in os.listdir(side):
                os.remove(os.path.join(side, name))
        n, count, total = write_side(side, which)
        print(f"{side}: {n} shards, {count} tensors, {total:,} bytes")
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected(), f, indent=2)
    with open(marker, "w") as f:
        f.write(VERSION)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
