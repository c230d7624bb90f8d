"""Hypothesis strategies for every reader: structurally plausible checkpoints, then damaged.

One strategy per target (cases.TARGETS), each drawing a `Case` (the files of one checkpoint):

- `safetensors_files`: 8-byte length + JSON header (random dtypes, shapes, offsets, names,
  __metadata__) + data; lengths that lie (huge, the header cap, off by a few), truncation,
  non-UTF-8, NaN literals, duplicate keys, deep nesting, a consistent header claiming terabytes;
- `index_folders`: an index beside real small shards; weight_map of every wrong kind (not a
  dict, non-string values, names outside the folder, empty, the index itself, 20,000 entries);
- `torch_files`: real `torch.save` output of small state dicts and of the bundled samples'
  objects with values replaced, then zip damage (data.pkl replaced by a grammar program or
  flipped, storages resized or compressed, entries added, renamed, dropped, the central
  directory corrupted) or byte damage; legacy (pre-zip) files; synthetic zips;
- `pickle_files`: grammar programs (pickle_grammar.py), `pickle.dumps` of random values in
  every protocol, damaged;
- `dcp_folders`: the bundled DCP samples with their `.metadata` edited as objects (offsets,
  lengths, paths, chunks, dtypes) or as bytes, rank files truncated, damaged, missing, extra;
- `state_folders`: HF Trainer, DeepSpeed, Megatron, Lightning and accelerate samples with
  trainer_state.json, markers and state pickles replaced by damaged ones.

Bundled samples are read once (functools.cache) and never written.
"""

from __future__ import annotations

import functools
import json
import math
import os
import pickle
import struct
from pathlib import Path

from hypothesis import strategies as st

from ckpt_browser.limits import LIMITS
from ckpt_browser.model import DTYPE_BITS

from .cases import Case
from .mutate import (
    build_zip,
    damaged_bytes,
    damaged_central_directory,
    damaged_members,
    damaged_tree,
    junk,
    members,
    small_tensor,
    torch_bytes,
)
from .pickle_grammar import RAW_PROGRAM, VALUE_OPS, pickle_program, rebuild_tensor

SAMPLES = Path(__file__).resolve().parents[2] / "sample_checkpoints"

# -- shared pieces -----------------------------------------------------------------------------

NAMES = st.one_of(
    st.sampled_from(["model.embed_tokens.weight", "lm_head.weight", "a", "", "__metadata__",
                     "x" * 300, "../../etc/passwd", "\x1b[2J\x1b[31mred", "line\nbreak",
                     "tab\there",
                     "\u202eevil", "é", "model.layers.0.mlp.up_proj.weight", "\x00", "*", "a.b.",
                     ".hidden", "layers." + "9" * 4400 + ".w"]),  # past int()'s 4,300 digits
    st.text(max_size=12),
)

JSON_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                        st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
                        st.sampled_from([0, -1, 2**63, 10**25, "4", "global_step4", ""]))
JSON_VALUES = st.recursive(JSON_LEAVES, lambda v: st.lists(v, max_size=4)
                           | st.dictionaries(st.text(max_size=10), v, max_size=4), max_leaves=10)


@st.composite
def json_text(draw, doc) -> bytes:
    """doc as JSON (NaN literals allowed), then maybe damaged at the text level."""
    indent = draw(st.sampled_from([None, None, 1]))
    text = json.dumps(doc, indent=indent, allow_nan=True).encode()
    how = draw(st.sampled_from(["plain"] * 5 + ["nest", "nan", "bigint", "utf8", "bom", "dupe",
                                                "bytes", "empty", "huge-string"]))
    if how == "nest":  # a nesting bomb in place of the first value
        depth = draw(st.sampled_from([200, 1000, 100_000]))
        bomb = b"[" * depth + b"]" * depth if draw(st.booleans()) else b'{"a":' * depth + b"1" \
            + b"}" * depth
        at = text.find(b":")
        text = text[:at + 1] + bomb + b"," + text[at + 1:] if at > 0 else bomb
    elif how == "nan":
        text = text.replace(b"0", draw(st.sampled_from([b"NaN", b"Infinity", b"-Infinity",
                                                        b"1e999"])), 1)
    elif how == "bigint":
        text = text.replace(b"1", b"9" * draw(st.sampled_from([4400, 10_000])), 1)
    elif how == "utf8":
        text = text.replace(b'"', b'"\xff\xfe', 1)
    elif how == "bom":
        text = b"\xef\xbb\xbf" + text
    elif how == "dupe" and text.startswith(b"{") and len(text) > 2:
        text = text[:1] + text[1:-1] + b"," + text[1:-1] + text[-1:] if text != b"{}" else text
    elif how == "bytes":
        text = draw(damaged_bytes(text))
    elif how == "empty":
        text = b""
    elif how == "huge-string":
        text = b'{"x": "' + b"a" * 2_000_000 + b'"}'
    return text


