"""Our own safetensors header reader: header only, never tensor bytes.

A header is accepted exactly when the Rust loader (`safe_open`) accepts it (FORMATS.md
"Safetensors"); where Python's json would read it differently, the exact reading in
stjson.py and stheader.py decides. Every problem is recorded on the returned FileInfo instead
of raised, so one bad shard never hides the others.
"""

from __future__ import annotations

import os
import struct
from operator import attrgetter

from ckpt_browser import limits
from ckpt_browser.errors import ShardError
from ckpt_browser.model import DTYPE_BITS, ERROR, FileInfo, Problem, TensorInfo
from ckpt_browser.readers import stheader, stjson
from ckpt_browser.readers.regular import missing_reason, open_regular

_by_offset = attrgetter("begin", "end", "name")
MAGIC_LEN = 8
U64 = 2**64


def read_header(path: str, name: str) -> FileInfo:
    """Read and validate one file's header. Never raises for bad content."""
    try:
        with open_regular(path, buffering=0) as f:  # unbuffered: read the header, nothing past it
            size = os.fstat(f.fileno()).st_size
            n, raw = _read_raw_header(f, size)
    except FileNotFoundError:
        return _failed(name, path, None, None, missing_reason(path))
    except PermissionError:
        return _failed(name, path, None, None, "cannot read the file: permission denied")
    except IsADirectoryError:
        return _failed(name, path, None, None, "is a folder, not a safetensors file")
    except OSError as e:
        return _failed(name, path, None, None, f"cannot read the file: {e.strerror or e}")
    except ShardError as e:
        return _failed(name, path, size, None, str(e))
    return parse_header(raw, name=name, path=path, size=size, n=n)


def _read_raw_header(f, size: int) -> tuple[int, bytes]:
    if size < MAGIC_LEN:
        raise ShardError(f"header too small: the file has {size} bytes, "
                         f"a safetensors file needs at least {MAGIC_LEN}")
    (n,) = struct.unpack("<Q", _read_exact(f, MAGIC_LEN))
    most = limits.LIMITS.safetensors_header  # safetensors' MAX_HEADER_SIZE, itself allowed
    if n > most:
        raise ShardError(f"header claims {n:,} bytes, over the {most:,}-byte limit "
                         "(not a safetensors file, or a corrupt one)")
    if MAGIC_LEN + n > size:
        raise ShardError(f"header claims {n:,} bytes but the file has only "
                         f"{size - MAGIC_LEN:,} after the length prefix (truncated?)")
    return n, _read_exact(f, n)


def _read_exact(f, n: int) -> bytes:
    """Unbuffered reads may come back short (network filesystems); loop until n bytes."""
    chunks = []
    while n:
        chunk = f.read(n)
        if not chunk:
            raise ShardError("the file shrank while it was being read")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _failed(name, path, size, n, message) -> FileInfo:
    return FileInfo(name=name, path=path, size=size, header_bytes=n,
                     problems=(Problem(ERROR, name, message),))


def parse_header(raw: bytes, *, name: str, path: str, size: int, n: int) -> FileInfo:
    """Problems are those the Rust loader would refuse the file for, each in words, plus what
    it lets through but other readers see differently (a name written twice)."""
    try:
        _within_budget(raw)
        text = _text(raw)
        header = stjson.loads(text)
        fast = _fast(header, text, name) if type(header) is dict else None
        if fast is None:  # anything unusual: read it again exactly as the loader does
            header = None  # free it before the second parse
            metadata, tensors, problems = stheader.read_exact(stjson.loads_exact(text), name)
        else:
            (metadata, tensors), problems = fast, []
    except ShardError as e:
        return _failed(name, path, size, n, str(e))
    tensors.sort(key=_by_offset)
    problems.extend(_check_layout(tensors, name, size, n))
    return FileInfo(name=name, path=path, size=size, header_bytes=n, metadata=metadata,
                     tensors=tuple(tensors), problems=tuple(problems))


def _text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ShardError(f"header is not UTF-8 (byte {e.start})") from None


