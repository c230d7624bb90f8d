"""Our own safetensors header reader: header only, never tensor bytes.

Rules follow the reference implementation (FORMATS.md "Safetensors"). Every problem
is recorded on the returned FileInfo instead of raised, so one bad shard
never hides the others.
"""

from __future__ import annotations

import json
import os
import struct
from collections import Counter
from operator import attrgetter

from ckpt_browser import limits
from ckpt_browser.errors import ShardError
from ckpt_browser.model import DTYPE_BITS, ERROR, FileInfo, Problem, TensorInfo
from ckpt_browser.readers.regular import missing_reason, open_regular
from ckpt_browser.standins import int_from_text

_by_offset = attrgetter("begin", "end", "name")
MAGIC_LEN = 8


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


def _reject_constant(token: str):
    raise ValueError(f"{token} is not valid JSON")


def _loads(text: str):
    """At C speed; only a header with a number Python refuses to parse (over 4,300 digits)
    is parsed again, with such numbers as HugeInt, so the tensor's check names it."""
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except ValueError as e:
        if "digits" not in str(e):
            raise
    return json.loads(text, parse_constant=_reject_constant, parse_int=int_from_text)


def _decode(raw: bytes) -> dict:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ShardError(f"header is not UTF-8 (byte {e.start})") from None
    try:
        header = _loads(text)
    except (ValueError, RecursionError) as e:
        raise ShardError(f"header is not valid JSON: {e}") from None
    if not isinstance(header, dict):
        raise ShardError(f"header is a JSON {type(header).__name__}, not an object")
    return header


def _duplicates(text: bytes, header: dict) -> list[str]:
    """Names written twice in the header (json.loads silently keeps the last).

    Fast path: each entry has one "data_offsets" key, so if the raw text holds
    exactly as many as the parsed dict has tensors there can be no duplicate.
    """
    tensors = len(header) - ("__metadata__" in header)
    if (text.count(b'"data_offsets"') == tensors and text.count(b'"dtype"') == tensors
            and b"\\u" not in text):  # a \u-escaped key would not be counted
        return []
    dups: list[str] = []

    def hook(pairs):
        counts = Counter(k for k, _ in pairs)
        dups.extend(k for k, c in counts.items() if c > 1)
        return dict(pairs)

    json.loads(text, object_pairs_hook=hook, parse_int=int_from_text)
    return dups


def parse_header(raw: bytes, *, name: str, path: str, size: int, n: int) -> FileInfo:
    problems: list[Problem] = []
    try:
        header = _decode(raw)
    except ShardError as e:
        return _failed(name, path, size, n, str(e))
    for dup in _duplicates(raw, header):
        problems.append(Problem(ERROR, name, f"{dup!r} is written twice in the header; "
                                "loaders silently keep the last one"))
    metadata = header.pop("__metadata__", None)
    if metadata is not None and not (
        isinstance(metadata, dict) and all(isinstance(v, str) for v in metadata.values())
    ):
        problems.append(Problem(ERROR, name, "__metadata__ must map strings to strings"))
        metadata = None
    tensors = _tensors(header, name, problems)
    tensors.sort(key=_by_offset)
    problems.extend(_check_layout(tensors, name, size, n))
    return FileInfo(name=name, path=path, size=size, header_bytes=n, metadata=metadata,
                     tensors=tuple(tensors), problems=tuple(problems))


U64 = 2**64


def _tensors(header: dict, file: str, problems: list[Problem]) -> list[TensorInfo]:
    """The hot loop (94,000 entries on a big checkpoint): inline checks for the common
    well-formed entry; anything unusual goes through _tensor for a precise message."""
    tensors = []
    bits_of = DTYPE_BITS.get
    for tname, entry in header.items():
        try:
            dtype, shape, (begin, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
            bits = bits_of(dtype)
            numel = 1
            for d in shape:
                if type(d) is not int or not 0 <= d < U64:
                    raise ValueError
                numel *= d
            if (bits is None or type(shape) is not list or type(begin) is not int
                    or type(end) is not int or not 0 <= begin <= end < U64
                    or numel * bits != (end - begin) * 8):
                raise ValueError
            tensors.append(TensorInfo(tname, dtype, tuple(shape), file, begin, end, numel))
        except (TypeError, KeyError, ValueError):
            try:
                tensors.append(_tensor(tname, entry, file))
            except ShardError as e:
                problems.append(Problem(ERROR, file, str(e)))
    return tensors


def _tensor(tname: str, entry, file: str) -> TensorInfo:
    """Validate one header entry. Plain type checks: this runs 94,000 times per big checkpoint."""
    if type(entry) is not dict:
        raise ShardError(f"tensor {tname!r}: entry is not an object")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if type(dtype) is not str or (bits := DTYPE_BITS.get(dtype)) is None:
        raise ShardError(f"tensor {tname!r}: unknown dtype {dtype!r}")
    if type(shape) is not list:
        raise ShardError(f"tensor {tname!r}: shape {_shown(shape)} is not a list of "
                         "non-negative integers")
    numel = 1
    for d in shape:
        if type(d) is not int or d < 0 or d >= U64:
            raise ShardError(f"tensor {tname!r}: shape {_shown(shape)} is not a list of "
                             "non-negative integers below 2**64")
        numel *= d
    if type(offsets) is not list or len(offsets) != 2:
        raise ShardError(f"tensor {tname!r}: data_offsets {_shown(offsets)} is not [begin, end]")
    begin, end = offsets
    if type(begin) is not int or type(end) is not int or not 0 <= begin <= end < U64:
        raise ShardError(f"tensor {tname!r}: data_offsets {_shown(offsets)} is not [begin, end] "
                         "with 0 <= begin <= end < 2**64")
    nbits = numel * bits
    if nbits % 8:
        raise ShardError(f"tensor {tname!r}: {numel} x {dtype} does not end on a byte boundary")
    if nbits >> 3 != end - begin:
        need = f"{nbits >> 3:,}" if nbits < 2**200 else "more than 2**64"  # 4,300+ digits fail
        raise ShardError(f"tensor {tname!r}: shape {_shown(shape)} of {dtype} needs {need} "
                         f"bytes but data_offsets span {end - begin:,}")
    return TensorInfo(tname, dtype, tuple(shape), file, begin, end, numel)


def _shown(value) -> str:
    """A bounded repr for messages: a shape may hold 20,000 dimensions or 1,000-digit ints."""
    text = repr(value)
    return text if len(text) <= 120 else f"{text[:100]}... ({len(text):,} characters)"


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
