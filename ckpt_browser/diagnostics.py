"""Everything ckpt-browser writes to stderr, and the code it exits with.

`ExitCode` is the one list of exit codes (the README's "Exit codes" table shows the same rows; a
test compares them). `RETURNS` says once which codes each subcommand returns and what each means
there; the `--help` epilogs are built from it. Messages are one escaped line: `error()` for the
line that goes with a failing exit code, `note()` for one that does not; `stopped()` says what
ended a command early (a `bug()` included) and picks its code; `Parser` does the same for usage
errors. `Progress` is the progress line, `rewriting()` shows remote mirror paths as their URLs.
Ground floor: nothing here imports the rest of the package but `alarms`, `errors` and `escape`.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import IntEnum
from typing import NamedTuple

from ckpt_browser import alarms
from ckpt_browser.errors import CheckpointError
from ckpt_browser.escape import printable as _one_line

PROG = "ckpt-browser"


class ExitCode(IntEnum):
    """Exit codes; `meaning` is the README row. diff's two aliases follow diff(1)."""

    meaning: str

    def __new__(cls, value: int, meaning: str = "") -> ExitCode:
        code = int.__new__(cls, value)
        code._value_ = value
        code.meaning = meaning
        return code

    OK = 0, ("fine (warnings may have been printed); check: the verdict is exact; diff: no "
             "differences")
    DIFFERS = 1, "diff: the checkpoints differ"
    USAGE = 2, ("usage error, path not found, or nothing at PATH that can be read as a "
                "checkpoint; diff: any trouble reading them")
    TROUBLE = 2  # diff: a path or some values could not be read
    INEXACT = 3, "check: the verdict is inexact"
    WEIGHTS_ONLY = 4, "check: the verdict is weights-only"
    DAMAGED = 5, ("the checkpoint is damaged or unsafe: at least one error-level problem (stats: "
                  "some tensor's values could not be read); check: the verdict is broken")
    FOUND = 6, "stats --check: some tensor holds NaN or Inf (--check-constant: or is constant)"
    WRITE_FAILED = 7, ("export: OUT could not be written (disk full, no permission, a file "
                       "that read back wrong); nothing is left in OUT")
    # EX_SOFTWARE of sysexits.h: never a code a command also gives for its input
    BUG = 70, ("a bug in ckpt-browser (one line on stderr; CKPT_BROWSER_DEBUG=1 shows the "
               "traceback), in every command")
    INTERRUPTED = 130, ("interrupted (Ctrl-C); quiz: stops, prints the score so far and exits 0")


# `check`: one code per resume verdict.
VERDICT_CODE = {"exact": ExitCode.OK, "inexact": ExitCode.INEXACT,
                "weights-only": ExitCode.WEIGHTS_ONLY, "broken": ExitCode.DAMAGED}


class Returns(NamedTuple):
    """The codes one subcommand returns, each with what it means there, in the order shown."""

    codes: tuple[tuple[ExitCode, str], ...]
    like: str = ""  # a tool whose convention the codes follow: "diff(1)"

    def epilog(self) -> str:
        head = f"exit codes (as {self.like}):" if self.like else "exit codes:"
        body = ", ".join(f"{int(code)} {meaning}" for code, meaning in self.codes)
        return textwrap.fill(f"{head} {body}", width=79, break_on_hyphens=False)


_BUG = (ExitCode.BUG, "a bug in ckpt-browser")
_USAGE = (ExitCode.USAGE, "usage error or nothing readable at PATH")

