"""torch.save files (zip or legacy) and plain pickles, read without torch and without running them.

A torch zip is opened with `zipfile`, which reads the central directory and, for data.pkl,
one local header; each storage record is located by its 30-byte local header, never its data
(FORMATS.md "torch.save zip"). zipcheck reads the same archive as torch's own reader does and
reports wherever the two (or unzip, or a streaming reader) could see different contents;
zipentries CRC-checks the small records and unpickles every other *.pkl entry. The legacy
format is back-to-back pickles followed by the raw storages, each preceded by its 8-byte
element count; those counts are the only bytes read past the pickles. Everything else is a
plain pickle, capped at 64 MiB.
"""

from __future__ import annotations

import io
import os
import struct
import threading
import zipfile
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

from ckpt_browser import limits
from ckpt_browser.model import ERROR, WARNING, Problem
from ckpt_browser.readers.archive import is_archive, read_archive
from ckpt_browser.readers.export import is_export, read_export
from ckpt_browser.readers.pickle_safe import (
    ITEMSIZE,
    CappedReader,
    SafeUnpickler,
    Unpickled,
    describe,
    short,
    unpickle,
)
from ckpt_browser.readers.pickle_safe.torchscript_records import TORCHSCRIPT_GLOBALS
from ckpt_browser.readers.regular import missing_reason, open_regular
from ckpt_browser.readers.torchscript import (
    custom_classes,
    operators,
    read_code,
    torchscript_kind,
    without_constants,
)
from ckpt_browser.readers.zipcheck import check_zip
from ckpt_browser.readers.zipentries import (
    check_records,
    crc_problem,
    local_start,
    raw_name,
    read_member,
    unchecked,
    with_zipfile_view,
)
from ckpt_browser.standins import Opaque, PickleFile, TensorRef

ZIP_MAGIC = b"PK\x03\x04"
LEGACY_MAGIC = 0x1950A86A20F9469CFC6C  # torch.serialization.MAGIC_NUMBER
LEGACY_HEAD = 4096  # where the first pickle is looked for, to tell a legacy file (see is_legacy)
MAX_STORAGE_PROBLEMS = 10
READ_BUFFER = 1024  # a storage's 30-byte local header costs 1 KiB of reading, not 8
# zipfile's reader of the end-of-central-directory record, and its size field (untyped privates)
_END_RECORD = zipfile._EndRecData  # type: ignore[attr-defined]
_ECD_SIZE: int = zipfile._ECD_SIZE  # type: ignore[attr-defined]


# what torch.save(model) pickles of an nn.Module, in the order state_dict() reads them
MODULE_RECORDS = ("_parameters", "_buffers", "_modules")

_CACHE: OrderedDict[tuple, PickleFile] = OrderedDict()
_CACHE_LOCK = threading.Lock()
CACHED_FILES = 8  # a folder of a run's checkpoints is read to order it, then one is opened


def read_pickle_file(path: str, name: str) -> PickleFile:
    """Read one torch or pickle file. Never raises for bad content; problems are recorded.
    The last few files read are remembered while their size and mtime stay the same."""
    try:
        with open_regular(path, buffering=READ_BUFFER) as f:
            st = os.fstat(f.fileno())
            # the caps in force are part of the key: a test, or a run, may change them
            key = (name, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, limits.LIMITS)
            with _CACHE_LOCK:
                hit = _CACHE.get(key)
                if hit is not None:
                    _CACHE.move_to_end(key)
                    return hit
            pf = read_pickle_file_object(f, name, st.st_size)
            if len(pf.tensors) < 200_000:
                with _CACHE_LOCK:
                    _CACHE[key] = pf
                    while len(_CACHE) > CACHED_FILES:
                        _CACHE.popitem(last=False)
            return pf
    except FileNotFoundError:
        return _failed(name, "pickle", None, missing_reason(path))
    except PermissionError:
        return _failed(name, "pickle", None, "cannot read the file: permission denied")
    except IsADirectoryError:
        return _failed(name, "pickle", None, "is a folder, not a file")
    except OSError as e:
        return _failed(name, "pickle", None, f"cannot read the file: {e.strerror or e}")


