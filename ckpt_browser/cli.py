"""Command line: `ckpt-browser [PATH]` opens the TUI; subcommands print reports. This is the
parser; each command is a module of `commands/`.

Imports stay light: the TUI (and Textual) load only when the TUI opens.
"""

from __future__ import annotations

import argparse
import math
import sys

from ckpt_browser import __version__, limits
from ckpt_browser.commands.check import cmd_check
from ckpt_browser.commands.diff import cmd_browse, cmd_diff
from ckpt_browser.commands.export import cmd_export
from ckpt_browser.commands.inspect import cmd_inspect
from ckpt_browser.commands.quiz import cmd_quiz
from ckpt_browser.commands.stats import cmd_stats
from ckpt_browser.diagnostics import Parser, epilog, outliving_reader, rewriting, stopped, table

ONE_PATH = ("a checkpoint folder or file (.safetensors, index, .pt/.bin/.ckpt, DCP folder) "
            "or a URL (s3://, gs://, hf://, https://)")
PATH_HELP = ONE_PATH + "; a folder of checkpoints means the newest (--checkpoint picks another)"
RAW = argparse.RawDescriptionHelpFormatter  # the epilogs keep their lines


def _number(parse, ok, wants: str):
    """An argparse type: `parse` the text (ValueError or None: not a number), then `ok` it."""
    def check(text: str):
        try:
            x = parse(text)
        except ValueError:
            x = None
        if x is None or not ok(x):
            raise argparse.ArgumentTypeError(f"must be {wants}, not {text!r}")
        return x
    return check


_world_size = _number(int, lambda n: n >= 1, "a whole number of ranks, 1 or more")
_count = _number(lambda t: int(t) if t.isdigit() else None, lambda n: n >= 1,
                 "a whole number, 1 or more")
_seconds = _number(float, lambda x: 0 < x < math.inf, "a number of seconds above 0")
_tolerance = _number(float, lambda x: 0 <= x < math.inf, "a number, 0 or more")


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="ckpt-browser", formatter_class=RAW,
               usage="ckpt-browser [options] [PATH [PATH]]\n"
                     "       ckpt-browser COMMAND [options] ...  (COMMAND --help for its own)",
               description="Look inside model and training checkpoints without loading them.",
               epilog="With no subcommand, opens PATH (default: a bundled sample) in the terminal "
                      "UI;\nwith two paths A B, their diff.\n" + table())
    p.add_argument("--version", action="version", version=f"ckpt-browser {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    _inspect_args(_command(sub, "inspect", cmd_inspect, "summary of a checkpoint: files, tensors, "
                           "totals, problems"))
    _check_args(_command(sub, "check", cmd_check, "can training resume from this checkpoint? a "
                         "verdict (exact, inexact, weights-only, broken) and what is missing"))
    _quiz_args(_command(sub, "quiz", cmd_quiz, "practise sharding and resumable training: a "
                        "bilingual quiz on stdin, optionally with questions about a checkpoint"))
    _stats_args(_command(sub, "stats", cmd_stats, "statistics of tensor values (min, max, mean, "
                         "std, NaN, Inf, zeros, histogram), reading one tensor at a time"))
    _diff_args(_command(sub, "diff", cmd_diff, "compare two checkpoints: names, shapes, dtypes, "
                        "training state and (--values) values, one tensor at a time"))
    _export_args(_command(sub, "export", cmd_export, "write a checkpoint's weights as "
                          "safetensors (the layout transformers loads), without running it"))
    _browse_args(_command(sub, "browse", cmd_browse, "open PATH in the terminal UI (the default "
                          "command); with two paths, open their diff"))
    p.commands = sub.choices  # the subcommands by name; for errors in a subcommand's own words
    return p


def _command(sub, name: str, run, summary: str) -> argparse.ArgumentParser:
    """A subcommand: its --help ends with the exit codes it returns; parsing it runs `run`."""
    p = sub.add_parser(name, help=summary, epilog=epilog(name), formatter_class=RAW)
    p.set_defaults(run=run)
    return p


def _inspect_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", metavar="PATH", nargs="?",
                   help=PATH_HELP + " (default: a bundled sample)")
    p.add_argument("--json", action="store_true", help="print JSON (schema in the README)")
    p.add_argument("--files", action="store_true", help="list every file in the table (past "
                   "24 files, each run of sound numbered files such as 163 shards is one row)")
    p.add_argument("--checkpoint", metavar="NAME", help="in a folder of several checkpoints: "
                   "which one (a name such as checkpoint-500, or a step); default the newest")
    _remote_options(p)