# Ctrl-C (INTERRUPTED) applies to every subcommand alike and is left out of each list.
RETURNS: dict[str, Returns] = {
    "inspect": Returns(((ExitCode.OK, "fine"),
                        (ExitCode.DAMAGED, "the checkpoint is damaged or unsafe (error-level "
                         "problems)"), _USAGE, _BUG)),
    "check": Returns(((ExitCode.OK, "exact"), (ExitCode.INEXACT, "inexact"),
                      (ExitCode.WEIGHTS_ONLY, "weights-only"),
                      (ExitCode.DAMAGED, "broken (for a folder of checkpoints: the newest one's "
                       "verdict)"),
                      (ExitCode.USAGE, "usage error, nothing readable at PATH, or PATH is one "
                       "shard whose folder lacks the index or other shards (no verdict: check "
                       "the folder)"), _BUG)),
    "quiz": Returns(((ExitCode.OK, "fine (also when stopped early)"),
                     (ExitCode.USAGE, "usage error or an unreadable question bank or --from "
                      "PATH"), _BUG)),
    "stats": Returns(((ExitCode.OK, "fine"),
                      (ExitCode.USAGE, "usage error, nothing readable at PATH, no tensor "
                       "matches, or values left unread by the values budget (listed)"),
                      (ExitCode.DAMAGED, "some tensor's values could not be read (damaged)"),
                      (ExitCode.FOUND, "--check: NaN or Inf found (or, with "
                       "--check-constant, a constant tensor)"), _BUG)),
    "diff": Returns(((ExitCode.OK, "no differences in what was compared"),
                     (ExitCode.DIFFERS, "differences"),
                     (ExitCode.TROUBLE, "trouble (a path not readable, values that could not "
                      "be read or that the values budget left unread)"), _BUG),
                    like="diff(1)"),
    "export": Returns(((ExitCode.OK, "every weight written and read back"),
                       (ExitCode.USAGE, "usage error, nothing readable at PATH, OUT not a new "
                        "or empty folder, or OUT inside the checkpoint folder"),
                       (ExitCode.DAMAGED, "the source is damaged or unsafe: nothing written "
                        "(--partial: the readable weights written, the rest listed)"),
                       (ExitCode.WRITE_FAILED, "OUT could not be written; nothing left there"),
                       _BUG)),
    "browse": Returns(((ExitCode.OK, "after quitting"),
                       (ExitCode.USAGE, "usage error or nothing readable at PATH (said before "
                        "the screen is taken)"), _BUG)),
}


def epilog(command: str) -> str:
    """`ckpt-browser COMMAND --help`'s last paragraph: the codes COMMAND returns."""
    return RETURNS[command].epilog()


def table() -> str:
    """`ckpt-browser --help`'s exit codes: every code with its meaning, one row each."""
    rows = ["exit codes (each command's --help lists its own):"]
    for code in ExitCode:  # the alias TROUBLE is in USAGE's row
        rows.append(textwrap.fill(code.meaning, width=79, initial_indent=f"  {int(code):<5}",
                                  subsequent_indent=" " * 7, break_on_hyphens=False))
    return "\n".join(rows)


def exit_code_for(command: str | None, error: BaseException) -> ExitCode:
    """The code `command` exits with when `error` stops it (None: before a command was parsed)."""
    if isinstance(error, KeyboardInterrupt):
        return ExitCode.INTERRUPTED
    if isinstance(error, BrokenPipeError):  # the reader went away (`| head`): not a failure
        return ExitCode.OK
    if isinstance(error, SystemExit):  # argparse: 0 for --help and --version, 2 for usage errors
        return ExitCode.OK if error.code == 0 else ExitCode.USAGE
    if isinstance(error, CheckpointError):  # diff(1): 2 is any trouble
        return ExitCode.TROUBLE if command == "diff" else ExitCode.USAGE
    return ExitCode.BUG


def error(message: str) -> None:
    """The one line on stderr that goes with a failing exit code."""
    _line(message)


def note(message: str) -> None:
    """One line on stderr that changes nothing about the exit code."""
    _line(message)


def _line(message: str) -> None:
    print(_one_line(f"{PROG}: {message}"), file=sys.stderr, flush=True)


