"""One budget for values work: `stats`, `diff --values` and the `v` key read at most
`values_bytes` bytes and `values_tensors` tensors in one run, and from any one file at most twice
what it holds on disk plus `file_extra_bytes`.

The per-file rule is what keeps a small hostile file from making a long read: tensors that share
one storage (50,000 views of it), a view whose stride 0 repeats one element 2**34 times, DCP
chunks that all point at the same bytes, and a sparse file (8 GiB that hold 8 KiB on disk) all
ask for many more bytes than the file holds.

It is decided before any byte is read, from sizes alone (`plan`): an item (a tensor, or a pair
of tensors for a diff) over its file's allowance is not read, and the others are; if those
others need more than the budget, none of them is read, so a run over the budget says so at
once instead of after an hour of reading. Either way the items left out are listed with one
line saying why and what raises the cap, never skipped in silence.
"""

from __future__ import annotations

import errno
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from ckpt_browser import limits
from ckpt_browser.readers.pickle_safe import ITEMSIZE
from ckpt_browser.values.locate import TensorLoc

REPEAT = 2  # a file may be read twice over (tied weights read one storage twice)


@dataclass
class Plan:
    admitted: list = field(default_factory=list)  # the items to read, in order
    over_budget: list = field(default_factory=list)  # not read: all together need too much
    over_file: list = field(default_factory=list)  # not read: each would read a file too often
    budget_reason: str = ""  # "over the values budget of 64.0 GiB (... raises it)"
    file_reason: str = ""  # "they would read 64.0 GiB from optimizer.pt, which holds ..."
    _lines: list | None = field(default=None, repr=False)

    @property
    def unread(self) -> list:
        return self.over_file + self.over_budget

    def reasons(self) -> list[tuple[list, str]]:
        """(items, why they are not read) for each reason that left some out: "over the
        values budget of 64.0 GiB (CKPT_BROWSER_MAX_VALUES_BYTES raises it)"."""
        return [(items, why) for items, why in ((self.over_file, self.file_reason),
                                                (self.over_budget, self.budget_reason)) if items]

    def groups(self) -> list[tuple[list, str]]:
        """(items, one line saying why they are not read), for each reason that left some
        out: "values of 3 tensors (24.0 GiB) not read: over the values budget ..."."""
        if self._lines is None:  # 200,000 items: their bytes are summed once
            self._lines = [(items, f"values of {_tensors(len(items))} ({_size(_bytes(items))}) "
                                   f"not read: {why}") for items, why in self.reasons()]
        return self._lines

    def message(self) -> str | None:
        """Every reason, in one line; None when everything is read."""
        return "; ".join(line for _, line in self.groups()) or None


def plan(items: Sequence[Sequence[TensorLoc]], max_bytes: int | None = None,
         max_tensors: int | None = None, flag: str | None = None) -> Plan:
    """Split `items` (each the tensors read together: one, or a diff's pair) into those read
    and those not. `max_bytes` (default the values_bytes limit) and `flag`: the option that
    set it for this run, named in the message with what it would take ("--max-bytes")."""
    lim = limits.LIMITS
    max_bytes = lim.values_bytes if max_bytes is None else max_bytes
    max_tensors = lim.values_tensors if max_tensors is None else max_tensors
    out = Plan()
    if len(items) > max_tensors:  # decided by the count alone: no file is looked at
        out.over_budget = list(items)
        spent = _bytes(items)
        out.budget_reason = _budget_reason(spent, max_bytes, len(items), max_tensors, flag)
        out.groups()
        return out
    tally: dict[tuple[int, str], int] = {}  # (side, file) -> bytes read from it so far
    disk = _Files()
    spent = 0
    for item in items:
        reads = _file_reads(item, disk)
        over = next(((side, path, n) for (side, path), n in reads.items()
                     if tally.get((side, path), 0) + n > disk.allowance(path)), None)
        if over is not None:
            out.over_file.append(item)
            if not out.file_reason:
                side, path, n = over
                out.file_reason = _file_reason(path, tally.get((side, path), 0) + n,
                                               disk.held(path))
            continue
        for key, n in reads.items():
            tally[key] = tally.get(key, 0) + n
        spent += sum(reads.values())
        out.admitted.append(item)
    if len(out.admitted) > max_tensors or spent > max_bytes:
        out.budget_reason = _budget_reason(spent, max_bytes, len(out.admitted), max_tensors,
                                           flag)
        out.over_budget, out.admitted = out.admitted, []
    return out


def bytes_to_read(locs: Sequence[TensorLoc]) -> int:
    """What reading these tensors' values reads: a tensor that cannot be read (its bytes past
    its file's end, a storage that is missing) fails before its first byte."""
    reads = _file_reads(tuple(locs), _Files())
    return sum(reads.values())


