"""`ckpt-browser check`: can training resume from this checkpoint (or each of a run's)?"""

from __future__ import annotations

import json
import sys

from ckpt_browser.diagnostics import VERDICT_CODE, note
from ckpt_browser.errors import NotACheckpoint


def cmd_check(args) -> int:
    from ckpt_browser.analysis.opened import local_path
    from ckpt_browser.analysis.resume import resume_report, resume_reports
    from ckpt_browser.analysis.resume.shard import shard_of
    from ckpt_browser.analysis.runs import is_run
    from ckpt_browser.report.resume import (
        resume_doc,
        resume_text,
        timeline_resume_text,
        unchecked_words,
    )

    args.path = local_path(args.path, args)
    shard = shard_of(args.path)
    if shard is not None and not shard.folder_complete:  # a weights file, not a checkpoint
        raise NotACheckpoint(args.path, shard.sentence())
    if shard is not None:
        note(f"{args.path} is one shard of {shard.total}: checking its folder, {shard.folder}")
        args.path = shard.folder
    if is_run(args.path):
        timeline = resume_reports(args.path, args.world_size)
        reports = timeline.reports
        out = (json.dumps([resume_doc(r) for r in reports]) if args.json
               else timeline_resume_text(timeline))
        if args.json and timeline.unchecked:
            note(f"{args.path}: {unchecked_words(timeline)}")
    else:
        reports = (resume_report(args.path, args.world_size),)
        out = json.dumps(resume_doc(reports[0])) if args.json else resume_text(reports[0])
    sys.stdout.write(out + "\n")
    return VERDICT_CODE[reports[0].verdict]
