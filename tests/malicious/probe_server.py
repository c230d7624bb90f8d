"""A warm parent for probe.py: import ckpt-browser and Textual once, then fork one child per case.

    python -m tests.malicious.probe_server

Reads one JSON request per line on stdin: {"result", "path", "names", "cwd", "out", "err",
"timeout", "limit"}. For each it forks a child that starts its own session, moves to `cwd`, caps
its address space at `limit`, sends its output to the files `out` and `err`, and runs
probe.main (which ends with os._exit). The parent waits for that child alone (wait4, so the
peak RSS is the child's own), kills its process group after `timeout` seconds, and answers with
one JSON line: {"rc", "seconds", "maxrss_mb"}.

A fresh process per case would pay the same imports 160 times; a fork pays them once and still
gives each case its own process, memory limit and working folder. Nothing here threads, so the
fork is clean.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import time


def _warm() -> None:
    os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")
    import rich.console  # noqa: F401
    import textual.widgets  # noqa: F401

    import ckpt_browser.cli  # noqa: F401
    import ckpt_browser.readers  # noqa: F401
    import ckpt_browser.tui.browse.screen  # noqa: F401
    from tests.malicious import probe  # noqa: F401
    from tests.tui import conftest  # noqa: F401


def _child(req: dict) -> None:
    try:
        os.setsid()
        os.chdir(req["cwd"])
        for fd, name in ((1, "out"), (2, "err")):
            f = os.open(req[name], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(f, fd)
            os.close(f)
        resource.setrlimit(resource.RLIMIT_AS, (req["limit"], req["limit"]))
        from tests.malicious import probe

        probe.main([req["result"], req["path"], *req["names"]])
    finally:
        os._exit(70)  # probe.main exits on its own; reaching here is a failure


def _serve(req: dict) -> dict:
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        _child(req)
    hung = False
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() - start > req["timeout"]:
            hung = True
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            done, status, usage = os.wait4(pid, 0)
            break
        time.sleep(0.01)
    code = os.waitstatus_to_exitcode(status)
    rc: int | str = "hang" if hung else (
        f"killed by {signal.Signals(-code).name}" if code < 0 else code)
    return {"rc": rc, "seconds": round(time.monotonic() - start, 2),
            "maxrss_mb": round(usage.ru_maxrss / 1024, 1)}


def main() -> None:
    _warm()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        print(json.dumps(_serve(json.loads(line))), flush=True)


if __name__ == "__main__":
    main()