def read_pickle_file_object(f, name: str, size: int, nested: str | None = None) -> PickleFile:
    """Like read_pickle_file, on an open binary file (or a window into one) of `size` bytes.
    `nested`: a file inside a .pt2 archive, which torch.export.load reads with torch.load
    ("torch") or with torch's C++ unpickler ("torchbind"); never read as a .pt2 itself."""
    head = f.read(LEGACY_HEAD)
    f.seek(0)
    if head.startswith(ZIP_MAGIC):
        return _read_zip(f, name, size, nested)
    if is_legacy(head):
        return _read_legacy(f, name, size)
    return _read_plain(f, name, size, head)


def walk(obj: Any, prefix: str = "", *, max_depth: int | None = None) -> Iterator[tuple[str, Any]]:
    """Yield (dotted path, value) for every leaf under obj, in container order.

    Dict keys and list/tuple indices are joined by '.' (`state.0.exp_avg`). An Opaque is yielded
    itself and then entered: its constructor args as `0`, `1` ..., its attributes by name. Empty
    containers, sets, and anything on a cycle or deeper than max_depth (by default the depth
    cap) are yielded as leaves. Iterative: a deep graph cannot overflow the stack.
    """
    max_depth = limits.LIMITS.depth if max_depth is None else max_depth
    frames = [iter(((prefix, obj),))]
    owners: list[int] = []  # ids of the containers being walked, outermost first
    while frames:
        for path, node in frames[-1]:
            kids = _children(node)
            enter = bool(kids) and id(node) not in owners and len(owners) < max_depth
            if type(node) is Opaque or not enter:
                yield path, node
            if enter:
                frames.append(iter([(f"{path}.{seg}" if path else seg, child)
                                    for seg, child in kids]))
                owners.append(id(node))
                break
        else:
            frames.pop()
            if owners:
                owners.pop()


def _children(node) -> Sequence[tuple[str, Any]]:
    kind = type(node)
    if kind is dict:
        return [(str(k), v) for k, v in node.items()]
    if kind is list or kind is tuple:
        return [(str(i), v) for i, v in enumerate(node)]
    if kind is Opaque:
        kids = [(str(i), v) for i, v in enumerate(node.args)]
        if node.qualname.startswith("__torch__.") and node.state is not None \
                and type(node.state) is not dict:  # a scripted __getstate__'s tuple
            return kids + [("state", node.state)]
        fields = node.fields
        if not node.qualname.startswith("__torch__.") and any(
                type(fields.get(r)) is dict for r in MODULE_RECORDS):
            return kids + _module_children(fields)
        return kids + list(fields.items())
    return ()


def _module_children(fields: dict) -> list[tuple[str, Any]]:
    """A pickled nn.Module (torch.save(model)): its tensors under the names its state_dict()
    gives them (`0.weight`, not `_modules.0._parameters.weight`): the records' entries take
    their place, parameters, then buffers, then submodules, as state_dict() orders them."""
    kids = [(str(k), v) for k, v in fields.items() if k not in MODULE_RECORDS]
    for record in MODULE_RECORDS:
        entries = fields.get(record)
        if type(entries) is dict:
            kids += [(str(k), v) for k, v in entries.items() if v is not None]
    return kids


def module_attributes(obj: Any, prefix: str = "") -> set[str]:
    """Paths of the tensors that pickled nn.Modules under `obj` keep as plain attributes
    (Ultralytics' `self.stride = torch.tensor(...)`): not in their state_dict()."""
    out: set[str] = set()
    for path, node in walk(obj, prefix):
        if type(node) is Opaque and not node.qualname.startswith("__torch__.") and any(
                type(node.fields.get(r)) is dict for r in MODULE_RECORDS):
            out.update(f"{path}.{k}" if path else str(k) for k, v in node.fields.items()
                       if k not in MODULE_RECORDS and type(v) is TensorRef)
    return out


