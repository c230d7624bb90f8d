"""A warm parent for the remote tests' CLI runs: import ckpt-browser and the filesystems once,
then fork one child per run.

    python -m tests.remote.cli_server

Reads one JSON request per line on stdin: {"args", "env", "cwd", "out", "err", "timeout"}.
For each it forks a child that starts its own session, takes `env` as its whole environment,
moves to `cwd`, sends its output to the files `out` and `err` (stdin from /dev/null) and runs
`ckpt_browser.cli.main(args)` as `python -m ckpt_browser` would. The parent waits for that
child, kills its process group after `timeout` seconds, and answers one JSON line: {"rc"}
(an int, or "hang").

A fresh `python -m ckpt_browser` pays ~1 s of imports (s3fs, gcsfs, aiohttp) per run, and the
store suite makes about 40 runs per store. A fork pays them once and still gives each run a
process of its own: no filesystem instance, event loop or mirror registry is made before the
fork, so each child starts as clean as a new process. huggingface_hub is not imported here:
it reads HF_ENDPOINT, HF_HOME and HF_HUB_OFFLINE when it is imported, so each child imports it
under its own environment.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time


def _warm() -> None:
    import aiohttp  # noqa: F401
    import fsspec  # noqa: F401
    import gcsfs.core  # noqa: F401
    import numpy  # noqa: F401
    import s3fs  # noqa: F401

    import ckpt_browser.cli  # noqa: F401
    import ckpt_browser.remote.mirror  # noqa: F401

    assert "huggingface_hub" not in sys.modules, "huggingface_hub reads the environment on import"
    assert threading.active_count() == 1, "a thread before fork would be lost in the child"


def _child(req: dict) -> None:
    code = 70  # reaching the end without an exit code is a failure
    try:
        os.setsid()
        # the pickle policy reads its allow-list on import: a child cannot take another one
        assert not req["env"].get("CKPT_BROWSER_ALLOW_GLOBALS"), "not with a warm parent"
        os.environ.clear()
        os.environ.update(req["env"])
        import tempfile

        tempfile.tempdir = None  # found again from this environment's TMPDIR
        os.chdir(req["cwd"])
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        for fd, name in ((1, "out"), (2, "err")):
            f = os.open(req[name], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(f, fd)
            os.close(f)
        sys.stdin = open(0, closefd=False)
        sys.stdout = open(1, "w", closefd=False)
        sys.stderr = open(2, "w", closefd=False)
        sys.argv = ["ckpt-browser", *req["args"]]
        from ckpt_browser import limits
        from ckpt_browser.cli import main

        limits.LIMITS = limits.Limits.from_env()  # read on import, from the parent's environment

        try:
            code = main(req["args"])
        except SystemExit as e:  # argparse, as `python -m` would exit
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if e.code is not None and not isinstance(e.code, int):
                print(e.code, file=sys.stderr)
        code = 0 if code is None else code
    except BaseException:  # noqa: BLE001 - printed and exit 1, as python -m does with any error
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        import atexit

        # What the interpreter does at exit, in its order, which os._exit skips: wait for the
        # threads still running (a fetch pool's requests after the first failure), then the
        # atexit handlers (the mirror's --no-cache cleanup; huggingface_hub's closing of its
        # HTTP client, which in the other order broke a request still in flight)
        threading._shutdown()  # type: ignore[attr-defined]
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(code)


def _serve(req: dict) -> dict:
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        _child(req)
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return {"rc": os.waitstatus_to_exitcode(status)}
        if time.monotonic() - start > req["timeout"]:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
            return {"rc": "hang"}
        time.sleep(0.005)


def main() -> None:
    _warm()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        print(json.dumps(_serve(json.loads(line))), flush=True)


if __name__ == "__main__":
    main()
