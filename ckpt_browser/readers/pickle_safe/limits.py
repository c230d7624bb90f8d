"""What bounds one read: a file reader that enforces the size cap, the marker left where a cap
cut something, and a bounded repr for messages."""

from __future__ import annotations

import pickle
import reprlib
from typing import Any, BinaryIO

from ckpt_browser import limits
from ckpt_browser.standins import Opaque

# The caps themselves are fields of ckpt_browser.limits.Limits, read when a pickle is read.
MAX_NOTES = 20  # distinct warnings kept per pickle; the rest are counted
PRUNED_NODES = 1_000_000  # what is kept of a graph that broke the depth or paths cap


class Limit(pickle.UnpicklingError):
    """A size limit was reached; reading stops."""


class CappedReader:
    """A file wrapper that refuses to read past `limit` bytes (for pickles read from a file)."""

    def __init__(self, f: BinaryIO, limit: int | None = None):
        limit = limits.LIMITS.pickle_bytes if limit is None else limit
        self._f, self._left, self.limit = f, limit, limit

    def read(self, n: int = -1) -> bytes:
        if n < 0 or n > self._left:
            raise self._over()
        data = self._f.read(n)
        self._left -= len(data)
        return data

    def readline(self) -> bytes:
        line = self._f.readline(self._left + 1)
        if len(line) > self._left:
            raise self._over()
        self._left -= len(line)
        return line

    def _over(self) -> Limit:
        return Limit(f"pickle is larger than the {self.limit:,}-byte limit "
                     f"({limits.env('pickle_bytes')} raises it)")


def elided() -> Opaque:
    return Opaque("<elided>")  # a fresh one each time: BUILD may set its state


_short = reprlib.Repr()
_short.maxstring = _short.maxother = 60
_short.maxlevel = 3


def short(obj: Any) -> str:
    """A bounded one-line repr for messages."""
    try:
        text = _short.repr(obj)
    except Exception:  # noqa: BLE001 - a message must never fail
        text = f"<{type(obj).__name__}>"
    return text.replace("\n", " ")[:120]
