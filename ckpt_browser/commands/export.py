"""`ckpt-browser export SRC OUT`: a checkpoint's weights as safetensors, without running it."""

from __future__ import annotations

import json
import os

from ckpt_browser import alarms
from ckpt_browser.diagnostics import ExitCode, Progress, error, note


def cmd_export(args) -> int:
    from ckpt_browser.analysis.opened import local_path, open_path
    from ckpt_browser.export.plan import DTYPES, Options, config_folder, plan
    from ckpt_browser.export.write import (
        NoRoom,
        WriteError,
        abandon,
        configs,
        prepare_out,
        room_for,
        write,
    )
    from ckpt_browser.report.words import count, plural, size
    from ckpt_browser.values.read import ValuesError

    src = local_path(args.path, args)
    opened = open_path(src, args.checkpoint, run=True)
    where = opened.path
    opts = Options(DTYPES.get(args.dtype), args.include, args.exclude, args.strip_prefix,
                   args.ema)
    p = plan(opened.checkpoint, opts, where)
    if not p.whole and not args.partial:
        _say_refused(where, p)
        return ExitCode.DAMAGED
    try:
        room_for(args.out, p.nbytes)  # the configs beside are small
    except NoRoom as e:
        error(no_room(e))
        return ExitCode.WRITE_FAILED
    root, is_dir = opened.layout.root, os.path.isdir(opened.path)
    found, said = configs(root if is_dir and not args.no_config else None, config_folder(p),
                          p.adapter)
    p.notes.extend(said)
    extras = found if p.whole else []
    if found and not p.whole:  # it would load, the missing weights drawn at random
        p.notes.append("the config is not copied beside a partial export: loading it would "
                       "fill the missing weights at random")
    created = prepare_out(args.out, root, is_dir)
    try:
        with Progress() as progress:
            done = write(p, args.out, args.max_shard_size,
                         lambda k, n, name: progress.update(k, n, name), extras=extras)
    except (WriteError, ValuesError) as e:
        abandon(args.out, created)
        error(f"{args.out}: nothing written: {e}")
        return ExitCode.DAMAGED if isinstance(e, ValuesError) else ExitCode.WRITE_FAILED
    except BaseException:
        abandon(args.out, created)  # Ctrl-C: no partial files left behind either
        raise
    params = p.params
    if args.json:
        print(json.dumps({"source": where, "out": args.out, "files": done.files,
                          "tensors": done.tensors, "params": params, "bytes": done.nbytes,
                          "tied": {i.name: i.same_as for i in p.items if i.same_as},
                          "left_out": dict(p.left_out), "notes": p.notes}))
    else:
        index = f" and {done.index}" if done.index else ""
        print(f"{args.out}: {plural(done.tensors, 'tensor')}, {count(params)} params, "
              f"{size(done.nbytes)} in {plural(len(done.weights), 'safetensors file')}{index}")
        copied = [f for f in done.files if f not in done.weights and f != done.index]
        if copied:
            print(f"  copied from the checkpoint: {', '.join(copied)}")
        for line in p.notes:
            print(f"  note: {line}")
        for name, why in p.left_out:
            print(f"  left out: {name}: {why}")
    if not p.whole:
        note(f"{where}: exported without {plural(len(p.left_out), 'tensor')} "
             f"(--partial); {alarms.phrase(p.problems) or 'the source has problems'}")
        return ExitCode.DAMAGED
    return ExitCode.OK


def no_room(e) -> str:
    from ckpt_browser.report.words import size

    return f"{e.out}: the export needs {size(e.needed)}, and {e.where} has {size(e.free)} free"


def _say_refused(where: str, p) -> None:
    said = alarms.phrase(p.problems)
    error(f"{where}: not exported: {said + ', ' if said else ''}"
          f"{len(p.problems)} error(s), {len(p.left_out)} unreadable tensor(s); --partial "
          "exports the rest")
    for problem in p.problems[:20]:
        note(f"  {problem.line()}")
    for name, why in p.left_out[:20]:
        note(f"  {name}: {why}")
