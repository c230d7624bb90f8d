"""A torch zip's small records and every pickle in it, read from raw bytes and CRC-checked.

torch.load reads data.pkl, byteorder, version ... with miniz and never checks their CRC-32;
torch.jit.load and torch.package unpickle other *.pkl entries too (constants.pkl, a second
root's data.pkl). Each is read here within the pickle cap, its checksum compared, and every
pickle goes through the same unpickler as data.pkl, so code hidden in any of them is reported.
Storage records are never read.
"""

from __future__ import annotations

import copy
import io
import lzma
import struct
import zipfile
import zlib
from collections.abc import Callable

from ckpt_browser import limits
from ckpt_browser.model import ERROR, INFO, WARNING, Problem
from ckpt_browser.readers.pickle_safe import Unpickled, describe, unpickle
from ckpt_browser.readers.zipdir import Entry

SMALL = {b"byteorder", b"version", b".data/version", b".format_version", b".storage_alignment",
         b".data/serialization_id", b"archive_format", b"archive_version"}
MAX_SMALL = 4096
NO_CRC = ("saved without CRC-32 checksums (torch.serialization.set_crc32_options(False)): "
          "the records cannot be checked against them")


def unchecked(entries: list[Entry]) -> bool:
    """torch.save with set_crc32_options(False) writes 0 as every checksum."""
    return any(e.usize for e in entries) and all(e.crc == 0 for e in entries)


def crc_problem(text: str, data: bytes, crc: int, usize: int, name: str) -> Problem | None:
    """None when `data` is the whole record and matches its checksum."""
    if len(data) == usize and zlib.crc32(data) == crc:
        return None
    return Problem(ERROR, name, f"zip entry {text!r} fails its CRC-32 check (its {len(data):,} "
                   f"bytes do not match the checksum and size its entry records; torch.load "
                   "reads it anyway, zipfile refuses it, unzip reports it damaged): other "
                   "readers may see different contents than shown here")


def check_records(f, entries: list[Entry], starts: dict[int, int], shown: tuple[bytes, int],
                  name: str, allow: dict | None = None,
                  seen: Callable[[str, Unpickled], None] | None = None,
                  ) -> tuple[list[Problem], tuple[str, ...]]:
    """CRC problems of the small records; the unsafe globals of every pickle but `shown`,
    read with `allow` (a TorchScript archive's own). `seen(entry name, result)` is told of
    each pickle read."""
    problems = [Problem(INFO, name, NO_CRC)] if unchecked(entries) else \
        _small_records(f, entries, starts, name)
    return problems, _pickles(f, entries, starts, shown, name, problems, allow, seen)


def _small_records(f, entries, starts, name) -> list[Problem]:
    problems = []
    for e in entries:
        if e.name.split(b"/", 1)[-1] in SMALL and e.usize <= MAX_SMALL and e.offset in starts:
            data = read_entry(f, e, starts[e.offset], MAX_SMALL)
            bad = crc_problem(e.text, data, e.crc, e.usize, name) if data is not None else None
            problems += [bad] if bad else []
    return problems


def with_zipfile_view(f, zf, entries: list[Entry], starts: dict[int, int],
                      size: int) -> list[Entry]:
    """torch's entries plus those only Python's zipfile lists (a second directory ...)."""
    known = {(e.name, e.offset) for e in entries}
    extra = []
    for i in zf.infolist() if zf is not None else ():
        raw = raw_name(i)
        if (raw, i.header_offset) in known:
            continue  # its local header was read by the checks already
        start = local_start(f, i.header_offset, size)
        if start is None:
            continue
        starts.setdefault(i.header_offset, start)
        extra.append(Entry(raw, i.flag_bits, i.compress_type, i.CRC, i.compress_size,
                           i.file_size, i.header_offset))
    return entries + extra


def raw_name(info) -> bytes:
    return info.orig_filename.encode("utf-8" if info.flag_bits & 0x800 else "cp437")