def _check_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", metavar="PATH", help=ONE_PATH + "; a folder of checkpoints: the "
                   "newest 50 are checked, newest first")
    p.add_argument("--json", action="store_true", help="print JSON (schema in the README)")
    p.add_argument("--world-size", metavar="N", type=_world_size,
                   help="check a resume on N ranks: per-rank RNG and data state, DCP resharding, "
                   "and each framework's own rules (optimizer shards, parallel degrees)")
    _remote_options(p)


def _quiz_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--lang", choices=("en", "vi"), default="en",
                   help="English or Vietnamese (default en)")
    p.add_argument("--from", dest="from_path", metavar="PATH",
                   help="add questions about the checkpoint at PATH (a folder, a file or a "
                   "URL), answers computed from it")
    p.add_argument("--count", metavar="N", type=_count, default=10,
                   help="how many questions (default 10)")
    p.add_argument("--seed", metavar="S", type=int,
                   help="the same seed asks the same questions in the same order")
    p.add_argument("--no-save", action="store_true", help="do not read or write the progress "
                   "record ($XDG_STATE_HOME/ckpt-browser/quiz.json)")
    p.add_argument("--export", choices=("json",), help="print the whole bank (both "
                   "languages, answers, explanations) and exit")
    _remote_options(p)
    p.add_argument("--bank", metavar="FILE", help="another question bank file (format: "
                   "ckpt_browser/quiz/FORMAT.md)")


def _stats_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", metavar="PATH", help=PATH_HELP)
    p.add_argument("names", metavar="NAME_OR_GLOB", nargs="*",
                   help="tensor names or globs (default: every weight tensor); names of "
                   "optimizer and other state tensors are those `inspect --json` lists")
    p.add_argument("--json", action="store_true", help="print JSON (schema in the README)")
    p.add_argument("--check", action="store_true", help="print only the tensors holding NaN "
                   "or Inf and one summary line; exit 6 if any (a script's 'is this "
                   "checkpoint sound?')")
    p.add_argument("--check-constant", action="store_true", help="with --check: all-zero and "
                   "constant tensors count too (a layer that never trained, a wiped shard)")
    _checkpoint_option(p)
    p.add_argument("--max-bytes", metavar="N", type=_byte_count, default=None,
                   help="read at most N bytes of tensor values in all (a number, or with K, M, "
                   "G or T: 700G); more reads none of them and lists them as not read "
                   f"(default {limits.LIMITS.values_bytes // 2**30:,}G, or "
                   f"{limits.env('values_bytes')})")
    _remote_options(p)


_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def _parse_bytes(text: str) -> int | None:
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    unit = t[-1:] if t[-1:] in _UNITS else ""
    digits = t[: len(t) - len(unit)]
    return int(digits) * _UNITS[unit] if digits.isascii() and digits.isdigit() else None


_byte_count = _number(_parse_bytes, lambda n: n >= 1, "a number of bytes such as 700G")


def _diff_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", metavar="A", help=ONE_PATH)
    p.add_argument("b", metavar="B", help="another, in any format or sharding")
    p.add_argument("--values", action="store_true", help="also compare the values of tensors "
                   "with the same shape (reads both sides' tensor bytes)")
    p.add_argument("--json", action="store_true", help="print JSON (schema in the README)")
    p.add_argument("--rtol", metavar="R", type=_tolerance, default=0.0,
                   help="values within atol + rtol * |b| count as unchanged (default 0)")
    p.add_argument("--atol", metavar="T", type=_tolerance, default=0.0,
                   help="absolute tolerance (default 0: any difference counts)")
    p.add_argument("--strip-prefix-a", metavar="P", default="",
                   help="remove this prefix from A's names before matching (e.g. model.)")
    p.add_argument("--strip-prefix-b", metavar="P", default="", help="the same for B")
    p.add_argument("--include", metavar="GLOB", action="append", default=[],
                   help="compare only names matching GLOB (repeatable)")
    p.add_argument("--exclude", metavar="GLOB", action="append", default=[],
                   help="skip names matching GLOB (repeatable)")
    p.add_argument("--weights-only", action="store_true",
                   help="compare the weights only, not optimizer or other training state")
    _remote_options(p)


