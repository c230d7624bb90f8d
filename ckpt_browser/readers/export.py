"""`torch.export.save` archives (`.pt2`): listed from their JSON configs, every pickle in them
read like any other, never loaded.

A PT2 archive is a zip whose root holds `archive_format` ("pt2"), each model's graph in
`models/<model>.json`, and each weight or constant under `data/weights/` or `data/constants/`,
described by `<model>_weights_config.json` and `<model>_constants_config.json` (name -> member,
dtype code, sizes). A plain tensor is a raw member: only its local header is read, to find
where its bytes are. What torch.export.load unpickles (torch/export/pt2_archive/_package.py)
goes through the restricted unpickler like any pickle: an entry saved with `use_pickle` (a
tensor subclass) is a torch.save archive it reads with torch.load(weights_only=False), an
`opaque_obj_*` constant a pickle it reads with pickle.loads, a `custom_obj_*` constant a
TorchScript pickle of a custom C++ class, and `data/sample_inputs/<model>.pt` a torch.save
archive it reads with torch.load, again with weights_only=False when that fails.
"""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass, field, replace
from typing import Any

from ckpt_browser import limits
from ckpt_browser.model import ERROR, INFO, WARNING, Problem
from ckpt_browser.readers.export_graph import read_program
from ckpt_browser.readers.zipentries import read_member
from ckpt_browser.standins import PickleFile, TensorRef

MAX_CONFIG = 64 * 2**20

# torch._export.serde.schema.ScalarType -> our dtype spelling
SCALAR_TYPES = {1: "U8", 2: "I8", 3: "I16", 4: "I32", 5: "I64", 6: "F16", 7: "F32", 8: "F64",
                9: "C32", 10: "C64", 11: "C128", 12: "BOOL", 13: "BF16", 28: "U16",
                29: "F8_E4M3", 30: "F8_E5M2", 31: "F8_E4M3FNUZ", 32: "F8_E5M2FNUZ",
                33: "F8_E8M0", 34: "U32", 35: "U64"}
FOLDERS = (("data/weights/", "_weights_config.json"), ("data/constants/", "_constants_config.json"))
# how torch.export.load reads a pickled member, by its name: (torchfile's way, what it is)
PICKLED = (("opaque_obj_", "pickle", "an opaque object constant, read with pickle.loads"),
           ("custom_obj_", "torchbind", "a custom-class constant, read by torch's C++ unpickler"),
           ("", "torch", "a pickled tensor, read with torch.load(weights_only=False)"))


def is_export(zf: zipfile.ZipFile) -> str | None:
    """The archive's root folder when it is a PT2 archive."""
    for info in zf.infolist()[:4096]:
        parts = info.filename.split("/")
        if len(parts) == 2 and parts[1] == "archive_format" and info.file_size <= 16:
            return parts[0]
    return None


@dataclass
class _Archive:
    """What is read of one PT2 archive. `locate(info)`: a member's (data start, length)."""

    f: Any
    zf: zipfile.ZipFile
    root: str
    name: str
    locate: Any
    read_file: Any  # torchfile.read_pickle_file_object, for the torch files inside
    obj: dict = field(default_factory=dict)
    storages: dict = field(default_factory=dict)
    problems: list = field(default_factory=list)
    unsafe: dict = field(default_factory=dict)
    pickles: int = 0  # pickled members read

    def member(self, rel: str) -> zipfile.ZipInfo | None:
        return self.zf.NameToInfo.get(f"{self.root}/{rel}")


def read_export(f, zf: zipfile.ZipFile, root: str, name: str, size: int, locate,
                read_file) -> PickleFile:
    """The weights and constants of a PT2 archive as tensor records, and what its pickles
    would run. `read_file` reads the torch files the archive holds (passed in: torchfile
    reads archives, and archives hold torch files)."""
    a = _Archive(f, zf, root, name, locate, read_file)
    models = _models(zf, root)
    for model in models:
        prefix = "" if len(models) == 1 else f"{model}."
        for folder, suffix in FOLDERS:
            _config(a, folder, f"{folder}{model}{suffix}", prefix)
            legacy = a.member(f"{folder}{model}.pt")  # before the configs: one torch.save
            if legacy is not None:
                _pickled(a, legacy, "torch", f"the {folder[5:-1]} of {model} (an older "
                         "layout), read with torch.load", prefix, list_tensors=True)
        inputs = a.member(f"data/sample_inputs/{model}.pt")
        if inputs is not None:
            _pickled(a, inputs, "torch", f"the sample inputs of {model}, read with torch.load")
        _program(a, f"models/{model}.json")
    detail = (f"a torch.export archive: {len(a.obj)} weights and constants; its program "
              "(models/*.json) is read for what torch would evaluate or call, never run")
    tensors = tuple((k, v) for k, v in a.obj.items() if type(v) is TensorRef)
    return PickleFile(name=name, kind="export", obj=a.obj, tensors=tensors, size=size,
                      storages=a.storages, unsafe=tuple(a.unsafe),
                      problems=tuple(a.problems) + (Problem(INFO, name, detail),))


