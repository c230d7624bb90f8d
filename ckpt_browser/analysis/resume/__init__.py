"""`ckpt-browser check`: if I restart from this checkpoint, what happens?

One verdict (exact / inexact / weights-only / broken, FORMATS.md "Resume verdict") with findings
that say what is missing, where, and what it means for the resumed run. Built from what the readers
already found: the checks made while every file was read (`analysis.opened`) and the seven
components of `training_state`; nothing is read twice and no pickle is ever run.

    verdict.py   severities -> verdict, the Draft the checks fill
    weights.py   safetensors header / index errors
    tiling.py    DCP chunks tile each tensor; rank files present and long enough
    ranks.py     rank-indexed files missing (RNG per rank, ZeRO shards per data-parallel rank)
    coverage.py  optimizer state against the trainable weights
    content.py   counters that disagree, EMA-only weights, pickled modules (read by content)
    world.py     --world-size N
    status.py    dangling markers, every component that is not ok, leftover reader problems
"""

from __future__ import annotations

import os

from ckpt_browser.analysis.resume.content import check_content
from ckpt_browser.analysis.resume.coverage import check_coverage
from ckpt_browser.analysis.resume.ranks import check_ranks
from ckpt_browser.analysis.resume.status import check_markers, check_other_problems, check_statuses
from ckpt_browser.analysis.resume.tiling import check_dcp, tiling_problem
from ckpt_browser.analysis.resume.verdict import Draft, verdict_of
from ckpt_browser.analysis.resume.weights import check_weights
from ckpt_browser.analysis.resume.world import check_world_size
from ckpt_browser.errors import CheckpointError
from ckpt_browser.model import (
    COMPONENTS,
    ERROR,
    Checkpoint,
    Component,
    Finding,
    ResumeReport,
    ResumeTimeline,
    TrainingState,
)

__all__ = ["CHECKED", "report_from", "resume_report", "resume_reports", "tiling_problem"]

CHECKED = 50  # checkpoints of one run folder checked, newest first; older ones are listed


def report_from(ckpt: Checkpoint | None, training: TrainingState, world_size: int | None = None,
                path: str | None = None) -> ResumeReport:
    """The verdict from a checkpoint's weights (already loaded) and its training state."""
    draft = Draft(dict(training.components))
    check_weights(draft, ckpt)
    check_dcp(draft, training)
    check_ranks(draft)
    check_coverage(draft, ckpt, training)
    if world_size is not None:
        check_world_size(draft, training, world_size)
    if path is None:
        path = ckpt.layout.path if ckpt is not None else ""
    check_content(draft, training, path, ckpt)
    check_markers(draft, training)
    check_statuses(draft)
    check_other_problems(draft, training)
    findings = draft.sorted()
    return ResumeReport(path, training.framework, verdict_of(findings), training.step,
                        training.ranks, draft.components, findings)


def resume_report(path: str, world_size: int | None = None) -> ResumeReport:
    """Check one checkpoint (a folder or a file). A folder holding several checkpoints is
    checked at its newest; `resume_reports` checks each. Raises CheckpointError when nothing
    at `path` can be read as a checkpoint."""
    from ckpt_browser.analysis.opened import open_path

    opened = open_path(path, run=True)  # a folder of checkpoints: its newest
    target = opened.layout.path if os.path.isdir(path) else path
    return report_from(opened.checkpoint, opened.training, world_size, path=target)


def resume_reports(folder: str, world_size: int | None = None) -> ResumeTimeline:
    """The newest CHECKED checkpoints in a folder of checkpoints, newest first, and the
    newest exact one among them; older ones are only listed (a run folder of 10,000 took
    minutes). A checkpoint that cannot be read at all is reported broken, not raised."""
    from ckpt_browser.analysis.runs import run_entries

    entries = run_entries(folder)
    reports = []
    for entry in entries[:CHECKED]:
        try:
            reports.append(resume_report(entry.path, world_size))
        except CheckpointError as e:
            reports.append(_unreadable(entry.path, e))
    exact = next((r for r in reports if r.verdict == "exact"), None)
    return ResumeTimeline(folder, tuple(reports), exact,
                          tuple(e.path for e in entries[CHECKED:]))


def _unreadable(path: str, e: CheckpointError) -> ResumeReport:
    why = f"nothing here can be read as a checkpoint ({e.problem})"
    comps = {k: Component(k, "missing", (), why + ".") for k in COMPONENTS}
    finding = Finding(ERROR, "weights", None, f"{why}: nothing can resume from it.")
    return ResumeReport(path, "unknown", "broken", None, None, comps, (finding,))
