"""Write the malicious corpus into tests/malicious/corpus/, byte for byte the same every run.

    python tests/malicious/make_corpus.py          # (re)write the corpus
    python tests/malicious/make_corpus.py --check  # exit 1 if the committed corpus differs
    python tests/malicious/make_corpus.py --readme # the README's table of cases

DELIBERATELY MALICIOUS FILES. Never load anything under corpus/ with pickle.load,
torch.load(weights_only=False), numpy.load(allow_pickle=True) or DCP's FileSystemReader outside
a throwaway folder: each payload would run. Every payload is harmless and detectable: it
creates an empty file named PWNED-<case> in the current folder, nothing else.

No torch is needed or imported: pickles are written opcode by opcode (protocols 2-5), zips by
hand (fixed timestamps, so the bytes never change), safetensors as length + JSON + data. The
cases are described once, in CASES (committed files) and TEST_TIME_CASES (FIFOs and device
files, which git cannot hold: the tests make them in a temporary folder); the README's table
and the tests are driven by these lists.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
MARKER = "PWNED-"  # every payload creates a file whose name starts with this


# =============================================================================================
# Pickle opcodes
# =============================================================================================

@dataclass(frozen=True, eq=False)  # identity: nodes are dict keys
class G:
    """A global: GLOBAL (protocol <= 3) or STACK_GLOBAL (4+). `name` may be dotted."""
    module: str
    name: str


@dataclass(frozen=True, eq=False)  # identity: nodes are dict keys
class Call:
    """REDUCE: func(*args)."""
    func: object
    args: tuple = ()


@dataclass(frozen=True, eq=False)  # identity: nodes are dict keys
class NewObj:
    """NEWOBJ: cls.__new__(cls, *args)."""
    cls: object
    args: tuple = ()


@dataclass(frozen=True, eq=False)  # identity: nodes are dict keys
class Build:
    """BUILD: obj.__setstate__(state) or obj.__dict__.update(state)."""
    obj: object
    state: object


@dataclass(frozen=True, eq=False)  # identity: nodes are dict keys
class PersId:
    """BINPERSID: persistent_load(pid)."""
    pid: object


@dataclass(frozen=True, eq=False)  # identity: nodes are dict keys
class Put:
    """The value, then BINPUT into memo slot `slot`."""
    slot: int
    value: object


@dataclass(frozen=True, eq=False)  # identity: nodes are dict keys
class Get:
    """BINGET of memo slot `slot`."""
    slot: int


@dataclass(frozen=True, eq=False)  # identity: nodes are dict keys
class Raw:
    """Opcodes written as they are."""
    data: bytes


class Pickle:
    def __init__(self, protocol: int):
        assert 2 <= protocol <= 5
        self.p = protocol
        self.out = bytearray()

    def w(self, b: bytes) -> None:
        self.out += b

    def emit(self, x) -> None:  # noqa: C901 - one branch per opcode family
        t = type(x)
        if x is None:
            self.w(b"N")
        elif t is bool:
            self.w(b"\x88" if x else b"\x89")
        elif t is int:
            if 0 <= x < 256:
                self.w(b"K" + bytes([x]))
            elif 0 <= x < 65536:
                self.w(b"M" + struct.pack("<H", x))
            elif -2**31 <= x < 2**31:
                self.w(b"J" + struct.pack("<i", x))
            else:
                n = (x.bit_length() + 8) // 8
                raw = x.to_bytes(n, "little", signed=True)
                self.w((b"\x8a" + bytes([n]) if n < 256 else b"\x8b" + struct.pack("<i", n)) + raw)
        elif t is float:
            self.w(b"G" + struct.pack(">d", x))
        elif t is str:
            b = x.encode("utf-8")
            if self.p >= 4 and len(b) < 256:
                self.w(b"\x8c" + bytes([len(b)]) + b)
            else:
                self.w(b"X" + struct.pack("<I", len(b)) + b)
        elif t is bytes:
            self.w((b"C" + bytes([len(x)]) if len(x) < 256 else b"B" + struct.pack("<I", len(x)))
                   + x)
        elif t is tuple:
            if len(x) == 0:
                self.w(b")")
            elif len(x) <= 3:
                for v in x:
                    self.emit(v)
                self.w(b"\x85\x86\x87"[len(x) - 1:len(x)])
            else:
                self.w(b"(")
                for v in x:
                    self.emit(v)
                self.w(b"t")
        elif t is list:
            self.w(b"]")
            if x:
                self.w(b"(")
                for v in x:
                    self.emit(v)
                self.w(b"e")
        elif t is dict:
            self.w(b"}")
            if x:
                self.w(b"(")
                for k, v in x.items():
                    self.emit(k)
                    self.emit(v)
                self.w(b"u")
        elif t is G:
            if self.p >= 4:
                self.emit(x.module)
                self.emit(x.name)
                self.w(b"\x93")
            else:
                self.w(b"c" + x.module.encode() + b"\n" + x.name.encode() + b"\n")
        elif t is Call:
            self.emit(x.func)
            self.emit(tuple(x.args))
            self.w(b"R")
        elif t is NewObj:
            self.emit(x.cls)
            self.emit(tuple(x.args))
            self.w(b"\x81")
        elif t is Build:
            self.emit(x.obj)
            self.emit(x.state)
            self.w(b"b")
        elif t is PersId:
            self.emit(x.pid)
            self.w(b"Q")
        elif t is Put:
            self.emit(x.value)
            self.w(b"q" + bytes([x.slot]))
        elif t is Get:
            self.w(b"h" + bytes([x.slot]))
        elif t is Raw:
            self.w(x.data)
        else:
            raise TypeError(f"cannot emit {t.__name__}")


def dumps(obj, protocol: int = 2, frame: bool = False) -> bytes:
    """PROTO, (FRAME,) the object, STOP."""
    p = Pickle(protocol)
    p.emit(obj)
    body = bytes(p.out) + b"."
    head = b"\x80" + bytes([protocol])
    if frame and protocol >= 4:
        head += b"\x95" + struct.pack("<Q", len(body))
    return head + body


def system(case: str, module: str = "os") -> Call:
    """module.system('touch PWNED-<case>')"""
    return Call(G(module, "system"), (f"touch {MARKER}{case}",))


# -- torch's own pickled shapes ------------------------------------------------------------------

def storage(key: str, numel: int, cls: str = "FloatStorage", location: str = "cpu") -> PersId:
    return PersId(("storage", G("torch", cls), key, location, numel))


def tensor(key: str, shape: tuple, numel: int | None = None, cls: str = "FloatStorage",
           offset: int = 0, pid: PersId | None = None) -> Call:
    """torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks)"""
    n = 1
    for d in shape:
        n *= d
    stride, acc = [], 1
    for d in reversed(shape):
        stride.insert(0, acc)
        acc *= d
    return Call(G("torch._utils", "_rebuild_tensor_v2"),
                (pid or storage(key, n if numel is None else numel, cls), offset, tuple(shape),
                 tuple(stride), False, Call(G("collections", "OrderedDict"), ())))


def adamw(extra: dict | None = None, state: dict | None = None) -> dict:
    """An AdamW state_dict for one [4] parameter (the weight in model.safetensors)."""
    if state is None:
        state = {0: {"step": tensor("0", ()), "exp_avg": tensor("1", (4,)),
                     "exp_avg_sq": tensor("2", (4,))}}
    groups = [{"lr": 0.001, "betas": (0.9, 0.999), "eps": 1e-08, "weight_decay": 0.01,
               "amsgrad": False, "foreach": None, "maximize": False, "capturable": False,
               "differentiable": False, "fused": None, "params": [0]}]
    return {"state": state, "param_groups": groups, **(extra or {})}


ADAMW_STORAGES = {"0": struct.pack("<f", 1.0), "1": struct.pack("<4f", 0.1, 0.2, 0.3, 0.4),
                  "2": struct.pack("<4f", 0.01, 0.02, 0.03, 0.04)}

SCHEDULER = {"base_lrs": [0.001], "last_epoch": 1, "_step_count": 2, "verbose": False,
             "_get_lr_called_within_step": False, "_last_lr": [0.001], "lr_lambdas": [None]}


# =============================================================================================
# Zips, written by hand: fixed times, chosen methods, and sizes that may lie
# =============================================================================================

@dataclass
class Member:
    name: str
    data: bytes  # what is stored in the file (already compressed when method is 8)
    method: int = 0  # 0 stored, 8 deflated
    size: int | None = None  # uncompressed size as declared; default len(data) when stored
    crc: int | None = None
    at: str | None = None  # central entry pointing at another member's local header


def deflate(data: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


def deflated(name: str, plain: bytes, size: int | None = None) -> Member:
    return Member(name, deflate(plain), 8, len(plain) if size is None else size,
                  zlib.crc32(plain))


def zeros_deflated(name: str, n: int) -> Member:
    """n zero bytes, deflated chunk by chunk (never n bytes in memory)."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunk, out, crc, left = bytes(2**20), [], 0, n
    while left:
        k = min(left, len(chunk))
        out.append(c.compress(chunk[:k]))
        crc = zlib.crc32(chunk[:k], crc)
        left -= k
    out.append(c.flush())
    return Member(name, b"".join(out), 8, n, crc)


