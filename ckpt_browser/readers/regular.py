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


class TooLarge(OSError):
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


def read_small(path: str, most: int) -> bytes:
    """The whole of a small file (a marker, a ref, a JSON record) that must be regular and at
    most `most` bytes: a FIFO is refused before any read, /dev/zero before it starts."""
    with open_regular(path) as f:
        data = f.read(most + 1)
    if len(data) > most:
        raise TooLarge(errno.EFBIG, f"is over {most:,} bytes", path)
    return data


def why_unreadable(e: OSError) -> str:
    """What an OSError from open_regular says about a file, without its path: "is a FIFO
    (named pipe), not a regular file", "does not exist" ..."""
    if isinstance(e, FileNotFoundError):
        return "does not exist"
    words = e.strerror or str(e)
    return words if words.startswith("is ") else f"cannot be read: {words}"


def missing_reason(path: str) -> str:
    """Why a file cannot be found: gone, or a symlink that leads nowhere."""
    if os.path.islink(path):
        try:
            os.stat(path)
        except OSError as e:
            if e.errno == errno.ELOOP:
                return f"is a symlink loop (to {os.readlink(path)!r}, which never resolves)"
        return f"is a symlink to {os.readlink(path)!r}, which does not exist"
    return "file does not exist"
