"""Builders for real and damaged checkpoints, and independent readings with the real library.

Good files are written by `safetensors.torch.save_file`; bad ones are real files damaged
afterwards, or raw bytes (8-byte little-endian length + JSON header + data) when the damage
cannot be produced any other way. Expected values come from `safetensors.safe_open`, never
from ckpt_browser itself.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_checkpoints"
RUN6 = SAMPLES / "tiny-llama-run" / "checkpoint-6"
RELEASE = SAMPLES / "tiny-llama-release"
DAMAGED = SAMPLES / "tiny-llama-damaged"
INDEX = "model.safetensors.index.json"
SHARDS = tuple(f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3))

# Bits per element of the 22 safetensors dtypes, written out from safetensors' `Dtype` enum
# (FORMATS.md "Safetensors"), not taken from ckpt_browser.model.
SAFETENSORS_BITS = {
    "BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8, "F8_E5M2": 8,
    "F8_E4M3": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16,
    "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32, "C64": 64, "F64": 64, "I64": 64,
    "U64": 64,
}


def craft(path: Path, header: dict | bytes, data: bytes = b"", n: int | None = None) -> Path:
    """Write a raw safetensors file. `n` overrides the length prefix."""
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    length = len(raw) if n is None else n
    path.write_bytes(struct.pack("<Q", length) + raw + data)
    return path


def sparse(path: Path, n: int, total: int) -> Path:
    """A file whose prefix claims `n` header bytes, extended to `total` bytes without disk use."""
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", n))
        f.truncate(total)
    return path


def entry(dtype: str, shape: list[int], begin: int, end: int) -> dict:
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def save(path: Path, tensors: dict, metadata: dict | None = None) -> Path:
    from safetensors.torch import save_file

    save_file(tensors, str(path), metadata=metadata)
    return path


def header_len(path: Path) -> int:
    with open(path, "rb") as f:
        return struct.unpack("<Q", f.read(8))[0]


def reference_tensors(path: Path) -> dict[str, tuple[str, tuple[int, ...]]]:
    """name -> (dtype, shape) as the real safetensors library sees the file."""
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as f:
        return {k: (f.get_slice(k).get_dtype(), tuple(f.get_slice(k).get_shape()))
                for k in f.keys()}


def reference_map(folder: Path, files) -> dict[str, tuple[str, tuple[int, ...], str]]:
    """name -> (dtype, shape, file) over several shards, as safe_open sees them."""
    out = {}
    for f in files:
        for name, (dtype, shape) in reference_tensors(folder / f).items():
            out[name] = (dtype, shape, f)
    return out


def reference_accepts(path: Path) -> bool:
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="numpy") as f:
            f.keys()
    except Exception:  # noqa: BLE001 - SafetensorError, or OSError for a bad length
        return False
    return True


def reference_totals(files) -> dict:
    """tensors / params / bytes / by_dtype computed by loading the tensors with torch."""
    from safetensors import safe_open

    out = {"tensors": 0, "params": 0, "bytes": 0, "by_dtype": {}}
    for path in files:
        with safe_open(str(path), framework="pt") as f:
            for k in f.keys():
                t = f.get_tensor(k)
                row = out["by_dtype"].setdefault(f.get_slice(k).get_dtype(),
                                                 {"tensors": 0, "params": 0, "bytes": 0})
                for d in (out, row):
                    d["tensors"] += 1
                    d["params"] += t.numel()
                    d["bytes"] += t.numel() * t.element_size()
    return out


def copy_sample(src: Path, dst: Path, skip: tuple[str, ...] = ()) -> Path:
    dst.mkdir(parents=True, exist_ok=True)
    for p in src.iterdir():
        if p.is_file() and p.name not in skip:
            shutil.copy2(p, dst / p.name)
    return dst


def write_index(folder: Path, weight_map: dict[str, str], total_size: int | None = None,
                name: str = INDEX) -> Path:
    meta = {} if total_size is None else {"total_size": total_size}
    path = folder / name
    path.write_text(json.dumps({"metadata": meta, "weight_map": weight_map}, indent=2))
    return path


def sharded(folder: Path, shards: dict[str, dict], index: bool = True,
            weight_map: dict[str, str] | None = None, total_size: int | None = None) -> Path:
    """Write real shards with save_file and (optionally) an index the way HF writes it."""
    folder.mkdir(parents=True, exist_ok=True)
    wm: dict[str, str] = {}
    size = 0
    for fname, tensors in shards.items():
        save(folder / fname, tensors, {"format": "pt"})
        for k, t in tensors.items():
            wm[k] = fname
            size += t.numel() * t.element_size()
    if index:
        write_index(folder, wm if weight_map is None else weight_map,
                    size if total_size is None else total_size)
    return folder


def three_shards(folder: Path, **kw) -> Path:
    """A clean 3-shard checkpoint with an index, mixing F32, F16, F64 and BOOL."""
    import torch

    return sharded(folder, {
        "model-00001-of-00003.safetensors": {"a.weight": torch.randn(4, 4),
                                             "a.bias": torch.randn(4)},
        "model-00002-of-00003.safetensors": {"b.weight": torch.randn(8, 4).half()},
        "model-00003-of-00003.safetensors": {"c.weight": torch.randn(2, 2, dtype=torch.float64),
                                             "c.mask": torch.ones(3, dtype=torch.bool)},
    }, **kw)


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ckpt_browser", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=60)


NOBODY = 65534


def unprivileged(fn):
    """Run fn() in a forked child that, when we are root, first drops to `nobody`,
    so file modes apply (root reads anything). Returns fn()'s JSON-able result.
    Forking (no exec) keeps the loaded modules: /root's interpreter is not reachable by nobody."""
    import io
    import json as _json

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        code = 0
        try:
            os.close(r)
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)
            out = fn()
        except BaseException as e:  # noqa: BLE001 - report anything to the parent
            out, code = {"exception": repr(e)}, 1
        with io.FileIO(w, "w") as pipe:
            pipe.write(_json.dumps(out).encode())
        os._exit(code)
    os.close(w)
    with io.FileIO(r, "r") as pipe:
        data = pipe.readall()
    os.waitpid(pid, 0)
    return _json.loads(data)


def locked_file(tensors: dict) -> Path:
    """A real safetensors file with mode 000, in a folder `nobody` can enter."""
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="ckpt-locked-"))
    folder.chmod(0o755)
    path = save(folder / "locked.safetensors", tensors)
    path.chmod(0)
    return path
