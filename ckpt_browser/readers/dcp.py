"""torch.distributed.checkpoint folders: `.metadata` + `__{rank}_{i}.distcp` (FORMATS.md "DCP").

`.metadata` is a bare pickle that torch reads with plain `pickle.load`. We read it with the
restricted unpickler and exactly the globals a real file names, mapped to local records: torch and
torch.distributed are never imported, and no process group is needed. Rank files are only
stat'ed: every byte range the metadata names must lie inside its file.
"""

from __future__ import annotations

import io
import os
import re
import stat
from typing import Any

from ckpt_browser import limits
from ckpt_browser.model import ERROR, INFO, WARNING, Problem
from ckpt_browser.readers import dcp_fast
from ckpt_browser.readers.pickle_safe import (
    DTYPE_GLOBALS,
    Unpickled,
    short,
    torch_layout,
    torch_size,
    unpickle,
)
from ckpt_browser.readers.regular import open_regular
from ckpt_browser.readers.torchfile import unsafe_problems
from ckpt_browser.readers.walk import list_folder
from ckpt_browser.standins import DcpCheckpoint, DcpChunk, DcpEntry

METADATA = ".metadata"
RANK_METADATA = re.compile(r"^__(\d+)\.metadata$")
MAX_RANGE_PROBLEMS = 10


class _Record:
    """A DCP metadata dataclass, rebuilt from its pickled state. Extra attributes (a
    writer's own, such as mcore_data) are kept; missing ones read as None."""

    __slots__ = ("kind", "fields")

    def __init__(self, kind: str):
        self.kind = kind
        self.fields: dict[str, Any] = {}

    def _pickle_build(self, state) -> None:
        if type(state) is tuple and len(state) == 2 and type(state[1]) is dict:
            state = {**(state[0] if type(state[0]) is dict else {}), **state[1]}
        if type(state) is dict:
            self.fields.update((k, v) for k, v in state.items() if type(k) is str)
        elif self.kind == "TensorProperties" and type(state) is tuple and len(state) == 5:
            names = ("dtype", "layout", "requires_grad", "memory_format", "pin_memory")
            self.fields.update(zip(names, state))

    __setstate__ = _pickle_build  # how the C unpickler builds it (readers/dcp_fast.py)

    def get(self, name: str):
        return self.fields.get(name)

    def __repr__(self) -> str:
        return f"<{self.kind} {short(self.fields)}>"


class _Index(_Record):
    """MetadataIndex: a dict key in storage_data, equal by (fqn, offset) like the real one."""

    __slots__ = ()

    def key(self) -> tuple[str | None, tuple[int, ...] | None]:
        """Flat by construction (a str and ints), so hashing it cannot recurse."""
        fqn = self.fields.get("fqn")
        return fqn if type(fqn) is str else None, _dims(self.fields.get("offset"))

    def __hash__(self) -> int:
        return hash(self.key())

    def __eq__(self, other) -> bool:
        return type(other) is _Index and self.key() == other.key()


def _record(kind: str, cls=_Record):
    def make(u, args):
        return cls(kind)
    make.record = (kind, cls)  # type: ignore[attr-defined]  # for dcp_fast's C unpickler
    return make


def _mem_format(u, args):  # _MEM_FORMAT_ENCODING(0)
    names = {0: "torch.contiguous_format", 1: "torch.channels_last", 2: "torch.preserve_format"}
    return names.get(args[0], f"memory format {short(args[0])}") if len(args) == 1 else None


def _path(sep: str):
    def make(u, args):  # PosixPath(*parts) -> str
        return sep.join(str(a) for a in args if type(a) is str).replace(sep + sep, sep)
    return make


def _write_item_type(u, args):  # WriteItemType(1): an enum member by its value
    names = {1: "TENSOR", 2: "SHARD", 3: "BYTE_IO"}
    return f"WriteItemType.{names.get(args[0], short(args[0]))}" if len(args) == 1 else None


