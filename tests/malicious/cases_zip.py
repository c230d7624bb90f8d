"""Zip parser differentials: archives where two readers could see different contents.

Each optimizer.pt holds a clean AdamW data.pkl where Python's zipfile looks, and a hostile one
(os.system('touch PWNED-<case>')) where torch's reader (miniz), unzip or a streaming reader
looks instead. The zips are laid out by hand: `Rec` records, `lay` writes their local headers
back to back, `directory` their central entries, `end` the end record.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from tests.malicious.make_corpus import (
    ADAMW_STORAGES,
    DAMAGED,
    DOS_DATE,
    UNSAFE,
    adamw,
    case,
    dumps,
    hf_checkpoint,
    system,
)


@dataclass
class Rec:
    name: bytes
    data: bytes
    crc: int | None = None  # the checksum both headers record (default: the real one)
    local_name: bytes | None = None  # what the local header says (default: name)

    @property
    def checksum(self) -> int:
        return zlib.crc32(self.data) if self.crc is None else self.crc


def local(r: Rec) -> bytes:
    name = r.name if r.local_name is None else r.local_name
    return struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, DOS_DATE, r.checksum,
                       len(r.data), len(r.data), len(name), 0) + name + r.data


def central(r: Rec, offset: int) -> bytes:
    return struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 0x031E, 20, 0, 0, 0, DOS_DATE,
                       r.checksum, len(r.data), len(r.data), len(r.name), 0, 0, 0, 0,
                       0o100644 << 16, offset) + r.name


def lay(recs: list[Rec], out: bytearray) -> list[int]:
    """Append the records' local headers and data; their offsets."""
    offsets = []
    for r in recs:
        offsets.append(len(out))
        out += local(r)
    return offsets


def directory(recs: list[Rec], offsets: list[int], shift: int = 0) -> bytes:
    return b"".join(central(r, o - shift) for r, o in zip(recs, offsets))


def end(count: int, size: int, offset: int) -> bytes:
    return struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, count, count, size, offset, 0)


def zip64_end(count: int, size: int, offset: int) -> bytes:
    return struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 0x031E, 45, 0, 0, count, count, size,
                       offset)


def zip64_locator(at: int) -> bytes:
    return struct.pack("<IIQI", 0x07064B50, 0, at, 1)


def plain(recs: list[Rec], count: int | None = None) -> bytes:
    out = bytearray()
    offsets = lay(recs, out)
    cd = directory(recs, offsets)
    return bytes(out + cd + end(len(recs) if count is None else count, len(cd), len(out)))


def records(pkl: bytes, root: bytes = b"archive") -> list[Rec]:
    """What torch.save writes, in its order."""
    recs = [Rec(root + b"/data.pkl", pkl), Rec(root + b"/.format_version", b"1"),
            Rec(root + b"/.storage_alignment", b"64"), Rec(root + b"/byteorder", b"little")]
    recs += [Rec(root + b"/data/" + k.encode(), v) for k, v in ADAMW_STORAGES.items()]
    return recs + [Rec(root + b"/version", b"3\n"),
                   Rec(root + b"/.data/serialization_id", b"0" * 40)]


def clean() -> bytes:
    return dumps(adamw(), 2)


def hostile(name: str) -> bytes:
    return dumps(adamw({"payload": system(name)}), 2)


def zip_case(name: str, tries: str, words: str, live: str | None = "torch", exits=UNSAFE):
    """An HF checkpoint-1 whose optimizer.pt the decorated function writes."""
    def register(build):
        def write():
            hf_checkpoint(f"{name}/checkpoint-1", build(name))
        case(name=name, path=f"{name}/checkpoint-1", tries=tries, exits=exits, live=live,
             bad=f"{name}/checkpoint-1/optimizer.pt", words=words)(write)
        return build
    return register


# -- names ---------------------------------------------------------------------------------------

@zip_case("zip-two-datapkl",
          "optimizer.pt lists archive/data.pkl twice: Python's zipfile shows the last copy "
          "(clean); torch's reader takes whichever copy its sorted lookup lands on, here the "
          "first (hostile)", r"unsafe.*os\.system")
def two_datapkl(name: str) -> bytes:
    recs = records(hostile(name))
    recs.insert(7, Rec(b"archive/data.pkl", clean()))  # where miniz's binary search hits #1
    return plain(recs)


@zip_case("zip-nul-name",
          "a clean entry named 'archive/data.pkl\\0' after the hostile archive/data.pkl: "
          "Python's zipfile cuts the name at the NUL and shows the clean one; torch reads "
          "the hostile one", r"unsafe.*os\.system")
def nul_name(name: str) -> bytes:
    return plain(records(hostile(name)) + [Rec(b"archive/data.pkl\0", clean())])


@zip_case("zip-case-name",
          "a hostile archive/DATA.PKL beside the clean archive/data.pkl: torch's reader looks "
          "names up ignoring case and loads DATA.PKL; zipfile shows data.pkl",
          r"unsafe.*os\.system")
def case_name(name: str) -> bytes:
    return plain(records(clean()) + [Rec(b"archive/DATA.PKL", hostile(name))])


@zip_case("zip-backslash-name",
          "a hostile 'archive\\data.pkl' after the clean archive/data.pkl: unzip (and zipfile on "
          "Windows) take the backslash for a folder separator and extract it over data.pkl; "
          "torch.load itself reads the clean one", r"unsafe.*os\.system", live=None)
def backslash_name(name: str) -> bytes:
    return plain(records(clean()) + [Rec(b"archive\\data.pkl", hostile(name))])


@zip_case("zip-other-pickles",
          "besides a clean archive/data.pkl, a hostile archive/constants.pkl (torch.jit.load "
          "unpickles it) and a second root's other/data.pkl (what a reader that takes the root "
          "from another entry loads); torch.load itself reads the clean one",
          r"unsafe.*os\.system", live=None)