def _export_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", metavar="SRC", help=PATH_HELP)
    p.add_argument("out", metavar="OUT", help="a new or empty folder (not inside SRC): "
                   "model.safetensors, or model-0000i-of-0000n.safetensors and its index")
    p.add_argument("--dtype", choices=("fp32", "fp16", "bf16"), help="cast floating-point "
                   "weights (integers and FP8 stay as stored); default: as stored")
    p.add_argument("--max-shard-size", metavar="N", type=_byte_count, default=5 * 2**30,
                   help="start a new file past N bytes (K, M, G: 2G; default 5G)")
    p.add_argument("--include", metavar="GLOB", action="append", default=[],
                   help="export only names matching GLOB (repeatable; names as written)")
    p.add_argument("--exclude", metavar="GLOB", action="append", default=[],
                   help="leave out names matching GLOB (repeatable)")
    p.add_argument("--strip-prefix", metavar="P", default="",
                   help="remove this prefix from the names (e.g. model.)")
    p.add_argument("--ema", action="store_true", help="the EMA copy of the weights, not the "
                   "model's")
    _checkpoint_option(p)
    p.add_argument("--no-config", action="store_true", help="do not copy the checkpoint "
                   "folder's config.json, generation_config.json and tokenizer files beside "
                   "the weights")
    p.add_argument("--partial", action="store_true", help="a damaged or unsafe source: write "
                   "the weights that can be read, list the rest, exit 5")
    p.add_argument("--json", action="store_true", help="print JSON: files, counts, tied and "
                   "left-out names")
    _remote_options(p)


def _browse_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", metavar="PATH", nargs="*", help=ONE_PATH + "; a folder of "
                   "checkpoints opens the newest (c picks another); two paths open their diff; "
                   "none opens a bundled sample")
    _remote_options(p)


def _checkpoint_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", metavar="NAME", help="in a folder of several checkpoints: "
                   "which one (default the newest)")


def _remote_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("remote paths (s3://, gs://, hf://, https://; needs the remote extra)")
    g.add_argument("--no-cache", action="store_true", help="fetch headers again into a "
                   "throwaway folder, not the cache ($CKPT_BROWSER_CACHE, default "
                   "~/.cache/ckpt-browser/remote)")
    g.add_argument("--concurrency", metavar="N", type=_count, default=16,
                   help="requests in flight at once (default 16)")
    g.add_argument("--timeout", metavar="SECONDS", type=_seconds, default=60.0,
                   help="give up on a request after this long (default 60)")


def _split(argv: list[str], commands) -> list[str]:
    """`ckpt-browser PATH` means `ckpt-browser browse PATH`, options before the path too
    (`ckpt-browser --no-cache URL`); `ckpt-browser --no-cache inspect URL` is `inspect`'s."""
    if argv and argv[0] in commands or any(a in ("-h", "--help", "--version") for a in argv[:1]):
        return argv
    named = next((i for i, a in enumerate(argv) if a in commands), None)
    if named is not None and all(a.startswith("-") or a[:1].isdigit() for a in argv[:named]):
        return [argv[named], *argv[:named], *argv[named + 1:]]
    return ["browse", *argv]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from ckpt_browser.remote import shown
    from ckpt_browser.remote.urls import is_url

    with outliving_reader(), rewriting(shown if any(is_url(a) for a in argv) else None):
        return int(_run(argv))  # rewriting: the URL, never the cache


def _run(argv: list[str]) -> int:
    command = None
    try:
        parser = _parser()
        args, rest = parser.parse_known_args(_split(argv, parser.commands))
        if rest and args.command == "stats" and not any(r.startswith("-") for r in rest):
            args.names += rest  # names after an option: `stats PATH --json NAME`
        elif rest:
            parser.commands.get(args.command, parser).error(
                f"unrecognized arguments: {' '.join(rest)}")
        command = args.command
        return args.run(args)
    except (Exception, KeyboardInterrupt, SystemExit) as e:  # noqa: BLE001 - never a traceback
        return stopped(command, e)  # SystemExit: argparse, after --help or a usage error


if __name__ == "__main__":  # python -m ckpt_browser.cli, as well as python -m ckpt_browser
    sys.exit(main())