DOS_DATE = (0 << 9) | (1 << 5) | 1  # 1980-01-01


def raw_zip(members: list[Member]) -> bytes:
    out = bytearray()
    offsets: dict[str, int] = {}
    for m in members:
        if m.at is not None:
            continue
        offsets[m.name] = len(out)
        crc = zlib.crc32(m.data) if m.crc is None else m.crc
        size = len(m.data) if m.size is None else m.size
        name = m.name.encode()
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, m.method, 0, DOS_DATE, crc,
                           len(m.data), size, len(name), 0) + name + m.data
    cd = bytearray()
    for m in members:
        src = m if m.at is None else next(x for x in members if x.name == m.at)
        crc = zlib.crc32(src.data) if src.crc is None else src.crc
        size = len(src.data) if src.size is None else src.size
        size = m.size if m.at is not None and m.size is not None else size
        name = m.name.encode()
        cd += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 0x031E, 20, 0, src.method, 0,
                          DOS_DATE, crc, len(src.data), size, len(name), 0, 0, 0, 0,
                          0o100644 << 16, offsets[src.name]) + name
    start = len(out)
    out += cd
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members), len(cd),
                       start, 0)
    return bytes(out)


def torch_zip(pkl: bytes | Member, storages: dict[str, bytes] | None = None,
              root: str = "archive", extra: list[Member] = ()) -> bytes:
    """The members torch.save writes, in its order."""
    members = [pkl if isinstance(pkl, Member) else Member(f"{root}/data.pkl", pkl),
               Member(f"{root}/.format_version", b"1"),
               Member(f"{root}/.storage_alignment", b"64"),
               Member(f"{root}/byteorder", b"little")]
    members += [Member(f"{root}/data/{k}", v) for k, v in (storages or {}).items()]
    members += list(extra)
    members += [Member(f"{root}/version", b"3\n"),
                Member(f"{root}/.data/serialization_id", b"0" * 40)]
    return raw_zip(members)


# =============================================================================================
# Other formats
# =============================================================================================

def safetensors(header: dict | bytes, data: bytes = b"", n: int | None = None) -> bytes:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    if not isinstance(header, bytes):
        raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw) if n is None else n) + raw + data


def good_safetensors(names=("w",)) -> bytes:
    """A valid file: each name a F32 [4] tensor."""
    header, data = {"__metadata__": {"format": "pt"}}, b""
    for name in names:
        header[name] = {"dtype": "F32", "shape": [4], "data_offsets": [len(data), len(data) + 16]}
        data += struct.pack("<4f", 1.0, 2.0, 3.0, 4.0)
    return safetensors(header, data)


TRAINER_STATE = {"best_global_step": None, "best_metric": None, "best_model_checkpoint": None,
                 "epoch": 1.0, "eval_steps": 500, "global_step": 1, "is_hyper_param_search": False,
                 "is_local_process_zero": True, "is_world_process_zero": True,
                 "log_history": [{"epoch": 1.0, "grad_norm": 0.5, "learning_rate": 0.001,
                                  "loss": 1.25, "step": 1}],
                 "logging_steps": 1, "max_steps": 10, "num_input_tokens_seen": 0,
                 "num_train_epochs": 10, "save_steps": 1, "stateful_callbacks": {},
                 "total_flos": 0.0, "train_batch_size": 2, "trial_name": None,
                 "trial_params": None}

CONFIG = {"architectures": ["TinyModel"], "model_type": "tiny", "hidden_size": 4,
          "torch_dtype": "float32", "transformers_version": "4.57.0"}


def jdump(doc) -> bytes:
    return (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()


def legacy_torch(sys_info, obj, keys, storages: dict[str, bytes]) -> bytes:
    """torch.save(..., _use_new_zipfile_serialization=False): back-to-back pickles, then raw
    storages each after its 8-byte element count (F32)."""
    out = dumps(0x1950A86A20F9469CFC6C) + dumps(1001) + dumps(sys_info) + dumps(obj) + dumps(keys)
    for k in (keys if isinstance(keys, list) else []):
        if isinstance(k, str) and k in storages:
            out += struct.pack("<q", len(storages[k]) // 4) + storages[k]
    return out


SYS_INFO = {"protocol_version": 1001, "little_endian": True,
            "type_sizes": {"short": 2, "int": 4, "long": 4}}


# -- DCP -----------------------------------------------------------------------------------------

_MD = "torch.distributed.checkpoint.metadata"


def dc(cls: str, state: dict, module: str = _MD) -> Build:
    """A dataclass as pickle writes it: NEWOBJ of the class, then BUILD with its __dict__."""
    return Build(NewObj(G(module, cls)), state)


def size(*dims) -> Call:
    return Call(G("torch", "Size"), (tuple(dims),))


def tensor_md(shape: tuple, chunks: list[tuple[tuple, tuple]]) -> Build:
    props = Build(NewObj(G(_MD, "TensorProperties")),
                  (G("torch", "float32"), Call(G("torch.serialization", "_get_layout"),
                                               ("torch.strided",)),
                   False, Call(G(_MD, "_MEM_FORMAT_ENCODING"), (0,)), False))
    return dc("TensorStorageMetadata", {
        "properties": props, "size": size(*shape),
        "chunks": [dc("ChunkStorageMetadata", {"offsets": size(*o), "sizes": size(*s)})
                   for o, s in chunks]})


def storage_info(path: str, offset: int, length: int) -> Build:
    return dc("_StorageInfo", {"relative_path": path, "offset": offset, "length": length,
                               "transform_descriptors": None},
              "torch.distributed.checkpoint.filesystem")


def md_index(fqn: str, offset: tuple | None = None, index: int | None = None) -> Build:
    return dc("MetadataIndex", {"fqn": fqn, "offset": None if offset is None else size(*offset),
                                "index": index})


def dcp_metadata(items: dict, storage_data: dict, planner_data=None) -> bytes:
    """Metadata(state_dict_metadata, planner_data, storage_data, storage_meta, version)."""
    return dumps(dc("Metadata", {"state_dict_metadata": items, "planner_data": planner_data,
                                 "storage_data": storage_data, "storage_meta": None,
                                 "version": "1.0.0"}), protocol=4, frame=True)


def dcp_value_blob(obj) -> bytes:
    """A non-tensor DCP item: torch.save(value) into the rank file."""
    return torch_zip(dumps(obj, 2))


def dcp_tensor_blob() -> bytes:
    return torch_zip(dumps(tensor("0", (4,)), 2), {"0": struct.pack("<4f", 1, 2, 3, 4)})


def dcp_folder(values: dict[str, object], where: dict[str, str] | None = None,
               planner_data=None) -> tuple[bytes, bytes]:
    """(.metadata, __0_0.distcp) for model.w (F32 [4]) and the given non-tensor items.
    `where` overrides an item's relative_path."""
    rank = bytearray()
    items = {"model.w": tensor_md((4,), [((0,), (4,))])}
    blob = dcp_tensor_blob()
    storage_data = {md_index("model.w", (0,), 0): storage_info("__0_0.distcp", 0, len(blob))}
    rank += blob
    for key, value in values.items():
        blob = dcp_value_blob(value)
        items[key] = dc("BytesStorageMetadata", {})
        path = (where or {}).get(key, "__0_0.distcp")
        storage_data[md_index(key)] = storage_info(path, len(rank), len(blob))
        rank += blob
    return dcp_metadata(items, storage_data, planner_data), bytes(rank)


TITAN_ITEMS = {"train_state.step": 1, "train_state.ntokens_seen": 64,
               "lr_scheduler.last_epoch": 1}


# =============================================================================================
# Cases
# =============================================================================================

@dataclass
class Case:
    name: str  # the folder under corpus/
    path: str  # what the tests open, relative to corpus/
    tries: str  # what the case tries, for the README
    bad: str  # the offending file, relative to corpus/ (named in the report)
    words: str  # a regex the problems must match (case-insensitive)
    exits: dict = field(default_factory=dict)  # command -> allowed exit codes
    live: str | None = None  # how a naive loader runs the payload: torch, pickle, legacy ...
    live_file: str | None = None  # the file that loader opens (default: bad)
    stats_names: tuple = ("*",)
    control: bool = False
    forbid: str | None = None  # a regex no output may match (what reading outside would show)

    @property
    def marker(self) -> str:
        return MARKER + self.name


# Allowed exit codes. check: an unsafe or damaged optimizer makes a weights-only (4) resume,
# an unsafe or damaged RNG, scheduler or progress file an inexact one (3), weights broken (5).
# stats reads only what is readable: good weights beside a bad file give 0.
UNSAFE = {"inspect": {5}, "check": {3, 4, 5}, "stats": {0, 2, 5}}
DAMAGED = {"inspect": {5}, "check": {3, 4, 5}, "stats": {0, 2, 5}}
BROKEN = {"inspect": {2, 5}, "check": {2, 5}, "stats": {0, 2, 5}}
ODD = {"inspect": {0, 5}, "check": {0, 3, 4, 5}, "stats": {0, 2, 5}}
CLEAN = {"inspect": {0}, "check": {0, 3, 4}, "stats": {0}}

CASES: list[Case] = []
_WRITERS: dict[str, object] = {}


def case(**kw):
    def register(fn):
        c = Case(**kw)
        CASES.append(c)
        _WRITERS[c.name] = fn
        return fn
    return register


def put(rel: str, data: bytes) -> None:
    p = CORPUS / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)


def link(rel: str, target: str) -> None:
    p = CORPUS / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, p)