_M = "torch.distributed.checkpoint.metadata."
_P = "torch.distributed.checkpoint.planner."
DCP_GLOBALS = {  # every global a real .metadata names (FORMATS.md "DCP")
    **{_M + k: _record(k) for k in ("Metadata", "TensorStorageMetadata", "BytesStorageMetadata",
                                    "ChunkStorageMetadata", "TensorProperties", "StorageMeta")},
    _M + "MetadataIndex": _record("MetadataIndex", _Index),
    _M + "_MEM_FORMAT_ENCODING": _mem_format,
    "torch.distributed.checkpoint.filesystem._StorageInfo": _record("_StorageInfo"),
    # save plans: a writer may keep every rank's in Metadata.all_local_plans, to reuse them
    # on its next save (FORMATS.md "DCP"); read as inert records, never used
    **{_P + k: _record(k) for k in ("SavePlan", "WriteItem", "TensorWriteData")},
    _P + "WriteItemType": _write_item_type,
    "torch.Size": torch_size,
    "torch.serialization._get_layout": torch_layout,
    **DTYPE_GLOBALS,
    "pathlib.PosixPath": _path("/"),
    "pathlib.WindowsPath": _path("\\"),
}


def read_dcp(folder: str, rel: str) -> DcpCheckpoint:
    """Read a DCP folder's metadata and check its rank files. Never raises for bad content."""
    def where(n: str) -> str:
        return f"{rel}/{n}" if rel else n

    try:
        names = list(list_folder(folder).names)  # bounded, links that loop back left out
        stats = {n: os.stat(os.path.join(folder, n)) for n in names if n.endswith(".distcp")}
        files = {n: st.st_size for n, st in stats.items()}
    except OSError as e:
        return DcpCheckpoint(rel, problems=(Problem(ERROR, rel or None, f"cannot list the DCP "
                                                    f"folder: {e.strerror or e}"),))
    problems: list[Problem] = [
        Problem(ERROR, where(n), f"{n} is not a regular file (a FIFO, device or socket)")
        for n, st in stats.items() if not stat.S_ISREG(st.st_mode)]
    if METADATA in names:
        metas = [METADATA]
    else:
        metas = [n for n in names if RANK_METADATA.match(n)]
        problems.append(_no_metadata(where, names, metas))
    merged = _Merged()
    version, read_any = None, False
    unsafe: list[str] = []
    for meta in metas:
        data, failed = _metadata_bytes(os.path.join(folder, meta), where(meta))
        if failed is not None:
            problems.append(failed)
            continue
        fast = dcp_fast.read_fast(data, where(meta)) if dcp_fast.enabled(len(data)) else None
        if fast is not None:
            problems.extend(fast.problems)
            if not fast.repeated:
                read_any = True
                version = version or fast.version
                merged.add(fast.entries)
            continue
        got, size = _unpickle_metadata(data, where(meta)), len(data)
        problems.extend(got.problems)
        unsafe.extend(u for u in got.unsafe if u not in unsafe)
        if got.ok and _repeated(got.obj, size, where(meta), problems):
            continue
        if got.ok:
            read_any = True
            version = version or _version(got.obj)
            merged.add(_entries(got.obj, where(meta), problems))
    entries = merged.entries()
    if read_any:
        problems.extend(_check_files(entries, files, where))
    problems.extend(unsafe_problems(os.path.join(rel, ".metadata") if rel else ".metadata",
                                    unsafe))
    return DcpCheckpoint(rel, entries, files, version, tuple(problems), tuple(unsafe))


def _no_metadata(where, names: list[str], per_rank: list[str]) -> Problem:
    tmp = [n for n in names if n.endswith(".metadata.tmp")]
    if per_rank:
        shown = ", ".join(per_rank[:3]) + (" ..." if len(per_rank) > 3 else "")
        return Problem(WARNING, where(METADATA), f"no global .metadata; merged {len(per_rank)} "
                       f"per-rank files ({shown}), written without collectives: cannot tell "
                       "whether every rank finished")
    note = f"; found {tmp[0]}: the save stopped while writing it" if tmp else ""
    return Problem(ERROR, where(METADATA), f"incomplete: no .metadata (DCP writes it last){note}")


def fast_child(name: str) -> None:
    """The child dcp_fast starts: the .metadata on stdin read by the C unpickler, then what
    read_dcp takes from it, as JSON on stdout; exit 1 on anything the safe path should see."""
    data = dcp_fast.start_child()
    try:
        meta = dcp_fast.c_unpickle(data, DCP_GLOBALS)
    except Exception:  # noqa: BLE001 - the safe path says what is wrong
        raise SystemExit(1) from None
    if not _is(meta, "Metadata"):
        raise SystemExit(1)
    problems: list[Problem] = []
    if _repeated(meta, len(data), name, problems):
        dcp_fast.write_result(True, None, {}, problems)
        return
    dcp_fast.write_result(False, _version(meta), _entries(meta, name, problems), problems)