def _pickles(f, entries, starts, shown, name, problems, allow, seen) -> tuple[str, ...]:
    unsafe: dict[str, None] = {}
    picked = [e for e in entries if e.name.lower().endswith(b".pkl")
              and (e.name, e.offset) != shown and e.offset in starts]
    lim = limits.LIMITS
    budget = lim.pickle_bytes
    for i, e in enumerate(picked):
        if i == lim.zip_pickles or e.usize > budget:
            problems.append(Problem(ERROR, name, f"{len(picked) - i:,} more pickles in the zip "
                                    f"(e.g. {e.text!r}) are not checked: over the "
                                    f"{lim.pickle_bytes:,}-byte or {lim.zip_pickles:,}-pickle "
                                    "limit; they could run code when loaded"))
            break
        budget -= e.usize
        data = read_entry(f, e, starts[e.offset], e.usize)
        if data is None:
            problems.append(Problem(WARNING, name, f"zip entry {e.text!r} is compressed with "
                                    f"method {e.method}; the pickle in it is not checked"))
            continue
        if not unchecked(entries):
            bad = crc_problem(e.text, data, e.crc, e.usize, name)
            problems += [bad] if bad else []
        got = unpickle(io.BytesIO(data), name, allow, storage_ids="zip")
        if seen is not None:
            seen(e.text, got)
        if got.unsafe:
            unsafe.update(dict.fromkeys(got.unsafe))
            problems.append(Problem(ERROR, name, f"unsafe: its zip entry {e.text!r} is a "
                                    f"pickle that calls {describe(got.unsafe)} when loaded (not "
                                    "run here; whoever loads this entry runs it: torch.load "
                                    "where zip readers disagree, torch.jit.load, torch.package)"))
        elif not got.ok:
            problems.append(Problem(WARNING, name, f"zip entry {e.text!r} is a pickle that "
                                    f"cannot be read to its end ({got.problems[-1].message}); "
                                    "code past that point would not be reported"))
    return tuple(unsafe)


def read_entry(f, e: Entry, start: int, limit: int) -> bytes | None:
    """At most limit + 1 bytes of an entry's content; None for a method other than 0 and 8."""
    f.seek(start)
    if e.method == 0:
        return f.read(min(e.csize, limit + 1))
    if e.method != 8:
        return None
    inflate, out, left = zlib.decompressobj(-15), bytearray(), e.csize
    try:
        while left > 0 and len(out) <= limit:
            chunk = f.read(min(left, 2**20))
            if not chunk:
                break
            left -= len(chunk)
            out += inflate.decompress(chunk, limit + 1 - len(out))
            if inflate.unconsumed_tail:
                break
    except zlib.error:
        pass  # the bytes inflated so far; the CRC check says the rest is damaged
    return bytes(out)


def local_start(f, offset: int, size: int) -> int | None:
    """Where the data of the local header at `offset` starts."""
    if offset + 30 > size:
        return None
    f.seek(offset)
    head = f.read(30)
    if head[:4] != b"PK\x03\x04":
        return None
    n_name, n_extra = struct.unpack_from("<HH", head, 26)
    return offset + 30 + n_name + n_extra


def read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int,
                verify: bool = True) -> bytes:
    """At most `limit` bytes of a member, 1 MiB at a time: zipfile sizes one read by the
    compressed size the entry claims, so a 1 KB file claiming 2 GiB would allocate 2 GiB.
    verify=False skips zipfile's CRC check (which raises, losing the bytes): the caller
    checks the CRC itself and still shows what torch.load would read."""
    if not verify:
        info = copy.copy(info)
        info.CRC = None  # type: ignore[assignment]  # zipfile then skips its check
    out = bytearray()
    try:
        with zf.open(info) as member:
            while len(out) < limit:
                chunk = member.read(min(2**20, limit - len(out)))
                if not chunk:
                    break
                out += chunk
    except (zlib.error, lzma.LZMAError, EOFError, OSError) as e:  # bz2 says OSError
        raise zipfile.BadZipFile(f"{info.filename} cannot be decompressed "
                                 f"(method {info.compress_type}): {e}") from None
    return bytes(out)
