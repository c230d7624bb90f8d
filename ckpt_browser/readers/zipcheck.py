"""Zip parser differentials: refuse to choose silently between two readings.

We show a torch zip as Python's zipfile reads it; torch.load reads it with miniz (zipdir.py
reads it the same way), unzip and streaming extractors their own way. Wherever the file lets
them disagree (two end records or directories, counts, ZIP64 records, names, local headers,
bytes outside any entry) it is an error naming the entry. torch.save writes none of these.
"""

from __future__ import annotations

import struct
import zipfile
from dataclasses import dataclass, field

from ckpt_browser.model import ERROR, Problem
from ckpt_browser.readers.zipdir import EOCD, Directory, Entry, read_directory, zip64_values
from ckpt_browser.readers.zipentries import raw_name

DIFFERENT = "other readers may see different contents than shown here"
LOCAL = struct.Struct("<4sHHHHHIIIHH")


@dataclass
class ZipCheck:
    problems: list[Problem] = field(default_factory=list)
    starts: dict[int, int] = field(default_factory=dict)  # local header -> its data's start
    entries: list[Entry] = field(default_factory=list)  # as torch's reader lists them


def check_zip(f, zf: zipfile.ZipFile | None, size: int, name: str, cap: int) -> ZipCheck:
    out = ZipCheck()
    d = read_directory(f, size, cap)
    if d is None:
        return out
    out.entries = d.entries
    spans, local = _local_headers(f, d.entries, size, out.starts)
    # an end record inside an entry belongs to a zip stored in it (a .pt2's sample inputs)
    d.others = [p for p in d.others if not any(a <= p < b for a, b, _ in spans)]
    messages = _end_records(d, size) + _against_zipfile(d, zf) + name_problems(d.entries)
    messages += local + _outside(spans, d, size)
    out.problems = [Problem(ERROR, name, f"{m}: {DIFFERENT}") for m in messages]
    return out


def _end_records(d: Directory, size: int) -> list[str]:
    bad = []
    if d.others:
        bad.append(f"the file holds {len(d.others) + 1} zip end records (at bytes "
                   f"{', '.join(f'{p:,}' for p in [*d.others, d.end_at])}); torch, zipfile "
                   "and unzip take the last one, other readers may take another")
    if d.zip64_at is not None:
        held = dict(zip(("entries", "directory size", "directory offset"), d.classic))
        z64 = dict(zip(held, (d.count, d.size, d.offset)))
        for what, v in held.items():
            if v not in (0xFFFF, 0xFFFFFFFF) and v != z64[what]:
                bad.append(f"the ZIP64 end record gives {z64[what]:,} as the {what}, the "
                           f"classic end record {v:,} (torch reads the ZIP64 one)")
    py = d.python_zip64
    if d.zip64_at is not None and py != (d.count, d.size, d.offset):
        bad.append(f"the ZIP64 locator points at a ZIP64 end record at byte {d.zip64_at:,}, "
                   "but Python's zipfile reads " + ("another one, right before the locator"
                                                    if py else "the classic end record"))
    elif d.zip64_at is None and py is not None:
        bad.append("Python's zipfile reads a ZIP64 end record that torch's reader ignores "
                   "(the locator does not point at it)")
    if d.python_start != d.offset:
        what = "a second central directory" if d.entries else "something else"
        bad.append(f"the end record puts the central directory at byte {d.offset:,}, but "
                   f"Python's zipfile (and unzip) read {what} at byte {d.python_start:,}")
    if d.unread:
        bad.append(d.unread)
    tail = d.end_at + EOCD.size + d.comment
    if tail != size:
        bad.append(f"the zip end record's comment ends at byte {tail:,}, the file at {size:,}")
    return bad


def _against_zipfile(d: Directory, zf: zipfile.ZipFile | None) -> list[str]:
    """The entries Python's zipfile lists against those torch's reader lists."""
    if zf is None:
        return []
    ours = [(e.name, e.offset) for e in d.entries]
    theirs = [(raw_name(i), i.header_offset) for i in zf.infolist()]
    if ours == theirs:
        return []
    extra = next((n for n, _ in theirs if (n, _) not in ours), None)
    missing = next((n for n, _ in ours if (n, _) not in theirs), None)
    example = f"e.g. {_text(extra)!r} only for zipfile" if extra else \
        f"e.g. {_text(missing)!r} only for torch" if missing else "in another order"
    return [f"Python's zipfile lists {len(theirs):,} zip entries and torch's reader "
            f"{len(ours):,}, not the same ones ({example})"]


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def name_problems(entries: list[Entry]) -> list[str]:
    seen: dict[bytes, int] = {}
    folded: dict[bytes, bytes] = {}
    kinds: dict[str, list[str]] = {}
    for e in entries:
        n = e.name
        text = n.decode("utf-8", "replace")
        if b"\0" in n:
            kinds.setdefault("nul", []).append(text)
        if b"\\" in n:
            kinds.setdefault("backslash", []).append(text)
        if n.startswith((b"/", b"\\")) or b".." in n.replace(b"\\", b"/").split(b"/") or \
                n[1:3] == b":/":
            kinds.setdefault("traversal", []).append(text)
        seen[n] = seen.get(n, 0) + 1
        if seen[n] == 2:
            kinds.setdefault("twice", []).append(text)
        if folded.setdefault(n.lower(), n) != n:
            kinds.setdefault("case", []).append(text)
    return [_entries(names, WHY[k]) for k, names in kinds.items()]


