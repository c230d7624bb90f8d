"""Human-readable summaries shared by the CLI and the TUI."""

from __future__ import annotations

from collections import Counter

from ckpt_browser import alarms
from ckpt_browser.escape import printable
from ckpt_browser.model import Checkpoint, Totals
from ckpt_browser.report.resume import component_lines
from ckpt_browser.report.words import COMPACT_AT, count, families, family_phrase, plural, size


def dtype_line(totals: Totals) -> str:
    parts = [f"{k} {count(v.params)} ({size(v.bytes)})" for k, v in
             sorted(totals.by_dtype.items(), key=lambda kv: -kv[1].bytes)]
    return ", ".join(parts) or "no tensors"


FILES_COMPACT_OVER = 24  # a table of more files shows each run of sound numbered files as one row


def file_table(ckpt: Checkpoint, every_file: bool = False) -> list[str]:
    """One row per file; past FILES_COMPACT_OVER files (unless `every_file`), each family of
    sound numbered files (163 HF shards, 64 rank files) is one row of their sums, named as
    "163 shards (model-00001 ... model-00163)". A file with a problem always has its own row."""
    rows: list[tuple[str, str, int, int, int | None, str]] = []
    groups: dict[str, list[str]] = {}
    if not every_file and len(ckpt.files) > FILES_COMPACT_OVER:
        sound = [f.name for f in ckpt.files if f.ok and f.size is not None]
        groups = {members[0]: members for members in families(sound).values()
                  if len(members) >= COMPACT_AT}
    grouped = {name for members in groups.values() for name in members}
    by_name = {f.name: f for f in ckpt.files}
    for f in ckpt.files:
        if f.name in groups:
            members = [by_name[n] for n in groups[f.name]]
            formats = {m.format for m in members}
            rows.append((family_phrase(groups[f.name]),
                         formats.pop() if len(formats) == 1 else "mixed",
                         sum(len(m.tensors) for m in members),
                         sum(m.totals.params for m in members),
                         sum(m.size or 0 for m in members), "ok"))
        elif f.name not in grouped:
            status = "ok" if f.ok else file_status(f)
            rows.append((f.name, f.format, len(f.tensors), f.totals.params, f.size, status))
    width = max((len(r[0]) for r in rows), default=4)
    lines = [f"{'file':<{width}}  {'format':<12}  {'tensors':>8}  {'params':>8}  "
             f"{'size':>10}  status"]
    for name, fmt, tensors, params, nbytes, status in rows:
        file_size = size(nbytes) if nbytes is not None else "missing"
        lines.append(f"{name:<{width}}  {fmt:<12}  {tensors:>8,}  {count(params):>8}  "
                     f"{file_size:>10}  {status}")
    if grouped:
        lines.append(f"({len(grouped):,} of {len(ckpt.files):,} files in "
                     f"{plural(len(groups), 'row')}: --files lists each)")
    return lines


def file_status(f) -> str:
    """"UNSAFE: ...", "DAMAGED: ..." or "UNSAFE, DAMAGED: ...": the words, then the errors,
    unsafe ones first."""
    said = alarms.words(f.problems, bool(getattr(f.source, "unsafe", ())))
    return f"{', '.join(said)}: " + "; ".join(alarms.message(p) for p in alarms.errors(f.problems))


def inspect_text(ckpt: Checkpoint, framework: str = "", every_file: bool = False) -> str:
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
    lines += file_table(ckpt, every_file)
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


def lone_shard_text(shard) -> str:
    """In place of the training state for one shard of several opened alone: a weights file
    to browse, not a checkpoint (its other shards hold the rest of the model)."""
    return f"\nresume   {shard.sentence()}"


def timeline_text(entries, chosen: str) -> str:
    lines = [f"timeline: {len(entries)} checkpoints, showing {chosen} (use --checkpoint NAME)"]
    for e in entries:
        mark = "*" if e.path == chosen else " "
        step = f"{e.counter}{e.step}" if e.step is not None else ""
        lines.append(f" {mark} {e.name:<32} {step:<14} {e.format}")
    return "\n".join(printable(line) for line in lines)