@functools.cache
def _sample_bytes(rel: str) -> bytes:
    return (SAMPLES / rel).read_bytes()


@functools.cache
def _sample_obj(rel: str):
    import torch

    return torch.load(SAMPLES / rel, map_location="cpu", weights_only=False)  # our own samples


@functools.cache
def _folder(rel: str) -> dict[str, str]:
    """relative file name inside the sample folder -> path relative to SAMPLES (files only)."""
    root = SAMPLES / rel
    out = {}
    for dirpath, _, names in os.walk(root):
        for n in names:
            p = Path(dirpath) / n
            out[p.relative_to(root).as_posix()] = p.relative_to(SAMPLES).as_posix()
    return out


# -- safetensors -------------------------------------------------------------------------------

SAFE_DTYPES = tuple(DTYPE_BITS)


def _nbytes(dtype: str, shape: list[int]) -> int:
    return math.prod(shape) * DTYPE_BITS.get(dtype, 8) // 8


@st.composite
def _entry_damage(draw, entry: dict) -> object:
    how = draw(st.sampled_from(["field", "field", "drop", "extra", "huge", "not-object",
                                "reverse", "negative", "float"]))
    e = dict(entry)
    if how == "field":
        e[draw(st.sampled_from(["dtype", "shape", "data_offsets"]))] = draw(JSON_VALUES)
    elif how == "drop":
        e.pop(draw(st.sampled_from(sorted(e))))
    elif how == "extra":
        e[draw(st.text(max_size=6))] = draw(JSON_VALUES)
    elif how == "huge":  # consistent, and terabytes long
        shape = [2**20, 2**20, draw(st.integers(1, 4))]
        begin = e["data_offsets"][0]
        e.update(dtype="F32", shape=shape, data_offsets=[begin, begin + _nbytes("F32", shape)])
    elif how == "not-object":
        return draw(JSON_VALUES)
    elif how == "reverse":
        e["data_offsets"] = e["data_offsets"][::-1] + [0] * draw(st.integers(0, 1))
    elif how == "negative":
        e["shape"] = [-1, *e["shape"]]
    else:
        e["shape"] = [float(d) for d in e["shape"]] or [1.0]
    return e


@st.composite
def header_entries(draw, max_tensors: int = 6, damage: bool = True) -> tuple[list, int]:
    """[(name, entry)] laid out contiguously, some damaged; and the data length they need."""
    entries, offset = [], 0
    for _ in range(draw(st.integers(0, max_tensors))):
        dtype = draw(st.sampled_from(SAFE_DTYPES))
        shape = draw(st.lists(st.integers(0, 5), max_size=3))
        n = _nbytes(dtype, shape)
        entry: object = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
        if damage and draw(st.integers(0, 3)) == 0:
            entry = draw(_entry_damage(entry))
        entries.append((draw(NAMES), entry))
    return entries, offset


def _serialize(pairs: list) -> bytes:
    """A JSON object written pair by pair, so duplicate keys survive."""
    return ("{" + ",".join(f"{json.dumps(k)}:{json.dumps(v, allow_nan=True)}" for k, v in pairs)
            + "}").encode()


