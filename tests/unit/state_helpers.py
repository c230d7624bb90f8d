"""Builders for training-state files: real torch.save / pickle / DCP output, damaged copies,
and raw pickle opcodes for what no library would write (bombs, odd globals).

Expected values come from torch itself (torch.load(weights_only=True), DCP's own
FileSystemReader) on files these tests wrote, never from ckpt_browser.
"""

from __future__ import annotations

import os
import pickle
import socket
import struct
import subprocess
import sys
import warnings
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# torch dtype name -> safetensors spelling, written out here rather than taken from the reader.
EXPECTED_TAGS = {
    "float32": "F32", "float64": "F64", "float16": "F16", "bfloat16": "BF16", "int64": "I64",
    "int32": "I32", "int16": "I16", "int8": "I8", "uint8": "U8", "bool": "BOOL",
    "complex64": "C64", "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2",
    "float8_e4m3fnuz": "F8_E4M3FNUZ", "float8_e5m2fnuz": "F8_E5M2FNUZ", "float8_e8m0fnu": "F8_E8M0",
    "uint16": "U16", "uint32": "U32", "uint64": "U64",
}


def tag(dtype) -> str:
    return EXPECTED_TAGS[str(dtype).removeprefix("torch.")]


# -- real training state ---------------------------------------------------------------------

def adamw_state(steps: int = 2):
    """A real AdamW state_dict after `steps` steps on a small MLP (weights and biases)."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(steps):
        model(torch.randn(4, 6)).pow(2).sum().backward()
        opt.step()
        opt.zero_grad()
    return opt.state_dict()


def rng_state() -> dict:
    """What transformers' Trainer._save_rng_state writes (CPU only)."""
    import random

    import numpy as np
    import torch

    return {"python": random.getstate(), "numpy": np.random.get_state(),
            "cpu": torch.random.get_rng_state()}


