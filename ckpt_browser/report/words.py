"""The product's words, written once: what each verdict means, how statuses and severities
are shown, and how numbers are printed. The CLI, the TUI and the quiz all read them here.

Styles are Rich style strings, only ever a hint: every status is also a word, so nothing
depends on colour.
"""

from __future__ import annotations

import math
import re

import humanize

from ckpt_browser.model import Severity, Status, Verdict
from ckpt_browser.report.styles import ALERT, GOOD, WARN

# verdict -> (English, Vietnamese): what resuming from such a checkpoint gives you
VERDICT_MEANING: dict[Verdict, tuple[str, str]] = {
    "exact": ("resuming here continues the run as if it had never stopped",
              "tiếp tục từ đây thì quá trình huấn luyện chạy tiếp như chưa từng dừng"),
    "inexact": ("training can continue from here, but not bit-for-bit",
                "huấn luyện tiếp tục được từ đây, nhưng không giống hệt từng bit"),
    "weights-only": ("only a warm start: the weights load, the optimizer state cannot be used",
                     "chỉ khởi động ấm (warm start): trọng số nạp được, trạng thái optimizer "
                     "không dùng được"),
    "broken": ("nothing can resume from here: the weights are missing or damaged",
               "không thể tiếp tục từ đây: trọng số bị thiếu hoặc hỏng"),
}
VERDICT_STYLE: dict[Verdict, str] = {"exact": GOOD, "inexact": WARN, "weights-only": WARN,
                                     "broken": ALERT}

# component status -> Vietnamese (English is the status itself)
STATUS_VI: dict[Status, str] = {"ok": "đủ", "missing": "thiếu", "incomplete": "không đầy đủ",
                                "damaged": "hỏng", "unsafe": "không an toàn",
                                "not-needed": "không cần"}
GOOD_STATUSES: tuple[Status, ...] = ("ok", "not-needed")
STATUS_STYLE: dict[Status, str] = {"ok": "green", "missing": ALERT, "incomplete": WARN,
                                   "damaged": ALERT, "unsafe": ALERT, "not-needed": ""}
SEVERITY_STYLE: dict[Severity, str] = {"error": ALERT, "warning": WARN, "info": "bold"}


def verdict_word(verdict: str) -> str:
    """EXACT, INEXACT, WEIGHTS-ONLY, BROKEN: the verdict as a headline word."""
    return verdict.upper()


def verdict_sentence(verdict: str) -> str:
    """"EXACT: resuming here continues ...": the headline with its meaning."""
    meaning = VERDICT_MEANING.get(verdict)  # type: ignore[call-overload]
    return f"{verdict_word(verdict)}: {meaning[0]}" if meaning else verdict_word(verdict)


def status_word(status: str) -> str:
    return status.upper()


def shown_status(status: str) -> str:
    """A status in a CLI row: as JSON has it, but UNSAFE shouted, as on screen, because it
    means that loading the file runs code."""
    return status_word(status) if status == "unsafe" else status


def plural(n: int, word: str) -> str:
    """"1 rank", "2 ranks", "1,024 files"."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"


# --- file lists ---------------------------------------------------------------------------------

_SHARD = re.compile(r"^(?P<stem>.+)-(?P<i>\d+)-of-(?P<n>\d+)(?P<ext>\.[^-]+)$")
_DIGITS = re.compile(r"\d+")
COMPACT_AT = 4  # a family of this many numbered files is shown as its first and last


def file_list(names, shown: int | None = 3) -> str:
    """Files for people, one short line however many: a run of HF shards as "163 shards
    (model-00001 ... model-00163)", other numbered files as "8 files (rng_state_0.pth ...
    rng_state_7.pth)", the rest by name (`shown` at most, then "and N more"; None: all)."""
    names = list(names)
    by_family = families(names)
    parts, loose, seen = [], [], set()
    for name in names:
        key = _family(name)
        members = by_family[key]
        if len(members) < COMPACT_AT:
            loose.append(name)
        elif key not in seen:
            seen.add(key)
            parts.append((len(loose), family_phrase(members)))
    more = ""
    if shown is not None and len(loose) > shown:
        more = f" and {len(loose) - shown:,} more"
        loose = loose[:shown]
    out = list(loose)
    for at, phrase in reversed(parts):
        out.insert(min(at, len(out)), phrase)
    return ", ".join(out) + more


