"""Starting it: with no terminal `ckpt-browser PATH` prints the report the screen would show
(and exits with that report's code, never drawing escape codes into a log); options before a
bare path or before the command are taken; the usage line shows the PATH form."""

from __future__ import annotations

import subprocess
import sys

from .helpers import DAMAGED, RELEASE, RUN6

ESC = "\x1b"


def start(*args: str) -> subprocess.CompletedProcess:
    """The real executable with no terminal: stdin from /dev/null, stdout to a pipe."""
    return subprocess.run([sys.executable, "-m", "ckpt_browser", *args], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=120)


def test_no_terminal_prints_the_summary_with_its_exit_code():
    done = start(str(RELEASE))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"path     {RELEASE}") and ESC not in done.stdout
    assert done.stderr.count("\n") == 1 and "not a terminal" in done.stderr
    damaged = start(str(DAMAGED))
    assert damaged.returncode == 5 and ESC not in damaged.stdout  # as `inspect` exits


def test_no_terminal_with_two_paths_prints_their_diff():
    done = start(str(RELEASE), str(RUN6))
    assert done.returncode in (0, 1), done.stderr
    assert done.stdout.startswith(f"A: {RELEASE}") and ESC not in done.stdout


def test_an_unreadable_path_is_one_line_without_the_note(tmp_path):
    done = start(str(tmp_path / "nothing-here"))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "no such file" in done.stderr


def test_options_before_a_bare_path_or_the_command():
    bare = start("--no-cache", str(RELEASE))
    assert bare.returncode == 0 and bare.stdout.startswith(f"path     {RELEASE}"), bare.stderr
    before = start("--timeout", "5", "inspect", str(RELEASE))
    assert before.returncode == 0 and before.stdout.startswith(f"path     {RELEASE}")
    assert "not a terminal" not in before.stderr  # it was inspect, not the browser


def test_the_usage_line_shows_the_path_form():
    done = start("--help")
    assert done.returncode == 0
    assert done.stdout.startswith("usage: ckpt-browser [options] [PATH [PATH]]")