def hf_checkpoint(folder: str, optimizer: bytes | None = None, **files: bytes) -> None:
    """An HF Trainer checkpoint-1: weights, optimizer, scheduler, trainer state, config;
    `files` replace or add files (keys with '__' for '.', e.g. trainer_state__json)."""
    base = {"config.json": jdump(CONFIG), "model.safetensors": good_safetensors(),
            "optimizer.pt": optimizer if optimizer is not None else
            torch_zip(dumps(adamw(), 2), ADAMW_STORAGES),
            "scheduler.pt": torch_zip(dumps(SCHEDULER, 2)),
            "trainer_state.json": jdump(TRAINER_STATE)}
    base.update({k.replace("__", "."): v for k, v in files.items()})
    for name, data in base.items():
        if data is not None:
            put(f"{folder}/{name}", data)


def hf_optimizer_case(name: str, payload, tries: str, words: str, protocol: int = 2,
                      frame: bool = False, live: str | None = "torch", **kw) -> None:
    """An HF checkpoint whose optimizer.pt is a real torch zip: a real AdamW state dict plus
    a payload entry (so the rest of the file must still be shown)."""
    def write():
        pkl = dumps(adamw({"payload": payload}), protocol, frame)
        hf_checkpoint(f"{name}/checkpoint-1", torch_zip(pkl, ADAMW_STORAGES))
    case(name=name, path=f"{name}/checkpoint-1", tries=tries,
         bad=f"{name}/checkpoint-1/optimizer.pt", words=words,
         exits=kw.pop("exits", UNSAFE), live=live, **kw)(write)


# -- controls: the frames every case below is built on -------------------------------------------

@case(name="control-hf", path="control-hf/checkpoint-1", control=True, exits=CLEAN,
      tries="control: a clean HF Trainer checkpoint-1 (the frame of the pickle cases)",
      bad="control-hf/checkpoint-1/optimizer.pt", words=r".")
def _():
    hf_checkpoint("control-hf/checkpoint-1")


@case(name="control-dcp", path="control-dcp/step-1", control=True,
      exits={"inspect": {0}, "check": {0, 3, 4}, "stats": {0}},
      tries="control: a clean torchtitan-style DCP step-1 folder (the frame of the DCP cases)",
      bad="control-dcp/step-1/.metadata", words=r".")
def _():
    meta, rank = dcp_folder(TITAN_ITEMS)
    put("control-dcp/step-1/.metadata", meta)
    put("control-dcp/step-1/__0_0.distcp", rank)


@case(name="control-index", path="control-index", control=True, exits=CLEAN,
      tries="control: a clean sharded safetensors folder with its index",
      bad="control-index/model.safetensors.index.json", words=r".")
def _():
    index = {"metadata": {"total_size": 32},
             "weight_map": {"a": "model-00001-of-00002.safetensors",
                            "b": "model-00002-of-00002.safetensors"}}
    put("control-index/model.safetensors.index.json", jdump(index))
    put("control-index/model-00001-of-00002.safetensors", good_safetensors(["a"]))
    put("control-index/model-00002-of-00002.safetensors", good_safetensors(["b"]))


@case(name="control-hf-cache", path="control-hf-cache/snapshots/0123abcd", control=True,
      exits={"inspect": {0}, "check": {0, 3, 4, 5}, "stats": {0}},
      tries="control: the Hugging Face hub cache layout, where every file of a snapshot is a "
            "symlink to ../../blobs/<hash> (outside the snapshot folder, and legitimate)",
      bad="control-hf-cache/snapshots/0123abcd/model.safetensors", words=r".")
def _():
    put("control-hf-cache/blobs/5f1c2a", good_safetensors())
    put("control-hf-cache/blobs/9e8d7c", jdump(CONFIG))
    link("control-hf-cache/snapshots/0123abcd/model.safetensors", "../../blobs/5f1c2a")
    link("control-hf-cache/snapshots/0123abcd/config.json", "../../blobs/9e8d7c")


# -- pickles that reach for code, in real torch zips ---------------------------------------------

hf_optimizer_case(
    "pickle-os-system", system("pickle-os-system"),
    "optimizer.pt (torch zip, protocol 2) whose state dict holds os.system('touch ...')",
    r"unsafe.*os\.system")
hf_optimizer_case(
    "pickle-posix-system", system("pickle-posix-system", "posix"),
    "optimizer.pt, protocol 4 with a FRAME and STACK_GLOBAL posix.system",
    r"unsafe.*posix\.system", protocol=4, frame=True)
hf_optimizer_case(
    "pickle-subprocess-popen",
    Call(G("subprocess", "Popen"), (["touch", f"{MARKER}pickle-subprocess-popen"],)),
    "optimizer.pt, protocol 3: subprocess.Popen(['touch', ...])", r"unsafe.*subprocess\.Popen",
    protocol=3)
hf_optimizer_case(
    "pickle-builtins-eval",
    Call(G("builtins", "eval"), (f"open('{MARKER}pickle-builtins-eval', 'w').close()",)),
    "optimizer.pt, protocol 5 with a FRAME: builtins.eval(\"open('PWNED-...', 'w')\")",
    r"unsafe.*builtins\.eval", protocol=5, frame=True)
hf_optimizer_case(
    "pickle-py2-builtin-eval",
    Call(G("__builtin__", "eval"), (f"open('{MARKER}pickle-py2-builtin-eval', 'w').close()",)),
    "optimizer.pt, protocol 2 spelling eval the Python 2 way (__builtin__.eval, which "
    "pickle's fix_imports maps to builtins.eval)", r"unsafe.*builtins\.eval")
hf_optimizer_case(
    "pickle-builtins-exec",
    Call(G("builtins", "exec"), (f"import os\nos.system('touch {MARKER}pickle-builtins-exec')",)),
    "optimizer.pt, protocol 4: builtins.exec of a two-line program", r"unsafe.*builtins\.exec",
    protocol=4)
hf_optimizer_case(
    "pickle-import-getattr",
    Call(Call(G("builtins", "getattr"), (Call(G("builtins", "__import__"), ("os",)), "system")),
         (f"touch {MARKER}pickle-import-getattr",)),
    "getattr(__import__('os'), 'system')('touch ...'): the callable of a REDUCE is itself "
    "the result of a REDUCE", r"unsafe.*(builtins\.__import__|builtins\.getattr)")
hf_optimizer_case(
    "pickle-getattr-chain",
    Call(
        Call(G("builtins", "getattr"), (
            Call(G("builtins", "getattr"), (
                Call(G("builtins", "getattr"), (
                    Put(1, Call(G("builtins", "__import__"), ("subprocess",))), "os")),
                "system")),
            "__call__")),
        (f"touch {MARKER}pickle-getattr-chain",)),
    "getattr(getattr(getattr(__import__('subprocess'), 'os'), 'system'), '__call__')"
    "('touch ...'), the module kept in the memo (BINPUT)", r"unsafe.*builtins\.getattr")