WHY = {
    "nul": "with a NUL byte in the name (Python's zipfile cuts the name there, torch's "
           "reader keeps it whole)",
    "backslash": "with a backslash in the name (unzip and Windows readers take it for a "
                 "folder separator, torch does not)",
    "traversal": "naming a path outside the archive (path traversal); nothing is extracted "
                 "here, but unzip would write outside the folder",
    "twice": "listed twice in the central directory (Python's zipfile reads the last copy, "
             "torch's reader whichever its sorted lookup lands on)",
    "case": "whose name differs from another entry's only in case (torch's reader looks "
            "names up ignoring case)",
}


def _entries(names: list[str], why: str) -> str:
    n = len(names)
    return f"{n:,} zip entr{'y' if n == 1 else 'ies'} {why}, e.g. {names[0]!r}"


def _local_headers(f, entries, size, starts) -> tuple[list[tuple[int, int, str]], list[str]]:
    """Each entry's local header against its central entry; (start, end, name) spans."""
    spans, differ = [], []
    for e in entries:
        if e.offset + LOCAL.size > size:
            differ.append(e.text)
            continue
        f.seek(e.offset)
        head = f.read(LOCAL.size)
        if len(head) < LOCAL.size or head[:4] != b"PK\x03\x04":
            differ.append(e.text)  # no local header there: each reader improvises
            continue
        _, _, flags, method, _, _, crc, csize, usize, n_name, n_extra = LOCAL.unpack(head)
        local_name = f.read(n_name)
        data = e.offset + LOCAL.size + n_name + n_extra
        starts.setdefault(e.offset, data)
        if not flags & 8 and 0xFFFFFFFF in (csize, usize):
            usize, csize = zip64_values(f.read(n_extra), usize, csize)
        same = local_name == e.name and method == e.method and \
            (flags & 8 or (crc, csize, usize) == (e.crc, e.csize, e.usize))
        end = data + e.csize
        if flags & 8:
            length = -1
            if end + 12 <= size:
                f.seek(end)
                length = _descriptor(f.read(24), e)
            same, end = same and length > 0, end + max(length, 0)
        if not same:
            differ.append(e.text)
        spans.append((e.offset, min(end, size), e.text))
    if not differ:
        return spans, []
    return spans, [_entries(differ, "whose local header (or data descriptor) differs from "
                                    "its central directory entry: a reader that streams the "
                                    "local headers sees other names or bytes")]


def _descriptor(raw: bytes, e: Entry) -> int:
    """The length of the data descriptor after an entry's data; -1 when it does not match."""
    for sig, wide in ((True, False), (True, True), (False, False), (False, True)):
        body = raw[4:] if sig else raw
        if sig and raw[:4] != b"PK\x07\x08":
            continue
        fmt = "<IQQ" if wide else "<III"
        if len(body) >= struct.calcsize(fmt) and \
                struct.unpack_from(fmt, body) == (e.crc, e.csize, e.usize):
            return struct.calcsize(fmt) + 4 * sig
    return -1


def _outside(spans: list[tuple[int, int, str]], d: Directory, size: int) -> list[str]:
    """Bytes no entry covers: a prefix, gaps, or bytes before the central directory."""
    gaps, pos, last = [], 0, None
    for start, end, text in sorted(spans):
        if start > pos:
            where = f"before the entry {text!r}" if last is None else \
                f"between the entries {last!r} and {text!r}"
            gaps.append((pos, start, where))
        pos, last = max(pos, end), text
    if d.offset > pos and d.offset <= d.end_at:
        gaps.append((pos, d.offset, "between the last entry and the central directory"))
    if not gaps:
        return []
    a, b, where = gaps[0]
    more = f" (and {len(gaps) - 1:,} more stretch{'es' if len(gaps) > 2 else ''})" \
        if len(gaps) > 1 else ""
    return [f"bytes {a:,}-{b:,} lie outside any zip entry, {where}{more}; torch.save writes "
            "none, and a reader that streams local headers may find hidden entries there"]
