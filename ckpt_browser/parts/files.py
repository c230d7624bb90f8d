"""Reading state files once each, within size caps, with the restricted readers only."""

from __future__ import annotations

import functools
import io
import json
import os
import struct
import zipfile
import zlib
from collections.abc import Callable

from ckpt_browser import limits
from ckpt_browser.model import ERROR, Problem
from ckpt_browser.readers.pickle_safe.policy import describe
from ckpt_browser.readers.regular import open_regular
from ckpt_browser.readers.zipentries import read_member
from ckpt_browser.standins import (
    DcpCheckpoint,
    PickleFile,
    TensorRef,
    int_from_text,
)

_STRUCT = {"F64": "d", "F32": "f", "F16": "e", "I64": "q", "I32": "i", "I16": "h", "I8": "b",
           "U8": "B", "U16": "H", "U32": "I", "U64": "Q", "BOOL": "?"}


class StateFiles:
    """Reads each state file once; remembers every PickleFile / DcpCheckpoint and problem."""

    def __init__(self, root: str, max_json: int, ckpt=None) -> None:
        self.root = root
        self.max_json = max_json
        self._cache: dict[str, object] = {}
        self.read: list = []
        self.problems: list[Problem] = []
        self._handles: dict[str, object] = {}  # files whose scalar tensors are being read
        self.ckpt = ckpt  # the checkpoint whose files are read (build_content reads its parts)
        if ckpt is not None and os.path.abspath(ckpt.layout.root) == os.path.abspath(root):
            self._preload(ckpt)

    def _preload(self, ckpt) -> None:
        """What the checkpoint already read (each file once): its problems are the
        checkpoint's, so they are not repeated here."""
        for f in ckpt.files:
            src = f.source
            if isinstance(src, PickleFile):
                self._cache[f.name] = src
                self.read.append(src)
            elif isinstance(src, DcpCheckpoint):
                self._cache[f"dcp:{src.folder}"] = src
                self.read.append(src)

    def close(self) -> None:
        for f in self._handles.values():
            f.close()
        self._handles.clear()

    def pickle(self, name: str) -> PickleFile:
        if name not in self._cache:
            from ckpt_browser.readers.torchfile import read_pickle_file

            try:
                pf = read_pickle_file(os.path.join(self.root, name), name)
            except Exception as e:  # noqa: BLE001 - a reader bug must not hide the other components
                pf = PickleFile(name, "pickle", problems=(Problem(ERROR, name, f"not read: {e}"),))
            self._cache[name] = pf
            self.read.append(pf)
            self.problems.extend(pf.problems)
        return self._cache[name]

    def dcp(self, rel: str) -> DcpCheckpoint:
        key = f"dcp:{rel}"
        if key not in self._cache:
            from ckpt_browser.readers.dcp import read_dcp

            try:
                d = read_dcp(os.path.join(self.root, rel) if rel else self.root, rel)
            except Exception as e:  # noqa: BLE001 - as in pickle(): the other components still show
                d = DcpCheckpoint(rel, problems=(Problem(ERROR, rel or None, f"not read: {e}"),))
            self._cache[key] = d
            self.read.append(d)
            self.problems.extend(d.problems)
        return self._cache[key]

    def json(self, name: str, kinds: tuple[type, ...] = (dict,)) -> tuple:
        """(document, why it is unreadable); a document of another type than `kinds` is
        unreadable."""
        key = f"json:{name}:{','.join(k.__name__ for k in kinds)}"
        if key not in self._cache:
            self._cache[key] = read_json(os.path.join(self.root, name), self.max_json, kinds)
            if self._cache[key][1]:
                self.problems.append(Problem(ERROR, name, self._cache[key][1]))
        return self._cache[key]

    def dcp_value(self, rel: str, entry) -> object:
        """A non-tensor DCP item's value, or a label for tensors. Each item is a standalone
        torch.save zip inside a rank file (FORMATS.md "DCP"): read it with the restricted
        unpickler."""
        if entry.kind == "tensor":
            return f"tensor {entry.dtype}{list(entry.shape or ())}"
        chunk = entry.chunks[0] if entry.chunks else None
        most = limits.LIMITS.dcp_item_bytes
        if chunk is None or chunk.file is None or not 0 < (chunk.length or 0) <= most:
            return None
        name = f"{rel}/{chunk.file}" if rel else chunk.file
        try:
            with open_regular(os.path.join(self.root, name)) as f:
                f.seek(chunk.offset)
                blob = f.read(chunk.length)
            with zipfile.ZipFile(io.BytesIO(blob)) as zf:
                pkl = next((i for i in zf.infolist() if i.filename.endswith("/data.pkl")), None)
                if pkl is None or pkl.file_size > most:
                    return None
                data = read_member(zf, pkl, most)
        except (OSError, zipfile.BadZipFile, ValueError, EOFError, RuntimeError,
                NotImplementedError, zlib.error):
            return None
        from ckpt_browser.readers.pickle_safe import read_pickle_bytes  # only when a DCP is read

        obj, unsafe, problems = read_pickle_bytes(data, f"{name} ({entry.key})")
        if unsafe:
            self.problems.append(Problem(ERROR, name, f"unsafe: item {entry.key} asks to run "
                                         f"{describe(unsafe)} when unpickled; not run"))
            return f"unsafe call {unsafe[0]} (not run)"
        self.problems.extend(problems)  # warnings too: a hash flood, an int too long to print
        return obj if not any(p.severity == ERROR for p in problems) else None

    def scalar(self, pf: PickleFile, ref) -> object:
        """The value of a one-element tensor, read from its storage bytes; plain values pass."""
        if not isinstance(ref, TensorRef):
            return ref
        fmt = _STRUCT.get(ref.dtype)
        where = pf.storages.get(ref.storage_key)
        if ref.numel != 1 or where is None or (fmt is None and ref.dtype != "BF16"):
            return None
        size = 2 if ref.dtype == "BF16" else struct.calcsize(fmt)
        begin = where[0] + ref.storage_offset * size
        if ref.storage_offset * size + size > where[1]:
            return None
        try:
            f = self._handles.get(pf.name)
            if f is None:
                f = self._handles[pf.name] = open_regular(os.path.join(self.root, pf.name))
            f.seek(begin)
            raw = f.read(size)
        except OSError:
            return None
        if len(raw) != size:
            return None
        if ref.dtype == "BF16":
            return struct.unpack("<f", b"\0\0" + raw)[0]
        return struct.unpack("<" + fmt, raw)[0]

    def scalars(self, pf: PickleFile | None) -> Callable:
        """`scalar` bound to one file, as jsonable() takes it; without a file, no values."""
        return functools.partial(self.scalar, pf) if pf is not None else (lambda v: None)


def read_json(path: str, limit: int, kinds: tuple[type, ...] = (dict,)) -> tuple:
    try:
        size = os.path.getsize(path)
        if size > limit:
            return None, (f"{size:,} bytes, over the {limit:,}-byte limit for JSON; not read "
                          f"({limits.env('json_bytes')} raises it)")
        with open_regular(path) as f:
            # NaN and Infinity as the frameworks read them (json.loads): the Trainer writes a
            # NaN grad_norm or loss into trainer_state.json and resumes from it all the same
            doc = json.loads(f.read().decode("utf-8"), parse_constant=float,
                             parse_int=int_from_text)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        return None, f"not valid JSON: {e}"
    except OSError as e:
        return None, f"cannot read it: {e.strerror or e}"
    if not isinstance(doc, kinds):
        return None, "not a JSON object" if kinds == (dict,) else "not a JSON object or list"
    return doc, ""