def _models(zf: zipfile.ZipFile, root: str) -> list[str]:
    """Model names, from the configs and graphs present ("model" for torch.export.save)."""
    found: dict[str, None] = {}
    for n in zf.NameToInfo:
        rel = n[len(root) + 1:] if n.startswith(f"{root}/") else None
        if rel is None:
            continue
        for folder, suffix in FOLDERS + (("models/", ".json"), ("data/sample_inputs/", ".pt")):
            if rel.startswith(folder) and rel.endswith(suffix) and "/" not in rel[len(folder):]:
                found.setdefault(rel[len(folder):-len(suffix)], None)
    return [m for m in found if m]


def _config(a: _Archive, folder: str, rel: str, prefix: str) -> None:
    info = a.member(rel)
    if info is None or info.file_size > MAX_CONFIG:
        return
    try:
        doc = json.loads(read_member(a.zf, info, MAX_CONFIG))
    except (ValueError, UnicodeDecodeError, RecursionError):
        a.problems.append(Problem(WARNING, a.name, f"{info.filename} is not valid JSON"))
        return
    entries = doc.get("config") if isinstance(doc, dict) else None
    for key, entry in (entries.items() if isinstance(entries, dict) else ()):
        if not isinstance(entry, dict):
            continue
        ref: Any = _tensor(a, folder, str(key), entry)
        if entry.get("use_pickle"):
            member = a.member(f"{folder}{entry.get('path_name')}")
            how, what = next((h, w) for p, h, w in PICKLED
                             if str(entry.get("path_name")).startswith(p))
            if member is not None:
                _pickled(a, member, how, f"{key}: {what}")
            if ref is None:
                ref = f"{key}: {what.split(',')[0]}"
        if ref is not None:
            a.obj[prefix + str(key)] = ref


def _program(a: _Archive, rel: str) -> None:
    """The strings of a program that torch turns into code (export_graph.py)."""
    info = a.member(rel)
    if info is None:
        return
    if info.file_size > MAX_CONFIG:
        a.problems.append(Problem(WARNING, a.name, f"{info.filename} is over {MAX_CONFIG:,} "
                                  "bytes and not read: what it makes torch evaluate or call is "
                                  "not checked"))
        return
    try:
        program = read_program(read_member(a.zf, info, MAX_CONFIG).decode("utf-8"), rel)
    except (ValueError, UnicodeDecodeError, RecursionError):
        a.problems.append(Problem(WARNING, a.name, f"{info.filename} is not valid JSON "
                                  "(torch.export.load would fail on it)"))
        return
    if program.unsafe:
        shown = "; ".join(f"{k} ({w})" for k, w in list(program.unsafe.items())[:6])
        more = len(program.unsafe) - 6
        a.problems.append(Problem(ERROR, a.name, f"unsafe: its program {rel} holds code torch "
                                  f"would run: {shown}{f' and {more:,} more' if more > 0 else ''}"
                                  " (not run here)"))
        a.unsafe.update(dict.fromkeys(program.unsafe))


def _tensor(a: _Archive, folder: str, key: str, entry: dict) -> TensorRef | None:
    """The tensor its tensor_meta describes; located in the file when stored raw."""
    meta = entry.get("tensor_meta")
    if not isinstance(meta, dict):
        return None
    code, sizes = meta.get("dtype"), meta.get("sizes")
    # an int code only: a list or object there is unhashable (it raised TypeError here)
    dtype = SCALAR_TYPES.get(code) if isinstance(code, int) else None
    if dtype is None or not isinstance(sizes, list):
        return None
    dims: list[int] = []
    for s in sizes:
        d = s.get("as_int") if isinstance(s, dict) else None
        if type(d) is not int or not 0 <= d < 2**62:
            return None
        dims.append(d)
    shape = tuple(dims)
    stride = []
    step = 1
    for d in reversed(shape):
        stride.append(step)
        step *= max(d, 1)
    skey = str(entry.get("path_name"))
    member = a.member(f"{folder}{skey}")
    if member is not None and not entry.get("use_pickle"):
        where = a.locate(member)
        if where is not None:
            a.storages[skey] = where
    return TensorRef(dtype, shape, tuple(reversed(stride)), skey,
                     requires_grad=entry.get("is_param") is True,
                     is_parameter=entry.get("is_param") is True)


