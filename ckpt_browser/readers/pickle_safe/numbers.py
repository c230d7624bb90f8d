"""The opcodes that read numbers from text or from unbounded byte runs, as a mixin of
SafeUnpickler: integers too long to show become a HugeInt (Python refuses to print past 4,300
digits, and to parse such text at all), memo indices stay below 2**63 (the C unpickler's
Py_ssize_t), and protocol 0 strings that are not ASCII are a warning, not a failure.

LONG1 needs nothing: its 255 bytes hold at most 614 digits.
"""

from __future__ import annotations

import pickle
import struct
from typing import Any, ClassVar

from ckpt_browser import limits
from ckpt_browser.readers.pickle_safe.host import UnpicklerHost
from ckpt_browser.standins import HugeInt, bounded_int, int_from_text

_MEMO_INDEX = 2**63


def _text_int(line: bytes):
    """int(line, 0) as pickle's INT and LONG read it, never converting more than
    `LIMITS.int_digits` decimal digits."""
    body = line.strip()
    if len(body) <= limits.LIMITS.int_digits:
        return int(body, 0)
    digits = body.lstrip(b"+-")
    if digits[:2].lower() in (b"0x", b"0o", b"0b"):  # power-of-two bases have no digit limit
        return bounded_int(int(body, 0))
    return int_from_text(body.replace(b"_", b""))


def _memo_index(line: bytes, what: str) -> int:
    body = line[:-1]
    if len(body.strip()) > 19:
        raise pickle.UnpicklingError(f"{what} index of {len(body):,} characters is out of range")
    i = int(body)
    if not 0 <= i < _MEMO_INDEX:
        raise pickle.UnpicklingError(f"{what} index {i} is out of range")
    return i


class Numbers(UnpicklerHost):
    """Mixed into a pickle._Unpickler that has `note(message)`."""

    dispatch: ClassVar[dict[int, Any]] = {}

    def _shown(self, n):
        if type(n) is HugeInt:
            self.note(f"{n} is shown by its length only (Python cannot print integers past "
                      "4,300 digits)")
        return n

    def load_int(self):
        data = self.readline()
        if data == b"00\n":
            self.append(False)
        elif data == b"01\n":
            self.append(True)
        else:
            self.append(self._shown(_text_int(data)))
    dispatch[pickle.INT[0]] = load_int

    def load_long(self):
        line = self.readline()[:-1]
        self.append(self._shown(_text_int(line[:-1] if line.endswith(b"L") else line)))
    dispatch[pickle.LONG[0]] = load_long

    def load_long4(self):
        (n,) = struct.unpack("<i", self.read(4))
        if n < 0:
            raise pickle.UnpicklingError("LONG pickle has negative byte count")
        data = self.read(n)
        if len(data) != n:
            raise EOFError
        self.append(self._shown(bounded_int(int.from_bytes(data, "little", signed=True))))
    dispatch[pickle.LONG4[0]] = load_long4

    def load_put(self):
        self.memo[_memo_index(self.readline(), "PUT")] = self.stack[-1]
    dispatch[pickle.PUT[0]] = load_put

    def load_get(self):
        i = _memo_index(self.readline(), "GET")
        try:
            self.append(self.memo[i])
        except KeyError:
            raise pickle.UnpicklingError(f"Memo value not found at index {i}") from None
    dispatch[pickle.GET[0]] = load_get

    # STRING, BINSTRING and SHORT_BINSTRING (Python 2's str) all decode through this
    def _decode_string(self, value: bytes):
        if self.encoding != "ASCII" or value.isascii():
            return super()._decode_string(value)
        try:
            text = value.decode("utf-8")
            how = "pickle.load fails on it and torch.load reads it as UTF-8 (shown so)"
        except UnicodeDecodeError:
            text = value.decode("latin-1")
            how = "pickle.load and torch.load both fail on it (shown as latin-1)"
        self.note(f"a Python 2 string (STRING/BINSTRING) holds bytes that are not ASCII: {how}; "
                  "torch.load may not build what this listing shows")
        return text