def other_pickles(name: str) -> bytes:
    return plain(records(clean()) + [Rec(b"archive/constants.pkl", hostile(name)),
                                     Rec(b"other/data.pkl", hostile(name + "-other"))])


# -- counts, directories and end records ---------------------------------------------------------

@zip_case("zip-count-short",
          "the end record counts one entry fewer than the directory holds: torch's reader stops "
          "before the last (clean) copy of archive/data.pkl and loads the first (hostile); "
          "zipfile reads the directory by size and shows the clean one", r"unsafe.*os\.system")
def count_short(name: str) -> bytes:
    recs = records(hostile(name)) + [Rec(b"archive/data.pkl", clean())]
    return plain(recs, count=len(recs) - 1)


def _two_directories(name: str) -> tuple[bytearray, list[Rec], list[Rec], list[int], int]:
    """Locals of a hostile and a clean data.pkl, then the other records; the records and
    offsets of directory A (hostile) and B (clean)."""
    out = bytearray()
    evil, good, rest = Rec(b"archive/data.pkl", hostile(name)), Rec(b"archive/data.pkl",
                                                                    clean()), records(clean())[1:]
    at = lay([evil, good] + rest, out)
    return out, [evil] + rest, [good] + rest, [at[0]] + at[2:], at[1]


@zip_case("zip-two-directories",
          "two central directories: the end record gives the offset of one listing the "
          "hostile data.pkl (torch's reader reads it there); the one right before the end "
          "record lists the clean data.pkl, which zipfile and unzip read", r"unsafe.*os\.system")
def two_directories(name: str) -> bytes:
    out, a, b, offsets, good_at = _two_directories(name)
    cd_a = directory(a, offsets)
    shift = len(cd_a)  # zipfile adds this 'prefix' to every offset of the directory it reads
    cd_b = directory(b, [good_at] + offsets[1:], shift)
    start = len(out)
    return bytes(out + cd_a + cd_b + end(len(a), len(cd_b), start))


@zip_case("zip64-locator",
          "two ZIP64 end records: the locator points at the one for the hostile directory "
          "(torch's reader and unzip follow it); zipfile reads the one right before the "
          "locator, for the clean directory", r"unsafe.*os\.system")
def zip64_two_records(name: str) -> bytes:
    out, a, b, offsets, good_at = _two_directories(name)
    cd_a = directory(a, offsets)
    at_a = len(out)
    out += cd_a
    record_a = len(out)
    out += zip64_end(len(a), len(cd_a), at_a)
    cd_b = directory(b, [good_at] + offsets[1:])
    at_b = len(out)
    out += cd_b + zip64_end(len(b), len(cd_b), at_b) + zip64_locator(record_a)
    return bytes(out + end(0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF))


@zip_case("zip64-count",
          "the ZIP64 end record counts one entry fewer than the classic one (and the "
          "directory): torch's reader trusts the ZIP64 count and never sees the last (clean) "
          "data.pkl; zipfile reads by size and shows it", r"unsafe.*os\.system")
def zip64_count(name: str) -> bytes:
    recs = records(hostile(name)) + [Rec(b"archive/data.pkl", clean())]
    out = bytearray()
    cd = directory(recs, lay(recs, out))
    start = len(out)
    out += cd
    record = len(out)
    out += zip64_end(len(recs) - 1, len(cd), start) + zip64_locator(record)
    return bytes(out + end(len(recs), len(cd), start))


@zip_case("zip-two-end-records",
          "a complete hostile archive's directory and end record, then a clean directory and "
          "the last end record: torch, zipfile and unzip take the last; a reader that takes "
          "the first end record it finds loads the hostile data.pkl",
          r"zip end records", live=None, exits=DAMAGED)
def two_end_records(name: str) -> bytes:
    out, a, b, offsets, good_at = _two_directories(name)
    cd_a = directory(a, offsets)
    start = len(out)
    out += cd_a + end(len(a), len(cd_a), start)
    cd_b = directory(b, [good_at] + offsets[1:])
    start = len(out)
    return bytes(out + cd_b + end(len(b), len(cd_b), start))


# -- checksums, local headers, hidden bytes ------------------------------------------------------

@zip_case("zip-bad-crc",
          "the hostile data.pkl carries the clean one's CRC-32: torch.load never checks it and "
          "runs the payload; zipfile refuses to read it", r"CRC")
def bad_crc(name: str) -> bytes:
    recs = records(hostile(name))
    recs[0].crc = zlib.crc32(clean())
    return plain(recs)


@zip_case("zip-local-name",
          "an unreferenced storage record archive/data/9 whose local header names it "
          "archive/data.pkl and holds the hostile pickle: torch and zipfile go by the central "
          "directory; a reader that streams local headers (Java's ZipInputStream, stream-unzip) "
          "meets archive/data.pkl twice and keeps the hostile one",
          r"local header", live=None, exits=DAMAGED)
def local_name(name: str) -> bytes:
    return plain(records(clean()) + [Rec(b"archive/data/9", hostile(name),
                                         local_name=b"archive/data.pkl")])


@zip_case("zip-hidden-entry",
          "a hostile archive/data.pkl local record that no directory lists, between the last "
          "entry and the central directory: torch and zipfile never see it; a streaming "
          "reader meets it after the clean one and keeps it",
          r"outside any zip entry", live=None, exits=DAMAGED)
def hidden_entry(name: str) -> bytes:
    recs = records(clean())
    out = bytearray()
    offsets = lay(recs, out)
    out += local(Rec(b"archive/data.pkl", hostile(name)))
    cd = directory(recs, offsets)
    start = len(out)
    return bytes(out + cd + end(len(recs), len(cd), start))
