"""What the safe pickle readers return instead of real objects.

Nothing here is ever executed from a file: the restricted unpickler builds plain
containers (dict, list, tuple, str, int, float, bool, None, bytes) and these inert
records. Shared by the torch-file reader, the DCP reader and the framework analysis.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ckpt_browser import limits


@dataclass(frozen=True)
class TensorRef:
    """A tensor the pickle describes; its bytes stay in the file."""

    dtype: str  # safetensors spelling: "F32", "BF16", "F8_E4M3", "I64", "U8", ...
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    storage_key: str  # torch zip: the record is "<root>/data/<storage_key>"
    storage_offset: int = 0  # in elements
    storage_numel: int | None = None  # elements in the whole storage, as the pickle claims
    requires_grad: bool = False
    is_parameter: bool = False

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass(frozen=True)
class NumpyArray:
    """A numpy array (RNG state): dtype and shape only."""

    dtype: str  # numpy spelling, e.g. "uint32"
    shape: tuple[int, ...]


_LOG10_2 = 0.30102999566398120


@dataclass(frozen=True)
class HugeInt:
    """An integer too long to show (or, past 4,300 digits, even to print): its size only."""

    digits: int
    negative: bool = False
    exact: bool = True  # False: `digits` may be one short (counting it would take too long)

    def __str__(self) -> str:
        sign = "a negative" if self.negative else "an"
        return f"{sign} integer of {'about ' if not self.exact else ''}{self.digits:,} digits"

    __repr__ = __str__


def bounded_int(n: int) -> int | HugeInt:
    """n itself, or a HugeInt when it has more than `LIMITS.int_digits` digits."""
    bits = abs(n).bit_length()
    if bits <= 3300:  # under 1,000 digits: the common case costs one bit_length
        return n
    low = int((bits - 1) * _LOG10_2) + 1  # the digits of 2**(bits - 1): n has low or low + 1
    if bits > 400_000:  # 10**low would take seconds to compute
        return HugeInt(low, n < 0, False)
    digits = low + 1 if abs(n) >= 10**low else low
    return n if digits <= limits.LIMITS.int_digits else HugeInt(digits, n < 0)


def int_from_text(text: str | bytes) -> int | HugeInt:
    """A decimal integer as JSON or pickle's protocol 0 write it; past `LIMITS.int_digits`
    digits it is never converted (Python refuses past 4,300)."""
    most = limits.LIMITS.int_digits
    if len(text) <= most:  # the common case: one len() before the parse
        return int(text)
    digits: str | bytes
    if isinstance(text, bytes):
        digits = text.strip().lstrip(b"+-").lstrip(b"0")
    else:
        digits = text.strip().lstrip("+-").lstrip("0")
    if len(digits) <= most:
        return int(text)
    if not digits.isdigit():
        raise ValueError(f"not a decimal integer ({len(text):,} characters)")
    return HugeInt(len(digits), text.strip()[:1] in ("-", b"-"))


@dataclass(frozen=True)
class Opaque:
    """An object of a class we do not build: its dotted name, constructor args and state."""

    qualname: str
    args: tuple = ()
    state: Any = None

    @property
    def fields(self) -> dict:
        """The object's attributes when its state is a dict (dataclasses, Namespace ...)."""
        if isinstance(self.state, dict):
            return self.state
        if isinstance(self.state, tuple) and self.state and isinstance(self.state[-1], dict):
            return self.state[-1]
        return {}


@dataclass(frozen=True)
class UnsafeCall:
    """A call the pickle asked for that could run code (os.system, eval ...). Never made."""

    qualname: str
    args: tuple = ()


@dataclass(frozen=True)
class PickleFile:
    """One pickled file (torch zip, legacy torch, or plain pickle), read without executing it."""

    name: str  # relative to the checkpoint folder
    kind: str  # "torch-zip" | "torch-legacy" | "pickle" | "torchscript" | "export" (model.FORMATS)
    obj: Any = None  # the object graph, None when nothing could be read
    tensors: tuple[tuple[str, TensorRef], ...] = ()  # (dotted path in obj, tensor)
    unsafe: tuple[str, ...] = ()  # dotted names of callables that would have run code
    size: int | None = None
    # torch zip: storage key -> (absolute byte offset of the record's data in the file, length)
    storages: dict[str, tuple[int, int]] = field(default_factory=dict)
    problems: tuple = ()  # tuple[model.Problem, ...]


@dataclass(frozen=True)
class DcpChunk:
    offsets: tuple[int, ...]  # where the chunk sits in the global tensor
    sizes: tuple[int, ...]
    file: str | None  # rank file, e.g. "__0_0.distcp", relative to the DCP folder
    offset: int | None  # byte range of its blob inside that file
    length: int | None


@dataclass(frozen=True)
class DcpEntry:
    key: str  # flattened state-dict key, e.g. "optimizer.state.layers.0.w.exp_avg"
    kind: str  # "tensor" | "bytes"
    dtype: str | None = None  # safetensors spelling for tensors
    shape: tuple[int, ...] | None = None  # global shape
    chunks: tuple[DcpChunk, ...] = ()


@dataclass(frozen=True)
class DcpCheckpoint:
    folder: str  # relative to the checkpoint root ("" for the root itself)
    entries: dict[str, DcpEntry] = field(default_factory=dict)
    files: dict[str, int] = field(default_factory=dict)  # rank file -> size on disk
    version: str | None = None
    problems: tuple = ()  # tuple[model.Problem, ...]
    unsafe: tuple[str, ...] = ()  # dotted names in .metadata that could run code (never run)