def _metadata_bytes(path: str, name: str) -> tuple[bytes, Problem | None]:
    """The .metadata's bytes, read once (whichever unpickler reads them), or why not."""
    def fail(message: str) -> tuple[bytes, Problem | None]:
        return b"", Problem(ERROR, name, message)
    try:
        with open_regular(path) as f:
            size, most = os.fstat(f.fileno()).st_size, limits.LIMITS.dcp_metadata_bytes
            if size > most:
                return fail(f"is {size:,} bytes, over the {most:,}-byte limit; not read "
                            f"({limits.env('dcp_metadata_bytes')} raises it)")
            data = f.read(min(size, most))  # read(n) allocates n up front
    except OSError as e:
        return fail(f"cannot read the file: {e.strerror or e}")
    if not data:
        return fail("empty .metadata (the save was interrupted?)")
    return data, None


def _unpickle_metadata(data: bytes, name: str) -> Unpickled:
    """The metadata through the restricted unpickler."""
    got = unpickle(io.BytesIO(data), name, DCP_GLOBALS, storage_ids=None,
                   ops="dcp_metadata_ops")
    if got.ok and not _is(got.obj, "Metadata"):
        got.problems += (Problem(ERROR, name, f"not DCP metadata: the pickle holds "
                                 f"{short(got.obj)}"),)
        got.ok = False
    return got


# A chunk as torch writes it (a ChunkStorageMetadata of two torch.Size, and for a placed one a
# MetadataIndex and a _StorageInfo) takes 39 to 200 bytes of the pickle; more chunks than one per
# CHUNK_BYTES of the file can only be the same objects referenced again and again.
CHUNK_BYTES = 16
FREE_CHUNKS = 10_000  # so many chunks are read whatever the file's size


