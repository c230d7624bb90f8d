"""Write a sparse checkpoint shaped like DeepSeek-V3 (671B MoE, plus its MTP layer).

Usage: python benchmarks/make_moe_checkpoint.py OUTDIR

163 safetensors shards in HF layout with real parameter names, shapes and the
FP8 / BF16 / F32 mix. Headers are real; tensor bytes are left as holes by
truncating each file to its full length, so ~700 GB of logical data costs
about 20 MB of disk. Deterministic; skipped if OUTDIR already has a complete set.
"""

import json
import math
import os
import sys

N_SHARDS = 163
MARKER = ".make_moe_checkpoint.complete"
VERSION = "1"  # bump when the layout changes so old work dirs get rebuilt

HIDDEN = 7168
VOCAB = 129280
N_LAYERS = 61  # layers 0..60, plus the MTP module as layer 61
FIRST_DENSE = 3
N_EXPERTS = 256
DENSE_INTER = 18432
MOE_INTER = 2048
N_HEADS = 128
Q_LORA = 1536
KV_LORA = 512
QK_NOPE = 128
QK_ROPE = 64
V_HEAD = 128
BLOCK = 128  # FP8 block-scale size (weight_block_size [128, 128])

ITEMSIZE = {"F8_E4M3": 1, "BF16": 2, "F32": 4}
# safetensors writes larger dtypes first, then by name.
DTYPE_RANK = {"F32": 0, "BF16": 1, "F8_E4M3": 2}

CONFIG = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "deepseek_v3",
    "hidden_size": HIDDEN,
    "intermediate_size": DENSE_INTER,
    "moe_intermediate_size": MOE_INTER,
    "num_hidden_layers": N_LAYERS,
    "num_nextn_predict_layers": 1,
    "num_attention_heads": N_HEADS,
    "num_key_value_heads": N_HEADS,
    "n_routed_experts": N_EXPERTS,
    "n_shared_experts": 1,
    "num_experts_per_tok": 8,
    "first_k_dense_replace": FIRST_DENSE,
    "q_lora_rank": Q_LORA,
    "kv_lora_rank": KV_LORA,
    "qk_nope_head_dim": QK_NOPE,
    "qk_rope_head_dim": QK_ROPE,
    "v_head_dim": V_HEAD,
    "vocab_size": VOCAB,
    "max_position_embeddings": 163840,
    "rms_norm_eps": 1e-06,
    "topk_method": "noaux_tc",
    "scoring_func": "sigmoid",
    "torch_dtype": "bfloat16",
    "quantization_config": {
        "activation_scheme": "dynamic",
        "fmt": "e4m3",
        "quant_method": "fp8",
        "weight_block_size": [BLOCK, BLOCK],
    },
}


def fp8_linear(name, out_f, in_f):
    yield name + ".weight", "F8_E4M3", [out_f, in_f]
    yield name + ".weight_scale_inv", "F32", [math.ceil(out_f / BLOCK), math.ceil(in_f / BLOCK)]


def mlp(prefix, inter):
    yield from fp8_linear(prefix + ".gate_proj", inter, HIDDEN)
    yield from fp8_linear(prefix + ".up_proj", inter, HIDDEN)
    yield from fp8_linear(prefix + ".down_proj", HIDDEN, inter)


def layer(i):
    p = f"model.layers.{i}"
    yield p + ".input_layernorm.weight", "BF16", [HIDDEN]
    yield p + ".post_attention_layernorm.weight", "BF16", [HIDDEN]
    a = p + ".self_attn"
    yield from fp8_linear(a + ".q_a_proj", Q_LORA, HIDDEN)
    yield a + ".q_a_layernorm.weight", "BF16", [Q_LORA]
    yield from fp8_linear(a + ".q_b_proj", N_HEADS * (QK_NOPE + QK_ROPE), Q_LORA)
    yield from fp8_linear(a + ".kv_a_proj_with_mqa", KV_LORA + QK_ROPE, HIDDEN)
    yield a + ".kv_a_layernorm.weight", "BF16", [KV_LORA]
    yield from fp8_linear(a + ".kv_b_proj", N_HEADS * (QK_NOPE + V_HEAD), KV_LORA)
    yield from fp8_linear(a + ".o_proj", HIDDEN, N_HEADS * V_HEAD)
    if i < FIRST_DENSE:
        yield from mlp(p + ".mlp", DENSE_INTER)
        return
    yield p + ".mlp.gate.weight", "BF16", [N_EXPERTS, HIDDEN]
    yield p + ".mlp.gate.e_score_correction_bias", "F32", [N_EXPERTS]
    for e in range(N_EXPERTS):
        yield from mlp(f"{p}.mlp.experts.{e}", MOE_INTER)
    yield from mlp(p + ".mlp.shared_experts", MOE_INTER)


def all_tensors():
    yield "model.embed_tokens.weight", "BF16", [VOCAB, HIDDEN]
    for i in range(N_LAYERS):
        yield from layer(i)
    # Multi-token-prediction module, stored as an extra layer.
    mtp = f"model.layers.{N_LAYERS}"
    yield from layer(N_LAYERS)
    yield mtp + ".embed_tokens.weight", "BF16", [VOCAB, HIDDEN]
    yield mtp + ".enorm.weight", "BF16", [HIDDEN]
    yield mtp + ".hnorm.weight", "BF16", [HIDDEN]
    yield mtp + ".eh_proj.weight", "BF16", [HIDDEN, 2 * HIDDEN]
    yield mtp + ".shared_head.norm.weight", "BF16", [HIDDEN]
    yield mtp + ".shared_head.head.weight", "BF16", [VOCAB, HIDDEN]
    yield "model.norm.weight", "BF16", [HIDDEN]
    yield "lm_head.weight", "BF16", [VOCAB, HIDDEN]


def nbytes(dtype, shape):
    return math.prod(shape) * ITEMSIZE[dtype]


def shard_name(k):
    return f"model-{k + 1:05d}-of-{N_SHARDS:06d}.safetensors"


def split_into_shards(tensors):
    # Cut the ordered list into N_SHARDS runs of roughly equal bytes. No tensor is
    # near a shard's size, so every shard gets at least one tensor.
    total = sum(nbytes(d, s) for _, d, s in tensors)
    shards = [[] for _ in range(N_SHARDS)]
    pos = 0
    for t in tensors:
        shards[min(N_SHARDS - 1, pos * N_SHARDS // total)].append(t)
        pos += nbytes(t[1], t[2])
    assert all(shards)
    return shards, total


def write_shard(path, tensors):
    tensors = sorted(tensors, key=lambda t: (DTYPE_RANK[t[1]], t[0]))
    header = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, dtype, shape in tensors:
        end = offset + nbytes(dtype, shape)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, end]}
        offset = end
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(len(raw).to_bytes(8, "little"))
        f.write(raw)
        # Extend to full length without writing: the tensor bytes become a hole.
        f.truncate(8 + len(raw) + offset)


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
    shards, total = split_into_shards(list(all_tensors()))
    weight_map = {}
    for k, tensors in enumerate(shards):
        write_shard(os.path.join(out, shard_name(k)), tensors)
        for name, _, _ in tensors:
            weight_map[name] = shard_name(k)
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2, sort_keys=True)  # as transformers writes it
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(CONFIG, f, indent=2)
    with open(marker, "w") as f:
        f.write(VERSION)
    print(f"{out}: {N_SHARDS} shards, {len(weight_map)} tensors, {total} bytes logical")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