def tensor_bytes(pf: PickleFile, t: TensorRef) -> tuple[int, tuple[int, int] | None]:
    """(bytes the tensor needs, its absolute byte range in the file when the record was found)."""
    itemsize = ITEMSIZE.get(t.dtype, 1)
    nbytes = t.numel * itemsize
    record = pf.storages.get(t.storage_key)
    if record is None:
        return nbytes, None
    begin = record[0] + t.storage_offset * itemsize
    return nbytes, (begin, begin + nbytes)


def tensors_of(obj: Any) -> tuple[tuple[str, TensorRef], ...]:
    return tuple((path, v) for path, v in walk(obj) if type(v) is TensorRef)


def _failed(name: str, kind: str, size: int | None, message: str) -> PickleFile:
    return PickleFile(name=name, kind=kind, size=size, problems=(Problem(ERROR, name, message),))


def _result(name: str, kind: str, size: int, got: Unpickled, storages: dict,
            problems: list[Problem]) -> PickleFile:
    tensors = tensors_of(got.obj) if got.ok else ()
    return PickleFile(name=name, kind=kind, obj=got.obj, tensors=tensors, unsafe=got.unsafe,
                      size=size, storages=storages,
                      problems=got.problems + tuple(problems) + _extent_problems(name, tensors)
                      + unsafe_problems(name, got.unsafe))


def unsafe_problems(name: str, unsafe) -> tuple[Problem, ...]:
    """An unsafe pickle is an error: whoever loads it the usual way runs that code."""
    if not unsafe:
        return ()
    return (Problem(ERROR, name, f"unsafe: its pickle calls {describe(unsafe)} when loaded "
                    "(not run here; torch.load(weights_only=False) or pickle.load would run it)"),)


# -- torch zip -------------------------------------------------------------------------------

def _read_zip(f, name: str, size: int, nested: str | None = None) -> PickleFile:
    zf = check = None
    lim = limits.LIMITS
    try:
        end = _END_RECORD(f)  # the end-of-central-directory record, as ZipFile reads it
        if end is None:
            return _failed(name, "torch-zip", size, "truncated zip: no central directory at the "
                           "end of the file (an interrupted save?)")
        if end[_ECD_SIZE] > lim.zip_directory_bytes:
            return _failed(name, "torch-zip", size, f"zip central directory claims "
                           f"{end[_ECD_SIZE]:,} bytes, over the "
                           f"{lim.zip_directory_bytes:,}-byte limit "
                           f"({limits.env('zip_directory_bytes')} raises it)")
        zf = zipfile.ZipFile(f)
        check = check_zip(f, zf, size, name, lim.zip_directory_bytes)
        entries = with_zipfile_view(f, zf, check.entries, check.starts, size)
        export_root = is_export(zf) if nested is None else None
        if export_root is not None:
            pf = read_export(f, zf, export_root, name, size,
                             lambda member: _data_start(f, member, size, check.starts),
                             read_pickle_file_object)
            return _checked(pf, f, entries, check, (b"", -1), name)
        root, info = _data_pkl(zf)
        if info is None and nested is None and is_archive(zf):  # torch files inside (SB3)
            pf = read_archive(f, zf, name, size,
                              lambda member: _data_start(f, member, size, check.starts),
                              read_pickle_file_object)
            return _checked(pf, f, entries, check, (b"", -1), name)
        if info is None:
            names = ", ".join(zf.namelist()[:5]) or "none"
            failed = _failed(name, "torch-zip", size, f"zip without data.pkl: not a torch.save "
                             f"file (entries: {names})")
            return _checked(failed, f, entries, check, (b"", -1), name)
        if info.file_size > lim.pickle_bytes:
            failed = _failed(name, "torch-zip", size, f"{info.filename} is "
                             f"{info.file_size:,} bytes, over the {lim.pickle_bytes:,}-byte "
                             f"limit; not read ({limits.env('pickle_bytes')} raises it)")
            return _checked(failed, f, entries, check, (b"", -1), name)
        data = read_member(zf, info, lim.pickle_bytes + 1, verify=False)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError, struct.error,
            NotImplementedError, RuntimeError) as e:  # RuntimeError: an encrypted entry
        failed = _failed(name, "torch-zip", size, f"unreadable zip: {e}")
        if check is None:  # zipfile gave up: torch's reader may not (what would it see?)
            check = check_zip(f, zf, size, name, lim.zip_directory_bytes)
        return _checked(failed, f, check.entries, check, (b"", -1), name)
    script = torchscript_kind(zf.namelist(), root) if nested != "torchbind" else None
    got = unpickle(io.BytesIO(data), name,
                   TORCHSCRIPT_GLOBALS if script or nested == "torchbind" else None,
                   storage_ids="zip")
    problems = _byteorder(zf, root, name)
    bad_crc = None if unchecked(entries) else \
        crc_problem(info.filename, data, info.CRC, info.file_size, name)
    problems += [bad_crc] if bad_crc else []
    storages = _locate_zip(f, zf, root, got.storages, name, size, problems, check.starts)
    kind = "torchscript" if script == "exact" else "torch-zip"
    if nested == "torchbind":  # torch._C._pickle_load_obj: a custom C++ class's __setstate__
        bound = custom_classes(got.obj if got.ok else None, name)
        problems += bound.problems
        got = replace(got, unsafe=got.unsafe + bound.unsafe)
    elif not script and got.ok and b"__torch__" in data:  # the bytes first: walking is slower
        odd = without_constants(got.obj, name)
        problems += [odd] if odd else []
    pf = _result(name, kind, size, got, storages, problems)
    return _checked(pf, f, entries, check, (raw_name(info), info.header_offset), name,
                    (zf, root, script, got) if script else None)


