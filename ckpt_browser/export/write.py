"""Write a Plan as safetensors files in OUT, the layout `transformers` and `safetensors` load:
one `model.safetensors`, or `model-0000i-of-0000n.safetensors` and `model.safetensors.index.json`
(`diffusion_pytorch_model...` beside a diffusers config, the names diffusers loads).

Everything is written inside OUT/PARTIAL first, each file read back and checked, then moved
into OUT, the index (or the one file) last: an export stopped at any point leaves nothing in
OUT that a loader takes for a complete checkpoint. Memory: one block at a time; a tensor stored
whole in one file is copied by the kernel (copy_file_range) and compared back block by block.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from ckpt_browser.errors import UsageError
from ckpt_browser.export.item import Item
from ckpt_browser.export.plan import Plan, out_bytes
from ckpt_browser.values.cast import caster
from ckpt_browser.values.locate import Piece
from ckpt_browser.values.read import Cancelled, ValuesError, _Fd, iter_raw

PARTIAL = ".ckpt-browser-export.partial"  # inside OUT while writing
STEM = "model"  # diffusers': "diffusion_pytorch_model" (stem_for)
# copied beside the weights from the checkpoint's folder, so OUT loads with from_pretrained
CONFIGS = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
           "tokenizer.model", "special_tokens_map.json", "added_tokens.json", "vocab.json",
           "merges.txt", "chat_template.jinja", "preprocessor_config.json", "adapter_config.json")
CONFIG_BYTES = 64 * 2**20
BLOCK = 16 * 2**20  # bytes copied or compared at a time

Progress = Callable[[int, int, str], None]  # (bytes done, bytes in all, tensor name)


class WriteError(Exception):
    """OUT could not be written (disk full, permission, a check that failed): one line."""


@dataclass
class Written:
    files: list[str]  # in OUT: the configs, the weights, the index last when there is one
    weights: list[str]  # the safetensors files
    index: str | None  # the index's name, when there is one
    tensors: int
    nbytes: int


def prepare_out(out: str, source_root: str, source_is_dir: bool) -> bool:
    """OUT is a new or empty folder, not inside the checkpoint folder (UsageError if not);
    True when this made it."""
    real_out = os.path.realpath(out)
    if source_is_dir:
        root = os.path.realpath(source_root)
        if real_out == root or real_out.startswith(root.rstrip(os.sep) + os.sep):
            raise UsageError(out, "is inside the checkpoint folder; export never writes there")
    if os.path.lexists(out):
        if not os.path.isdir(out):
            raise UsageError(out, "exists and is not a folder")
        if os.path.lexists(os.path.join(out, PARTIAL)):
            raise UsageError(out, f"holds an interrupted export ({PARTIAL}): remove it first")
        with os.scandir(out) as entries:  # one entry says it: never the whole listing
            if next(entries, None) is not None:
                raise UsageError(out, "is not empty: export writes only into a new or empty "
                                 "folder")
    created = not os.path.lexists(out)
    try:
        os.makedirs(os.path.join(out, PARTIAL))
    except OSError as e:
        raise UsageError(out, f"cannot create it: {e.strerror or e}") from None
    return created


class NoRoom(WriteError):
    """Less free space where OUT goes than the export needs."""

    def __init__(self, out: str, needed: int, where: str, free: int) -> None:
        super().__init__(f"{out}: the export needs {needed:,} bytes, and {where} has "
                         f"{free:,} free")
        self.out, self.needed, self.where, self.free = out, needed, where, free


def room_for(out: str, nbytes: int) -> None:
    """NoRoom when the file system OUT is on has less free space than the export needs:
    said before writing, not after half an hour of it."""
    where = os.path.abspath(out)
    while not os.path.isdir(where) and os.path.dirname(where) != where:
        where = os.path.dirname(where)
    try:
        free = shutil.disk_usage(where).free
    except OSError:
        return  # no answer: the writes will say
    if free < nbytes:
        raise NoRoom(out, nbytes, where, free)


def abandon(out: str, created: bool) -> None:
    """After a failure: the partial files go, and OUT too if this export made it."""
    shutil.rmtree(os.path.join(out, PARTIAL), ignore_errors=True)
    if created:
        try:
            os.rmdir(out)
        except OSError:
            pass


def shards_of(items: list[Item], max_bytes: int) -> list[list[Item]]:
    """Items in order, a new file when the next would pass max_bytes (a bigger tensor gets a
    file of its own). Tied items go with the file of the tensor they repeat (not stored)."""
    out: list[list[Item]] = [[]]
    size = 0
    for i in items:
        if i.same_as is not None:
            continue
        n = out_bytes(i)
        if out[-1] and size + n > max_bytes:
            out.append([])
            size = 0
        out[-1].append(i)
        size += n
    return out


def configs(root: str | None, sub: str = "", adapter: bool = False
            ) -> tuple[list[tuple[str, bytes]], list[str]]:
    """The model's config and tokenizer files, read (bounded, regular files only), from the
    folder the weights came from (`sub` of the checkpoint folder `root`: diffusers' unet/),
    else from `root` (a DeepSpeed global_stepN/ under the Trainer's checkpoint-N/); and a
    note for each one left behind."""
    if root is None:
        return [], []
    found = _configs(os.path.join(root, sub), adapter) if sub else ([], [])
    return found if found[0] or found[1] else _configs(root, adapter)


def _configs(folder: str, adapter: bool) -> tuple[list[tuple[str, bytes]], list[str]]:
    from ckpt_browser.readers.regular import read_small, why_unreadable

    found, notes = [], []
    # adapter_config.json beside a whole model would make transformers load it as an adapter
    for name in (n for n in CONFIGS if adapter or n != "adapter_config.json"):
        path = os.path.join(folder, name)
        if not os.path.lexists(path):
            continue
        try:
            found.append((name, read_small(path, CONFIG_BYTES)))
        except OSError as e:
            notes.append(f"{name} not copied: {why_unreadable(e)}")
    return found, notes


def stem_for(extras, adapter: bool) -> str:
    """diffusers loads `diffusion_pytorch_model*.safetensors` beside a config of its own (one
    that names `_diffusers_version`), PEFT an adapter as `adapter_model.safetensors`;
    everything else, transformers' `model*.safetensors`."""
    if adapter:
        return "adapter_model"
    # the key in its bytes, not a parse: a config nested 100,000 deep is still only data
    config = dict(extras).get("config.json") or b""
    return "diffusion_pytorch_model" if b'"_diffusers_version"' in config else STEM


def write(plan: Plan, out: str, max_bytes: int, progress: Progress | None = None,
          cancel: threading.Event | None = None,
          extras: list[tuple[str, bytes]] = ()) -> Written:  # type: ignore[assignment]
    shards = shards_of(plan.items, max_bytes)
    n = len(shards)
    stem = stem_for(extras, plan.adapter)
    names = [f"{stem}.safetensors"] if n == 1 else \
        [f"{stem}-{k + 1:05d}-of-{n:05d}.safetensors" for k in range(n)]
    index = f"{stem}.safetensors.index.json" if n > 1 else None
    partial = os.path.join(out, PARTIAL)
    total, done = plan.nbytes, [0]

    def step(k: int, name: str) -> None:
        done[0] += k
        if progress is not None:
            progress(done[0], total, name)

    for name, data in extras:  # the config first: with the weights, OUT is loadable
        _write_small(os.path.join(partial, name), data)
    for name, items in zip(names, shards):
        _write_file(os.path.join(partial, name), items, step, cancel)
    files = [name for name, _ in extras] + list(names)
    if index is not None:
        where = {i.name: f for f, items in zip(names, shards) for i in items}
        doc = {"metadata": {"total_size": total}, "weight_map": where}
        _write_small(os.path.join(partial, index), (json.dumps(doc, indent=2) + "\n").encode())
        files.append(index)
    for f in files:  # the loadable name last: the one file, or the index
        os.replace(os.path.join(partial, f), os.path.join(out, f))
    os.rmdir(partial)
    return Written(files, names, index, sum(len(s) for s in shards), total)


def header(items: list[Item]) -> bytes:
    """The safetensors header: tensors in order, back to back; padded with spaces to 8 bytes."""
    doc: dict = {"__metadata__": {"format": "pt"}}
    at = 0
    for i in items:
        n = out_bytes(i)
        doc[i.name] = {"dtype": i.dtype, "shape": list(i.shape), "data_offsets": [at, at + n]}
        at += n
    text = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text


def _write_file(path: str, items: list[Item], step, cancel) -> None:
    head = header(items)
    checks = []  # (item, offset in the file, crc32 of what was written or None: compare)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        _write_all(fd, head, 0)
        at = len(head)
        for i in items:
            if cancel is not None and cancel.is_set():
                raise Cancelled()
            piece = _whole(i)
            if piece is not None:
                _copy(piece, fd, at, step, i.name, cancel)
                checks.append((i, at, None))
            else:
                checks.append((i, at, _stream(i, fd, at, step, cancel)))
            at += out_bytes(i)
    except OSError as e:
        os.close(fd)
        raise WriteError(f"{path}: cannot write: {e.strerror or e}") from None
    except BaseException:
        os.close(fd)
        raise
    # to the disk while it is read back from memory: the two overlap
    synced: list[OSError | None] = []
    flush = threading.Thread(target=_sync_and_close, args=(fd, synced), daemon=True)
    flush.start()
    try:
        _verify(path, head, checks)
    finally:
        flush.join()
    if synced and synced[0] is not None:
        raise WriteError(f"{path}: cannot write: {synced[0].strerror or synced[0]}")


def _sync_and_close(fd: int, result: list) -> None:
    try:
        os.fsync(fd)
        result.append(None)
    except OSError as e:
        result.append(e)
    finally:
        os.close(fd)


def _whole(i: Item) -> Piece | None:
    """The one byte range that holds the tensor as it is to be written, if there is one."""
    loc = i.loc
    if i.dtype != loc.dtype or loc.stride is not None or len(loc.pieces) != 1:
        return None
    p = loc.pieces[0]
    if p.length != out_bytes(i) or tuple(p.sizes) != tuple(loc.shape):
        return None  # a DCP chunk wrapped in its own archive, or a part of the tensor
    from ckpt_browser.remote import range_reader

    return None if range_reader(p.path) is not None else p


def _copy(p: Piece, fd: int, at: int, step, name: str, cancel) -> None:
    with _Fd(p.path) as src:  # the plan checked its end (check_ends); a file cut since
        done = 0  # ends the copy early, which says so below
        while done < p.length:
            if cancel is not None and cancel.is_set():
                raise Cancelled()
            want = min(BLOCK, p.length - done)
            try:
                got = os.copy_file_range(src.fd, fd, want, p.offset + done, at + done)
            except OSError:  # another file system, an old kernel: through memory
                got = _copy_block(src, fd, p.offset + done, at + done, want)
            if got <= 0:
                raise ValuesError(f"{p.path}: the file ended while copying {name}")
            done += got
            step(got, name)


def _copy_block(src, fd: int, frm: int, to: int, n: int) -> int:
    buf = src.read_exact(frm, n)
    _write_all(fd, buf, to)
    return n


def _stream(i: Item, fd: int, at: int, step, cancel) -> int:
    """Blocks read and assembled (DCP chunks, ZeRO partitions, views), cast when asked,
    written in order from byte `at`; the crc32 of what was written."""
    crc, end = 0, at + out_bytes(i)
    cast = caster(i.loc.dtype, i.dtype) if i.dtype != i.loc.dtype else None
    for raw, block in iter_raw(i.loc, BLOCK, cancel):
        data = memoryview(cast(block) if cast else (raw if raw is not None else block)).cast("B")
        if at + len(data) > end:
            raise WriteError(f"{i.loc.file}: {i.name}: more bytes than its shape holds")
        _write_all(fd, data, at)
        at += len(data)
        crc = zlib.crc32(data, crc)
        step(len(data), i.name)
    if at != end:
        raise WriteError(f"{i.loc.file}: {i.name}: {end - at:,} bytes short of its shape")
    return crc


def _verify(path: str, head: bytes, checks) -> None:
    """Read the file back: its header as written, each tensor's bytes equal to the source's
    (a copy) or to the crc32 of what was written. Two buffers, filled in place."""
    mine, theirs = bytearray(BLOCK), bytearray(BLOCK)
    with _Fd(path) as f:
        if bytes(f.read_exact(0, len(head))) != head:
            raise WriteError(f"{path}: the header read back differs from the one written")
        for item, at, crc in checks:
            n = out_bytes(item)
            if crc is None:
                p = item.loc.pieces[0]
                with _Fd(p.path) as src:
                    for k in range(0, n, BLOCK):
                        m = min(BLOCK, n - k)
                        a, b = _fill(f, mine, at + k, m), _fill(src, theirs, p.offset + k, m)
                        if not (a == b if m == BLOCK else a[:m] == b[:m]):  # memcmp
                            raise WriteError(f"{path}: {item.name} read back differs from "
                                             f"its source at byte {k:,}")
                continue
            got = 0
            for k in range(0, n, BLOCK):
                m = min(BLOCK, n - k)
                got = zlib.crc32(memoryview(_fill(f, mine, at + k, m))[:m], got)
            if got != crc:
                raise WriteError(f"{path}: {item.name} read back differs from what was written")


def _fill(f, buf: bytearray, offset: int, n: int) -> bytearray:
    """`buf`'s first n bytes from `offset` of `f` (no new buffer per block)."""
    if f.readinto(memoryview(buf)[:n], offset) < n:
        raise WriteError(f"{f.path}: the file ends before byte {offset + n:,}")
    return buf


def _write_all(fd: int, data, at: int | None = None) -> None:
    view = memoryview(data).cast("B")
    while view:
        n = os.write(fd, view) if at is None else os.pwrite(fd, view, at)
        if at is not None:
            at += n
        view = view[n:]


def _write_small(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        _write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