hf_optimizer_case(
    "pickle-dotted-global", Call(G("posixpath", "os.system"),
                                 (f"touch {MARKER}pickle-dotted-global",)),
    "protocol 4 STACK_GLOBAL ('posixpath', 'os.system'): pickle resolves the dotted name "
    "attribute by attribute (posixpath.os is the os module), so os.system hides behind a "
    "harmless module name", r"unsafe.*os\.system", protocol=4)
hf_optimizer_case(
    "pickle-dotted-global-torch", Call(G("torch", "os.system"),
                                       (f"touch {MARKER}pickle-dotted-global-torch",)),
    "protocol 4 STACK_GLOBAL ('torch', 'os.system'): the same trick behind the module every "
    "checkpoint legitimately names", r"unsafe.*os\.system", protocol=4)
hf_optimizer_case(
    "pickle-pkgutil-resolve-name",
    Call(Call(G("pkgutil", "resolve_name"), ("os:system",)),
         (f"touch {MARKER}pickle-pkgutil-resolve-name",)),
    "pkgutil.resolve_name('os:system')('touch ...'): a resolver not on any deny list returns "
    "os.system, then a second REDUCE calls the result", r"unsafe.*(pkgutil|resolve_name)")
hf_optimizer_case(
    "pickle-copyreg-reconstructor",
    Call(G("copyreg", "_reconstructor"),
         (G("subprocess", "Popen"), G("subprocess", "Popen"),
          ["touch", f"{MARKER}pickle-copyreg-reconstructor"])),
    "copyreg._reconstructor(Popen, Popen, ['touch', ...]): the allow-listed helper calls "
    "base.__init__(obj, state), i.e. Popen(['touch', ...])", r"unsafe.*subprocess\.Popen")
hf_optimizer_case(
    "pickle-copyreg-newobj",
    Call(G("copyreg", "__newobj__"),
         (G("builtins", "tuple"),
          Call(G("builtins", "map"), (G("os", "system"),
                                      [f"touch {MARKER}pickle-copyreg-newobj"])))),
    "copyreg.__newobj__(tuple, map(os.system, ['touch ...'])): tuple.__new__ drains the map, "
    "so os.system runs without ever being the callable of a REDUCE", r"unsafe.*os\.system")
hf_optimizer_case(
    "pickle-nested-reduce",
    Call(Call(G("functools", "partial"),
              (G("os", "system"), f"touch {MARKER}pickle-nested-reduce")), ()),
    "REDUCE of a REDUCE result: functools.partial(os.system, 'touch ...')()",
    r"unsafe.*os\.system")
hf_optimizer_case(
    "pickle-codecs-open", Call(G("codecs", "open"), (f"{MARKER}pickle-codecs-open", "w")),
    "codecs.open('PWNED-...', 'w'): a file-creating callable from a module on no deny list",
    r"unsafe.*codecs\.open")
hf_optimizer_case(
    "pickle-pathlib-touch",
    Call(G("pathlib", "Path.touch"), (Call(G("pathlib", "PosixPath"),
                                           (f"{MARKER}pickle-pathlib-touch",)),)),
    "protocol 4 STACK_GLOBAL ('pathlib', 'Path.touch'): a dotted name reaching a method, "
    "called on PosixPath('PWNED-...')", r"unsafe.*pathlib\.Path\.touch", protocol=4)
hf_optimizer_case(
    "pickle-logging-filehandler",
    Call(G("logging", "FileHandler"), (f"{MARKER}pickle-logging-filehandler",)),
    "logging.FileHandler('PWNED-...'): constructing the handler creates the file",
    r"unsafe.*logging\.FileHandler")


def _ustr(text: str) -> bytes:
    b = text.encode()
    return b"X" + struct.pack("<I", len(b)) + b


hf_optimizer_case(
    "pickle-inst-obj",
    Raw(b"(" + _ustr(f"touch {MARKER}pickle-inst-obj-inst") + b"ios\nsystem\n"
        + b"(csubprocess\nPopen\n](" + _ustr("touch") + _ustr(f"{MARKER}pickle-inst-obj-obj")
        + b"eo" + b"\x86"),
    "the protocol 0/1 call opcodes inside a protocol 2 pickle: INST os.system and OBJ "
    "subprocess.Popen", r"unsafe.*(os\.system|subprocess\.Popen)")
hf_optimizer_case(
    "pickle-persid-call",
    PersId(system("pickle-persid-call")),
    "persistent_load abuse: the persistent id is computed by os.system(...) before "
    "torch's persistent_load even looks at it", r"unsafe.*os\.system")
hf_optimizer_case(
    "pickle-persid-not-storage",
    [PersId("a plain string"), PersId(("module", "os", "system")),
     PersId(("storage", "not a storage class", 5, None, -1)),
     PersId(("storage", G("torch", "FloatStorage"), ["not", "a", "key"], "cpu", 4))],
    "persistent ids that are not ('storage', class, key, location, numel): a string, a "
    "('module', ...) tuple, wrong types", r"persistent id", live=None, exits=ODD)
hf_optimizer_case(
    "pickle-persid-huge-storage",
    tensor("9", (2**31, 2**31), numel=2**62),
    "a tensor of shape [2**31, 2**31] (2**62 elements, 16 EiB) on storage data/9, which the "
    "zip does not hold: nothing may be sized, allocated or read from the claim",
    r"storage record data/9 is missing|needs [\d,]+ bytes", live=None, exits=DAMAGED)
hf_optimizer_case(
    "pickle-persid-path-traversal",
    [tensor("../../../../../../etc/passwd", (4,)), tensor("/etc/hostname", (2,)),
     tensor("..", (1,))],
    "storage keys '../../../../../../etc/passwd', '/etc/hostname' and '..': a reader that "
    "joins the key to a folder would read outside the checkpoint",
    r"storage record .*(missing|outside)", live=None, exits=DAMAGED)
hf_optimizer_case(
    "pickle-ext-opcode", Raw(b"\x82\x01"),
    "EXT1: a value from copyreg's extension registry (empty unless someone registered code)",
    r"extension", live=None, exits=DAMAGED)


def _laughs(levels: int = 40, width: int = 10) -> Raw:
    """Each list holds `width` references to the previous one: width**levels paths."""
    out = bytearray(b"]q\x00")
    for i in range(1, levels):
        out += b"0](" + (b"h" + bytes([i - 1])) * width + b"eq" + bytes([i])
    return Raw(bytes(out))


hf_optimizer_case(
    "pickle-billion-laughs", _laughs(),
    "a memo bomb: 40 nested lists, each holding 10 references to the previous one (10**39 "
    "paths in 400 bytes); walking it naively never ends",
    r"pickle bomb|elided|nests deeper", live=None, exits=ODD)
hf_optimizer_case(
    "pickle-deep-tuples", Raw(b"N" + b"\x85" * 90_000),
    "90,000 nested 1-tuples (TUPLE1 opcodes): hashing or repr-ing them recursively crashes "
    "CPython", r"pickle bomb|elided|nests? deeper", live=None, exits=ODD)
hf_optimizer_case(
    "pickle-deep-lists", Raw(b"]" * 45_000 + b"a" * 44_999),
    "45,000 nested lists (EMPTY_LIST then APPEND): recursion in any walker",
    r"pickle bomb|elided|nests? deeper", live=None, exits=ODD)


# -- the other state files a framework reads -----------------------------------------------------

@case(name="hf-rng-state", path="hf-rng-state/checkpoint-1", exits=UNSAFE, live="torch",
      tries="rng_state.pth (torch zip) with numpy-looking RNG state whose 'python' entry is "
            "os.system('touch ...')",
      bad="hf-rng-state/checkpoint-1/rng_state.pth", words=r"unsafe.*os\.system")
def _():
    rng = {"python": system("hf-rng-state"), "cpu": tensor("0", (4,), cls="ByteStorage")}
    hf_checkpoint("hf-rng-state/checkpoint-1",
                  rng_state__pth=torch_zip(dumps(rng, 2), {"0": b"\0\1\2\3"}))


@case(name="hf-training-args", path="hf-training-args/checkpoint-1", exits=UNSAFE,
      live="torch",
      tries="training_args.bin: an argparse.Namespace of training arguments (what older "
            "scripts save) whose report_to field is subprocess.Popen(['touch', ...])",
      bad="hf-training-args/checkpoint-1/training_args.bin", words=r"unsafe.*subprocess\.Popen")
