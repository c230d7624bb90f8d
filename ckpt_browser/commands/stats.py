"""`ckpt-browser stats`: statistics of tensor values, one tensor at a time."""

from __future__ import annotations

import json
import sys

from ckpt_browser import alarms
from ckpt_browser.diagnostics import ExitCode, Progress, error, note

SAY_READING = 2**30  # stats says how much it reads from 1 GiB up, even off a terminal


def cmd_stats(args) -> int:
    from ckpt_browser.analysis.opened import local_path, open_path
    from ckpt_browser.report.stats import (
        check_line,
        check_summary,
        error_doc,
        error_text,
        not_read_doc,
        not_read_text,
        stats_doc,
        stats_text,
    )
    from ckpt_browser.values.budget import plan
    from ckpt_browser.values.diff import side_of
    from ckpt_browser.values.locate import select
    from ckpt_browser.values.read import ValuesError
    from ckpt_browser.values.stats import tensor_stats, unsound

    side = side_of(open_path(local_path(args.path, args), args.checkpoint, run=True))
    path = side.path
    alarm = alarms.by_file(side.problems)  # UNSAFE beside the tensors of an unsafe file
    todo = plan([(loc,) for loc in select(side.locs, args.names, side.path)], args.max_bytes,
                flag="--max-bytes")
    locs = [loc for loc, in todo.admitted]
    total = _say_reading(locs)
    docs, bad, before = [], 0, 0
    check = args.check or args.check_constant
    found: dict[str, list[str]] = {}  # --check: tensor name -> what is wrong with its values
    with Progress() as progress:
        for i, loc in enumerate(locs):
            progress.name = f"[{i + 1}/{len(locs)}] {loc.name}"

            def step(done: int, numel: int, start: int = before, nbytes: int = loc.nbytes):
                progress.update(start + (nbytes * done // numel if numel else nbytes), total)

            before += loc.nbytes
            try:
                s = tensor_stats(loc, progress=step)
            except ValuesError as e:
                bad += not loc.placeholder
                shown = error_doc(loc, str(e)) if args.json else \
                    error_text(loc, str(e), alarm.get(loc.file, ""))
            else:
                wrong = unsound(s, args.check_constant) if check else []
                if wrong:
                    found[loc.name] = wrong
                shown = stats_doc(s, loc) if args.json else \
                    stats_text(s, loc, alarm.get(loc.file, "")) if not check else \
                    check_line(s, loc, wrong) if wrong else ""
            if args.json:
                docs.append(shown)
            elif shown:
                progress.write(shown)
    summary = check_summary(len(locs) - bad, found, args.check_constant) if check else ""
    if args.json:
        doc = {"path": path, "tensors": docs}
        if todo.unread:
            doc["not_read"] = not_read_doc(todo)
        if check:
            doc["check"] = {"tensors": len(locs) - bad, "found": found, "summary": summary}
        sys.stdout.write(json.dumps(doc) + "\n")
    else:
        if todo.unread:
            print(not_read_text(todo))
        if check:
            print(summary)
    said = [f"the values of {bad} tensor(s) could not be read"] if bad else []
    if todo.unread:
        said.append(todo.message())
    if said:
        error(f"{path}: {'; '.join(said)}")
    return ExitCode.DAMAGED if bad else ExitCode.FOUND if found else \
        ExitCode.USAGE if todo.unread else ExitCode.OK


def _say_reading(locs) -> int:
    """What `stats` will read, said on stderr first (for several tensors, on a terminal or
    from SAY_READING up: a script's stderr stays quiet for small reads)."""
    from ckpt_browser.report.words import plural, size
    from ckpt_browser.values.budget import bytes_to_read

    total = bytes_to_read(locs)  # not what an unreadable tensor claims (16 EiB of nothing)
    if len(locs) > 1 and (sys.stderr.isatty() or total >= SAY_READING):
        note(f"reading {size(total)} in {plural(len(locs), 'tensor')}")
    return total
