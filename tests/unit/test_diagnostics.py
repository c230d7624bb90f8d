"""`ckpt_browser.diagnostics`: the exit codes, which codes each subcommand returns, the one-line
stderr messages and the last-resort bug handler; and the README's exit-code table against it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ckpt_browser import diagnostics
from ckpt_browser.cli import _parser, main
from ckpt_browser.diagnostics import RETURNS, VERDICT_CODE, ExitCode, bug, exit_code_for, stopped
from ckpt_browser.errors import NotACheckpoint, UsageError

README = Path(__file__).resolve().parents[2] / "README.md"
COMMANDS = ("inspect", "check", "quiz", "stats", "diff", "export", "browse")


def readme_exit_codes() -> dict[int, str]:
    text = README.read_text()
    section = text.split("### Exit codes (every subcommand)\n", 1)[1].split("\n### ", 1)[0]
    rows = re.findall(r"^\| (\d+) \| (.+) \|$", section, re.M)
    assert rows, "no exit-code rows under README '### Exit codes (every subcommand)'"
    return {int(code): meaning.replace("`", "") for code, meaning in rows}


def test_the_readme_table_is_the_enum():
    assert readme_exit_codes() == {int(c): c.meaning for c in ExitCode}


def test_the_codes_as_the_readme_documents_them():
    assert {c.name: int(c) for c in ExitCode} == {
        "OK": 0, "DIFFERS": 1, "USAGE": 2, "INEXACT": 3, "WEIGHTS_ONLY": 4, "DAMAGED": 5,
        "FOUND": 6, "WRITE_FAILED": 7, "BUG": 70, "INTERRUPTED": 130}
    # diff follows diff(1): 2 is trouble; a bug has its own code everywhere
    assert ExitCode.TROUBLE is ExitCode.USAGE
    assert ExitCode.BUG not in (ExitCode.DIFFERS, ExitCode.TROUBLE)
    assert VERDICT_CODE == {"exact": 0, "inexact": 3, "weights-only": 4, "broken": 5}


def test_every_subcommand_of_the_parser_has_its_codes_described():
    assert set(_parser().commands) == set(RETURNS) == set(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_each_help_epilog_lists_exactly_the_codes_of_its_command(command):
    sub = _parser().commands[command]
    text = " ".join(sub.format_help().split())
    epilog = " ".join(diagnostics.epilog(command).split())
    assert text.endswith(epilog)
    listed = [int(n) for n in re.findall(r"(?:: |, )(\d+) ", epilog)]
    assert listed == [int(code) for code, _ in RETURNS[command].codes]
    for code, meaning in RETURNS[command].codes:
        assert f"{int(code)} {meaning}" in epilog


def test_the_main_help_shows_every_code():
    text = _parser().format_help()
    for code in ExitCode:
        assert re.search(rf"^  {int(code)} +\S", text, re.M), code


@pytest.mark.parametrize("command, error, code", [
    ("inspect", NotACheckpoint("x", "not a checkpoint"), 2),
    ("check", UsageError("x", "no"), 2),
    ("stats", UsageError("x", "no tensor"), 2),
    ("quiz", NotACheckpoint("bank.toml", "unreadable"), 2),
    ("browse", NotACheckpoint("x", "not a checkpoint"), 2),
    ("diff", NotACheckpoint("x", "not a checkpoint"), 2),
    (None, UsageError("x", "no"), 2),
    ("inspect", RuntimeError("boom"), 70),
    ("check", KeyError("k"), 70),
    ("browse", ValueError("v"), 70),
    (None, RuntimeError("before a command was parsed"), 70),
    ("diff", RuntimeError("boom"), 70),  # a bug is a bug in diff too, never "trouble"
    ("inspect", KeyboardInterrupt(), 130),
    ("diff", KeyboardInterrupt(), 130),
    ("inspect", BrokenPipeError(), 0),
    ("diff", BrokenPipeError(), 0),
    (None, SystemExit(0), 0),
    ("check", SystemExit(2), 2),
    ("diff", SystemExit(0), 0),
])
def test_exit_code_for(command, error, code):
    got = exit_code_for(command, error)
    assert isinstance(got, ExitCode) and got == code


@pytest.mark.parametrize("command", COMMANDS)
def test_what_stops_a_command_is_one_of_its_codes(command):
    codes = {int(code) for code, _ in RETURNS[command].codes}
    for error in (NotACheckpoint("x", "no"), RuntimeError("bug")):
        assert exit_code_for(command, error) in codes


def test_the_bug_handler_says_one_line_without_a_traceback(capsys, monkeypatch):
    monkeypatch.delenv("CKPT_BROWSER_DEBUG", raising=False)
    try:
        raise RuntimeError("boom\nsecond line")
    except RuntimeError as e:
        code = bug("inspect", e)
    assert code == ExitCode.BUG
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err
    assert err == ("ckpt-browser: internal error: RuntimeError: boom\\nsecond line (a bug; rerun "
                   "with CKPT_BROWSER_DEBUG=1 for details)\n")


def test_the_bug_handler_gives_diff_the_bug_code_not_trouble(capsys, monkeypatch):
    monkeypatch.delenv("CKPT_BROWSER_DEBUG", raising=False)
    assert bug("diff", ZeroDivisionError("x")) == ExitCode.BUG == 70
    assert capsys.readouterr().err.count("\n") == 1


def test_the_bug_handler_raises_under_debug(monkeypatch):
    monkeypatch.setenv("CKPT_BROWSER_DEBUG", "1")
    with pytest.raises(RuntimeError, match="boom"):
        bug("inspect", RuntimeError("boom"))


def test_a_bug_in_a_command_is_one_line_and_exit_70(capsys, monkeypatch):
    monkeypatch.delenv("CKPT_BROWSER_DEBUG", raising=False)

    def broken(args):
        raise RuntimeError("boom")

    monkeypatch.setattr("ckpt_browser.cli.cmd_check", broken)
    assert main(["check", "anything"]) == 70
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert "internal error: RuntimeError: boom" in err


def test_stopped_says_a_checkpoint_error_in_one_line(capsys):
    assert stopped("inspect", NotACheckpoint("a/b", "no checkpoint here")) == 2
    assert capsys.readouterr().err == "ckpt-browser: a/b: no checkpoint here\n"
    assert stopped("inspect", KeyboardInterrupt()) == 130
    assert capsys.readouterr().err == ""


def test_error_and_note_are_one_escaped_line(capsys):
    diagnostics.error("a\nb\x1b[31m")
    diagnostics.note("reading x ...")
    assert capsys.readouterr().err == "ckpt-browser: a\\nb\\x1b[31m\nckpt-browser: reading x ...\n"


class P:
    def __init__(self, severity, file, message):
        self.severity, self.file, self.message = severity, file, message


def test_errors_found_names_the_first_error(capsys):
    assert diagnostics.errors_found("ck", [P("warning", "a", "w")]) == ExitCode.OK
    problems = [P("warning", "a", "w"), P("error", "s.safetensors", "truncated"),
                P("error", None, "index names a missing file")]
    assert capsys.readouterr().err == ""
    assert diagnostics.errors_found("ck", problems) == ExitCode.DAMAGED
    assert capsys.readouterr().err == ("ckpt-browser: ck: damaged, 2 error(s); first: "
                                       "s.safetensors: truncated\n")


def test_errors_found_says_unsafe_and_names_the_unsafe_error_first(capsys):
    unsafe = P("error", "optimizer.pt", "unsafe: its pickle calls os.system")
    assert diagnostics.errors_found("ck", [unsafe]) == ExitCode.DAMAGED
    assert capsys.readouterr().err == ("ckpt-browser: ck: UNSAFE, 1 error(s); first: "
                                       "optimizer.pt: unsafe: its pickle calls os.system\n")
    crc = P("error", "optimizer.pt", "zip entry 'archive/data.pkl' fails its CRC-32 check")
    assert diagnostics.errors_found("ck", [crc, unsafe]) == ExitCode.DAMAGED
    assert capsys.readouterr().err == ("ckpt-browser: ck: UNSAFE and damaged, 2 error(s); "
                                       "first: optimizer.pt: unsafe: its pickle calls "
                                       "os.system\n")


def test_rewriting_passes_stdout_and_stderr_through_the_function(capsys):
    with diagnostics.rewriting(lambda text: text.replace("/cache/m1", "s3://b/ck")):
        print("/cache/m1/model.safetensors")
        diagnostics.error("/cache/m1: gone")
    with diagnostics.rewriting(None):
        print("/cache/m1")
    out, err = capsys.readouterr()
    assert out == "s3://b/ck/model.safetensors\n/cache/m1\n"
    assert err == "ckpt-browser: s3://b/ck: gone\n"