def _checked(pf: PickleFile, f, entries, check, shown, name, script=None) -> PickleFile:
    """The file as read, plus what the differential checks and the other pickles found, and
    for TorchScript (`script`: the zip, its root, its kind and data.pkl as read), what
    torch.jit.load would run."""
    pickles: dict[str, Unpickled] = {}
    allow = TORCHSCRIPT_GLOBALS if script else None
    wanted = {f"{script[1]}/{n}".lower() for n in ("constants.pkl", "bytecode.pkl")} \
        if script else set()

    def keep(entry: str, got: Unpickled) -> None:
        if entry.lower() in wanted:
            pickles[entry.lower()] = got

    more, unsafe = check_records(f, entries, check.starts, shown, name, allow, keep)
    if script:
        code = _script_code(script, pickles, name)
        more += code.problems
        unsafe += code.unsafe
        constants = pickles.get(f"{script[1]}/constants.pkl".lower())
        if constants is not None and constants.ok:
            pf = _constants(pf, f, script[0], script[1], constants, check.starts)
    unsafe = tuple(dict.fromkeys(u for u in unsafe if u not in pf.unsafe))
    return replace(pf, unsafe=pf.unsafe + unsafe,
                   problems=pf.problems + tuple(check.problems) + tuple(more))


def _constants(pf: PickleFile, f, zf, root: str, got: Unpickled, starts) -> PickleFile:
    """A TorchScript archive's constants table, `CONSTANTS.c0` ... in its code: a frozen
    model (torch.jit.freeze) keeps its weights there, in records under constants/."""
    found = tensors_of(got.obj)
    if not found:
        return pf
    problems: list[Problem] = []
    located = _locate_zip(f, zf, root, got.storages, pf.name, pf.size, problems, starts,
                          "constants")
    named = tuple((f"CONSTANTS.c{path}", replace(t, storage_key=f"constants/{t.storage_key}"))
                  for path, t in found)
    return replace(pf, tensors=pf.tensors + named,
                   storages={**pf.storages, **{f"constants/{k}": v for k, v in located.items()}},
                   problems=pf.problems + tuple(problems) + _extent_problems(pf.name, named))