def _():
    args = Build(NewObj(G("argparse", "Namespace")),
                 {"output_dir": "out", "seed": 42, "per_device_train_batch_size": 2,
                  "report_to": Call(G("subprocess", "Popen"),
                                    (["touch", f"{MARKER}hf-training-args"],))})
    hf_checkpoint("hf-training-args/checkpoint-1", training_args__bin=torch_zip(dumps(args, 2)))


@case(name="hf-scheduler-reduce-ex", path="hf-scheduler-reduce-ex/checkpoint-1", exits=UNSAFE,
      live="torch",
      tries="scheduler.pt (protocol 4, framed) whose lr_lambdas hold builtins.eval(...)",
      bad="hf-scheduler-reduce-ex/checkpoint-1/scheduler.pt", words=r"unsafe.*builtins\.eval")
def _():
    sched = dict(SCHEDULER, lr_lambdas=[
        Call(G("builtins", "eval"), (f"open('{MARKER}hf-scheduler-reduce-ex', 'w').close()",))])
    hf_checkpoint("hf-scheduler-reduce-ex/checkpoint-1",
                  scheduler__pt=torch_zip(dumps(sched, 4, frame=True)))


@case(name="accelerate-random-states", path="accelerate-random-states/step_1", exits=UNSAFE,
      live="pickle",
      tries="accelerate random_states_0.pkl, a plain protocol 4 pickle (accelerate loads it "
            "with torch.load(weights_only=False)) holding builtins.exec",
      bad="accelerate-random-states/step_1/random_states_0.pkl", words=r"unsafe.*builtins\.exec")
def _():
    rng = {"step": 1, "random_state": (3, tuple(range(8)), None),
           "numpy_random_seed": Call(G("builtins", "exec"), (
               f"open('{MARKER}accelerate-random-states', 'w').close()",)),
           "torch_manual_seed": tensor("0", (4,), cls="ByteStorage")}
    put("accelerate-random-states/step_1/random_states_0.pkl", dumps(rng, 4, frame=True))
    put("accelerate-random-states/step_1/model.safetensors", good_safetensors())
    put("accelerate-random-states/step_1/optimizer.bin",
        torch_zip(dumps(adamw(), 2), ADAMW_STORAGES))
    put("accelerate-random-states/step_1/scheduler.bin", torch_zip(dumps(SCHEDULER, 2)))


@case(name="lightning-hparams", path="lightning-hparams/epoch=0-step=1.ckpt", exits=UNSAFE,
      live="torch",
      tries="a Lightning .ckpt whose hyper_parameters hold subprocess.Popen(['touch', ...]) "
            "beside a real state_dict and optimizer state",
      bad="lightning-hparams/epoch=0-step=1.ckpt", words=r"unsafe.*subprocess\.Popen")
def _():
    ckpt = {"epoch": 0, "global_step": 1, "pytorch-lightning_version": "2.5.0",
            "state_dict": {"layer.w": tensor("3", (4,))},
            "loops": {}, "callbacks": {}, "optimizer_states": [adamw()],
            "lr_schedulers": [SCHEDULER],
            "hparams_name": "kwargs",
            "hyper_parameters": {"lr": 0.001, "cb": Call(G("subprocess", "Popen"), (
                ["touch", f"{MARKER}lightning-hparams"],))}}
    put("lightning-hparams/epoch=0-step=1.ckpt",
        torch_zip(dumps(ckpt, 2), {**ADAMW_STORAGES, "3": struct.pack("<4f", 1, 2, 3, 4)},
                  root="epoch=0-step=1"))


@case(name="deepspeed-model-states", path="deepspeed-model-states", exits=UNSAFE, live="torch",
      tries="DeepSpeed global_step1/mp_rank_00_model_states.pt whose ds_config is "
            "builtins.eval(...)",
      bad="deepspeed-model-states/global_step1/mp_rank_00_model_states.pt",
      words=r"unsafe.*builtins\.eval")
def _():
    states = {"module": {"w": tensor("0", (4,))}, "global_steps": 1, "skipped_steps": 0,
              "ds_version": "0.16.0", "dp_world_size": 1, "mp_world_size": 1,
              "ds_config": Call(G("builtins", "eval"), (
                  f"open('{MARKER}deepspeed-model-states', 'w').close()",))}
    put("deepspeed-model-states/latest", b"global_step1")
    put("deepspeed-model-states/global_step1/mp_rank_00_model_states.pt",
        torch_zip(dumps(states, 2), {"0": struct.pack("<4f", 1, 2, 3, 4)}))


@case(name="legacy-sysinfo", path="legacy-sysinfo/pytorch_model.bin", exits=UNSAFE,
      live="torch",
      tries="a legacy (pre-zip) torch file whose third pickle, sys_info, is os.system(...): "
            "torch.load unpickles it before the object",
      bad="legacy-sysinfo/pytorch_model.bin", words=r"unsafe.*os\.system")
def _():
    obj = {"w": tensor("0", (4,), pid=PersId(("storage", G("torch", "FloatStorage"), "0", "cpu",
                                                4, None)))}
    put("legacy-sysinfo/pytorch_model.bin",
        legacy_torch(system("legacy-sysinfo"), obj, ["0"], {"0": struct.pack("<4f", 1, 2, 3, 4)}))


@case(name="legacy-keys", path="legacy-keys/pytorch_model.bin", exits=UNSAFE, live="torch",
      tries="a legacy torch file whose trailing pickle (the list of storage keys) is "
            "os.system(...): torch.load unpickles it after the object",
      bad="legacy-keys/pytorch_model.bin", words=r"unsafe.*os\.system")
def _():
    obj = {"w": tensor("0", (4,), pid=PersId(("storage", G("torch", "FloatStorage"), "0", "cpu",
                                                4, None)))}
    put("legacy-keys/pytorch_model.bin",
        legacy_torch(SYS_INFO, obj, system("legacy-keys"), {}))


# -- zip bombs and zip names ---------------------------------------------------------------------

@case(name="zip-bomb-datapkl", path="zip-bomb-datapkl/checkpoint-1", exits=DAMAGED, live=None,
      tries="optimizer.pt whose data.pkl is deflated: a real pickle followed by 96 MiB of "
            "zeros, ~95 KB on disk (1000:1)",
      bad="zip-bomb-datapkl/checkpoint-1/optimizer.pt",
      words=r"over the [\d,]+-byte limit|too large")
