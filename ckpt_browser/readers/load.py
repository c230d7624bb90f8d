"""Read every file of a layout, in batches, cancellable: shard headers first (they are the
tree's skeleton), then every other file by its content, DCP folders as one read each."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator

from ckpt_browser import limits
from ckpt_browser.model import WARNING, Checkpoint, FileInfo, Layout, Problem, TensorInfo
from ckpt_browser.readers.files import read_file
from ckpt_browser.readers.pickle_safe.quiet_gc import gc_paused as paused_gc


def reading_order(layout: Layout) -> list[str]:
    """Shards first, in order; then the other files; a DCP folder's files once, as its
    .metadata (its rank files are only stat'ed)."""
    shards = set(layout.shards)
    first = [n for n in layout.files if n in shards]
    members = {n for n in layout.files if _dcp_of(layout, n) is not None}
    rest = [n for n in layout.files if n not in shards and n not in members]
    metas = [(f"{rel}/.metadata" if rel else ".metadata") for rel in layout.dcp]
    return first + metas + rest


def _dcp_of(layout: Layout, name: str) -> str | None:
    folder = os.path.dirname(name)
    if folder not in layout.dcp:
        return None
    leaf = os.path.basename(name)
    if leaf == ".metadata" or leaf.endswith(".distcp") or leaf.startswith(".metadata") or \
            (leaf.startswith("__") and leaf.endswith(".metadata")):
        return folder
    return None


def iter_files(layout: Layout, cancel: threading.Event | None = None,
               batch: int = 8) -> Iterator[list[FileInfo]]:
    """Yield what each file holds, in batches so a UI can show progress; stop when cancelled.
    A DCP folder yields its .metadata and every rank file together."""
    pending: list[FileInfo] = []
    shards = set(layout.shards)
    bound = _Bound(layout.rank_names)
    for name in reading_order(layout):
        if cancel is not None and cancel.is_set():
            return
        with paused_gc():
            if os.path.basename(name) == ".metadata" and os.path.dirname(name) in layout.dcp:
                pending.extend(read_dcp_files(layout.root, os.path.dirname(name)))
            elif name in shards:
                pending.append(read_file(layout.root, name, shard=True))
            else:
                why = bound.over(name)
                pending.append(not_read(layout.root, name, why) if why is not None
                               else read_file(layout.root, name))
        if len(pending) >= batch:
            yield pending
            pending = []
    if pending:
        yield pending


class _Bound:
    """How many files besides the shards are read by content (a folder may list 100,000:
    each read costs up to milliseconds), and how many per-rank files; past either limit a
    file is only listed, and the first one says so (its why, else None)."""

    def __init__(self, rank_names: tuple = ()) -> None:
        self.rank_names = rank_names  # Layout.rank_names
        self.read = self.ranks = 0
        self.told: set[str] = set()

    def over(self, name: str) -> str | None:
        lim = limits.LIMITS
        rank = any(rx.match(part) for part in name.split("/") for rx in self.rank_names)
        if self.read >= lim.other_files:
            return self._once("other_files", f"{lim.other_files:,} files besides the shards")
        if rank and self.ranks >= lim.rank_files:
            return self._once("rank_files", f"{lim.rank_files:,} per-rank files")
        self.read, self.ranks = self.read + 1, self.ranks + rank
        return None

    def _once(self, field: str, what: str) -> str:
        if field in self.told:
            return ""
        self.told.add(field)
        return (f"not read, nor the files after it of its kind: only the first {what} of a "
                f"checkpoint are read ({limits.env(field)} raises it); what they hold, code "
                "included, is not checked")


def not_read(root: str, name: str, why: str) -> FileInfo:
    """A file past a limit: its size only; `why` (said once, on the first) as a warning."""
    path = os.path.join(root, name)
    try:
        size: int | None = os.stat(path).st_size
    except OSError:
        size = None
    return FileInfo(name, path, size, format="other", detail="not read (over a limit)",
                    problems=(Problem(WARNING, name, why),) if why else ())


def read_dcp_files(root: str, rel: str) -> list[FileInfo]:
    """A DCP folder: its .metadata (every tensor, by key, with its global shape) and each rank
    file (its size; the chunks are placed by the metadata)."""
    from ckpt_browser.readers.dcp import read_dcp
    from ckpt_browser.readers.pickle_safe import ITEMSIZE

    folder = os.path.join(root, rel) if rel else root
    d = read_dcp(folder, rel)
    prefix = f"{rel}/" if rel else ""
    meta = prefix + ".metadata"
    rows = []
    chunks: dict[str, int] = {}
    for key, e in d.entries.items():
        for c in e.chunks:
            if c.file:
                chunks[c.file] = chunks.get(c.file, 0) + 1
        if e.kind != "tensor":
            continue
        shape = tuple(e.shape or ())
        numel = 1
        for dim in shape:
            numel *= dim
        itemsize = ITEMSIZE.get(e.dtype, 1) if e.dtype is not None else 1
        rows.append(TensorInfo(key, e.dtype, shape, meta, 0, numel * itemsize, numel, "other",
                               False))
    meta_path = os.path.join(folder, ".metadata")
    try:
        size = os.path.getsize(meta_path)
    except OSError:
        size = None
    values = sum(1 for e in d.entries.values() if e.kind != "tensor")
    out = [FileInfo(meta, meta_path, size, tensors=tuple(rows), problems=d.problems,
                    format="dcp-metadata", source=d,
                    detail=f"DCP metadata: {len(rows):,} tensors and {values:,} other values "
                    f"in {len(d.files)} rank file{'s' if len(d.files) != 1 else ''}")]
    for name, nbytes in d.files.items():
        n = chunks.get(name, 0)
        out.append(FileInfo(prefix + name, os.path.join(folder, name), nbytes, format="dcp-rank",
                            detail=f"DCP rank file: {n:,} chunk{'s' if n != 1 else ''}"))
    return out


def finish(layout: Layout, files: list[FileInfo]) -> Checkpoint:
    """Assemble a Checkpoint and run the cross-checks once every file is in."""
    from ckpt_browser.readers.integrity import cross_check

    problems = list(layout.problems)
    for f in files:
        problems.extend(f.problems)
    shards, apart = set(layout.shards), set(layout.apart)
    with paused_gc():
        problems.extend(cross_check(layout, [f for f in files if f.name not in apart and (
            f.name in shards or (layout.index is None and f.format == "safetensors"))]))
    order = {n: i for i, n in enumerate(layout.files)}
    files = sorted(files, key=lambda f: order.get(f.name, len(order)))
    return Checkpoint(layout, tuple(files), tuple(dict.fromkeys(problems)))

