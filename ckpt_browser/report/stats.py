"""`stats --json` (schema in the README) and the plain-text statistics."""

from __future__ import annotations

from ckpt_browser.escape import printable
from ckpt_browser.report.words import json_float

BARS = " ▁▂▃▄▅▆▇█"


def stats_doc(s, loc) -> dict:
    return {"name": s.name, "file": loc.file, "component": loc.component, "dtype": s.dtype,
            "shape": list(s.shape), "numel": s.numel, "finite": s.finite,
            "min": json_float(s.min), "max": json_float(s.max), "mean": json_float(s.mean),
            "std": json_float(s.std), "abs_max": json_float(s.abs_max), "nan": s.nan, "inf": s.inf,
            "zeros": s.zeros, "zero_fraction": s.zero_fraction, "hist": s.hist,
            "hist_range": [json_float(v) for v in s.hist_range] if s.hist_range else None,
            "preview": [_plain(v) for v in s.preview], "bytes_read": s.bytes_read,
            "note": s.note or None}


def error_doc(loc, message: str) -> dict:
    return {"name": loc.name, "file": loc.file, "component": loc.component, "dtype": loc.dtype,
            "shape": list(loc.shape), "elsewhere" if loc.placeholder else "error": message}


def _plain(v):
    if isinstance(v, complex):
        return [_plain(v.real), _plain(v.imag)]
    if isinstance(v, float):
        return json_float(v) if v == v and abs(v) != float("inf") else str(v)
    return v


def sparkline(counts: list[int]) -> str:
    """One character per bin, height by count; readable without colour."""
    top = max(counts, default=0)
    if not top:
        return ""
    return "".join(BARS[0 if not c else max(1, round(c / top * (len(BARS) - 1)))]
                   for c in counts)


def _g(x) -> str:
    return "n/a" if x is None else f"{x:.6g}"


def _head(name: str, dtype, shape, file: str, said: str) -> str:
    """"name  F32 [4]  (file)", with what is wrong with the file: "(optimizer.pt: UNSAFE)"."""
    return printable(f"{name}  {dtype} {list(shape)}  ({file}{': ' + said if said else ''})")


def stats_text(s, loc, said: str = "") -> str:
    """`said`: the words for the tensor's file ("UNSAFE", "DAMAGED"), if anything is wrong."""
    lines = [_head(s.name, s.dtype, s.shape, loc.file, said)]
    lines.append(f"  min {_g(s.min)}  max {_g(s.max)}  mean {_g(s.mean)}  std {_g(s.std)}  "
                 f"abs-max {_g(s.abs_max)}")
    zf = s.zero_fraction
    lines.append(f"  NaN {s.nan:,}  Inf {s.inf:,}  zeros {s.zeros:,}"
                 + (f" ({zf:.2%})" if zf is not None else "") + f"  finite {s.finite:,}")
    if s.hist:
        lo, hi = s.hist_range
        lines.append(f"  histogram [{lo:.4g} .. {hi:.4g}]  {sparkline(s.hist)}")
    if s.preview:
        shown = ", ".join(f"{v:.6g}" if isinstance(v, float) else str(v) for v in s.preview)
        lines.append(f"  first values: {shown}")
    if s.note:
        lines.append(f"  note: {s.note}")
    return "\n".join(lines)


def error_text(loc, message: str, said: str = "") -> str:
    # a placeholder is not damage: its values are in other files, which the message names
    what = "values not in this file" if loc.placeholder else "values unreadable"
    return (_head(loc.name, loc.dtype, loc.shape, loc.file, said) + "\n"
            + printable(f"  {what}: {message}"))


NAMES_SHOWN = 20  # unread tensors named in the text report; --json names them all


def not_read_doc(plan) -> dict | None:
    """`stats --json`'s "not_read": why, and every tensor left unread; None when none was."""
    if not plan.unread:
        return None
    return {"message": plan.message(),
            "tensors": [loc.name for item in plan.unread for loc in item[:1]]}


def not_read_text(plan) -> str:
    """The tensors left unread, as the last lines of the text report."""
    lines = []
    for items, line in plan.groups():
        names = [loc.name for item in items[:NAMES_SHOWN] for loc in item[:1]]
        more = f" and {len(items) - NAMES_SHOWN:,} more (--json lists them all)" \
            if len(items) > NAMES_SHOWN else ""
        lines.append(printable(f"{line}: {', '.join(names)}{more}"))
    return "\n".join(lines)


def check_line(s, loc, wrong: list[str]) -> str:
    """`stats --check`: one tensor whose values are suspect, on one line."""
    shape = "[" + ", ".join(str(d) for d in loc.shape) + "]"
    return printable(f"{loc.name}  {loc.dtype} {shape}  ({loc.file}): {', '.join(wrong)}")


def check_summary(checked: int, found: dict[str, list[str]], constant: bool) -> str:
    """`stats --check`'s last line: how many tensors were read, how many are suspect."""
    what = "NaN, Inf, all-zero or constant values" if constant else "NaN or Inf"
    if not found:
        return f"checked {checked:,} tensor(s): none holds {what}"
    nan = sum(any(w.endswith(" NaN") for w in ws) for ws in found.values())
    inf = sum(any(w.endswith(" Inf") for w in ws) for ws in found.values())
    rest = len(found) - sum(any(w.endswith((" NaN", " Inf")) for w in ws)
                            for ws in found.values())
    parts = [f"{nan:,} with NaN"] if nan else []
    parts += [f"{inf:,} with Inf"] if inf else []
    parts += [f"{rest:,} all zeros or constant"] if rest else []
    return f"checked {checked:,} tensor(s): {len(found):,} suspect ({', '.join(parts)})"


def values_verdict(s) -> tuple[str, str] | None:
    """The values pane's first line when a tensor's values are suspect: ("alarm", ...) for
    NaN or Inf, ("note", ...) for all zeros or one value throughout, None when neither. The
    counts are `unsound`'s words, as `stats --check` prints them."""
    from ckpt_browser.values.stats import unsound

    wrong = unsound(s, constant=True)
    if not wrong:
        return None
    said = f"{', '.join(wrong)} in {s.numel:,} values"
    if s.nan:
        return "alarm", (f"NOT FINITE: {said}. A model using this tensor computes NaN: the run "
                         "diverged, or the bytes were damaged or never written.")
    if s.inf:
        return "alarm", (f"NOT FINITE: {said}. In a weight this is an overflow (a diverged run, "
                         "or a cast to a narrower dtype); a mask may hold -inf on purpose.")
    return "note", (f"Note: {s.numel:,} values, {wrong[0]}: a tensor that never trained or was "
                    "reset, unless it is meant to be (a bias or a norm's scale before training).")