def _file_reads(item: Sequence[TensorLoc], disk: _Files) -> dict[tuple[int, str], int]:
    """Bytes of values each file gives each side of the item: every element counted as often as
    it is read (a strided view's elements, however few bytes its storage spans). A tensor whose
    bytes cannot be read costs nothing: reading it fails before the first byte."""
    reads: dict[tuple[int, str], int] = {}
    for side, loc in enumerate(item):
        if loc.problem or any(p.offset + p.length > disk.size(p.path) for p in loc.pieces):
            continue
        if loc.stride is not None and loc.pieces:  # a view: all its elements from one storage
            parts = [(loc.pieces[0].path, loc.nbytes)]
        else:
            itemsize = ITEMSIZE.get(loc.dtype, 1)
            parts = [(p.path, math.prod(p.sizes) * itemsize) for p in loc.pieces]
        for path, n in parts:
            reads[(side, path)] = reads.get((side, path), 0) + n
    return reads


class _Files:
    """Each file's size and the bytes it holds on disk, looked up once."""

    def __init__(self) -> None:
        self.cache: dict[str, tuple[float, int | None]] = {}

    def _get(self, path: str) -> tuple[float, int | None]:
        got = self.cache.get(path)
        if got is None:
            try:
                st = os.stat(path)
            except (OSError, ValueError):  # reading it says what is wrong
                got = (float("inf"), None)
            else:
                got = (st.st_size, on_disk(path, st))
            self.cache[path] = got
        return got

    def size(self, path: str) -> float:
        return self._get(path)[0]

    def held(self, path: str) -> int | None:
        return self._get(path)[1]

    def allowance(self, path: str) -> float:
        held = self.held(path)
        if held is None:  # unknown: reading it says what is wrong with it
            return float("inf")
        return REPEAT * held + limits.LIMITS.file_extra_bytes


def on_disk(path: str, st: os.stat_result) -> int:
    """The bytes a file (whose stat is `st`) holds: its size, or less when it is sparse (blocks
    allocated on disk). A remote mirror's size is the remote file's (the mirror itself is
    sparse, holding only the headers)."""
    from ckpt_browser.remote import range_reader

    if range_reader(path) is not None or not hasattr(st, "st_blocks"):
        return st.st_size
    allocated = st.st_blocks * 512
    if allocated >= st.st_size:
        return st.st_size
    if allocated == 0 and not _all_hole(path):  # some filesystems (FUSE) report no blocks
        return st.st_size
    return allocated


def _all_hole(path: str) -> bool:
    """Whether the file holds no data at all (SEEK_DATA finds none)."""
    from ckpt_browser.readers.regular import open_regular

    try:
        with open_regular(path, buffering=0) as f:
            os.lseek(f.fileno(), 0, os.SEEK_DATA)
    except OSError as e:
        return e.errno == errno.ENXIO
    return False


def _budget_reason(spent: int, max_bytes: int, count: int, max_tensors: int,
                   flag: str | None) -> str:
    """"over the values budget of 64.0 GiB (--max-bytes 642G or CKPT_... raises it)", naming
    each cap the run is over and what raises it."""
    over = []
    if count > max_tensors:
        over.append(f"{_tensors(max_tensors)} ({limits.env('values_tensors')} raises it)")
    if spent > max_bytes:
        need = f"{flag} {_amount(spent)} or " if flag else ""
        over.append(f"{_size(max_bytes)} ({need}{limits.env('values_bytes')} raises it)")
    return "over the values budget of " + " and of ".join(over)


def _file_reason(path: str, wanted: int, held: int | None) -> str:
    name = os.path.basename(path)
    return (f"they would read {_size(wanted)} from {name}, which holds {_size(held)} on disk "
            f"(tensors sharing storage, views repeating elements or a sparse file); at most "
            f"twice what a file holds, plus {_size(limits.LIMITS.file_extra_bytes)}, is read")


def _amount(n: int) -> str:
    """At least n bytes, rounded up in the largest unit that keeps it a whole number: 642G."""
    for unit, scale in (("T", 2**40), ("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if n >= scale:
            return f"{-(-n // scale)}{unit}"
    return str(n)


def _bytes(items) -> int:
    return sum(loc.nbytes for item in items for loc in item if not loc.problem)


def _tensors(n: int) -> str:
    return f"{n:,} tensor{'' if n == 1 else 's'}"


def _size(n: int | None) -> str:
    """report.words.size's spelling (values sits below report); the sizes planned here are
    sums of tensors' bytes, finite ints."""
    import humanize

    return "?" if n is None else humanize.naturalsize(n, binary=True, format="%.1f")
