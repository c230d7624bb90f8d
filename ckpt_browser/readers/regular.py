"""Open only regular files: a FIFO, device or socket where a checkpoint file should be would
block forever (a FIFO) or never end (/dev/zero); it gets a one-line refusal instead."""

from __future__ import annotations

import errno
import os
import stat

KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
         (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


class NotRegular(OSError):
    pass


def open_regular(path: str, buffering: int = -1):
    """open(path, "rb"), refusing anything but a regular file without blocking on it."""
    if "\0" in path:  # os.open raises ValueError; no file can have this name
        raise FileNotFoundError(errno.ENOENT, "no such file (its name holds a NUL byte)", path)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_BINARY", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "is a folder", path)
        if not stat.S_ISREG(mode):
            kind = next((k for test, k in KINDS if test(mode)), "not a regular file")
            raise NotRegular(errno.EINVAL, f"is {kind}, not a regular file", path)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb", buffering=buffering)
    except BaseException:
        os.close(fd)
        raise


def missing_reason(path: str) -> str:
    """Why a file cannot be found: gone, or a symlink that leads nowhere."""
    if os.path.islink(path):
        try:
            os.stat(path)
        except OSError as e:
            if e.errno == errno.ELOOP:
                return "is a symlink loop"
        return f"is a symlink to {os.readlink(path)!r}, which does not exist"
    return "file does not exist"