def _():
    pkl = dumps(adamw(), 2)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    n = 96 * 2**20
    data = c.compress(pkl)
    crc = zlib.crc32(pkl)
    chunk = bytes(2**20)
    for _ in range(n // len(chunk)):
        data += c.compress(chunk)
        crc = zlib.crc32(chunk, crc)
    data += c.flush()
    member = Member("archive/data.pkl", data, 8, len(pkl) + n, crc)
    hf_checkpoint("zip-bomb-datapkl/checkpoint-1", torch_zip(member, ADAMW_STORAGES))


@case(name="zip-bomb-lying-size", path="zip-bomb-lying-size/checkpoint-1", exits=DAMAGED,
      live=None,
      tries="optimizer.pt whose deflated data.pkl declares 300 bytes but inflates to 64 MiB "
            "(a pickle that never STOPs: 'N' after 'N')",
      bad="zip-bomb-lying-size/checkpoint-1/optimizer.pt",
      words=r"crc|unreadable|corrupt|ends early|truncat")
def _():
    body = b"\x80\x02]" + b"N" * (64 * 2**20)
    member = Member("archive/data.pkl", deflate(body), 8, 300, zlib.crc32(body[:300]))
    hf_checkpoint("zip-bomb-lying-size/checkpoint-1", torch_zip(member, ADAMW_STORAGES))


@case(name="zip-bomb-storage", path="zip-bomb-storage/checkpoint-1", exits=DAMAGED, live=None,
      tries="optimizer.pt whose storage record data/1 is deflated: 80 MiB of zeros in ~80 KB, "
            "claimed by a 20M-element exp_avg",
      bad="zip-bomb-storage/checkpoint-1/optimizer.pt", words=r"compress")
def _():
    n = 20 * 2**20
    state = {0: {"step": tensor("0", ()), "exp_avg": tensor("1", (n,)),
                 "exp_avg_sq": tensor("2", (4,))}}
    pkl = dumps(adamw(state=state), 2)
    members = [Member("archive/data.pkl", pkl), Member("archive/.format_version", b"1"),
               Member("archive/byteorder", b"little"),
               Member("archive/data/0", ADAMW_STORAGES["0"]),
               zeros_deflated("archive/data/1", 4 * n),
               Member("archive/data/2", ADAMW_STORAGES["2"]), Member("archive/version", b"3\n")]
    hf_checkpoint("zip-bomb-storage/checkpoint-1", raw_zip(members))


@case(name="zip-declared-4gb", path="zip-declared-4gb/checkpoint-1", exits=DAMAGED, live=None,
      tries="optimizer.pt whose stored data.pkl declares 4 GiB - 2 bytes in both headers",
      bad="zip-declared-4gb/checkpoint-1/optimizer.pt",
      words=r"over the [\d,]+-byte limit|too large")
def _():
    member = Member("archive/data.pkl", dumps(adamw(), 2), 0, 0xFFFFFFFE)
    hf_checkpoint("zip-declared-4gb/checkpoint-1", torch_zip(member, ADAMW_STORAGES))


@case(name="zip-overlapping", path="zip-overlapping/checkpoint-1", exits=ODD, live=None,
      tries="a Fifield-style overlapping zip: 300 central-directory entries (data/0 ... "
            "data/299) all point at one 32 KiB local record: 9.4 MiB of tensors from 32 KiB",
      bad="zip-overlapping/checkpoint-1/optimizer.pt",
      words=r"overlap|same (local )?(record|header|bytes)")
def _():
    k = 300
    state = {i: {"exp_avg": tensor(str(i), (8192,))} for i in range(k)}
    groups = adamw()["param_groups"]
    groups[0]["params"] = list(range(k))
    pkl = dumps({"state": state, "param_groups": groups}, 2)
    kernel = Member("archive/data/0", struct.pack("<f", 0.5) * 8192)
    members = [Member("archive/data.pkl", pkl), Member("archive/version", b"3\n"), kernel]
    members += [Member(f"archive/data/{i}", b"", at="archive/data/0") for i in range(1, k)]
    hf_checkpoint("zip-overlapping/checkpoint-1", raw_zip(members))


@case(name="zip-path-traversal", path="zip-path-traversal/checkpoint-1", exits=ODD, live=None,
      tries="optimizer.pt (a good AdamW state) with extra members named "
            "'../../../PWNED-zip-path-traversal', '/tmp/PWNED-zip-path-traversal-abs' and "
            "'archive/data/../../../../PWNED-zip-path-traversal-dotdot': an extractor "
            "would write outside its folder",
      bad="zip-path-traversal/checkpoint-1/optimizer.pt",
      words=r"PWNED-zip-path-traversal.*(outside|traversal)|(outside|traversal).*PWNED-zip")
def _():
    extra = [Member(f"../../../{MARKER}zip-path-traversal", b"x"),
             Member(f"/tmp/{MARKER}zip-path-traversal-abs", b"x"),
             Member(f"archive/data/../../../../{MARKER}zip-path-traversal-dotdot", b"x")]
    hf_checkpoint("zip-path-traversal/checkpoint-1",
                  torch_zip(dumps(adamw(), 2), ADAMW_STORAGES, extra=extra))


@case(name="zip-root-dotdot", path="zip-root-dotdot/checkpoint-1", exits=ODD, live=None,
      tries="optimizer.pt whose archive root folder is '..' (../data.pkl, ../data/0 ...), "
            "which torch.load accepts",
      bad="zip-root-dotdot/checkpoint-1/optimizer.pt",
      words=r"\.\./data\.pkl.*(outside|traversal)|(outside|traversal).*\.\./data")
def _():
    hf_checkpoint("zip-root-dotdot/checkpoint-1",
                  torch_zip(dumps(adamw(), 2), ADAMW_STORAGES, root=".."))


# -- safetensors headers -------------------------------------------------------------------------

def st_case(name: str, data: bytes, tries: str, words: str, exits=BROKEN) -> None:
    def write():
        put(f"{name}/model.safetensors", data)
        put(f"{name}/config.json", jdump(CONFIG))
    case(name=name, path=name, tries=tries, bad=f"{name}/model.safetensors", words=words,
         exits=exits)(write)


st_case("st-header-1e12", safetensors(b'{"w": {}}', n=10**12),
        "a header length of 10**12 in a 17-byte file", r"claims 1,000,000,000,000 bytes|10\*\*12")
st_case("st-header-u64max", safetensors(b"{}", n=2**64 - 1),
        "a header length of 2**64 - 1",
        r"claims 18,446,744,073,709,551,615|over the [\d,]+-byte limit")
st_case("st-header-nesting", safetensors(b'{"w": ' + b"[" * 99_000),
        "a header of 99,000 nested JSON arrays (never closed)",
        r"not valid JSON|nest|recursion|too deep")
st_case("st-shape-overflow", safetensors({
    "big": {"dtype": "F32", "shape": [2**63, 2**63, 2**63], "data_offsets": [0, 16]},
    "w": {"dtype": "F32", "shape": [4], "data_offsets": [16, 32]}},
    struct.pack("<8f", *range(8))),
    "a shape of [2**63, 2**63, 2**63] (numel overflows any fixed-width integer) beside a "
    "good tensor", r"needs [\d,]+ bytes but data_offsets span|overflow", exits=DAMAGED)
st_case("st-shape-2-63", safetensors({
    "huge": {"dtype": "U8", "shape": [2**63], "data_offsets": [0, 2**63]}}, b"\0" * 8),
    "a consistent 2**63-byte tensor in an 80-byte file: reading it would mean 8 EiB",
    r"truncat|missing|past", exits=DAMAGED)
st_case("st-int-digits", safetensors(
    b'{"w": {"dtype": "F32", "shape": [' + b"9" * 5000 + b'], "data_offsets": [0, 16]}}'
    + b"    ", b"\0" * 16),
    "a 5,000-digit dimension (Python refuses to parse ints over 4,300 digits)",
    r"not valid JSON|digits")
st_case("st-negative-offsets", safetensors({
    "w": {"dtype": "F32", "shape": [4], "data_offsets": [-16, 0]}}, b"\0" * 16),
    "data_offsets [-16, 0]", r"data_offsets \[-16, 0\]", exits=DAMAGED)
st_case("st-overlapping-offsets", safetensors({
    "a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
    "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}}, b"\0" * 24),
    "two tensors sharing 8 bytes", r"overlap", exits=DAMAGED)
st_case("st-many-dims", safetensors(
    b'{"w": {"dtype": "F32", "shape": [' + b"1, " * 20_000 + b'4], "data_offsets": [0, 16]}}'
    + b" " * 6, b"\0" * 16),
    "one tensor of 20,001 dimensions (all 1 but the last): every shape display must stay "
    "bounded", r".", exits={"inspect": {0, 5}, "check": {0, 3, 4, 5}, "stats": {0, 2, 5}})


@case(name="st-index-traversal", path="st-index-traversal", exits=BROKEN, live=None,
      tries="model.safetensors.index.json mapping tensors to '../../../../../../etc/passwd', "
            "'/etc/passwd' and '../outside.safetensors' (a valid file beside the folder)",
      bad="st-index-traversal/model.safetensors.index.json", words=r"outside",
      forbid=r'"name": "c"')
def _():
    index = {"metadata": {"total_size": 48},
             "weight_map": {"a": "../../../../../../etc/passwd", "b": "/etc/passwd",
                            "c": "../outside.safetensors"}}
    put("st-index-traversal/model.safetensors.index.json", jdump(index))
    put("outside.safetensors", good_safetensors(["c"]))


# -- JSON bombs ----------------------------------------------------------------------------------

@case(name="json-trainer-state-nesting", path="json-trainer-state-nesting/checkpoint-1",
      exits=DAMAGED, live=None,
      tries="trainer_state.json: 48,000 nested arrays (valid JSON, 96 KB)",
      bad="json-trainer-state-nesting/checkpoint-1/trainer_state.json",
      words=r"not valid JSON|nest|recursion|too deep")
def _():
    hf_checkpoint("json-trainer-state-nesting/checkpoint-1",
                  trainer_state__json=b'{"global_step": ' + b"[" * 48_000 + b"]" * 48_000 + b"}")


@case(name="json-index-nesting", path="json-index-nesting", exits=BROKEN, live=None,
      tries="model.safetensors.index.json: 100,000 nested arrays under weight_map (never "
            "closed)",
      bad="json-index-nesting/model.safetensors.index.json",
      words=r"not valid JSON|nest|recursion|too deep")
def _():
    put("json-index-nesting/model.safetensors.index.json",
        b'{"weight_map": ' + b"[" * 100_000)
    put("json-index-nesting/model-00001-of-00001.safetensors", good_safetensors())


@case(name="json-config-nesting", path="json-config-nesting/checkpoint-1", exits=CLEAN,
      live=None,
      tries="config.json: 48,000 nested objects-in-arrays beside a clean checkpoint (nothing "
            "needs config.json; it must not be parsed recursively either)",
      bad="json-config-nesting/checkpoint-1/config.json", words=r".")
def _():
    hf_checkpoint("json-config-nesting/checkpoint-1",
                  config__json=b"[" * 48_000 + b"]" * 48_000)


@case(name="json-megatron-metadata-nesting", path="json-megatron-metadata-nesting",
      exits={"inspect": {0, 2, 5}, "check": {2, 3, 4, 5}, "stats": {0, 2, 5}}, live=None,
      tries="Megatron iter_0000001/metadata.json (read to tell torch_dist from zarr): "
            "60,000 nested arrays, inside the 64 KiB it reads",
      bad="json-megatron-metadata-nesting/iter_0000001/metadata.json", words=r".")
def _():
    put("json-megatron-metadata-nesting/latest_checkpointed_iteration.txt", b"1")
    put("json-megatron-metadata-nesting/iter_0000001/metadata.json", b"[" * 60_000)
    put("json-megatron-metadata-nesting/iter_0000001/common.pt", torch_zip(dumps({"iteration": 1})))


@case(name="json-index-amplify", path="json-index-amplify", exits=BROKEN, live=None,
      tries="an index of 2,000 tensor names (~90 KB) all mapped to a shard holding one tensor, "
            "plus a second shard that does not exist: thousands of problems from one small file",
      bad="json-index-amplify/model.safetensors.index.json",
      words=r"not in the file|does not exist")
def _():
    names = {f"t{i}": "model-00001-of-00002.safetensors" for i in range(2000)}
    names["b"] = "model-00002-of-00002.safetensors"
    put("json-index-amplify/model.safetensors.index.json",
        json.dumps({"metadata": {"total_size": 10**15}, "weight_map": names}).encode())
    put("json-index-amplify/model-00001-of-00002.safetensors", good_safetensors(["a"]))


@case(name="json-huge-strings", path="json-huge-strings/checkpoint-1", exits=ODD, live=None,
      tries="trainer_state.json with a 90,000-character best_model_checkpoint and log keys: "
            "every display of it must stay bounded",
      bad="json-huge-strings/checkpoint-1/trainer_state.json", words=r".")
def _():
    state = dict(TRAINER_STATE, best_model_checkpoint="A" * 90_000,
                 log_history=[{"loss": 1.0, "step": 1, "\u202e" + "k" * 200: 1}])
    hf_checkpoint("json-huge-strings/checkpoint-1", trainer_state__json=jdump(state))


# -- DCP -----------------------------------------------------------------------------------------

@case(name="dcp-metadata-os-system", path="dcp-metadata-os-system/step-1", exits=UNSAFE,
      live="pickle",
      tries="a DCP .metadata (a bare pickle: torch reads it with plain pickle.load) whose "
            "planner_data is posix.system('touch ...')",
      bad="dcp-metadata-os-system/step-1/.metadata", words=r"unsafe.*posix\.system")
def _():
    meta, rank = dcp_folder(TITAN_ITEMS, planner_data=system("dcp-metadata-os-system", "posix"))
    put("dcp-metadata-os-system/step-1/.metadata", meta)
    put("dcp-metadata-os-system/step-1/__0_0.distcp", rank)


@case(name="dcp-item-payload", path="dcp-item-payload/step-1", exits=UNSAFE,
      live="dcp-item", live_file="dcp-item-payload/step-1/__0_0.distcp",
      tries="a DCP bytes item (train_state.step) whose torch.save blob is os.system(...): "
            "DCP's default load planner torch.loads it with weights_only=False",
      bad="dcp-item-payload/step-1/__0_0.distcp", words=r"unsafe.*os\.system")
def _():
    meta, rank = dcp_folder({**TITAN_ITEMS, "train_state.step": system("dcp-item-payload")})
    put("dcp-item-payload/step-1/.metadata", meta)
    put("dcp-item-payload/step-1/__0_0.distcp", rank)


@case(name="dcp-path-traversal", path="dcp-path-traversal/step-1", exits=BROKEN, live=None,
      tries="a DCP .metadata placing train_state.step in '../outside.distcp' (a real file "
            "beside the checkpoint whose step reads 424242) and lr_scheduler.last_epoch in "
            "'/etc/passwd'",
      bad="dcp-path-traversal/step-1/.metadata", words=r"outside|does not exist",
      forbid=r"424242")
def _():
    items = dict(TITAN_ITEMS, **{"train_state.step": 111111})  # pickled as long as 424242
    meta, rank = dcp_folder(items, where={"train_state.step": "../outside.distcp",
                                                "lr_scheduler.last_epoch": "/etc/passwd"})
    put("dcp-path-traversal/step-1/.metadata", meta)
    put("dcp-path-traversal/step-1/__0_0.distcp", rank)
    # the blob sits at the offset the metadata names for train_state.step
    offset = len(dcp_tensor_blob())
    put("dcp-path-traversal/outside.distcp", b"\0" * offset + dcp_value_blob(424242)
        + b"\0" * 4096)


@case(name="dcp-huge-ranges", path="dcp-huge-ranges/step-1", exits=BROKEN, live=None,
      tries="a DCP .metadata whose tensor is [2**40] F32 with one chunk at offset 2**62, "
            "length 2**62 in a 2 KB rank file",
      bad="dcp-huge-ranges/step-1/.metadata",
      words=r"places model\.w at [\d,]+-|past the end|shorter")
def _():
    items = {"model.w": tensor_md((2**40,), [((0,), (2**40,))]),
             "train_state.step": dc("BytesStorageMetadata", {})}
    blob = dcp_value_blob(1)
    storage_data = {md_index("model.w", (0,), 0): storage_info("__0_0.distcp", 2**62, 2**62),
                    md_index("train_state.step"): storage_info("__0_0.distcp", 0, len(blob))}
    put("dcp-huge-ranges/step-1/.metadata", dcp_metadata(items, storage_data))
    put("dcp-huge-ranges/step-1/__0_0.distcp", blob)


# -- symlinks (committed; git stores the link, not the target) -----------------------------------

@case(name="symlink-loop", path="symlink-loop/checkpoint-1", exits=DAMAGED, live=None,
      tries="model.safetensors -> model.safetensors (a loop) and optimizer.pt <-> "
            "rng_state.pth (a two-link loop)",
      bad="symlink-loop/checkpoint-1/model.safetensors",
      words=r"symbolic links|symlink loop|loop")
def _():
    hf_checkpoint("symlink-loop/checkpoint-1", model__safetensors=None, optimizer__pt=None)
    link("symlink-loop/checkpoint-1/model.safetensors", "model.safetensors")
    link("symlink-loop/checkpoint-1/optimizer.pt", "rng_state.pth")
    link("symlink-loop/checkpoint-1/rng_state.pth", "optimizer.pt")


@case(name="symlink-etc-passwd", path="symlink-etc-passwd/checkpoint-1", exits=DAMAGED,
      live=None,
      tries="model.safetensors and trainer_state.json are symlinks to /etc/passwd, outside "
            "the checkpoint",
      bad="symlink-etc-passwd/checkpoint-1/model.safetensors", words=r"symlink|outside")
def _():
    hf_checkpoint("symlink-etc-passwd/checkpoint-1", model__safetensors=None,
                  trainer_state__json=None)
    link("symlink-etc-passwd/checkpoint-1/model.safetensors", "/etc/passwd")
    link("symlink-etc-passwd/checkpoint-1/trainer_state.json", "/etc/passwd")


@case(name="symlink-outside-valid", path="symlink-outside-valid/checkpoint-1", exits=ODD,
      live=None,
      tries="model.safetensors is a symlink to ../../outside.safetensors, a valid file "
            "outside the checkpoint folder (its tensor is named 'c')",
      bad="symlink-outside-valid/checkpoint-1/model.safetensors", words=r"symlink|outside")
def _():
    hf_checkpoint("symlink-outside-valid/checkpoint-1", model__safetensors=None)
    link("symlink-outside-valid/checkpoint-1/model.safetensors", "../../outside.safetensors")


# Cases by topic, in their own modules: each registers its cases with `case(...)` when imported
# (they import this module's helpers; run this file as a script and it re-imports itself as
# tests.malicious.make_corpus, so there is one registry).
if __name__ != "__main__":  # as a script, main() below runs the imported registry instead
    from tests.malicious import (  # noqa: E402,F401
        cases_budget,
        cases_code,
        cases_found,
        cases_gadgets,
        cases_legacy,
        cases_reach,
        cases_resources,
        cases_safetensors,
        cases_zip,
    )


# =============================================================================================
# Made at test time (git cannot hold FIFOs; device links are made there too)
# =============================================================================================

SPECIAL_WORDS = r"not a regular file|fifo|named pipe|device|special file"
SPECIAL_EXITS = {"inspect": {2, 5}, "check": {2, 3, 4, 5}, "stats": {0, 2, 5}}


# Folder loops (made at test time: a committed one would trap pytest's collection and any
# other tree walker). Each kind: what it tries, and the links it plants (link -> target).
LOOPS = {
    "dir-loop": ("a run folder whose 'checkpoint' and 'checkpoints' (the nesting folders "
                 "torchtitan and accelerate use) are both symlinks to '.': a search that "
                 "follows them branches twice per level",
                 {"checkpoint": ".", "checkpoints": "."}),
    "self-link": ("a run folder (control-hf: checkpoint-1) whose checkpoint-9 is a symlink to "
                  "'.', the run folder itself: followed, it is a newer checkpoint 40 folders "
                  "deep", {"checkpoint-9": "."}),
    "parent-link": ("a run folder (control-hf: checkpoint-1) whose checkpoint-7 is a symlink "
                    "to '..', the folder above it: followed, it is a newer checkpoint of "
                    "nothing", {"checkpoint-7": ".."}),
    "link-chain": ("a run folder (control-hf: checkpoint-1) with checkpoint-5 -> b and "
                   "b/checkpoint-6 -> ../checkpoint-5 (a folder chain back to itself), and "
                   "checkpoint-2 -> checkpoint-3 -> checkpoint-2 (links that never resolve)",
                   {"b/checkpoint-6": "../checkpoint-5", "checkpoint-5": "b",
                    "checkpoint-2": "checkpoint-3", "checkpoint-3": "checkpoint-2"}),
}
LOOP_EXITS = {"inspect": {0}, "check": {3}, "stats": {0}}  # checkpoint-1 is read, inexact


@dataclass(frozen=True)
class TestTimeCase:
    name: str
    base: str  # the control folder copied, relative to corpus/ ("" for an empty folder)
    target: str  # the file replaced (or the link named), relative to the path opened
    kind: str  # "fifo", "/dev/zero", "/dev/urandom", "hf-refs-fifo", or one of LOOPS
    words: str = SPECIAL_WORDS
    exits: dict = field(default_factory=lambda: SPECIAL_EXITS, hash=False)

    @property
    def tries(self) -> str:
        if self.kind in LOOPS:
            return LOOPS[self.kind][0] + " (made at test time)"
        if self.kind == "hf-refs-fifo":
            return ("a Hugging Face cache repo (models--org--tiny, control-hf-cache inside) whose "
                    "refs/main, read to name the branch of the snapshot opened, is a FIFO")
        what = "a FIFO (a read blocks until someone writes)" if self.kind == "fifo" else \
            f"a symlink to {self.kind} (reads never end)"
        return f"{self.target} in a copy of {self.base} is {what}"

    def build(self, dst: Path) -> Path:
        """Copy the base into dst and plant the special file; return the path to open."""
        root = dst / self.name
        if self.kind == "hf-refs-fifo":  # the cache's own layout: <cache>/models--org--name/
            repo = root / "models--org--tiny"
            shutil.copytree(CORPUS / self.base, repo, symlinks=True)
            (repo / "refs").mkdir()
            os.mkfifo(repo / "refs" / "main")
            return repo / "snapshots" / "0123abcd"
        if self.base:
            shutil.copytree(CORPUS / self.base, root, symlinks=True)
        else:
            root.mkdir(parents=True)
        if self.kind in LOOPS:
            if not self.base:
                (root / "notes.txt").write_bytes(b"a run folder\n")
            for link, to in LOOPS[self.kind][1].items():
                (root / link).parent.mkdir(exist_ok=True)
                os.symlink(to, root / link)
            return root
        p = root / self.target
        if p.exists() or p.is_symlink():
            p.unlink()
        if self.kind == "fifo":
            os.mkfifo(p)
        else:
            os.symlink(self.kind, p)
        return root


TEST_TIME_CASES = [
    TestTimeCase(f"{kind.strip('/').replace('/', '-')}-{slug}", base, target, kind)
    for kind in ("fifo", "/dev/zero", "/dev/urandom")
    for slug, base, target in (
        ("weights", "control-hf/checkpoint-1", "model.safetensors"),
        ("optimizer", "control-hf/checkpoint-1", "optimizer.pt"),
        ("trainer-state", "control-hf/checkpoint-1", "trainer_state.json"),
        ("index", "control-index", "model.safetensors.index.json"),
        ("shard", "control-index", "model-00002-of-00002.safetensors"),
        ("dcp-metadata", "control-dcp/step-1", ".metadata"),
        ("dcp-rank", "control-dcp/step-1", "__0_0.distcp"),
    )
] + [TestTimeCase("symlink-dir-loop", "", "checkpoint", "dir-loop", words="loop",
                  exits={"inspect": {0, 2, 5}, "check": {2, 3, 4, 5}, "stats": {2, 5}}),
      TestTimeCase("symlink-checkpoint-to-run", "control-hf", "checkpoint-9", "self-link",
                   words="loop", exits=LOOP_EXITS),
      TestTimeCase("symlink-to-parent", "control-hf", "checkpoint-7", "parent-link",
                   words="loop", exits=LOOP_EXITS),
      TestTimeCase("symlink-chain", "control-hf", "checkpoint-5", "link-chain",
                   words=r"checkpoint-5 holds only links back.*loop", exits=LOOP_EXITS),
      TestTimeCase("hf-refs-fifo", "control-hf-cache", "../../refs/main", "hf-refs-fifo",
                   exits={"inspect": {0}, "check": {0, 3, 4}, "stats": {0}})]


# =============================================================================================
# Writing and checking
# =============================================================================================

def write(dest: Path = CORPUS) -> None:
    global CORPUS
    saved, CORPUS = CORPUS, dest
    try:
        if dest.exists() or dest.is_symlink():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        for c in CASES:
            _WRITERS[c.name]()
    finally:
        CORPUS = saved


def snapshot(root: Path) -> dict[str, tuple[str, str]]:
    """relative path -> ("link", target) | ("file", crc32 of the bytes) | ("dir", "")."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = ("link", os.readlink(p))
            elif p.is_dir():
                out[rel] = ("dir", "")
            else:
                st = p.stat()
                out[rel] = ("file", f"{zlib.crc32(p.read_bytes()):08x}:{st.st_size}")
    return out


def readme_table() -> str:
    """The README's table of cases, from CASES and TEST_TIME_CASES."""
    rows = ["| case | opened as | what it tries | must be reported as |", "|---|---|---|---|"]
    for c in CASES:
        said = "(a clean control)" if c.control else \
            "(bounded; no particular words)" if c.words == "." else f"`/{c.words}/`"
        rows.append(f"| `{c.name}` | `{c.path}` | {c.tries} | {said.replace('|', '&#124;')} |")
    for c in TEST_TIME_CASES:
        said = "not a regular file" if c.words == SPECIAL_WORDS else f"`/{c.words}/`"
        rows.append(f"| `{c.name}` | test time | {c.tries} | {said} |")
    return "\n".join(rows) + "\n"


def main(argv: list[str]) -> int:
    if "--readme" in argv:
        sys.stdout.write(readme_table())
        return 0
    if "--check" in argv:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            write(Path(tmp) / "corpus")
            fresh, committed = snapshot(Path(tmp) / "corpus"), snapshot(CORPUS)
        if fresh != committed:
            diff = sorted(set(fresh.items()) ^ set(committed.items()))
            print(f"corpus differs from make_corpus.py: {diff[:5]}", file=sys.stderr)
            return 1
        print(f"corpus matches ({len(CASES)} cases, {len(fresh)} entries)")
        return 0
    write()
    big = [(p, p.stat().st_size) for p in CORPUS.rglob("*")
           if p.is_file() and not p.is_symlink() and p.stat().st_size > 100_000]
    print(f"wrote {len(CASES)} cases into {CORPUS}" + (f"; over 100 KB: {big}" if big else ""))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parent.parent))  # the repository, for `tests.malicious`
    from tests.malicious import make_corpus as registered

    sys.exit(registered.main(sys.argv[1:]))