def _script_code(script, pickles: dict[str, Unpickled], name: str):
    """read_code on what torch.jit.load unpickles: data.pkl and constants.pkl (any case)."""
    zf, root, kind, data = script
    found = pickles
    constants = found.get(f"{root}/constants.pkl".lower())
    parts = [data, constants] if constants is not None else [data]
    pickled = [p.obj for p in parts] if all(p.ok for p in parts) else None
    bytecode = found.get(f"{root}/bytecode.pkl".lower())
    ops = operators(bytecode.obj) if bytecode is not None and bytecode.ok else []
    return read_code(zf, root, name, kind, pickled, ops)


def _data_pkl(zf: zipfile.ZipFile) -> tuple[str, zipfile.ZipInfo | None]:
    """torch takes the archive's root folder from its first entry; any name goes."""
    infos = zf.infolist()
    if infos and "/" in infos[0].filename:
        root = infos[0].filename.split("/", 1)[0]
        info = zf.NameToInfo.get(f"{root}/data.pkl")
        if info is not None:
            return root, info
    for info in infos:
        parts = info.filename.split("/")
        if len(parts) == 2 and parts[1] == "data.pkl":
            return parts[0], info
    return "", None


def _byteorder(zf: zipfile.ZipFile, root: str, name: str) -> list[Problem]:
    info = zf.NameToInfo.get(f"{root}/byteorder")
    if info is None or info.file_size > 16:
        return []
    try:
        order = read_member(zf, info, 16, verify=False).decode("ascii", "replace").strip()
    except Exception:  # noqa: BLE001 - a damaged byteorder record
        return [Problem(WARNING, name, f"{info.filename} cannot be read")]
    if order != "little":
        return [Problem(WARNING, name, f"storages are {order}-endian; the sizes below still hold")]
    return []


def _locate_zip(f, zf, root, declared, name, size, problems,
                starts, folder: str = "data") -> dict[str, tuple[int, int]]:
    """Find each declared storage's bytes: one 30-byte local-header read per record."""
    storages: dict[str, tuple[int, int]] = {}
    bad: list[str] = []
    for key, (tag, numel) in declared.items():
        record = f"{folder}/{key}"
        info = zf.NameToInfo.get(f"{root}/{record}")
        need = numel * ITEMSIZE[tag]
        if info is None:
            bad.append(f"storage record {record} is missing (a tensor needs {need:,} bytes)")
            continue
        if info.compress_type != zipfile.ZIP_STORED:
            bad.append(f"storage record {record} is compressed (method {info.compress_type}); "
                       "torch needs it stored")
            continue
        if info.file_size < need:
            bad.append(f"storage record {record} has {info.file_size:,} bytes but the tensor "
                       f"needs {need:,}")
        found = _data_start(f, info, size, starts)
        if found is None:
            bad.append(f"storage record {record}: no local header at byte {info.header_offset:,}")
            continue
        start = found[0]
        if start + info.file_size > size:
            bad.append(f"storage record {record} runs to byte {start + info.file_size:,} but the "
                       f"file has {size:,} (truncated?)")
        storages[key] = (start, info.file_size)
    problems.extend(_capped(bad, name, "storage records"))
    problems.extend(_overlaps(storages, name))
    return storages


def _data_start(f, info: zipfile.ZipInfo, size: int,
                starts: dict[int, int]) -> tuple[int, int] | None:
    """(where a member's bytes start in the file, their length), from its 30-byte local
    header (already read by the checks, mostly); None when there is no local header where
    the central directory says."""
    start = starts.get(info.header_offset)
    if start is None:
        start = local_start(f, info.header_offset, size)
    return None if start is None else (start, info.file_size)


def _overlaps(storages: dict[str, tuple[int, int]], name: str) -> list[Problem]:
    """Records whose bytes overlap: one stretch of the file read as several tensors (a zip
    crafted to amplify, or a damaged central directory)."""
    spans = sorted((start, start + length, key) for key, (start, length) in storages.items())
    shared = [(a[2], b[2]) for a, b in zip(spans, spans[1:]) if b[0] < a[1]]
    if not shared:
        return []
    return [Problem(WARNING, name, f"{len(shared):,} storage record(s) overlap others (e.g. "
                    f"data/{shared[0][1]} shares bytes with data/{shared[0][0]}): the same "
                    "bytes stand for several tensors, as no torch.save writes")]


