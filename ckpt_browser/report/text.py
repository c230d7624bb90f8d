"""Human-readable summaries shared by the CLI and the TUI."""

from __future__ import annotations

import humanize

from ckpt_browser.model import Checkpoint, Totals
from ckpt_browser.report.escape import printable


def size(n: int | None) -> str:
    return "?" if n is None else humanize.naturalsize(n, binary=True, format="%.1f")


def count(n: int) -> str:
    """Parameter counts the way ML people say them: 671.0B, 7.2M."""
    for unit, scale in (("T", 10**12), ("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if n >= scale:
            return f"{n / scale:.1f}{unit}"
    return str(n)


def dtype_line(totals: Totals) -> str:
    parts = [f"{k} {count(v.params)} ({size(v.bytes)})" for k, v in
             sorted(totals.by_dtype.items(), key=lambda kv: -kv[1].bytes)]
    return ", ".join(parts) or "no tensors"


def inspect_text(ckpt: Checkpoint) -> str:
    t = ckpt.totals
    lines = [
        f"path     {ckpt.layout.path}",
        f"format   {ckpt.layout.format}",
        f"files    {len(ckpt.shards)}",
        f"tensors  {t.tensors:,}",
        f"params   {t.params:,} ({count(t.params)})",
        f"bytes    {t.bytes:,} ({size(t.bytes)})",
        f"dtypes   {dtype_line(t)}",
        "",
    ]
    width = max((len(s.name) for s in ckpt.shards), default=4)
    lines.append(f"{'file':<{width}}  {'tensors':>8}  {'params':>8}  {'size':>10}  status")
    for s in ckpt.shards:
        status = "ok" if s.ok else f"DAMAGED: {s.error}"
        file_size = size(s.size) if s.size is not None else "missing"
        lines.append(f"{s.name:<{width}}  {len(s.tensors):>8,}  {count(s.totals.params):>8}  "
                     f"{file_size:>10}  {status}")
    if ckpt.problems:
        lines += ["", f"problems ({len(ckpt.problems)})"]
        lines += [f"  {p.line()}" for p in ckpt.problems]
    return "\n".join(printable(line) for line in lines)


def state_text(training) -> str:
    lines = ["", f"training state ({training.framework}"
             + (f", step {training.step}" if training.step is not None else "")
             + (f", {training.ranks} ranks" if training.ranks else "") + ")"]
    for kind, c in training.components.items():
        files = ", ".join(c.files) or "-"
        lines.append(f"  {kind:<10} {c.status:<11} {files}")
        if c.detail:
            lines.append(f"  {'':<10} {c.detail}")
    if training.problems:
        lines += ["", f"training-state problems ({len(training.problems)})"]
        lines += [f"  {p.line()}" for p in training.problems]
    return "\n".join(printable(line) for line in lines)


def timeline_text(entries, chosen: str) -> str:
    lines = [f"timeline: {len(entries)} checkpoints, showing {chosen} (use --checkpoint NAME)"]
    for e in entries:
        mark = "*" if e.path == chosen else " "
        step = f"{e.counter}{e.step}" if e.step is not None else ""
        lines.append(f" {mark} {e.name:<32} {step:<14} {e.format}")
    return "\n".join(printable(line) for line in lines)