def _repeated(meta: _Record, size: int, name: str, problems: list[Problem]) -> bool:
    """Whether the metadata names far more chunks than its bytes can hold (shared references:
    a 80 KB file whose 1,000 tensors all list one memoised list of 1,000 chunks describes a
    million); then it is refused, in one problem, before any chunk is looked at."""
    sdm = meta.get("state_dict_metadata")
    if type(sdm) is not dict:
        return False
    chunks = sum(len(c) for md in sdm.values() if _is(md, "TensorStorageMetadata")
                 and type(c := md.get("chunks")) is list)
    if chunks <= max(FREE_CHUNKS, size // CHUNK_BYTES):
        return False
    problems.append(Problem(ERROR, name, f"names {chunks:,} chunks in {size:,} bytes: the same "
                            "chunks referenced again and again (torch writes each one apart, in "
                            f"over {CHUNK_BYTES} bytes); not read"))
    return True


def _is(obj, kind: str) -> bool:
    return isinstance(obj, _Record) and obj.kind == kind


def _version(meta: _Record) -> str | None:
    v = meta.get("version")
    return v if type(v) is str else None


def _entries(meta: _Record, name: str, problems: list[Problem]) -> dict[str, DcpEntry]:
    sdm = meta.get("state_dict_metadata")
    if type(sdm) is not dict:
        problems.append(Problem(ERROR, name, "metadata has no state_dict_metadata"))
        return {}
    where = _storage_index(meta.get("storage_data"))
    entries: dict[str, DcpEntry] = {}
    unplaced: list[str] = []
    for key, md in sdm.items():
        key = str(key)
        if _is(md, "TensorStorageMetadata"):
            entries[key] = _tensor_entry(key, md, where, unplaced)
        elif _is(md, "BytesStorageMetadata"):
            chunk = _chunk((), (), where.get((key, None)))
            if chunk.file is None:
                unplaced.append(key)
            entries[key] = DcpEntry(key, "bytes", chunks=(chunk,))
        else:
            problems.append(Problem(ERROR, name, f"entry {key!r}: unexpected metadata "
                                    f"{short(md)}"))
    if unplaced:
        problems.append(Problem(ERROR, name, f"no storage location for {len(unplaced):,} "
                                f"item(s), e.g. {unplaced[0]!r}: a load would fail"))
    return entries


def _tensor_entry(key: str, md: _Record, where: dict, unplaced: list[str]) -> DcpEntry:
    props = md.get("properties")
    dtype = props.get("dtype") if _is(props, "TensorProperties") else None
    chunks = []
    for ch in md.get("chunks") if type(md.get("chunks")) is list else ():
        if not _is(ch, "ChunkStorageMetadata"):
            unplaced.append(f"{key} chunk {short(ch)}")
            continue
        offsets, sizes = _dims(ch.get("offsets")), _dims(ch.get("sizes"))
        chunk = _chunk(offsets or (), sizes or (), where.get((key, offsets)))
        if chunk.file is None:
            unplaced.append(f"{key} chunk at {offsets}")
        chunks.append(chunk)
    return DcpEntry(key, "tensor", dtype if type(dtype) is str else None,
                    _dims(md.get("size")), tuple(chunks))


def _dims(value) -> tuple[int, ...] | None:
    if type(value) is tuple and all(type(d) is int and d >= 0 for d in value):
        return value
    return None


def _storage_index(storage_data) -> dict[tuple, _Record]:
    """(fqn, chunk offsets or None) -> _StorageInfo."""
    if type(storage_data) is not dict:
        return {}
    return {k.key(): v for k, v in storage_data.items()
            if type(k) is _Index and _is(v, "_StorageInfo")}


def _chunk(offsets, sizes, info: _Record | None) -> DcpChunk:
    if info is None:
        return DcpChunk(offsets, sizes, None, None, None)
    path, offset, length = info.get("relative_path"), info.get("offset"), info.get("length")
    ok = type(path) is str and all(type(x) is int and x >= 0 for x in (offset, length))
    return DcpChunk(offsets, sizes, path if ok else None, offset if ok else None,
                    length if ok else None)


class _Merged:
    """Per-rank metadata files each describe that rank's chunks; a tensor's chunks add up, each
    offset once. Merged in `entries()`, chunks kept as lists until then, so 4,096 per-rank
    files cost 4,096 merges, not 4,096 copies of every chunk merged before; one file is its
    own entries."""

    def __init__(self) -> None:
        self.added: list[dict[str, DcpEntry]] = []
        self.first: dict[str, DcpEntry] = {}
        self.chunks: dict[str, list] = {}
        self.offsets: dict[str, set] = {}
        self.dtype: dict[str, str | None] = {}
        self.shape: dict[str, tuple | None] = {}

    def add(self, more: dict[str, DcpEntry]) -> None:
        self.added.append(more)

    def _merge(self, more: dict[str, DcpEntry]) -> None:
        for key, entry in more.items():
            old = self.first.setdefault(key, entry)
            if old.kind != "tensor" or entry.kind != "tensor":
                continue
            if key not in self.chunks:
                self.chunks[key], self.offsets[key] = [], set()
                self.dtype[key], self.shape[key] = entry.dtype, entry.shape
            offsets = self.offsets[key]
            for c in entry.chunks:
                if old is entry or c.offsets not in offsets:  # one file keeps its own repeats
                    self.chunks[key].append(c)
            offsets.update(c.offsets for c in entry.chunks)
            self.dtype[key] = self.dtype[key] or entry.dtype
            self.shape[key] = self.shape[key] or entry.shape

    def entries(self) -> dict[str, DcpEntry]:
        if len(self.added) == 1:  # one .metadata (the usual case): nothing to merge
            return self.added[0]
        for more in self.added:
            self._merge(more)
        return {key: DcpEntry(key, "tensor", self.dtype[key], self.shape[key],
                              tuple(self.chunks[key])) if key in self.chunks else entry
                for key, entry in self.first.items()}


def _check_files(entries: dict[str, DcpEntry], files: dict[str, int], where) -> list[Problem]:
    named: dict[str, int] = {}
    past: dict[str, list] = {}
    for entry in entries.values():
        for c in entry.chunks:
            if c.file is None or c.offset is None or c.length is None:  # all three or none
                continue
            named[c.file] = named.get(c.file, 0) + 1
            size = files.get(c.file)
            if size is not None and c.offset + c.length > size:
                past.setdefault(c.file, []).append((entry.key, c))
    problems = []
    for f, count in named.items():
        if f not in files:
            problems.append(Problem(ERROR, where(f), f"missing: the metadata places {count:,} "
                                    f"item(s) in {f}, which does not exist"))
    for f, hits in list(past.items())[:MAX_RANGE_PROBLEMS]:
        key, c = min(hits, key=lambda hit: hit[1].offset)  # where the file's data stops
        more = f" (and {len(hits) - 1:,} more ranges past the end)" if len(hits) > 1 else ""
        problems.append(Problem(ERROR, where(f), f"{f} is {files[f]:,} bytes but the metadata "
                                f"places {key} at {c.offset:,}-{c.offset + c.length:,}{more}"))
    for f in files:
        if f not in named:
            problems.append(Problem(INFO, where(f), "not named by the metadata (left over from "
                                    "another save?)"))
    return problems
