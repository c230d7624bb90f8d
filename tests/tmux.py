"""The app in a real terminal: a tmux server of its own per test.

Each terminal has its own socket (`tmux -L`): tests running in parallel never share a server,
so one test ending its last session cannot take the server away from another starting one
(the default server did exactly that in CI: "server exited unexpectedly"), and a developer's
own tmux is never touched.
"""

import itertools
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

TMUX = shutil.which("tmux")
_names = itertools.count()


def app_command() -> list[str]:
    """The installed console script when there is one, as a user runs it."""
    script = Path(sys.executable).with_name("ckpt-browser")
    return [str(script)] if script.exists() else [sys.executable, "-m", "ckpt_browser"]


class Terminal:
    def __init__(self, rc_file: Path, width: int = 80, height: int = 24) -> None:
        assert TMUX is not None
        self.base = [TMUX, "-L", f"ckpt-test-{os.getpid()}-{next(_names)}"]
        self.rc_file = rc_file
        self.size = [str(width), str(height)]

    def start(self, args: list, cwd: Path | None = None, env: dict | None = None) -> None:
        cmd = " ".join(shlex.quote(str(a)) for a in [*app_command(), *args])
        envs = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env or {}).items())
        cd = f"cd {shlex.quote(str(cwd))} && " if cwd else ""
        shell = (f"{cd}env TERM=xterm-256color TEXTUAL_ANIMATIONS=none {envs} {cmd}; "
                 f"echo $? > {shlex.quote(str(self.rc_file))}; sleep 30")
        subprocess.run([*self.base, "new-session", "-d", "-s", "main", "-x", self.size[0],
                        "-y", self.size[1], shell], check=True)

    def screen(self, escapes: bool = False) -> str:
        """The screen's text; with `escapes`, with the SGR codes that colour each cell."""
        return subprocess.run([*self.base, "capture-pane", "-p", *(["-e"] if escapes else []),
                               "-t", "main"], capture_output=True, text=True).stdout

    def wait_for(self, text: str, timeout: float = 20.0, present: bool = True) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if (text in screen) == present:
                return screen
            time.sleep(0.05)
        raise AssertionError(f"{text!r} {'never appeared' if present else 'never went'}:\n"
                             f"{self.screen()}")

    def keys(self, *keys: str) -> None:
        subprocess.run([*self.base, "send-keys", "-t", "main", *keys], check=True)

    def type(self, text: str) -> None:
        subprocess.run([*self.base, "send-keys", "-t", "main", "-l", text], check=True)

    def exit_code(self, timeout: float = 20.0) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.rc_file.exists() and self.rc_file.read_text().strip():
                return int(self.rc_file.read_text())
            time.sleep(0.05)
        raise AssertionError(f"the app did not exit:\n{self.screen()}")

    def close(self) -> None:
        subprocess.run([*self.base, "kill-server"], capture_output=True)