@st.composite
def safetensors_bytes(draw, damage: bool = True, max_tensors: int = 6) -> bytes:
    entries, need = draw(header_entries(max_tensors, damage))
    meta = draw(st.sampled_from(["none", "ok", "junk"])) if damage else "ok"
    if meta == "ok":
        entries.insert(0, ("__metadata__", {"format": "pt"}))
    elif meta == "junk":
        entries.insert(draw(st.integers(0, len(entries))), ("__metadata__", draw(JSON_VALUES)))
    if damage and entries and draw(st.integers(0, 5)) == 0:
        entries.append(draw(st.sampled_from(entries)))  # a duplicate name
    header = _serialize(entries)
    if damage and draw(st.integers(0, 3)) == 0:
        header = draw(json_text(json.loads(header or b"{}"))) if draw(st.booleans()) \
            else draw(damaged_bytes(header))
    header += b" " * draw(st.integers(0, 7))  # the library pads to 8 bytes
    n = len(header)
    if damage:
        most = LIMITS.safetensors_header
        n = draw(st.sampled_from([n] * 6 + [0, 1, n - 1, n + 1, n + 8, most, most + 1,
                                             2**32, 2**63, 2**64 - 1]))
        n = max(0, min(n, 2**64 - 1))
    fill = draw(st.binary(min_size=1, max_size=8))
    data = (fill * (need // len(fill) + 1))[:need]
    if damage:
        data = data[:draw(st.sampled_from([need, need, need, 0, max(0, need - 1), need + 3]))] \
            + b"\0" * draw(st.sampled_from([0, 0, 0, 5]))
    out = struct.pack("<Q", n) + header + data
    if damage and draw(st.integers(0, 7)) == 0:
        out = draw(damaged_bytes(out))
    return out


@st.composite
def safetensors_files(draw) -> Case:
    name = draw(st.sampled_from(["model.safetensors"] * 4 + ["weights"]))  # sniffed by content
    return Case.of("safetensors", {name: draw(safetensors_bytes())})


# -- index + shards ----------------------------------------------------------------------------

WEIGHT_MAP_TARGETS = ["missing.safetensors", "../outside.safetensors", "/etc/passwd", "", " ",
                      ".", "sub/model-00001-of-00002.safetensors", "model.safetensors.index.json",
                      "sub", "model-00001-of-00002.safetensors\x00", "C:\\x.safetensors",
                      "pytorch_model-00001-of-00002.bin"]


@st.composite
def index_folders(draw) -> Case:
    files: dict[str, bytes] = {}
    weight_map: dict = {}
    shards = [f"model-0000{i}-of-00002.safetensors" for i in (1, 2)][:draw(st.integers(0, 2))]
    for shard in shards:
        entries, need = draw(header_entries(4, damage=False))
        data = struct.pack("<Q", len(_serialize(entries))) + _serialize(entries) + b"\0" * need
        files[f"ckpt/{shard}"] = draw(damaged_bytes(data)) if draw(st.integers(0, 5)) == 0 \
            else data
        weight_map.update((name, shard) for name, _ in entries)
    if draw(st.integers(0, 4)) == 0:
        files["ckpt/sub/model-00001-of-00002.safetensors"] = draw(safetensors_bytes(damage=False,
                                                                                    max_tensors=2))
    for _ in range(draw(st.integers(0, 3))):
        weight_map[draw(NAMES)] = draw(st.sampled_from(WEIGHT_MAP_TARGETS + shards))
    if draw(st.integers(0, 15)) == 0:  # a big map
        target = draw(st.sampled_from(WEIGHT_MAP_TARGETS + shards))
        weight_map.update((f"layers.{i}.w", target) for i in range(20_000))
    doc: object = {"metadata": draw(st.sampled_from([{"total_size": 0}, {}, None]) | JSON_VALUES),
                   "weight_map": weight_map}
    how = draw(st.sampled_from(["ok"] * 4 + ["value", "map", "doc"]))
    if how == "value" and weight_map:
        weight_map[draw(st.sampled_from(sorted(weight_map)))] = draw(JSON_VALUES)
    elif how == "map":
        doc["weight_map"] = draw(JSON_VALUES)
    elif how == "doc":
        doc = draw(JSON_VALUES)
    files["ckpt/model.safetensors.index.json"] = draw(json_text(doc))
    extra = draw(st.sampled_from(["", "", "", "second", "single"]))
    if extra == "second":
        files["ckpt/other.safetensors.index.json"] = draw(json_text(draw(JSON_VALUES)))
    elif extra == "single":
        files["ckpt/model.safetensors"] = draw(safetensors_bytes(damage=False, max_tensors=1))
    return Case.of("index", files)


# -- torch files -------------------------------------------------------------------------------

TORCH_SAMPLES = ("hf-run3/checkpoint-4/optimizer.pt", "hf-run3/checkpoint-4/scheduler.pt",
                 "hf-run3/checkpoint-4/rng_state.pth", "lightning/last.ckpt",
                 "megatron-run/iter_0000004/mp_rank_00/model_optim_rng.pt",
                 "deepspeed-run/global_step4/mp_rank_00_model_states.pt",  # no DeepSpeed class
                 "accelerate-state/step_4/random_states_0.pkl")


@st.composite
def state_dict(draw) -> dict:
    """A small state dict of tensors, some views of one storage."""
    sd = {draw(NAMES): draw(small_tensor()) for _ in range(draw(st.integers(0, 4)))}
    if sd and draw(st.booleans()):
        name, t = next(iter(sd.items()))
        if t.dim() and t.shape[0] > 1:
            sd[name + ".view"] = t[1:]  # shares the storage
    return sd


@st.composite
def torch_object(draw):
    how = draw(st.sampled_from(["state_dict", "sample", "sample", "junk"]))
    if how == "state_dict":
        return draw(state_dict())
    if how == "junk":
        return draw(junk())
    return draw(damaged_tree(_sample_obj(draw(st.sampled_from(TORCH_SAMPLES)))))


@st.composite
def synthetic_zip(draw) -> bytes:
    pkl = draw(pickle_program(root=rebuild_tensor(VALUE_OPS) if draw(st.booleans()) else None))
    rows = [("archive/data.pkl", pkl, 0), ("archive/byteorder", b"little", 0)]
    for key in draw(st.lists(st.sampled_from(["0", "1", "2", "x"]), max_size=3, unique=True)):
        rows.append((f"archive/data/{key}", b"\0" * draw(st.integers(0, 96)), 0))
    rows.append(("archive/version", b"3\n", 0))
    return build_zip(rows)


@st.composite
def synthetic_legacy(draw) -> bytes:
    """The pre-zip format: magic number, protocol, system info, the object, the storage keys,
    then per key an 8-byte element count and the bytes (the object is a grammar program)."""
    info = {"protocol_version": 1001, "little_endian": draw(st.booleans()),
            "type_sizes": {"short": 2, "int": 4, "long": 4}}
    head = b"".join(pickle.dumps(x, protocol=2) for x in (0x1950A86A20F9469CFC6C, 1001, info))
    obj = draw(pickle_program(root=rebuild_tensor(VALUE_OPS) if draw(st.booleans()) else None))
    keys = draw(st.lists(st.sampled_from(["0", "1", "2", "x"]), max_size=3, unique=True))
    tail = pickle.dumps(keys if draw(st.integers(0, 5)) else draw(junk(tensors=False)), protocol=2)
    for _ in keys:
        count = draw(st.sampled_from([0, 1, 4, -1, 2**62]) | st.integers(0, 16))
        tail += struct.pack("<q", count) + b"\0" * draw(st.integers(0, 64))
    return head + obj + tail


@st.composite
def torch_bytes_damaged(draw) -> bytes:
    base = draw(st.sampled_from(["save", "save", "save", "legacy", "raw", "synthetic",
                                 "synthetic-legacy"]))
    if base == "synthetic":
        data = draw(synthetic_zip())
    elif base == "synthetic-legacy":
        data = draw(synthetic_legacy())
    elif base == "raw":
        data = _sample_bytes(draw(st.sampled_from(TORCH_SAMPLES)))
    else:
        data = torch_bytes(draw(torch_object()), legacy=base == "legacy")
    how = draw(st.sampled_from(["none", "members", "members", "cd", "bytes"]))
    if how == "members" and data.startswith(b"PK"):
        data = draw(damaged_members(members(data), pickle_program()))
    elif how == "cd" and data.startswith(b"PK"):
        data = draw(damaged_central_directory(data))
    elif how != "none":
        data = draw(damaged_bytes(data))
    return data


@st.composite
def torch_files(draw) -> Case:
    name = draw(st.sampled_from(["model.pt", "pytorch_model.bin", "last.ckpt", "weights.pth",
                                 "optimizer.pt"]))
    return Case.of("torch", {name: draw(torch_bytes_damaged())})


# -- plain pickles -----------------------------------------------------------------------------

@st.composite
def pickle_files(draw) -> Case:
    how = draw(st.sampled_from(["grammar", "grammar", "grammar", "dumps", "raw", "tensor"]))
    if how == "grammar":
        data = draw(pickle_program())
    elif how == "tensor":
        data = draw(pickle_program(root=rebuild_tensor(VALUE_OPS)))
    elif how == "raw":
        data = draw(RAW_PROGRAM)
    else:
        data = pickle.dumps(draw(junk(tensors=False)), protocol=draw(st.integers(0, 5)))
        if draw(st.booleans()):
            data = draw(damaged_bytes(data))
    return Case.of("pickle", {draw(st.sampled_from(["data.pkl", "state.pkl"])): data})


# -- DCP ---------------------------------------------------------------------------------------

DCP_SAMPLES = ("torchtitan-run/checkpoint/step-10", "dcp-ranks/ranks-2")


@functools.cache
def _dcp_metadata(rel: str):
    import torch.distributed.checkpoint as dcp  # the classes pickle.load needs

    assert dcp.metadata.Metadata

    with open(SAMPLES / rel / ".metadata", "rb") as f:
        return pickle.load(f)  # our own sample


def _dims(draw):
    import torch

    values = draw(st.lists(st.integers(-2, 20) | st.sampled_from([2**40, 2**63 - 1]), max_size=3))
    return torch.Size(values) if draw(st.booleans()) and all(v >= 0 for v in values) \
        else tuple(values)


@st.composite
def dcp_metadata_edited(draw, rel: str) -> bytes:
    """The sample's Metadata with a few fields set to wrong values, pickled again."""
    import copy

    import torch

    meta = copy.deepcopy(_dcp_metadata(rel))
    for _ in range(draw(st.integers(1, 4))):
        how = draw(st.sampled_from(["storage", "storage", "chunk", "size", "dtype", "drop",
                                    "replace", "version", "key"]))
        sd, storage = meta.state_dict_metadata, meta.storage_data
        if not sd or not storage:
            break
        if how == "storage":
            key = draw(st.sampled_from(sorted(storage, key=repr)))
            info = storage[key]
            field = draw(st.sampled_from(["offset", "length", "relative_path"]))
            value = draw(st.sampled_from(["missing.distcp", "../x.distcp", "/etc/passwd", "",
                                          "__1_0.distcp", None]) if field == "relative_path"
                         else st.sampled_from([-1, 0, 2**40, 2**63, None]) | st.integers(0, 4000))
            object.__setattr__(info, field, value)
        elif how in ("chunk", "size"):
            key = draw(st.sampled_from(sorted(sd)))
            md = sd[key]
            if hasattr(md, "chunks") and md.chunks and how == "chunk":
                ch = draw(st.sampled_from(md.chunks))
                object.__setattr__(ch, draw(st.sampled_from(["offsets", "sizes"])), _dims(draw))
            elif hasattr(md, "size"):
                object.__setattr__(md, "size", _dims(draw))
        elif how == "dtype":
            md = sd[draw(st.sampled_from(sorted(sd)))]
            if hasattr(md, "properties"):
                dtype = getattr(torch, draw(st.sampled_from(["float16", "int8", "bool",
                                                             "complex64", "float8_e5m2"])))
                object.__setattr__(md.properties, "dtype", dtype)
        elif how == "drop":
            target = draw(st.sampled_from(["sd", "storage"]))
            d = sd if target == "sd" else storage
            if d:
                d.pop(draw(st.sampled_from(sorted(d, key=repr))))
        elif how == "replace":
            sd[draw(st.sampled_from(sorted(sd)))] = draw(junk(tensors=False))
        elif how == "version":
            meta.version = draw(JSON_VALUES)
        else:  # a storage key's chunk offset: the key's hash changes, so the dict is rebuilt
            key = draw(st.sampled_from(sorted(storage, key=repr)))
            info = storage.pop(key)
            object.__setattr__(key, "offset", _dims(draw))
            meta.storage_data = {**storage, key: info}
    return pickle.dumps(meta, protocol=draw(st.integers(2, 5)))


@st.composite
def dcp_folders(draw) -> Case:
    rel = draw(st.sampled_from(DCP_SAMPLES))
    prefix = "checkpoint/step-10/" if rel.startswith("torchtitan") else "ranks-2/"
    files = {prefix + n: _sample_bytes(f"{rel}/{n}") for n in _folder(rel)}
    how = draw(st.sampled_from(["edit", "edit", "edit", "bytes", "grammar", "keep"]))
    meta = prefix + ".metadata"
    if how == "edit":
        files[meta] = draw(dcp_metadata_edited(rel))
    elif how == "bytes":
        files[meta] = draw(damaged_bytes(files[meta]))
    elif how == "grammar":
        files[meta] = draw(pickle_program())
    for name in sorted(n for n in files if n.endswith(".distcp")):
        fate = draw(st.sampled_from(["keep"] * 4 + ["truncate", "damage", "drop"]))
        if fate == "truncate":
            files[name] = files[name][:draw(st.integers(0, len(files[name])))]
        elif fate == "damage":
            files[name] = draw(damaged_bytes(files[name], max_ops=8))
        elif fate == "drop":
            del files[name]
    extra = draw(st.sampled_from(["", "", "", "rank", "tmp", "per-rank"]))
    if extra == "rank":
        files[prefix + "__7_0.distcp"] = draw(st.binary(max_size=64))
    elif extra == "tmp":
        files[prefix + ".metadata.tmp"] = files.pop(meta)
    elif extra == "per-rank":
        files[prefix + "__0.metadata"] = files.pop(meta)
    return Case.of("dcp", files)


# -- training-state folders --------------------------------------------------------------------

# sample files whose pickles name another package's classes (transformers' TrainingArguments,
# DeepSpeed's ZeRO optimizer state), which the cases never rebuild: damaged as bytes only
NOT_LOADED = ("training_args.bin", "optim_states.pt")
FRAMEWORKS = {  # sample folder -> where it goes in the case
    "hf-run3": "run3",  # a folder of three checkpoints: the timeline readers
    "hf-run3/checkpoint-4": "checkpoint-4",
    "hf-multirank/checkpoint-4": "checkpoint-4",
    "deepspeed-run": "run",
    "megatron-run": "run",
    "lightning": "lightning",
    "accelerate-state/step_4": "step_4",
}
MARKERS = st.one_of(
    st.sampled_from(["global_step4", "global_step999", "", "..", ".", "/abs", "../global_step4",
                     "4", "release", "-1", "0", "99999999999999999999", "4\n\n", " 4 ", "nan",
                     "iter_0000004", "global_step4\x00", "x" * 5000, "é"]),
    st.text(max_size=20)).map(lambda s: s.encode("utf-8", "surrogatepass")) | st.binary(max_size=24)


@st.composite
def state_folders(draw) -> Case:
    rel = draw(st.sampled_from(sorted(FRAMEWORKS)))
    top = FRAMEWORKS[rel]
    files = {f"{top}/{n}": _sample_bytes(p) for n, p in _folder(rel).items()
             if not n.endswith(".py")}
    for _ in range(draw(st.integers(1, 3))):
        if not files:
            break
        name = draw(st.sampled_from(sorted(files)))
        base = name.rsplit("/", 1)[-1]
        if base.endswith(".json"):
            doc = json.loads(_sample_bytes(_folder(rel)[name.split("/", 1)[1]]))
            files[name] = draw(json_text(draw(damaged_tree(doc, values=JSON_VALUES,
                                                           json_only=True))
                                         if draw(st.booleans()) else draw(JSON_VALUES)))
        elif base in ("latest", "latest_checkpointed_iteration.txt"):
            files[name] = draw(MARKERS)
        elif base.endswith((".pt", ".pth", ".ckpt", ".bin", ".pkl")):
            how = draw(st.sampled_from(["tree", "tree", "tree", "bytes", "drop"]))
            rel_file = _folder(rel).get(name.split("/", 1)[1])
            if how == "tree" and (not rel_file or base.endswith(NOT_LOADED)):
                how = "bytes"  # another package's classes: damage it as bytes
            if how == "tree":
                files[name] = torch_bytes(draw(damaged_tree(_sample_obj(rel_file))))
            elif how == "bytes":
                files[name] = draw(damaged_bytes(files[name]))
            else:
                del files[name]
        elif draw(st.booleans()):
            del files[name]
    if draw(st.integers(0, 5)) == 0:
        extra = draw(st.sampled_from(["trainer_state.json", "latest", "metadata.json",
                                      "latest_checkpointed_iteration.txt", "scheduler.pt"]))
        files[f"{top}/{extra}"] = draw(json_text(draw(JSON_VALUES))) if extra.endswith(".json") \
            else draw(MARKERS)
    if not files:
        files[f"{top}/README"] = b""
    return Case.of("state", files)


STRATEGIES = {"safetensors": safetensors_files, "index": index_folders, "torch": torch_files,
              "pickle": pickle_files, "dcp": dcp_folders, "state": state_folders}
