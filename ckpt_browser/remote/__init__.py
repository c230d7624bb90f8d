"""Remote checkpoints (s3://, gs://, hf://, https://) through fsspec, reading only headers.

A URL is turned into a local *mirror*: a folder in the cache with the same names and sizes,
whose files are sparse and hold only the bytes the readers need (safetensors headers, zip
structure, small JSON and pickles, DCP metadata). Every reader then runs unchanged on the
mirror, and so reads exactly the ranges that were fetched. Tensor bytes are fetched only when
values are asked for (`stats`, `diff --values`, the `v` key), straight into memory, through
`range_reader`. Output shows the URL, never the mirror's path.
"""

from __future__ import annotations

import re
import threading

_LOCK = threading.Lock()
# mirror root (local folder) -> (filesystem, remote root path, URL as shown)
_MIRRORS: dict[str, tuple[object, str, str]] = {}


def register(local_root: str, fs, remote_root: str, shown: str) -> None:
    with _LOCK:
        _MIRRORS[local_root] = (fs, remote_root, shown)


def range_reader(path: str):
    """For a file inside a mirror: a function (offset, length) -> bytes reading the remote
    file; None for a local file."""
    roots = [r for r in list(_MIRRORS) if path == r or path.startswith(r + "/")]
    if not roots:
        return None
    root = max(roots, key=len)  # a file registered on its own wins over its folder
    fs, remote, url = _MIRRORS[root]
    target, where = remote + path[len(root):], url.rstrip("/") + path[len(root):]
    return lambda offset, length: _cat(fs, target, where, offset, length)


def _cat(fs, target: str, where: str, offset: int, length: int) -> bytes:
    from ckpt_browser.remote.errors import remote_errors
    from ckpt_browser.remote.fs import read_bytes

    with remote_errors(where):  # `target` may hold a token; `where` is the URL as shown
        return read_bytes(fs, target, offset, offset + length)


def shown(text: str) -> str:
    """`text` with every mirror path replaced by its URL: the mirror's own path by the URL
    exactly as given, paths inside it by the URL's folder plus the rest."""
    for root, (_, _, url) in sorted(_MIRRORS.items(), key=lambda kv: -len(kv[0])):
        if root in text:
            text = re.sub(re.escape(root) + r"(?=/)", lambda _, url=url: url.rstrip("/"), text)
            text = text.replace(root, url)
    return text
