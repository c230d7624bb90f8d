"""Run ckpt-browser on one corpus case in this (throwaway) process and write what happened.

    python -m tests.malicious.probe RESULT.json PATH [STATS_NAME ...]

Steps, each under its own alarm: `inspect --json`, `check --json`, `stats --json NAMES`,
`export PATH OUT --partial` into a throwaway folder (through `ckpt_browser.cli.main`, as the
console script runs them) and a TUI pilot session (make_app on
open_layout, as tests/tui do): wait for the workers, open the problems screen, the training
view and the resume check, quit. The result file is rewritten after every step, so a step that
hangs or kills the process still leaves the earlier ones. The test that starts this process
sets its memory limit and measures its peak.

The process ends with os._exit: a worker thread blocked in a read (a FIFO) must not keep it.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import resource
import shutil
import signal
import sys
import tempfile
import time
import traceback

STEP_SECONDS = 20
MAX_TEXT = 20_000_000  # what is kept of each output (a flood's inspect --json is MBs)


class Hang(BaseException):
    """Raised by the alarm; a BaseException, so `except Exception` in the code cannot eat it."""


def _alarm(signum, frame):
    raise Hang(f"no answer after {STEP_SECONDS} s")


def _maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _cli(argv: list[str]) -> dict:
    from ckpt_browser.cli import main

    out, err = io.StringIO(), io.StringIO()
    start = time.monotonic()
    result: dict = {"argv": argv}
    signal.alarm(STEP_SECONDS)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            result["rc"] = main(argv)
    except Hang as e:
        result["rc"], result["error"] = "hang", str(e)
        result["where"] = traceback.format_exc()[-3000:]
    except BaseException as e:  # noqa: BLE001 - record anything that escaped main()
        result["rc"], result["error"] = "raised", f"{type(e).__name__}: {e}"
        result["where"] = traceback.format_exc()[-3000:]
    finally:
        signal.alarm(0)
    result.update(out=out.getvalue()[:MAX_TEXT], err=err.getvalue()[:MAX_TEXT],
                  seconds=round(time.monotonic() - start, 3), maxrss_mb=round(_maxrss_mb(), 1))
    return result


def _texts(screen) -> str:
    from rich.console import Console
    from textual.widgets import Static

    parts = []
    with open(os.devnull, "w") as devnull:
        for w in screen.query(Static):
            console = Console(width=1000, record=True, color_system=None, file=devnull)
            try:
                console.print(w.content)
            except Exception:  # noqa: BLE001 - a widget we cannot render here
                continue
            parts.append(console.export_text())
    return "\n".join(parts)[:MAX_TEXT]


async def _session(path: str) -> dict:
    from ckpt_browser.analysis.opened import pick as _pick
    from ckpt_browser.errors import CheckpointError
    from ckpt_browser.producers.layout import open_layout
    from ckpt_browser.tui.app import make_app
    from tests.tui.conftest import loaded

    try:
        chosen, timeline = _pick(path, None)
        layout = open_layout(chosen)
    except CheckpointError as e:  # what the CLI prints as one line before any screen
        return {"refused": str(e)}
    app = make_app(layout, (path, timeline) if timeline else None)
    seen: dict = {}
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(app, pilot)
        seen["running_after_load"] = app.is_running
        seen["main"] = _texts(app.screen)
        await pilot.press("p")
        await pilot.pause()
        seen["problems"] = _texts(app.screen)
        await pilot.press("escape", "t")
        await loaded(app, pilot)
        seen["state"] = _texts(app.screen)
        await pilot.press("r")
        await loaded(app, pilot)
        seen["resume"] = _texts(app.screen)
        await pilot.press("escape")
        await pilot.pause()
        seen["running_at_end"] = app.is_running
        await pilot.press("q")
    return seen


def _tui(path: str) -> dict:
    start = time.monotonic()
    result: dict = {}
    signal.alarm(STEP_SECONDS + 5)  # wait_for below is the first line of defence
    try:
        result.update(asyncio.run(asyncio.wait_for(_session(path), STEP_SECONDS)))
        result["rc"] = "ok"
    except (Hang, asyncio.TimeoutError) as e:
        result["rc"], result["error"] = "hang", f"{type(e).__name__}: {e}"
        result["where"] = traceback.format_exc()[-3000:]
    except BaseException as e:  # noqa: BLE001
        result["rc"], result["error"] = "raised", f"{type(e).__name__}: {e}"
        result["where"] = traceback.format_exc()[-3000:]
    finally:
        signal.alarm(0)
    result.update(seconds=round(time.monotonic() - start, 3), maxrss_mb=round(_maxrss_mb(), 1))
    return result


def main(argv: list[str]) -> None:
    out_path, path, names = argv[0], argv[1], argv[2:] or ["*"]
    os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")
    signal.signal(signal.SIGALRM, _alarm)
    results: dict = {"start_maxrss_mb": round(_maxrss_mb(), 1)}

    def save():
        tmp = out_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(results, f)
        os.replace(tmp, out_path)

    save()
    results["inspect"] = _cli(["inspect", "--json", path])
    save()
    results["check"] = _cli(["check", "--json", path])
    save()
    results["stats"] = _cli(["stats", path, "--json", *names])
    save()
    out = tempfile.mkdtemp(prefix="probe-export-")  # not the working folder: it stays empty
    results["export"] = _cli(["export", path, os.path.join(out, "out"), "--partial"])
    shutil.rmtree(out, ignore_errors=True)
    save()
    results["tui"] = _tui(path)
    results["done"] = True
    save()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