def _pickled(a: _Archive, info: zipfile.ZipInfo, how: str, what: str, prefix: str = "",
             list_tensors: bool = False) -> None:
    """Read one pickled member the way torch.export.load would load it, and keep what it
    would run; `list_tensors`: its tensors are weights (an older archive's one torch.save)."""
    lim = limits.LIMITS
    if a.pickles == lim.zip_pickles:
        a.problems.append(Problem(ERROR, a.name, f"more than {lim.zip_pickles:,} pickled "
                                  f"entries (e.g. {info.filename}): the rest are not checked; "
                                  "they could run code when loaded"))
    a.pickles += 1
    if a.pickles > lim.zip_pickles:
        return
    got = _read(a, info, how)
    for p in got.problems:
        a.problems.append(replace(p, file=a.name, message=f"{info.filename} ({what}): "
                                  f"{p.message}"))
    a.unsafe.update(dict.fromkeys(got.unsafe))
    if list_tensors and not got.unsafe:
        start = a.locate(info)
        for path, t in got.tensors:
            skey = f"{info.filename[len(a.root) + 1:]}/{t.storage_key}"
            record = got.storages.get(t.storage_key)
            if record is not None and start is not None:
                a.storages[skey] = (start[0] + record[0], record[1])
            a.obj[prefix + path] = replace(t, storage_key=skey)


def _read(a: _Archive, info: zipfile.ZipInfo, how: str) -> PickleFile:
    where = a.locate(info) if info.compress_type == zipfile.ZIP_STORED else None
    return read_member_file(a.f, a.zf, info, a.name, where, a.read_file, how)


def read_member_file(f, zf: zipfile.ZipFile, info: zipfile.ZipInfo, name: str, where,
                     read_file, how: str = "torch") -> PickleFile:
    """A torch file (or, `how` "pickle", a plain pickle) inside a zip, read, never loaded:
    through a window into the zip when `where` (its data's (start, length)) is known, else in
    memory within the pickle cap (a deflated member). `read_file`:
    torchfile.read_pickle_file_object."""
    from ckpt_browser.readers.pickle_safe import unpickle

    lim = limits.LIMITS
    if how == "pickle" or where is None:
        if info.file_size > lim.pickle_bytes:
            return PickleFile(name, "pickle", problems=(Problem(
                ERROR, name, f"{info.file_size:,} bytes, over the {lim.pickle_bytes:,}-byte "
                f"limit; not read ({limits.env('pickle_bytes')} raises it); it could run code "
                "when loaded"),))
        data = read_member(zf, info, lim.pickle_bytes)
        if how == "pickle":
            got = unpickle(io.BytesIO(data), name, storage_ids=None)
            return PickleFile(name, "pickle", obj=got.obj, unsafe=got.unsafe,
                              problems=got.problems)
        return read_file(io.BytesIO(data), name, len(data), nested=how)
    window = io.BufferedReader(Window(f, where[0], where[1]), 1024)
    return read_file(window, name, where[1], nested=how)


class Window(io.RawIOBase):
    """Bytes [start, start + length) of an open binary file, as a read-only file of their own."""

    def __init__(self, f, start: int, length: int):
        self.f, self.start, self.length, self.pos = f, start, length, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, pos: int, whence: int = 0) -> int:
        self.pos = max(0, {0: pos, 1: self.pos + pos, 2: self.length + pos}[whence])
        return self.pos

    def tell(self) -> int:
        return self.pos

    def readinto(self, b) -> int:
        n = max(0, min(len(b), self.length - self.pos))
        if not n:
            return 0
        got = self.read_at(memoryview(b)[:n], self.start + self.pos)
        self.pos += got
        return got

    def read_at(self, b: memoryview, offset: int) -> int:
        self.f.seek(offset)
        return self.f.readinto(b)
