"""The product's words, written once: what each verdict means, how statuses and severities
are shown, and how numbers are printed. The CLI, the TUI and the quiz all read them here.

Styles are Rich style strings, only ever a hint: every status is also a word, so nothing
depends on colour.
"""

from __future__ import annotations

import math

import humanize

from ckpt_browser.model import Severity, Status, Verdict

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
VERDICT_STYLE: dict[Verdict, str] = {"exact": "bold green", "inexact": "bold yellow",
                                     "weights-only": "bold yellow", "broken": "bold red"}

# component status -> Vietnamese (English is the status itself)
STATUS_VI: dict[Status, str] = {"ok": "đủ", "missing": "thiếu", "incomplete": "không đầy đủ",
                                "damaged": "hỏng", "unsafe": "không an toàn",
                                "not-needed": "không cần"}
GOOD_STATUSES: tuple[Status, ...] = ("ok", "not-needed")
STATUS_STYLE: dict[Status, str] = {"ok": "green", "missing": "bold red", "incomplete": "yellow",
                                   "damaged": "bold red", "unsafe": "bold red",
                                   "not-needed": "dim"}
SEVERITY_STYLE: dict[Severity, str] = {"error": "bold red", "warning": "bold", "info": "bold"}


def verdict_word(verdict: str) -> str:
    """EXACT, INEXACT, WEIGHTS-ONLY, BROKEN: the verdict as a headline word."""
    return verdict.upper()


def verdict_sentence(verdict: str) -> str:
    """"EXACT: resuming here continues ...": the headline with its meaning."""
    meaning = VERDICT_MEANING.get(verdict)  # type: ignore[call-overload]
    return f"{verdict_word(verdict)}: {meaning[0]}" if meaning else verdict_word(verdict)


def status_word(status: str) -> str:
    return status.upper()


# --- numbers ------------------------------------------------------------------------------------

def size(n: int | None) -> str:
    """Bytes for people: 104.6 KiB, 648.2 GiB."""
    return "?" if n is None else humanize.naturalsize(n, binary=True, format="%.1f")


def count(n: int) -> str:
    """Parameter counts the way ML people say them: 671.0B, 7.2M."""
    for unit, scale in (("T", 10**12), ("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if n >= scale:
            return f"{n / scale:.1f}{unit}"
    return str(n)


def short_number(x: float | int | None) -> str:
    """A value in a narrow cell (tables, histogram axes): 4 significant digits."""
    if x is None:
        return "n/a"
    if isinstance(x, int):
        return f"{x:,}"
    return "0" if x == 0 else f"{x:.4g}"


def full_number(x: float | int | None) -> str:
    """A value in a details pane: 7 significant digits, so 0.9999997 is not shown as 1."""
    if x is None:
        return "n/a"
    if isinstance(x, int):
        return f"{x:,}"
    return f"{x:.7g}"


def json_float(x: float | None) -> float | None:
    """JSON has no NaN or Infinity: those become null."""
    return x if x is not None and math.isfinite(x) else None
