"""`ckpt-browser diff`: compare two checkpoints; and `browse`, which opens one or two in the
terminal UI."""

from __future__ import annotations

import dataclasses
import sys

from ckpt_browser.diagnostics import ExitCode, Progress, error, note
from ckpt_browser.errors import UsageError
from ckpt_browser.samples import SHOWN_AS, default_sample


def cmd_diff(args) -> int:
    from ckpt_browser.readers.load import paused_gc
    from ckpt_browser.report.diff import diff_text, write_diff_json
    from ckpt_browser.values.diff import Options, diff

    opts = Options(args.values, args.rtol, args.atol, args.strip_prefix_a, args.strip_prefix_b,
                   tuple(args.include), tuple(args.exclude), args.weights_only)
    with paused_gc():  # two objects per tensor per side, no cycles
        a, b = _side(args.a, "A", args), _side(args.b, "B", args)
    with Progress() as progress:
        result = diff(a, b, opts, progress=progress.update)
    if args.json:
        with paused_gc():
            write_diff_json(result, sys.stdout)
    else:
        sys.stdout.write(diff_text(result) + "\n")
    if result.errors:
        error(result.trouble())
        return ExitCode.TROUBLE
    return ExitCode.DIFFERS if result.differs else ExitCode.OK


def cmd_browse(args) -> int:
    from ckpt_browser.analysis.opened import local_path, open_path

    if len(args.path) > 2:
        raise UsageError(" ".join(args.path), "give one checkpoint to browse, or two to compare")
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return _no_terminal(args)
    if len(args.path) == 2:
        from ckpt_browser.values.diff import Options

        if sys.stderr.isatty():  # the screen is not ours yet; 94,000 headers take seconds
            note(f"reading {args.path[0]} and {args.path[1]} ...")
        a, b = _side(args.path[0], "A", args), _side(args.path[1], "B", args)
        from ckpt_browser.tui.app import make_diff_app

        app = make_diff_app(a, b, Options())
        app.run()
        return app.return_code or ExitCode.OK
    folder = local_path(args.path[0] if args.path else default_sample(), args)
    opened = open_path(folder, run=True)  # the layout fails fast, before the screen is taken
    layout = opened.layout
    if not args.path:
        layout = dataclasses.replace(layout, shown_as=SHOWN_AS)
    from ckpt_browser.tui.app import make_app

    app = make_app(layout, (folder, opened.timeline) if opened.timeline else None)
    app.run()
    return app.return_code or ExitCode.OK


def _no_terminal(args) -> int:
    """No terminal to draw on (`ckpt-browser PATH > log`, a pipe, a job): the report the
    screen would show, as `inspect` or `diff` prints it, with their exit codes."""
    from argparse import Namespace

    from ckpt_browser.commands.inspect import cmd_inspect

    remote = {k: getattr(args, k) for k in ("no_cache", "concurrency", "timeout")
              if hasattr(args, k)}
    if len(args.path) == 2:
        code = cmd_diff(Namespace(a=args.path[0], b=args.path[1], values=False, json=False,
                                  rtol=0.0, atol=0.0, strip_prefix_a="", strip_prefix_b="",
                                  include=[], exclude=[], weights_only=False, **remote))
    else:
        code = cmd_inspect(Namespace(path=args.path[0] if args.path else None, json=False,
                                     files=False, checkpoint=None, **remote))
    # after the report: a path that cannot be read is its one line alone
    note("not a terminal (stdin or stdout), so the report above instead of the browser")
    return code


def _side(path: str, which: str, args):
    """One side of a diff: a URL mirrored, a folder of several checkpoints refused."""
    from ckpt_browser.analysis.opened import local_path, open_path
    from ckpt_browser.values.diff import side_of

    return side_of(open_path(local_path(path, args), run=True, which=which))
