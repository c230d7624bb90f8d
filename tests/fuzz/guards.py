"""What a reader may not do while it reads a fuzz case: write or create any file, run a program,
open a connection, use more memory or time than the code's own caps allow.

Writes and process launches are caught with an audit hook (PEP 578), so "anywhere" means
anywhere, not only the folders a snapshot looks at; the hook is installed once and records only
while a `watch()` block runs. Memory is tracemalloc's peak (numpy reports to it too); time is
the process's CPU time, with a wall-clock alarm far above the limit so a hang fails the test
instead of stalling the run.
"""

from __future__ import annotations

import hashlib
import os
import signal
import sys
import time
import tracemalloc
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ckpt_browser.limits import LIMITS

# The caps the code states for one read are 64 MiB (a pickle, a JSON state file) and 256 MiB
# (a zip's central directory). Fuzz inputs are under 4 MiB, so an honest read of
# one stays far below the larger cap; going over it means a declared size was believed.
MEMORY_LIMIT = LIMITS.zip_directory_bytes  # 256 MiB, tracemalloc peak per call
assert MEMORY_LIMIT >= LIMITS.pickle_bytes
# Seconds of CPU per call on a small input: CPU time, not wall time, so that other processes
# on a busy two-core machine cannot fail a test. A call looping past twice that is stopped by a
# CPU-time alarm; a call blocked without using CPU (a FIFO read) by a wall-clock one.
TIME_LIMIT = 5.0
HANG_LIMIT = 20

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_WRITE_EVENTS = frozenset({
    "os.mkdir", "os.rename", "os.remove", "os.rmdir", "os.truncate", "os.chmod", "os.chown",
    "os.utime", "os.symlink", "os.link", "os.chflags", "os.lchflags", "os.mkfifo", "os.mknod",
    "os.setxattr", "os.removexattr", "shutil.copyfile", "shutil.copymode", "shutil.copystat",
    "shutil.copytree", "shutil.move", "shutil.rmtree", "tempfile.mkstemp", "tempfile.mkdtemp",
})
_RUN_EVENTS = frozenset({
    "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty", "os.startfile",
    "subprocess.Popen", "pty.spawn", "socket.connect", "socket.bind", "socket.getaddrinfo",
    "ctypes.dlopen", "ctypes.dlsym", "os.kill", "os.killpg", "webbrowser.open",
})


class Hang(BaseException):
    """Raised by the alarm; a BaseException so a reader's `except Exception` cannot eat it."""


class _Watch:
    active = False
    events: list[str] = []


def _bytecode(path) -> bool:  # Python's own .pyc cache written on a first import: not the tool
    return isinstance(path, (str, bytes, os.PathLike)) and "__pycache__" in os.fsdecode(path)


def _hook(event: str, args: tuple) -> None:
    if not _Watch.active:
        return
    if event == "open":
        path, mode, flags = args
        writes = (flags & _WRITE_FLAGS) if mode is None else any(c in mode for c in "wax+")
        if writes and not _bytecode(path):
            _Watch.events.append(f"opened {path!r} for writing (mode {mode!r}, flags {flags})")
    elif event in _WRITE_EVENTS and not _bytecode(args[0] if args else None):
        _Watch.events.append(f"{event}{args!r:.200}")
    elif event in _RUN_EVENTS:
        _Watch.events.append(f"{event}{args!r:.200}")
    elif event == "mmap.__new__" and len(args) > 2 and args[2] == 2:  # ACCESS_WRITE
        _Watch.events.append(f"mmap with write access {args!r:.200}")


_installed = False


def install() -> None:
    global _installed
    if not _installed:
        sys.addaudithook(_hook)
        _installed = True


@dataclass
class Usage:
    seconds: float = 0.0  # CPU time of the process
    wall: float = 0.0
    peak: int = 0
    events: list[str] = field(default_factory=list)


def _alarm(signum, frame):
    if signum == signal.SIGPROF:
        raise Hang(f"stopped after {2 * TIME_LIMIT} s of CPU (an endless loop?)")
    raise Hang(f"still running after {HANG_LIMIT} s (wall clock)")


@contextmanager
def watch(usage: Usage, memory: bool = True):
    """Record writes, launches, peak memory and time of the block into `usage`; raise Hang in
    the block when it runs too long."""
    install()
    _Watch.events = usage.events
    main = _can_alarm()
    if main:
        old = signal.signal(signal.SIGALRM, _alarm), signal.signal(signal.SIGPROF, _alarm)
        signal.setitimer(signal.ITIMER_REAL, HANG_LIMIT)
        signal.setitimer(signal.ITIMER_PROF, 2 * TIME_LIMIT)
    started = memory and not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    base = 0
    if memory:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
    t0, c0 = time.perf_counter(), time.process_time()
    _Watch.active = True
    try:
        yield usage
    finally:
        _Watch.active = False
        usage.seconds = time.process_time() - c0
        usage.wall = time.perf_counter() - t0
        if memory:
            usage.peak = max(0, tracemalloc.get_traced_memory()[1] - base)
        if started:
            tracemalloc.stop()
        if main:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.setitimer(signal.ITIMER_PROF, 0)
            signal.signal(signal.SIGALRM, old[0])
            signal.signal(signal.SIGPROF, old[1])


def _can_alarm() -> bool:
    import threading

    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


def broken(usage: Usage) -> list[tuple[str, str]]:
    """(kind, detail) for each limit the call broke: "writes" or "limits"."""
    out = [("writes", e) for e in usage.events]
    if usage.peak > MEMORY_LIMIT:
        out.append(("limits", f"peak memory {usage.peak:,} bytes, over the {MEMORY_LIMIT:,}-byte "
                    "limit"))
    if usage.seconds > TIME_LIMIT:
        out.append(("limits", f"took {usage.seconds:.1f} s of CPU, over the {TIME_LIMIT} s "
                    "limit"))
    return out


# -- snapshots: nothing created or modified beside the checkpoint ----------------------------

def snapshot(folder: Path) -> dict[str, tuple]:
    """relative path -> (kind, size, mtime_ns, sha1) of everything under folder."""
    out: dict[str, tuple] = {}
    for root, dirs, files in os.walk(folder):
        for n in dirs + files:
            p = os.path.join(root, n)
            st = os.lstat(p)
            rel = os.path.relpath(p, folder)
            if n in files and os.path.isfile(p) and not os.path.islink(p):
                with open(p, "rb") as f:
                    digest = hashlib.sha1(f.read()).hexdigest()
                out[rel] = ("file", st.st_size, st.st_mtime_ns, digest)
            else:
                out[rel] = ("dir" if n in dirs else "other", 0, st.st_mtime_ns, "")
    return out


def changes(before: dict, after: dict) -> list[str]:
    out = [f"created {p}" for p in sorted(after.keys() - before.keys())]
    out += [f"deleted {p}" for p in sorted(before.keys() - after.keys())]
    out += [f"modified {p}" for p in sorted(before.keys() & after.keys())
            if before[p] != after[p] and before[p][0] == "file"]
    return out
