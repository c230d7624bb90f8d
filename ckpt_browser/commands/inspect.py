"""`ckpt-browser inspect`: files, tensors, totals and problems of one checkpoint."""

from __future__ import annotations

import json
import sys

from ckpt_browser.diagnostics import errors_found
from ckpt_browser.samples import default_sample


def cmd_inspect(args) -> int:
    from ckpt_browser.analysis.opened import local_path, open_path
    from ckpt_browser.readers.load import paused_gc

    opened = open_path(local_path(args.path or default_sample(), args), args.checkpoint,
                       run=True)
    path, timeline = opened.path, opened.timeline
    ckpt, training = opened.checkpoint, opened.training
    if args.json:
        from ckpt_browser.report.json_report import full_doc

        with paused_gc():  # one dict per tensor, no cycles
            sys.stdout.write(json.dumps(full_doc(ckpt, training, timeline)) + "\n")
    else:
        from ckpt_browser.analysis.resume.shard import shard_of
        from ckpt_browser.report.text import (
            inspect_text,
            lone_shard_text,
            state_text,
            timeline_text,
        )

        if timeline:
            print(timeline_text(timeline, path) + "\n")
        shard = shard_of(path)
        print(inspect_text(ckpt, training.framework, args.files)
              + (lone_shard_text(shard) if shard else state_text(training, ckpt.problems)))
    return errors_found(ckpt.layout.path, ckpt.problems + tuple(training.problems))
