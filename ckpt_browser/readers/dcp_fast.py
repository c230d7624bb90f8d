"""A big DCP `.metadata` read by the C unpickler, in a child process.

The restricted unpickler is pure Python: 100,000 tensor keys (a 24 MB .metadata) take it
7 s, where torch's plain `pickle.load` takes 1.5. The C unpickler is as restricted through
`find_class` (every global a real file names maps to our inert records, anything else is
refused), but it hashes dict keys in C with no depth check: a 2 MB pickle of a tuple nested a
million deep used as a key crashes the process, and keys that share one hash make it
quadratic. So it runs in a child, on the bytes the parent already read, with memory and CPU
limits; whatever the child does not finish cleanly (a refused global, a crash, a limit, any
oddity in the file) is read again the safe way in this process, which reports it. Only files
of FAST_MIN bytes and up go this way: below that the child costs more than it saves.

CKPT_BROWSER_DCP_FAST=0 turns it off.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

from ckpt_browser.model import Problem
from ckpt_browser.standins import DcpChunk, DcpEntry

FAST_MIN = 1 << 20  # bytes of .metadata
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# the child: no site-packages of the user's (-I), this package from where the parent has it
CHILD = ("import sys; sys.path.insert(0, sys.argv[1]); "
         "from ckpt_browser.readers.dcp import fast_child; fast_child(sys.argv[2])")


class Fast:
    """What the child found in one .metadata: as read_dcp's safe path would."""

    def __init__(self, repeated: bool, version: str | None, entries: dict[str, DcpEntry],
                 problems: list[Problem]) -> None:
        self.repeated, self.version = repeated, version
        self.entries, self.problems = entries, problems


def enabled(size: int) -> bool:
    return size >= FAST_MIN and os.environ.get("CKPT_BROWSER_DCP_FAST", "1") != "0"


def read_fast(data: bytes, name: str) -> Fast | None:
    """The metadata's entries, read by the child; None when it did not finish cleanly."""
    timeout = 10 + 2 * len(data) / (1 << 20)  # ~0.1 s per MiB on an idle core
    try:
        done = subprocess.run([sys.executable, "-I", "-c", CHILD, ROOT, name], input=data,
                              capture_output=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    try:
        doc = json.loads(done.stdout)
        return Fast(doc["repeated"], doc["version"], _entries(doc["entries"]),
                    [Problem(*p) for p in doc["problems"]])
    except (ValueError, KeyError, TypeError):
        return None


def _entries(rows) -> dict[str, DcpEntry]:
    out = {}
    for key, kind, dtype, shape, chunks in rows:
        out[key] = DcpEntry(key, kind, dtype, tuple(shape) if shape is not None else None,
                            tuple(DcpChunk(tuple(o), tuple(s), f, b, n)
                                  for o, s, f, b, n in chunks))
    return out


# --- the child (readers/dcp.py fast_child) ----------------------------------------------------

def start_child() -> bytes:
    """The .metadata's bytes from stdin; from here on, collection off and memory capped."""
    import gc

    gc.disable()  # a short-lived process building a million objects: nothing to collect
    data = sys.stdin.buffer.read()
    _limit_memory((1 << 30) + 64 * len(data))  # the real files take about 25x their size
    return data


def c_unpickle(data: bytes, records: dict):
    """The pickle in `data`, each global from `records` (DCP_GLOBALS' shape: a value, a
    recorder `fn(u, args)`, or one with a `record` (kind, class) attribute); raises on any
    other global, a persistent id, or bytes after the end."""
    import pickle

    found = _globals(records)

    class Unpickler(pickle.Unpickler):
        def find_class(self, module: str, qual: str):
            got = found.get(f"{module}.{qual}")
            if got is None:
                raise pickle.UnpicklingError(f"{module}.{qual} is not a DCP global")
            return got

        def persistent_load(self, pid):
            raise pickle.UnpicklingError("persistent id")

    f = io.BytesIO(data)
    obj = Unpickler(f).load()
    if f.read(1):
        raise pickle.UnpicklingError("bytes after the pickle's end")
    return obj


def write_result(repeated: bool, version: str | None, entries: dict[str, DcpEntry],
                 problems: list[Problem]) -> None:
    rows = [[e.key, e.kind, e.dtype, e.shape,
             [[c.offsets, c.sizes, c.file, c.offset, c.length] for c in e.chunks]]
            for e in entries.values()]
    doc = {"repeated": repeated, "version": version, "entries": rows,
           "problems": [[p.severity, p.file, p.message] for p in problems]}
    sys.stdout.buffer.write(json.dumps(doc).encode())  # json.dump writes it piece by piece


def _globals(records: dict) -> dict:
    """The records as the C unpickler calls them: a record's class makes our record (NEWOBJ
    calls its __new__, REDUCE the class), a recorder is called with the arguments, a value
    (a dtype tag) is itself."""
    out = {}
    for qual, spec in records.items():
        if isinstance(spec, str):
            out[qual] = spec
        elif getattr(spec, "record", None) is not None:
            out[qual] = _maker(*spec.record)
        else:
            out[qual] = _caller(spec)
    return out


def _limit_memory(most: int) -> None:
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (most, most))
    except (ImportError, ValueError, OSError):  # not on this system: the timeout still bounds it
        pass


class _Frozen(type):
    """A record's maker: a BUILD on the class itself cannot set its attributes."""

    def __setattr__(cls, name, value):
        raise TypeError("read-only")


def _maker(kind: str, cls):
    def __new__(_, *args, **kwargs):
        return cls(kind)
    return _Frozen(f"new_{kind}", (), {"__new__": __new__, "__slots__": ()})


def _caller(fn):
    def call(*args):
        got = fn(None, args)
        if got is None:
            raise ValueError("unexpected arguments")
        return got
    return call