def _capped(messages: list[str], name: str, what: str) -> list[Problem]:
    out = [Problem(ERROR, name, m) for m in messages[:MAX_STORAGE_PROBLEMS]]
    if len(messages) > MAX_STORAGE_PROBLEMS:
        out.append(Problem(ERROR, name, f"... and {len(messages) - MAX_STORAGE_PROBLEMS:,} more "
                           f"{what} with problems"))
    return out


def _extent_problems(name: str, tensors) -> tuple[Problem, ...]:
    """A tensor must end inside the storage the pickle declares for it."""
    bad = []
    for path, t in tensors:
        if t.storage_numel is None or 0 in t.shape:
            continue
        last = t.storage_offset + sum((d - 1) * s for d, s in zip(t.shape, t.stride))
        if last >= t.storage_numel:
            bad.append(f"tensor {path} reaches element {last:,} of storage {t.storage_key}, "
                       f"which holds {t.storage_numel:,}")
    return tuple(_capped(bad, name, "tensors"))


# -- legacy torch format ---------------------------------------------------------------------

def first_pickle(head: bytes) -> str | None:
    """What the first pickle in `head` is: "legacy" (its value is torch's magic number),
    "pickle" (it ends in `head`), "cut" (its opcodes run to the end of `head`) or None.
    torch.load compares the first pickle's value with the magic number, however it is written:
    LONG1 as torch writes it, LONG4, protocol 0's 'L1195...L', behind opcodes that leave
    nothing. Read with the same restricted unpickler as every pickle, so nothing runs."""
    if not head:
        return None
    u = SafeUnpickler(io.BytesIO(head), "head", storage_ids=None)
    try:
        value = u.load()
    except EOFError:  # no opcode left: what follows the head may continue the pickle
        return "cut"
    except Exception:  # noqa: BLE001 - whatever fails here is not the start of a pickle
        return None
    finally:
        u.release()
    return "legacy" if type(value) is int and value == LEGACY_MAGIC else "pickle"


def is_legacy(head: bytes) -> bool:
    return first_pickle(head) == "legacy"


def _read_legacy(f, name: str, size: int) -> PickleFile:
    """torch.load's order: the magic number, the protocol version, the system info, the
    object and the list of storage keys, five pickles back to back. Each is read like any
    other pickle: torch.load unpickles them all (weights_only=False), so any can run code."""
    side = _SidePickles(name)
    try:
        if side.value(f, "magic number") != LEGACY_MAGIC:
            raise _LegacyError("legacy torch file: wrong magic number")
        if side.value(f, "protocol version") != 1001:
            raise _LegacyError("legacy torch file: unknown protocol version")
        info = side.value(f, "system info")
        problems = []
        if type(info) is dict and info.get("little_endian") is False:
            problems.append(Problem(WARNING, name, "saved on a big-endian machine"))
    except _LegacyError as e:
        return side.added_to(_failed(name, "torch-legacy", size, str(e)))
    got = unpickle(CappedReader(f), name, storage_ids="legacy")
    storages = _locate_legacy(f, got.storages, name, size, problems, side) if got.ok else {}
    return side.added_to(_result(name, "torch-legacy", size, got, storages, problems))