def compacted(names) -> bool:
    """Whether `file_list` leaves some of `names` out."""
    return file_list(names, None) != ", ".join(names)


def families(names) -> dict[str, list[str]]:
    """Numbered files by family (HF shards `model-0000i-of-N.safetensors`, rank files
    `rng_state_i.pth`, ...), in the order given; a name with no number is its own family."""
    out: dict[str, list[str]] = {}
    for name in names:
        out.setdefault(_family(name), []).append(name)
    return out


def _family(name: str) -> str:
    m = _SHARD.match(name)
    if m:
        return f"shard:{m['stem']}-of-{m['n']}{m['ext']}"
    return _DIGITS.sub("#", name) if _DIGITS.search(name) else "name:" + name


def _numbers(name: str) -> tuple[int, ...]:
    return tuple(int(d) for d in _DIGITS.findall(name))


def family_phrase(members: list[str]) -> str:
    """A family as a phrase: "163 shards (model-00001 ... model-00163)"."""
    members = sorted(members, key=_numbers)
    first, last = members[0], members[-1]
    m, z = _SHARD.match(first), _SHARD.match(last)
    if m and z:
        total = int(m["n"])
        have = f"{len(members):,}" if len(members) == total else f"{len(members):,} of {total:,}"
        return f"{have} shards ({m['stem']}-{m['i']} ... {z['stem']}-{z['i']})"
    return f"{len(members):,} files ({first} ... {last})"


# --- numbers ------------------------------------------------------------------------------------

QIB = 1024**10  # humanize's largest binary unit; a size past it is said in powers of ten


def size(n: int | float | None) -> str:
    """Bytes for people: 104.6 KiB, 648.2 GiB. Whatever a file claims: 7.89e+277 QiB, "nan
    bytes", "a 1,000-digit number of bytes", never an exception or a 300-digit number."""
    if n is None:
        return "?"
    if isinstance(n, float) and not math.isfinite(n):
        return f"{n} bytes"
    if abs(n) >= QIB:
        big = _past_float(n)
        return f"{big} of bytes" if big else f"{n / QIB:.3g} QiB"
    return humanize.naturalsize(n, binary=True, format="%.1f")


def size_cell(n: int | float | None) -> str:
    """`size` for a table cell: "128 B", not "128 Bytes"."""
    return size(n).replace(" Bytes", " B").replace(" Byte", " B")


def count(n: int | float) -> str:
    """Parameter counts the way ML people say them: 671.0B, 7.2M; past 1,000T in powers of ten
    (1e+40); inf and nan as Python spells them."""
    if isinstance(n, float) and not math.isfinite(n):
        return str(n)
    big = _past_float(n)
    if big:
        return big
    if n < 0:
        return "-" + count(-n)
    if n >= 10**15:
        return f"{n:.3g}"
    for unit, scale in (("T", 10**12), ("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if n >= scale:
            return f"{n / scale:.1f}{unit}"
    return str(n)


def _past_float(n: int | float) -> str | None:
    """"a 1,000-digit number" for an integer no float can hold (past 1.8e308), else None."""
    if isinstance(n, int) and abs(n) > 2**1023:
        return f"a {'negative ' if n < 0 else ''}{len(str(abs(n))):,}-digit number"
    return None


def short_number(x: float | int | None) -> str:
    """A value in a narrow cell (tables, histogram axes): 4 significant digits."""
    if x is None:
        return "n/a"
    if isinstance(x, int):
        return _whole(x, 4)
    return "0" if x == 0 else f"{x:.4g}"


def full_number(x: float | int | None) -> str:
    """A value in a details pane: 7 significant digits, so 0.9999997 is not shown as 1."""
    if x is None:
        return "n/a"
    if isinstance(x, int):
        return _whole(x, 7)
    return f"{x:.7g}"


def _whole(x: int, digits: int) -> str:
    """An integer with its commas, or past 10**21 (a step counter no run reaches) in powers
    of ten: 1e+40, "a 1,000-digit number"."""
    if abs(x) < 10**21:
        return f"{x:,}"
    return _past_float(x) or f"{x:.{digits}g}"


def json_float(x: float | None) -> float | None:
    """JSON has no NaN or Infinity: those become null (an int passes whole)."""
    if isinstance(x, int):
        return x
    return x if x is not None and math.isfinite(x) else None
