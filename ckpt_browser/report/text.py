"""Human-readable summaries shared by the CLI and the TUI."""

from __future__ import annotations

from collections import Counter

from ckpt_browser.escape import printable
from ckpt_browser.model import Checkpoint, Totals
from ckpt_browser.report.resume import component_lines
from ckpt_browser.report.words import count, plural, size


def dtype_line(totals: Totals) -> str:
    parts = [f"{k} {count(v.params)} ({size(v.bytes)})" for k, v in
             sorted(totals.by_dtype.items(), key=lambda kv: -kv[1].bytes)]
    return ", ".join(parts) or "no tensors"


def inspect_text(ckpt: Checkpoint, framework: str = "") -> str:
    t = ckpt.totals
    fmt = ckpt.layout.format if ckpt.layout.format != "files" else framework or "files"
    kinds = Counter(f.format for f in ckpt.files)
    lines = [
        f"path     {ckpt.layout.path}",
        *([f"repo     {ckpt.layout.shown_as}"] if ckpt.layout.shown_as else []),
        f"format   {fmt}",
        f"files    {len(ckpt.files)} ({', '.join(f'{n} {k}' for k, n in kinds.items())})"
        if ckpt.files else "files    0",
        f"tensors  {t.tensors:,}",
        f"params   {t.params:,} ({count(t.params)})",
        f"bytes    {t.bytes:,} ({size(t.bytes)})",
        f"dtypes   {dtype_line(t)}",
    ]
    others = ckpt.component_totals
    if others:
        lines.append("other    " + "; ".join(
            f"{k} {v.tensors:,} tensor{'s' if v.tensors != 1 else ''} ({count(v.params)}, "
            f"{size(v.bytes)})" for k, v in others.items()))
    lines.append("")
    width = max((len(f.name) for f in ckpt.files), default=4)
    lines.append(f"{'file':<{width}}  {'format':<12}  {'tensors':>8}  {'params':>8}  "
                 f"{'size':>10}  status")
    for f in ckpt.files:
        status = "ok" if f.ok else (
            f"{'UNSAFE' if getattr(f.source, 'unsafe', ()) else 'DAMAGED'}: {f.error}")
        file_size = size(f.size) if f.size is not None else "missing"
        lines.append(f"{f.name:<{width}}  {f.format:<12}  {len(f.tensors):>8,}  "
                     f"{count(f.totals.params):>8}  {file_size:>10}  {status}")
    if ckpt.problems:
        lines += ["", f"problems ({len(ckpt.problems)})"]
        lines += [f"  {p.line()}" for p in ckpt.problems]
    return "\n".join(printable(line) for line in lines)


def state_text(training, shown=()) -> str:
    """The seven components, and the problems not already `shown` with the files."""
    lines = ["", f"training state ({training.framework}"
             + (f": {training.project}" if training.project else "")
             + (f", step {training.step}" if training.step is not None else "")
             + (f", {plural(training.ranks, 'rank')}" if training.ranks else "") + ")"]
    lines += component_lines(training.components)
    problems = [p for p in training.problems if p not in set(shown)]
    if problems:
        lines += ["", f"training-state problems ({len(problems)})"]
        lines += [f"  {p.line()}" for p in problems]
    return "\n".join(printable(line) for line in lines)


def timeline_text(entries, chosen: str) -> str:
    lines = [f"timeline: {len(entries)} checkpoints, showing {chosen} (use --checkpoint NAME)"]
    for e in entries:
        mark = "*" if e.path == chosen else " "
        step = f"{e.counter}{e.step}" if e.step is not None else ""
        lines.append(f" {mark} {e.name:<32} {step:<14} {e.format}")
    return "\n".join(printable(line) for line in lines)