def stopped(command: str | None, e: BaseException) -> ExitCode:
    """What stopped `command`, said on stderr (one line, or nothing), and the code to exit with."""
    if isinstance(e, CheckpointError):
        error(str(e))
    elif isinstance(e, BrokenPipeError):  # stdout is gone: no more writes to it, no complaint
        to_devnull(sys.stdout.fileno())
    elif isinstance(e, Exception):
        return bug(command, e)
    return exit_code_for(command, e)


def errors_found(path: str, problems) -> ExitCode:
    """DAMAGED (the code for damaged or unsafe), with one line saying which and naming the
    first error, unsafe ones first, when some of `problems` are errors; else OK."""
    errors = alarms.errors(problems)
    if not errors:
        return ExitCode.OK
    first = errors[0]
    where = f"{first.file}: " if first.file else ""
    error(f"{path}: {alarms.phrase(errors)}, {len(errors)} error(s); first: {where}"
          f"{first.message}")
    return ExitCode.DAMAGED


def bug(command: str | None, e: Exception) -> ExitCode:
    """The last resort: one line, never a traceback (unless CKPT_BROWSER_DEBUG is set)."""
    if os.environ.get("CKPT_BROWSER_DEBUG"):
        raise e
    error(f"internal error: {type(e).__name__}: {e} "
          "(a bug; rerun with CKPT_BROWSER_DEBUG=1 for details)")
    return exit_code_for(command, e)


class Parser(argparse.ArgumentParser):
    """Usage errors as one line on stderr, like every other error, and ExitCode.USAGE."""

    def error(self, message: str):
        usage = " ".join(self.format_usage().split())
        self.exit(ExitCode.USAGE, _one_line(f"{self.prog}: error: {message} ({usage})") + "\n")


def to_devnull(fd: int) -> None:
    """Point `fd` (stdout, whose reader is gone) at /dev/null: later writes and the exit's
    flush go nowhere instead of failing."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), fd)


class _ReaderGone:
    """stdout that outlives its reader (`| head`, `| true`): once the pipe is closed, writes
    go nowhere and the command runs on to the code it decides (a damaged checkpoint still
    exits 5 under `set -o pipefail`); a BrokenPipeError out of print() lost that code."""

    def __init__(self, stream):
        self.stream = stream
        self.gone = False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                return self.stream.write(text)
            except BrokenPipeError:
                self._drop()
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self.stream.flush()
            except BrokenPipeError:
                self._drop()

    def _drop(self) -> None:
        """No more writes to the pipe, and none left buffered for the exit's flush."""
        self.gone = True
        with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
            to_devnull(self.stream.fileno())

    def __getattr__(self, name):
        return getattr(self.stream, name)


@contextmanager
def outliving_reader() -> Iterator[None]:
    """Inside the block a closed stdout pipe ends the output, not the command."""
    stream = sys.stdout
    sys.stdout = safe = _ReaderGone(stream)
    try:
        yield
    finally:
        safe.flush()
        sys.stdout = stream


class _Rewritten:
    """An output stream that passes every write through `rewrite`."""

    def __init__(self, stream, rewrite: Callable[[str], str]):
        self.stream = stream
        self.rewrite = rewrite

    def write(self, text: str) -> int:
        return self.stream.write(self.rewrite(text))

    def __getattr__(self, name):
        return getattr(self.stream, name)


@contextmanager
def rewriting(rewrite: Callable[[str], str] | None) -> Iterator[None]:
    """Inside the block every write to stdout and stderr passes through `rewrite` (for remote
    paths: `ckpt_browser.remote.shown`, which shows each mirror's path as its URL); None: as is."""
    if rewrite is None:
        yield
        return
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Rewritten(sys.stdout, rewrite), _Rewritten(sys.stderr, rewrite)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = streams


class Progress:
    """A one-line progress display on stderr, only when stderr is a terminal."""

    def __init__(self):
        self.tty = sys.stderr.isatty()
        self.name = ""
        self.last = 0.0
        self.shown = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.clear()

    def update(self, done: int, total: int, name: str | None = None) -> None:
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
        """A line of the report on stdout, with the progress line cleared first."""
        self.clear()
        print(text, flush=True)
