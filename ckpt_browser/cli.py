"""Command line: `ckpt-browser [PATH]` opens the TUI; subcommands print reports.

Imports stay light: the TUI (and Textual) load only when the TUI opens.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from ckpt_browser import __version__
from ckpt_browser.errors import (EXIT_BUG, EXIT_DAMAGED, EXIT_OK, EXIT_USAGE, VERDICT_EXIT,
                                 CheckpointError, UsageError)
from ckpt_browser.escape import printable as _one_line

EXIT_CODES = """exit codes: 0 fine, 2 usage error or nothing readable at PATH,
5 the checkpoint is damaged (error-level problems), 1 a bug in ckpt-browser;
check: 0 exact, 3 inexact, 4 weights-only, 5 broken;
diff (as diff(1)): 0 no differences, 1 differences, 2 trouble"""
CHECK_EXIT_CODES = """exit codes: 0 exact, 3 inexact, 4 weights-only, 5 broken (for a folder of
checkpoints: the newest one's verdict), 2 usage error or nothing readable at PATH,
1 a bug in ckpt-browser"""

ONE_PATH = ("a checkpoint folder or file (.safetensors, index, .pt/.bin/.ckpt, DCP folder) "
            "or a URL (s3://, gs://, hf://, https://)")
PATH_HELP = ONE_PATH + "; a folder of checkpoints means the newest (--checkpoint picks another)"
INSPECT_EXIT_CODES = """exit codes: 0 fine, 5 the checkpoint is damaged or unsafe (error-level
problems), 2 usage error or nothing readable at PATH, 1 a bug in ckpt-browser"""
QUIZ_EXIT_CODES = """exit codes: 0 fine (also when stopped early), 2 usage error or an
unreadable question bank or --from PATH, 1 a bug in ckpt-browser"""
BROWSE_EXIT_CODES = """exit codes: 0 after quitting, 2 usage error or nothing readable at PATH
(said before the screen is taken), 1 a bug in ckpt-browser"""
STATS_EXIT_CODES = """exit codes: 0 fine, 2 usage error, nothing readable at PATH, or no tensor
matches, 5 some tensor's values could not be read (damaged), 1 a bug in ckpt-browser"""
DIFF_EXIT_CODES = """exit codes (as diff(1)): 0 no differences in what was compared,
1 differences, 2 trouble (a path not readable, values that could not be read, or a bug)"""


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line on stderr, like every other error."""

    def error(self, message: str):
        usage = " ".join(self.format_usage().split())
        self.exit(EXIT_USAGE, _one_line(f"{self.prog}: error: {message} ({usage})") + "\n")


def _world_size(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of ranks, 1 or more, "
                                         f"not {text!r}")
    return n


def _count(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number, 1 or more, not {text!r}")
    return int(text)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="ckpt-browser",
        description="Look inside model and training checkpoints without loading them.",
        epilog="With no subcommand, opens PATH (default: a bundled sample) in the terminal UI;\n"
               "with two paths A B, their diff.\n"
               + EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"ckpt-browser {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    ins = sub.add_parser("inspect", help="summary of a checkpoint: files, tensors, totals, problems",
                         epilog=INSPECT_EXIT_CODES,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    ins.add_argument("path", metavar="PATH", nargs="?",
                     help=PATH_HELP + " (default: a bundled sample)")
    ins.add_argument("--json", action="store_true", help="print JSON (schema in the README)")
    ins.add_argument("--checkpoint", metavar="NAME", help="in a folder of several checkpoints: "
                     "which one (a name such as checkpoint-500, or a step); default the newest")
    chk = sub.add_parser("check", help="can training resume from this checkpoint? a verdict "
                         "(exact, inexact, weights-only, broken) and what is missing",
                         epilog=CHECK_EXIT_CODES,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    chk.add_argument("path", metavar="PATH", help=ONE_PATH + "; a folder of checkpoints: each "
                     "is checked, newest first")
    chk.add_argument("--json", action="store_true", help="print JSON (schema in the README)")
    chk.add_argument("--world-size", metavar="N", type=_world_size,
                     help="check a resume on N ranks: per-rank RNG and data state, ZeRO shards, "
                     "Megatron parallel degrees, DCP resharding")
    quiz = sub.add_parser("quiz", help="practise sharding and resumable training: a bilingual "
                          "quiz on stdin, optionally with questions about a checkpoint",
                          epilog=QUIZ_EXIT_CODES,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    quiz.add_argument("--lang", choices=("en", "vi"), default="en",
                      help="English or Vietnamese (default en)")
    quiz.add_argument("--from", dest="from_path", metavar="PATH",
                      help="add questions about the checkpoint at PATH (a local folder or "
                      "file), answers computed from it")
    quiz.add_argument("--count", metavar="N", type=_count, default=10,
                      help="how many questions (default 10)")
    quiz.add_argument("--seed", metavar="S", type=int,
                      help="the same seed asks the same questions in the same order")
    quiz.add_argument("--no-save", action="store_true", help="do not read or write the progress "
                      "record ($XDG_STATE_HOME/ckpt-browser/quiz.json)")
    quiz.add_argument("--export", choices=("json",), help="print the whole bank (both "
                      "languages, answers, explanations) and exit")
    quiz.add_argument("--bank", metavar="FILE", help="another question bank file (format: "
                      "ckpt_browser/quiz/FORMAT.md)")
    st = sub.add_parser("stats", help="statistics of tensor values (min, max, mean, std, NaN, "
                        "Inf, zeros, histogram), reading one tensor at a time",
                        epilog=STATS_EXIT_CODES,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    st.add_argument("path", metavar="PATH", help=PATH_HELP)
    st.add_argument("names", metavar="NAME_OR_GLOB", nargs="*",
                    help="tensor names or globs (default: every weight tensor); names of "
                    "optimizer and other state tensors are those `inspect --json` lists")
    st.add_argument("--json", action="store_true", help="print JSON (schema in the README)")
    st.add_argument("--checkpoint", metavar="NAME", help="in a folder of several checkpoints: "
                    "which one (default the newest)")
    df = sub.add_parser("diff", help="compare two checkpoints: names, shapes, dtypes, training "
                        "state and (--values) values, one tensor at a time",
                        epilog=DIFF_EXIT_CODES,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    df.add_argument("a", metavar="A", help=ONE_PATH)
    df.add_argument("b", metavar="B", help="another, in any format or sharding")
    df.add_argument("--values", action="store_true", help="also compare the values of tensors "
                    "with the same shape (reads both sides' tensor bytes)")
    df.add_argument("--json", action="store_true", help="print JSON (schema in the README)")
    df.add_argument("--rtol", metavar="R", type=_tolerance, default=0.0,
                    help="values within atol + rtol * |b| count as unchanged (default 0)")
    df.add_argument("--atol", metavar="T", type=_tolerance, default=0.0,
                    help="absolute tolerance (default 0: any difference counts)")
    df.add_argument("--strip-prefix-a", metavar="P", default="",
                    help="remove this prefix from A's names before matching (e.g. model.)")
    df.add_argument("--strip-prefix-b", metavar="P", default="", help="the same for B")
    df.add_argument("--include", metavar="GLOB", action="append", default=[],
                    help="compare only names matching GLOB (repeatable)")
    df.add_argument("--exclude", metavar="GLOB", action="append", default=[],
                    help="skip names matching GLOB (repeatable)")
    df.add_argument("--weights-only", action="store_true",
                    help="compare the weights only, not optimizer or other training state")
    ui = sub.add_parser("browse", help="open PATH in the terminal UI (the default command); "
                        "with two paths, open their diff", epilog=BROWSE_EXIT_CODES,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    ui.add_argument("path", metavar="PATH", nargs="*", help=ONE_PATH + "; a folder of "
                    "checkpoints opens the newest (c picks another); two paths open their diff; "
                    "none opens a bundled sample")
    for command in (ins, chk, st, df, ui):
        _remote_options(command)
    p.commands = sub.choices  # for errors in a subcommand's own words
    return p


def _remote_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("remote paths (s3://, gs://, hf://, https://; needs the remote extra)")
    g.add_argument("--no-cache", action="store_true", help="fetch headers again into a "
                   "throwaway folder, not the cache ($CKPT_BROWSER_CACHE, default "
                   "~/.cache/ckpt-browser/remote)")
    g.add_argument("--concurrency", metavar="N", type=_count, default=16,
                   help="requests in flight at once (default 16)")
    g.add_argument("--timeout", metavar="SECONDS", type=_seconds, default=60.0,
                   help="give up on a request after this long (default 60)")


def _seconds(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        x = 0.0
    if not 0 < x < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, not {text!r}")
    return x


def _tolerance(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        x = -1.0
    if not x >= 0 or x == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number, 0 or more, not {text!r}")
    return x


def _split(argv: list[str]) -> list[str]:
    """`ckpt-browser PATH` means `ckpt-browser browse PATH`."""
    commands = {"inspect", "check", "quiz", "browse", "stats", "diff"}
    if not argv or (argv[0] not in commands and not argv[0].startswith("-")):
        return ["browse", *argv]
    return argv


def _path(path: str | None) -> str:
    if path:
        return path
    from ckpt_browser.samples import default_sample

    return default_sample()


def _local(path: str, args) -> str:
    """A URL becomes its local mirror (headers only); anything else stays as it is."""
    from ckpt_browser.remote.urls import is_url

    if not is_url(path):
        return path
    from ckpt_browser.remote.mirror import mirror
    from ckpt_browser.remote.urls import public

    with _Progress() as progress:
        progress.name = f"reading headers of {public(path)}"
        return mirror(path, cache=not args.no_cache, concurrency=args.concurrency,
                      timeout=args.timeout, progress=progress.update)


def _pick(path: str, choice: str | None):
    """A folder of checkpoints: the one asked for, else the newest. Returns (path, timeline)."""
    from ckpt_browser.analysis.runs import run_entries

    entries = run_entries(path)
    if not entries:
        if choice:
            raise UsageError(path, "--checkpoint applies only to a folder of checkpoints")
        return path, None
    if not choice:
        return entries[0].path, entries
    for e in entries:
        if choice in (e.name, os.path.basename(e.name), str(e.step)):
            return e.path, entries
    raise UsageError(path, f"no checkpoint {choice!r} here; it holds "
                     + ", ".join(e.name for e in entries[:8]))


def cmd_inspect(args) -> int:
    from ckpt_browser.analysis.components import training_state
    from ckpt_browser.analysis.open import open_checkpoint
    from ckpt_browser.readers.load import paused_gc

    path, timeline = _pick(_local(_path(args.path), args), args.checkpoint)
    ckpt = open_checkpoint(path)
    training = training_state(ckpt)
    if args.json:
        from ckpt_browser.report.json_report import full_doc

        with paused_gc():  # one dict per tensor, no cycles
            sys.stdout.write(json.dumps(full_doc(ckpt, training, timeline)) + "\n")
    else:
        from ckpt_browser.report.text import inspect_text, state_text, timeline_text

        if timeline:
            print(timeline_text(timeline, path) + "\n")
        print(inspect_text(ckpt, training.framework) + state_text(training, ckpt.problems))
    errors = list(dict.fromkeys(p for p in ckpt.problems + tuple(training.problems)
                                if p.severity == "error"))
    if errors:
        first = errors[0]
        where = f"{first.file}: " if first.file else ""
        print(_one_line(f"ckpt-browser: {ckpt.layout.path}: damaged, {len(errors)} error(s); "
                        f"first: {where}{first.message}"), file=sys.stderr)
        return EXIT_DAMAGED
    return EXIT_OK


def cmd_check(args) -> int:
    from ckpt_browser.analysis.runs import is_run
    from ckpt_browser.report.resume import resume_doc, resume_text, timeline_resume_text

    args.path = _local(args.path, args)
    if is_run(args.path):
        from ckpt_browser.analysis.resume import resume_reports

        timeline = resume_reports(args.path, args.world_size)
        reports = timeline.reports
        out = (json.dumps([resume_doc(r) for r in reports]) if args.json
               else timeline_resume_text(timeline))
    else:
        from ckpt_browser.analysis.resume import resume_report

        reports = (resume_report(args.path, args.world_size),)
        out = json.dumps(resume_doc(reports[0])) if args.json else resume_text(reports[0])
    sys.stdout.write(out + "\n")
    return VERDICT_EXIT[reports[0].verdict]


def cmd_quiz(args) -> int:
    from ckpt_browser.quiz.bank import export_doc, load_bank

    questions = load_bank(args.bank)
    if args.from_path:
        from ckpt_browser.quiz.generated import questions_for

        questions += questions_for(args.from_path, args.seed)
    if args.export:
        sys.stdout.write(json.dumps(export_doc(questions), ensure_ascii=False, indent=1) + "\n")
        return EXIT_OK
    from ckpt_browser.quiz.progress import Progress, load_progress, save_progress
    from ckpt_browser.quiz.session import Session
    from ckpt_browser.quiz.terminal import run

    progress = Progress() if args.no_save else load_progress()
    if progress.note:
        print(_one_line(f"ckpt-browser: {progress.note}"), file=sys.stderr)
    session = Session(questions, args.count, args.seed, progress.weights())
    run(session, args.lang, sys.stdin, sys.stdout)
    if not args.no_save and session.answers:
        for qid, correct in session.results():
            progress.record(qid, correct)
        try:
            save_progress(progress)
        except OSError as e:
            print(_one_line(f"ckpt-browser: quiz progress not saved: {e}"), file=sys.stderr)
    return EXIT_OK


def cmd_stats(args) -> int:
    from ckpt_browser.report.stats import error_doc, error_text, stats_doc, stats_text
    from ckpt_browser.values.diff import open_side
    from ckpt_browser.values.read import ValuesError
    from ckpt_browser.values.stats import tensor_stats

    path, _ = _pick(_local(args.path, args), args.checkpoint)
    side = open_side(path)
    locs = _matching(side, args.names)
    docs, bad = [], 0
    with _Progress() as progress:
        for i, loc in enumerate(locs):
            progress.name = f"[{i + 1}/{len(locs)}] {loc.name}"
            try:
                s = tensor_stats(loc, progress=progress.update)
            except ValuesError as e:
                bad += 1
                docs.append(error_doc(loc, str(e)))
                if not args.json:
                    progress.write(error_text(loc, str(e)))
                continue
            if args.json:
                docs.append(stats_doc(s, loc))
            else:
                progress.write(stats_text(s, loc))
    if args.json:
        sys.stdout.write(json.dumps({"path": path, "tensors": docs}) + "\n")
    if bad:
        print(_one_line(f"ckpt-browser: {path}: the values of {bad} tensor(s) could not be "
                        "read"), file=sys.stderr)
        return EXIT_DAMAGED
    return EXIT_OK


def _matching(side, patterns: list[str]) -> list:
    import fnmatch

    if not patterns:
        locs = [x for x in side.locs if x.component in ("weights", None)]
        if not locs:
            raise UsageError(side.path, "holds no weight tensors; name the tensors to read")
        return locs
    by_name = {x.name: x for x in reversed(side.locs)}
    out: dict[str, object] = {}
    for pattern in patterns:
        hits = ([by_name[pattern]] if pattern in by_name
                else [x for x in side.locs if fnmatch.fnmatchcase(x.name, pattern)])
        if not hits:
            import difflib

            close = difflib.get_close_matches(pattern, list(by_name), n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise UsageError(side.path, f"no tensor named or matching {pattern!r}{hint}")
        for x in hits:
            out.setdefault(f"{x.file}:{x.name}", x)
    return list(out.values())


class _Shown:
    """An output stream that shows each remote mirror's path as its URL."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> int:
        from ckpt_browser.remote import shown

        return self.stream.write(shown(text))

    def __getattr__(self, name):
        return getattr(self.stream, name)


class _Progress:
    """A one-line progress display on stderr, only when stderr is a terminal."""

    def __init__(self):
        self.tty = sys.stderr.isatty()
        self.name = ""
        self.last = 0.0
        self.shown = False

    def __enter__(self) -> _Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.clear()

    def update(self, done: int, total: int, name: str | None = None) -> None:
        import time

        now = time.monotonic()
        if not self.tty or now - self.last < 0.1:
            return
        self.last = now
        pct = 100 * done // total if total else 100
        label = _one_line(name or self.name)[:50]
        sys.stderr.write(f"\r\033[K{pct:3d}% {label}")
        sys.stderr.flush()
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
            self.shown = False

    def write(self, text: str) -> None:
        self.clear()
        print(text, flush=True)


def _diff_side(path: str, which: str):
    from ckpt_browser.analysis.runs import run_entries
    from ckpt_browser.values.diff import open_side

    entries = run_entries(path)
    if entries:
        names = ", ".join(e.name for e in entries[:6])
        raise UsageError(path, f"{which} is a folder of several checkpoints ({names}); "
                         "name one of them")
    return open_side(path)


def cmd_diff(args) -> int:
    from ckpt_browser.values.diff import Options, diff

    opts = Options(args.values, args.rtol, args.atol, args.strip_prefix_a, args.strip_prefix_b,
                   tuple(args.include), tuple(args.exclude), args.weights_only)
    from ckpt_browser.readers.load import paused_gc

    with paused_gc():  # two objects per tensor per side, no cycles
        a = _diff_side(_local(args.a, args), "A")
        b = _diff_side(_local(args.b, args), "B")
    with _Progress() as progress:
        result = diff(a, b, opts, progress=progress.update)
    if args.json:
        from ckpt_browser.report.diff import write_diff_json

        with paused_gc():
            write_diff_json(result, sys.stdout)
    else:
        from ckpt_browser.report.diff import diff_text

        sys.stdout.write(diff_text(result) + "\n")
    if result.errors:
        print(_one_line(f"ckpt-browser: the values of {result.errors} tensor(s) could not be "
                        "read; see the report"), file=sys.stderr)
        return EXIT_USAGE
    return 1 if result.differs else EXIT_OK


def cmd_browse(args) -> int:
    from ckpt_browser.readers import open_layout

    if len(args.path) > 2:
        raise UsageError(" ".join(args.path), "give one checkpoint to browse, or two to compare")
    if len(args.path) == 2:
        from ckpt_browser.values.diff import Options

        if sys.stderr.isatty():  # the screen is not ours yet; 94,000 headers take seconds
            print(_one_line(f"ckpt-browser: reading {args.path[0]} and {args.path[1]} ..."),
                  file=sys.stderr, flush=True)
        a = _diff_side(_local(args.path[0], args), "A")
        b = _diff_side(_local(args.path[1], args), "B")
        from ckpt_browser.tui.diff_app import DiffApp

        app = DiffApp(a, b, Options())
        app.run()
        return app.return_code or EXIT_OK
    folder = _local(_path(args.path[0] if args.path else None), args)
    path, timeline = _pick(folder, None)
    layout = open_layout(path)  # fail fast, before the screen is taken
    from ckpt_browser.tui.app import make_app

    app = make_app(layout, (folder, timeline) if timeline else None)
    app.run()
    return app.return_code or EXIT_OK


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from ckpt_browser.remote.urls import is_url

    streams = sys.stdout, sys.stderr
    if any(is_url(a) for a in argv):  # output names the URL, never the cache folder
        sys.stdout, sys.stderr = _Shown(sys.stdout), _Shown(sys.stderr)
    try:
        return _run(argv)
    finally:
        sys.stdout, sys.stderr = streams


def _run(argv: list[str]) -> int:
    command = None
    try:
        parser = _parser()
        args, rest = parser.parse_known_args(_split(argv))
        if rest and args.command == "stats" and not any(r.startswith("-") for r in rest):
            args.names += rest  # names after an option: `stats PATH --json NAME`
        elif rest:
            parser.commands.get(args.command, parser).error(
                f"unrecognized arguments: {' '.join(rest)}")
        command = args.command
        return {"inspect": cmd_inspect, "check": cmd_check, "quiz": cmd_quiz,
                "browse": cmd_browse, "stats": cmd_stats, "diff": cmd_diff}[command](args)
    except CheckpointError as e:
        print(_one_line(f"ckpt-browser: {e}"), file=sys.stderr)
        return EXIT_USAGE if command == "diff" else e.exit_code
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except KeyboardInterrupt:
        return 130
    except SystemExit as e:  # argparse: 0 for --help, 2 for usage errors
        return e.code if isinstance(e.code, int) else EXIT_USAGE
    except Exception as e:  # noqa: BLE001 - last resort: one line, not a traceback
        if os.environ.get("CKPT_BROWSER_DEBUG"):
            raise
        print(_one_line(f"ckpt-browser: internal error: {type(e).__name__}: {e} "
                        "(a bug; rerun with CKPT_BROWSER_DEBUG=1 for details)"), file=sys.stderr)
        return EXIT_USAGE if command == "diff" else EXIT_BUG  # diff(1): 2 is trouble


if __name__ == "__main__":  # python -m ckpt_browser.cli, as well as python -m ckpt_browser
    sys.exit(main())