def leaves(obj, prefix=""):
    """(dotted path, value) of every tensor in a real state dict, for comparisons."""
    import torch

    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from leaves(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from leaves(v, f"{prefix}.{i}" if prefix else str(i))
    elif isinstance(obj, torch.Tensor):
        yield prefix, obj


def torch_load(path):
    """The reference reading: weights_only=True plus the HF Trainer's numpy RNG allowlist
    (FORMATS.md "HF Trainer")."""
    import numpy as np
    import torch

    core = getattr(np, "_core", None) or np.core
    allow = [core.multiarray._reconstruct, np.ndarray, np.dtype, type(np.dtype(np.uint32))]
    with torch.serialization.safe_globals(allow):
        return torch.load(path, weights_only=True)


def storage_bytes(t) -> bytes:
    return bytes(t.untyped_storage())


# -- payloads that would run code if unpickled the usual way ---------------------------------

class SystemCall:
    def __init__(self, cmd: str):
        self.cmd = cmd

    def __reduce__(self):
        return (os.system, (self.cmd,))


class EvalCall:
    def __init__(self, expr: str):
        self.expr = expr

    def __reduce__(self):
        return (eval, (self.expr,))


class PopenCall:
    def __init__(self, argv: list[str]):
        self.argv = argv

    def __reduce__(self):
        return (subprocess.Popen, (self.argv,))


class ImportCall:
    def __init__(self, module: str):
        self.module = module

    def __reduce__(self):
        return (__import__, (self.module,))


def evil_payload(sentinel: Path) -> dict:
    touch = f"touch {sentinel}"
    return {"x": SystemCall(touch), "e": EvalCall(f"open({str(sentinel)!r}, 'w')"),
            "p": PopenCall(["touch", str(sentinel)]), "i": ImportCall("this")}


# -- raw pickle opcodes ------------------------------------------------------------------------

def glob(module: str, name: str) -> bytes:
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def text(s: str) -> bytes:
    raw = s.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw


def num(i: int) -> bytes:
    """An int as protocol-2 opcodes (LONG1 for anything big)."""
    return pickle.dumps(i, protocol=2)[2:-1]


def memo(i: int) -> bytes:
    return struct.pack("<I", i)


def storage_pid(dtype_class: str, key: str, numel: int) -> bytes:
    """torch's persistent id ('storage', torch.<X>Storage, key, 'cpu', numel) as BINPERSID."""
    return b"(" + text("storage") + glob("torch", dtype_class) + text(key) + text("cpu") + \
        num(numel) + b"tQ"


def tensor_v2(pid: bytes, shape: tuple[int, ...], stride: tuple[int, ...],
              offset: int = 0) -> bytes:
    """_rebuild_tensor_v2(storage, offset, size, stride, False, OrderedDict())."""
    def tup(xs):
        return b"(" + b"".join(num(x) for x in xs) + b"t"
    return (glob("torch._utils", "_rebuild_tensor_v2") + b"(" + pid + num(offset) + tup(shape)
            + tup(stride) + b"\x89" + glob("collections", "OrderedDict") + b")Rt" + b"R")


def dict_pickle(items: dict[str, bytes]) -> bytes:
    """A protocol-2 pickle of {key: <value opcodes>}."""
    return b"\x80\x02}(" + b"".join(text(k) + v for k, v in items.items()) + b"u."


# -- zips ---------------------------------------------------------------------------------------

def torch_zip(path: Path, data_pkl: bytes, records: dict[str, bytes] | None = None,
              root: str = "archive") -> Path:
    """A zip laid out like torch.save's (stored entries under one root folder)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr(f"{root}/data.pkl", data_pkl)
        for key, data in (records or {}).items():
            z.writestr(f"{root}/data/{key}", data)
        z.writestr(f"{root}/version", "3\n")
        z.writestr(f"{root}/byteorder", "little")
    return path


def rewrite_zip(src: Path, dst: Path, change: dict, compress: set[str] = frozenset()) -> Path:
    """Copy a zip entry by entry; `change` maps a name suffix to new bytes (None drops it)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            hit = next((k for k in change if info.filename.endswith(k)), None)
            if hit is not None:
                data = change[hit]
                if data is None:
                    continue
            method = zipfile.ZIP_DEFLATED if any(info.filename.endswith(c) for c in compress) \
                else zipfile.ZIP_STORED
            zout.writestr(info.filename, data, compress_type=method)
    return dst


# -- DCP ----------------------------------------------------------------------------------------

def dcp_save(state: dict, folder: Path, **kw) -> Path:
    import torch.distributed.checkpoint as dcp

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "torch.distributed is disabled ... single process"
        dcp.save(state, checkpoint_id=str(folder), **kw)
    return folder


def torch_metadata(folder: Path):
    """DCP's own reading of .metadata (plain pickle.load: fine on a file this test wrote)."""
    from torch.distributed.checkpoint import FileSystemReader

    return FileSystemReader(str(folder)).read_metadata()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _two_rank_worker(rank: int, port: int, out: str) -> None:
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        mesh = init_device_mesh("cpu", (2,))
        torch.manual_seed(0)
        state = {"model": {"w": distribute_tensor(torch.randn(8, 4), mesh, [Shard(0)]),
                           "b": distribute_tensor(torch.randn(6), mesh, [Shard(0)])},
                 "step": 7, "plain": torch.ones(3)}
        dcp.save(state, checkpoint_id=os.path.join(out, "collective"))
        dcp.save(state, checkpoint_id=os.path.join(out, "per-rank"), use_collectives=False)
    finally:
        dist.destroy_process_group()


def two_rank_dcp(out: Path) -> Path:
    """Two gloo ranks on localhost save DTensors sharded on dim 0: chunks in two rank files.
    Writes out/collective (one .metadata) and out/per-rank (__0.metadata, __1.metadata)."""
    import torch.multiprocessing as mp

    mp.spawn(_two_rank_worker, args=(free_port(), str(out)), nprocs=2, join=True)
    return out


def run_python(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True,
                          cwd=REPO, timeout=120)
