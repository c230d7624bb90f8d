"""A zip's end records and central directory as torch's reader (miniz) finds them, from raw bytes.

miniz takes the last end-of-central-directory record in the file and, when a ZIP64 locator
sits right before it, the ZIP64 end record at the offset the locator gives; it then reads as
many entries as that record counts, from the offset it gives. Python's zipfile reads whatever
lies just before the end records, for as many bytes as they say, whatever the count. This
module only reads; zipcheck compares the two views.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

EOCD = struct.Struct("<4sHHHHIIH")
ZIP64_LOCATOR = struct.Struct("<4sIQI")
ZIP64_END = struct.Struct("<4sQHHIIQQQQ")
CENTRAL = struct.Struct("<4sHHHHHHIIIHHHHHII")
EOCD_SIG, LOCATOR_SIG, ZIP64_SIG, CENTRAL_SIG = (b"PK\x05\x06", b"PK\x06\x07", b"PK\x06\x06",
                                                 b"PK\x01\x02")
TAIL = 2**16 + EOCD.size  # zipfile's search window: a maximal comment plus the record


@dataclass(frozen=True)
class Entry:
    name: bytes  # raw, as miniz compares it
    flags: int
    method: int
    crc: int
    csize: int
    usize: int
    offset: int  # of its local header

    @property
    def text(self) -> str:
        return self.name.decode("utf-8", "replace")


@dataclass
class Directory:
    end_at: int  # the classic end record miniz takes (the last one)
    comment: int  # its comment length
    classic: tuple[int, int, int]  # its (entries, directory size, directory offset)
    count: int  # the values miniz uses: ZIP64 ones when there is a ZIP64 end record
    size: int
    offset: int
    zip64_at: int | None = None  # where the locator puts the ZIP64 end record
    python_start: int = 0  # where Python's zipfile reads the directory: just before the end
    python_zip64: tuple[int, int, int] | None = None  # the ZIP64 record zipfile reads, if any
    others: list[int] = field(default_factory=list)  # other plausible end records
    entries: list[Entry] = field(default_factory=list)
    unread: str = ""  # why the entries could not all be read


def read_directory(f, size: int, cap: int) -> Directory | None:
    """None when there is no end record at all; the directory is read only within `cap`."""
    start = max(size - TAIL, 0)
    f.seek(start)
    tail = f.read(size - start)
    ends = [start + i for i in _find_all(tail, EOCD_SIG) if start + i + EOCD.size <= size]
    if not ends:
        return None
    at = ends[-1]
    _, _, _, _, count, cd_size, cd_offset, comment = EOCD.unpack_from(tail, at - start)
    d = Directory(at, comment, (count, cd_size, cd_offset), count, cd_size, cd_offset,
                  others=[p for p in ends[:-1] if _plausible(tail, p - start, p, size)])
    _read_zip64(f, d)
    d.python_start = d.end_at - d.size if d.python_zip64 is None else \
        d.end_at - ZIP64_LOCATOR.size - ZIP64_END.size - d.python_zip64[1]
    if d.size > cap:
        d.unread = f"the central directory claims {d.size:,} bytes, over the {cap:,}-byte limit"
        return d
    if d.offset + d.size > d.end_at:
        d.unread = (f"the end record puts the central directory at bytes {d.offset:,}-"
                    f"{d.offset + d.size:,}, past the end record at byte {d.end_at:,}")
        return d
    f.seek(d.offset)
    _read_entries(f.read(d.size), d)
    return d


def _find_all(data: bytes, sig: bytes) -> list[int]:
    out, i = [], data.find(sig)
    while i >= 0:
        out.append(i)
        i = data.find(sig, i + 1)
    return out


def _plausible(tail: bytes, i: int, at: int, size: int) -> bool:
    """An end record, not 4 stray bytes: one disk, and its directory and comment fit."""
    _, disk, disk_cd, _, _, cd_size, cd_offset, comment = EOCD.unpack_from(tail, i)
    return disk == disk_cd == 0 and cd_offset + cd_size <= at and at + EOCD.size + comment <= size


def _read_zip64(f, d: Directory) -> None:
    """miniz reads the ZIP64 end record where the locator says; zipfile, right before it."""
    if d.end_at < ZIP64_LOCATOR.size:
        return
    f.seek(d.end_at - ZIP64_LOCATOR.size)
    sig, _, where, _ = ZIP64_LOCATOR.unpack(f.read(ZIP64_LOCATOR.size))
    if sig != LOCATOR_SIG:
        return
    record = _zip64_end(f, where) if where + ZIP64_END.size <= d.end_at else None
    if record is not None:
        d.zip64_at = where
        d.count, d.size, d.offset = record
    if d.end_at >= ZIP64_LOCATOR.size + ZIP64_END.size:
        d.python_zip64 = _zip64_end(f, d.end_at - ZIP64_LOCATOR.size - ZIP64_END.size)


def _zip64_end(f, at: int) -> tuple[int, int, int] | None:
    f.seek(at)
    raw = f.read(ZIP64_END.size)
    if len(raw) < ZIP64_END.size or raw[:4] != ZIP64_SIG:
        return None
    *_, count, size, offset = ZIP64_END.unpack(raw)
    return count, size, offset


def _read_entries(data: bytes, d: Directory) -> None:
    pos = 0
    for _ in range(min(d.count, len(data) // CENTRAL.size)):
        if data[pos:pos + 4] != CENTRAL_SIG or pos + CENTRAL.size > len(data):
            break
        (_, _, _, flags, method, _, _, crc, csize, usize, n_name, n_extra, n_comment, _, _, _,
         offset) = CENTRAL.unpack_from(data, pos)
        name = data[pos + CENTRAL.size:pos + CENTRAL.size + n_name]
        extra = data[pos + CENTRAL.size + n_name:pos + CENTRAL.size + n_name + n_extra]
        usize, csize, offset = zip64_values(extra, usize, csize, offset)
        d.entries.append(Entry(bytes(name), flags, method, crc, csize, usize, offset))
        pos += CENTRAL.size + n_name + n_extra + n_comment
    if len(d.entries) < d.count:
        d.unread = (f"the central directory at byte {d.offset:,} holds {len(d.entries):,} "
                    f"readable entries, not the {d.count:,} its end record counts")
    elif pos != len(data):
        d.unread = (f"the central directory's {d.count:,} entries fill {pos:,} of the "
                    f"{len(data):,} bytes its end record gives it")


def zip64_values(extra: bytes, *fields: int) -> tuple[int, ...]:
    """Replace the 0xFFFFFFFF sizes and offset by the ZIP64 extra field's 8-byte values."""
    values, pos = list(fields), 0
    while pos + 4 <= len(extra):
        kind, length = struct.unpack_from("<HH", extra, pos)
        if kind == 1:
            body, k = extra[pos + 4:pos + 4 + length], 0
            for i, v in enumerate(values):
                if v == 0xFFFFFFFF and k + 8 <= len(body):
                    values[i] = struct.unpack_from("<Q", body, k)[0]
                    k += 8
        pos += 4 + length
    return tuple(values)