def _within_budget(raw: bytes) -> None:
    """Bound the parse by what the bytes can hold before parsing: every JSON key or value
    but the first follows one of , : [ { outside strings, so their count bounds the objects
    Python would build (a 94,000-tensor header holds about 1,100,000)."""
    most = limits.LIMITS.safetensors_values
    if len(raw) < most:  # each counted byte is one byte: a short header cannot be over
        return
    values = raw.count(b",") + raw.count(b":") + raw.count(b"[") + raw.count(b"{") + 1
    if values > most:
        raise ShardError(f"header holds up to {values:,} JSON values, over the {most:,} limit "
                         f"(about {most // 12:,} tensors); not read "
                         f"({limits.env('safetensors_values')} raises it)")


def _fast(header: dict, text: str, file: str) -> tuple[dict | None, list[TensorInfo]] | None:
    """The common header, at C speed where it can be: every entry exactly {dtype, shape,
    data_offsets} and valid, metadata strings, no key twice, nothing serde_json reads
    differently. None for anything else, which `stheader.read_exact` then reads and names."""
    if not stjson.plain(text):
        return None
    keys = len(header)
    metadata = header.pop("__metadata__", None)
    if metadata is not None:
        if type(metadata) is not dict or not all(type(v) is str for v in metadata.values()):
            return None
        keys += len(metadata)
    tensors = []
    bits_of = DTYPE_BITS.get
    try:  # the hot loop: 94,000 entries on a big checkpoint
        for tname, entry in header.items():
            dtype, shape, (begin, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
            bits = bits_of(dtype)
            numel = 1
            for d in shape:
                if type(d) is not int or not 0 <= d < U64:
                    raise ValueError
                numel *= d
            if (bits is None or len(entry) != 3 or type(shape) is not list
                    or type(begin) is not int or type(end) is not int
                    or not 0 <= begin <= end < U64 or numel * bits != (end - begin) * 8
                    or (not numel and len(shape) > 2)):  # a 64-bit overflow before a 0?
                raise ValueError
            tensors.append(TensorInfo(tname, dtype, tuple(shape), file, begin, end, numel))
    except (TypeError, KeyError, ValueError):
        return None
    # Each key is followed by one ':', so more of them than keys parsed and ':'s in their
    # strings means a key written twice, which json.loads hid by keeping the last. (With a
    # \u escape a ':' may be written \u003a, and then any mismatch is read exactly.)
    colons, expected = text.count(":"), keys + 3 * len(tensors)
    if colons != expected and ("\\u" in text or colons != expected + _colons(header, metadata)):
        return None
    return metadata, tensors


def _colons(names: dict, metadata: dict | None) -> int:
    """The ':'s inside the names and metadata strings (names such as 'a:b', URLs)."""
    found = sum(name.count(":") for name in names)
    return found + sum(k.count(":") + v.count(":") for k, v in (metadata or {}).items())


def _check_layout(tensors: list[TensorInfo], file: str, size: int, n: int) -> list[Problem]:
    """Offsets start at 0, are contiguous with no gap or overlap, and cover the data exactly."""
    problems = []
    expected = 0
    for t in tensors:
        if t.begin > expected:
            problems.append(Problem(ERROR, file,
                                    f"gap of {t.begin - expected:,} bytes before tensor "
                                    f"{t.name!r} (data_offsets must be contiguous from 0)"))
        elif t.begin < expected:
            problems.append(Problem(ERROR, file, f"tensor {t.name!r} overlaps the previous tensor "
                                    f"by {expected - t.begin:,} bytes"))
        expected = max(expected, t.end)
    data = size - MAGIC_LEN - n
    if expected > data:
        problems.append(Problem(ERROR, file, f"truncated: tensors need {expected:,} data bytes "
                                f"but the file holds {data:,} ({expected - data:,} missing)"))
    elif expected < data:
        problems.append(Problem(ERROR, file, f"{data - expected:,} unexpected bytes after the "
                                "last tensor (the data must end exactly at the file end)"))
    return problems
