"""Run one fuzz case through every reader of its target and say what went wrong, if anything.

The properties:
- each reader returns, or raises only what it documents (a `CheckpointError` subclass; the
  index reader's `ShardError`), with a one-line message; "never raises" readers never raise;
- the CLI exits with a documented code, never 70 (a bug, with "internal error"),
  with at most one line on stderr, no traceback, strict JSON for --json and no terminal
  control characters in text output;
- nothing is written or created anywhere, no program is run, memory and time stay under the
  limits in guards.py.

`check(case)` writes the case into a scratch folder, chdirs into an empty scratch cwd for the
calls, and returns a list of `Failure`s (empty when all holds).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import tempfile
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import ckpt_browser
from ckpt_browser.errors import CheckpointError, ShardError

from .cases import Case
from .guards import Hang, Usage, broken, changes, snapshot, watch


@dataclass(frozen=True)
class Failure:
    target: str
    call: str
    kind: str  # "exception" | "message" | "exit" | "output" | "limits" | "writes"
    detail: str
    where: str = ""  # innermost ckpt_browser frame of an exception: file:line function

    @property
    def signature(self) -> tuple[str, str, str, str]:
        """What makes two failures the same bug (for the fuzz run's de-duplication): the call,
        the kind, the exception type or property with numbers blanked, the raising frame.
        A broken limit counts per target: memory eaten by a zip is not the DCP reader's."""
        text = self.detail.split(":", 1)[0] if self.kind in ("exception", "limits", "writes") \
            else self.detail[:90]
        target = self.target if self.kind in ("limits", "writes") else ""
        return target, self.call, self.kind, re.sub(r"[\d,]+", "N", text) + " " + self.where

    def line(self) -> str:
        at = f" at {self.where}" if self.where else ""
        return f"[{self.target}/{self.call}] {self.kind}: {self.detail}{at}"


# -- the calls ------------------------------------------------------------------------------

def _read_header(entry: Path, case: Case):
    from ckpt_browser.readers.safetensors import read_header

    return read_header(str(entry), entry.name)


def _open_checkpoint(entry: Path, case: Case):
    from ckpt_browser.analysis.opened import open_path

    return open_path(str(entry)).checkpoint


def _training_state(entry: Path, case: Case):
    from ckpt_browser.analysis.opened import open_path

    return open_path(str(entry)).training


def _resume_report(entry: Path, case: Case):
    from ckpt_browser.analysis.resume import resume_report

    return resume_report(str(entry))


def _index_files(entry: Path) -> list[Path]:
    folder = entry if entry.is_dir() else entry.parent
    return sorted(folder.glob("*.index.json"))


def _read_index(entry: Path, case: Case):
    from ckpt_browser.readers.index import read_index

    return [read_index(str(p), p.name) for p in _index_files(entry)]


def _load_index_file(entry: Path, case: Case):
    from ckpt_browser.analysis.opened import open_path

    return [open_path(str(p)).checkpoint for p in _index_files(entry)]


def _pickle_file(entry: Path, case: Case):
    from ckpt_browser.readers.torchfile import read_pickle_file

    return read_pickle_file(str(entry), entry.name)


def _pickle_bytes(entry: Path, case: Case):
    from ckpt_browser.readers.pickle_safe import read_pickle_bytes

    return read_pickle_bytes(entry.read_bytes(), entry.name)


def _pickle_as_dcp(entry: Path, case: Case):
    from ckpt_browser.readers.dcp import DCP_GLOBALS
    from ckpt_browser.readers.pickle_safe import unpickle

    return unpickle(io.BytesIO(entry.read_bytes()), entry.name, DCP_GLOBALS, storage_ids=None,
                    ops="dcp_metadata_ops")


def _dcp_folders(entry: Path) -> list[Path]:
    folders = []
    for root, _, names in os.walk(entry):
        if ".metadata" in names or any(n.endswith(".distcp") for n in names):
            folders.append(Path(root))
    return sorted(folders)


def _read_dcp(entry: Path, case: Case):
    from ckpt_browser.readers.dcp import read_dcp

    return [read_dcp(str(f), os.path.relpath(f, entry) if f != entry else "")
            for f in _dcp_folders(entry)]


@dataclass(frozen=True)
class Call:
    name: str
    run: Callable[[Path, Case], object]
    raises: tuple[type[BaseException], ...] = ()  # what it may raise (documented)


NEVER = ()
CKPT = (CheckpointError,)
READER_CALLS: dict[str, tuple[Call, ...]] = {
    "safetensors": (Call("read_header", _read_header, NEVER), Call("open_checkpoint",
                    _open_checkpoint, CKPT), Call("training_state", _training_state, CKPT)),
    "index": (Call("read_index", _read_index, (ShardError,)),
              Call("open_checkpoint", _open_checkpoint, CKPT),
              Call("load_index_file", _load_index_file, CKPT),
              Call("training_state", _training_state, CKPT)),
    "torch": (Call("read_pickle_file", _pickle_file, NEVER),
              Call("training_state", _training_state, CKPT),
              Call("open_checkpoint", _open_checkpoint, CKPT)),
    "pickle": (Call("read_pickle_file", _pickle_file, NEVER),
               Call("read_pickle_bytes", _pickle_bytes, NEVER),
               Call("unpickle_dcp", _pickle_as_dcp, NEVER),
               Call("training_state", _training_state, CKPT)),
    "dcp": (Call("read_dcp", _read_dcp, NEVER), Call("training_state", _training_state, CKPT),
            Call("resume_report", _resume_report, CKPT)),
    "state": (Call("training_state", _training_state, CKPT),
              Call("resume_report", _resume_report, CKPT),
              Call("open_checkpoint", _open_checkpoint, CKPT)),
}

# subcommand -> exit codes it documents (1 is never allowed except diff's "differences")
CLI_CODES = {"inspect": {0, 2, 5}, "check": {0, 2, 3, 4, 5}, "stats": {0, 2, 5},
             "diff": {0, 1, 2}}
COMMANDS = ("inspect", "check", "stats", "diff")

# `diff` compares a case with a bundled sample of its kind (read only; the tests check the
# samples are unchanged), so names line up and values really differ
SAMPLES = Path(ckpt_browser.__file__).resolve().parents[1] / "sample_checkpoints"
DIFF_AGAINST = {"safetensors": "tiny-llama-run/checkpoint-6", "index": "tiny-llama-release",
                "torch": "lightning/last.ckpt", "pickle": "accelerate-state/step_4",
                "dcp": "dcp-ranks/ranks-2", "state": "hf-run3/checkpoint-4"}


def cli_argv(command: str, entry: str, as_json: bool, target: str = "safetensors") -> list[str]:
    flag = ["--json"] if as_json else []
    if command == "stats":
        return ["stats", entry, "*", *flag]  # every tensor, optimizer state included
    if command == "diff":
        other = str(SAMPLES / DIFF_AGAINST[target])
        return ["diff", entry, other, "--values", "--rtol", "1e-3", *flag]
    if command == "check":  # a resume on another world size: the resharding checks too
        return ["check", entry, "--world-size", "3", *flag]
    return [command, entry, *flag]


# -- checking one case ----------------------------------------------------------------------

_PACKAGE = os.path.dirname(os.path.abspath(ckpt_browser.__file__)) + os.sep


def _innermost(tb) -> str:
    """file:line function of the innermost ckpt_browser frame ("" when none raised)."""
    frames = [f for f in traceback.extract_tb(tb) if f.filename.startswith(_PACKAGE)]
    if not frames:
        return ""
    f = frames[-1]
    return f"{f.filename[len(_PACKAGE):]}:{f.lineno} {f.name}"


def _run_call(call: Call, entry: Path, case: Case, out: list[Failure], memory: bool) -> None:
    usage = Usage()
    try:
        with watch(usage, memory):
            call.run(entry, case)
    except Hang as e:
        out.append(Failure(case.target, call.name, "limits", str(e)))
    except call.raises as e:
        if "\n" in str(e) or "\r" in str(e) or not str(e).strip():
            out.append(Failure(case.target, call.name, "message",
                               f"{type(e).__name__} message is not one line: {str(e)!r:.300}"))
    except Exception as e:  # noqa: BLE001 - this is what the fuzzing looks for
        out.append(Failure(case.target, call.name, "exception",
                           f"{type(e).__name__}: {str(e)[:300]}", _innermost(e.__traceback__)))
    _account(case.target, call.name, usage, out)


# the largest peak memory and time seen per (target, call): the fuzz run's summary prints them
PEAKS: dict[tuple[str, str], tuple[int, float]] = {}


def _account(target: str, call: str, usage: Usage, out: list[Failure]) -> None:
    peak, secs = PEAKS.get((target, call), (0, 0.0))
    PEAKS[(target, call)] = (max(peak, usage.peak), max(secs, usage.seconds))
    out.extend(Failure(target, call, kind, detail) for kind, detail in broken(usage))


def _printable(text: str) -> bool:
    return all(ch.isprintable() or ch == "\n" for ch in text)


def _run_cli(command: str, as_json: bool, entry: Path, case: Case, out: list[Failure],
             memory: bool) -> None:
    from ckpt_browser.cli import main

    name = f"cli {command}{' --json' if as_json else ''}"
    argv = cli_argv(command, str(entry), as_json, case.target)
    stdout, stderr, usage = io.StringIO(), io.StringIO(), Usage()
    code = None
    # With CKPT_BROWSER_DEBUG main() re-raises what it would print as "internal error" (exit 70,
    # in every command), so the failure names the frame that raised.
    debug = os.environ.get("CKPT_BROWSER_DEBUG")
    os.environ["CKPT_BROWSER_DEBUG"] = "1"
    try:
        with watch(usage, memory), contextlib.redirect_stdout(stdout), \
                contextlib.redirect_stderr(stderr):
            code = main(argv)
    except Hang as e:
        out.append(Failure(case.target, name, "limits", str(e)))
    except BaseException as e:  # noqa: BLE001 - main() must return, whatever happens
        out.append(Failure(case.target, name, "exception", f"{type(e).__name__}: {str(e)[:300]}",
                           _innermost(e.__traceback__)))
    finally:
        if debug is None:
            del os.environ["CKPT_BROWSER_DEBUG"]
        else:
            os.environ["CKPT_BROWSER_DEBUG"] = debug
    _account(case.target, name, usage, out)
    if code is None:
        return
    err, text = stderr.getvalue(), stdout.getvalue()
    bug = "internal error" in err or "Traceback" in err
    if code not in CLI_CODES[command] or bug:
        out.append(Failure(case.target, name, "exit", f"exit {code}: {err.strip()[:400]!r}",
                           _bug_where(err)))
    if err.count("\n") > 1 or (err and not err.endswith("\n")):
        out.append(Failure(case.target, name, "message", f"stderr is not one line: {err[:300]!r}"))
    if not _printable(err) or (not as_json and not _printable(text)):
        bad = sorted({repr(c) for c in err + ("" if as_json else text)
                      if not (c.isprintable() or c == "\n")})
        out.append(Failure(case.target, name, "output", "control characters in the output: "
                           + " ".join(bad[:8])))
    if as_json and text:
        try:
            json.loads(text, parse_constant=_refuse)
        except ValueError as e:
            out.append(Failure(case.target, name, "output", f"stdout is not strict JSON: {e}"))


def _bug_where(err: str) -> str:
    return err.split("internal error: ", 1)[1].split(":", 1)[0] if "internal error: " in err else ""


def _refuse(token: str):
    raise ValueError(f"{token} is not JSON")


def check(case: Case, *, cli: tuple[str, ...] = COMMANDS,
          as_json: bool | None = None, readers: bool = True, memory: bool = True) -> list[Failure]:
    """Every property for one case; `as_json` None runs the CLI both ways."""
    failures: list[Failure] = []
    modes = (True, False) if as_json is None else (as_json,)
    with tempfile.TemporaryDirectory(prefix="ckpt-fuzz-") as tmp:
        data, cwd = Path(tmp) / "case", Path(tmp) / "cwd"
        data.mkdir()
        cwd.mkdir()
        entry = case.write(data)
        before = snapshot(Path(tmp))
        old = os.getcwd()
        os.chdir(cwd)
        try:
            if readers:
                for call in READER_CALLS[case.target]:
                    _run_call(call, entry, case, failures, memory)
            for command in cli:
                for mode in modes:
                    _run_cli(command, mode, entry, case, failures, memory)
        finally:
            os.chdir(old)
        failures += [Failure(case.target, "any", "writes", c)
                     for c in changes(before, snapshot(Path(tmp)))]
    return failures


_ORDER = ("exception", "exit", "message", "output", "writes", "limits")


def explain(case: Case, failures: list[Failure]) -> str:
    """The case and its failures, the most telling first (exceptions before limits)."""
    ranked = sorted(failures, key=lambda f: _ORDER.index(f.kind))
    return case.describe() + "\n" + "\n".join(f.line() for f in ranked)