class _SidePickles:
    """The pickles around the object: their unsafe calls (by pickle) and warnings."""

    def __init__(self, name: str):
        self.name = name
        self.unsafe: dict[str, str] = {}  # qualname -> the first pickle that calls it
        self.warnings: list[Problem] = []

    def read(self, f, what: str) -> Unpickled:
        got = unpickle(CappedReader(f), self.name, storage_ids=None)
        for qual in got.unsafe:
            self.unsafe.setdefault(qual, what)
        if got.ok:
            self.warnings.extend(got.problems)
        return got

    def value(self, f, what: str):
        got = self.read(f, what)
        if not got.ok:
            raise _LegacyError(f"legacy torch file: cannot read the {what}: "
                               f"{got.problems[-1].message}")
        return got.obj

    def added_to(self, pf: PickleFile) -> PickleFile:
        extra = {q: what for q, what in self.unsafe.items() if q not in pf.unsafe}
        problems = [p for p in dict.fromkeys(self.warnings) if p not in pf.problems]
        for what in dict.fromkeys(extra.values()):
            names = tuple(q for q, w in extra.items() if w == what)
            problems.append(Problem(ERROR, self.name, f"unsafe: its {what} pickle calls "
                                    f"{describe(names)} when loaded (not run here; "
                                    "torch.load(weights_only=False) unpickles it too)"))
        if not problems:
            return pf
        return replace(pf, unsafe=pf.unsafe + tuple(extra), problems=pf.problems + tuple(problems))


class _LegacyError(Exception):
    pass


def _locate_legacy(f, declared, name, size, problems,
                   side: _SidePickles) -> dict[str, tuple[int, int]]:
    """After the object: a pickled list of storage keys, then per key an 8-byte element count
    and the raw bytes. Only the counts are read."""
    keys = side.read(f, "storage keys")
    if not keys.ok or type(keys.obj) is not list:
        problems.append(Problem(ERROR, name, "legacy torch file: the list of storage keys "
                                "after the object is missing or unreadable (truncated?)"))
        return {}
    storages: dict[str, tuple[int, int]] = {}
    bad: list[str] = []
    pos = f.tell()
    for key in keys.obj:
        if type(key) is not str:
            bad.append(f"the list of storage keys holds {short(key)}")
            break
        tag, numel = declared.get(key, ("U8", None))
        f.seek(pos)
        count = f.read(8)
        if len(count) < 8:
            bad.append(f"storage {key} starts at byte {pos:,}, past the end of the file "
                       "(truncated?)")
            break
        (stored,) = struct.unpack("<q", count)
        length = max(stored, 0) * ITEMSIZE[tag]
        if numel is not None and stored < numel:
            bad.append(f"storage {key} holds {stored:,} elements but the tensor needs {numel:,}")
        storages[key] = (pos + 8, length)
        pos += 8 + length
        if pos > size:  # nothing after it can be found
            bad.append(f"storage {key} runs to byte {pos:,} but the file has {size:,} "
                       "(truncated?)")
            break
    listed = set(k for k in keys.obj if type(k) is str)
    missing = [k for k in declared if k not in listed]
    bad.extend(f"storage {k} is declared by a tensor but not stored" for k in missing)
    problems.extend(_capped(bad, name, "storages"))
    return storages


# -- plain pickle ----------------------------------------------------------------------------

def _read_plain(f, name: str, size: int, head: bytes) -> PickleFile:
    if size == 0:
        return _failed(name, "pickle", size, "empty file: not a torch file or pickle")
    most = limits.LIMITS.pickle_bytes
    if size > most:
        return _failed(name, "pickle", size, f"pickle is {size:,} bytes, over the "
                       f"{most:,}-byte limit; not read ({limits.env('pickle_bytes')} raises it)")
    buf = io.BytesIO(f.read(size))  # read(n) allocates n up front; size is under the cap
    got = unpickle(buf, name, storage_ids=None)
    framed = len(head) > 1 and head[0] == 0x80 and 2 <= head[1] <= 5  # PROTO 2..5
    if not got.ok and not framed:
        return _failed(name, "pickle", size, f"not a torch file or pickle "
                       f"({got.problems[-1].message})")
    problems = []
    rest = size - buf.tell()  # the reader stops right after the STOP opcode
    if got.ok and rest > 0 and type(got.obj) is int and got.obj == LEGACY_MAGIC:
        f.seek(0)  # a legacy file whose first pickle is longer than the head looked at
        return _read_legacy(f, name, size)
    if got.ok and rest > 0:
        problems.append(Problem(WARNING, name, f"{rest:,} bytes after the end of the pickle "
                                "(more pickles?); not read"))
    return _result(name, "pickle", size, got, {}, problems)
