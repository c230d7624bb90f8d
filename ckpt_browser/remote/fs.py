"""The few filesystem calls the mirror makes, over fsspec: open, list, stat, read a range.

HTTP gets its own range read: fsspec's `cat_file` reads whatever body comes back, so a server
that ignores `Range` would send a whole shard. Here a 200 answer to a range request is refused
unless the file is no longer than what was asked for.
"""

from __future__ import annotations

import re

from ckpt_browser.remote.errors import EXTRA, RemoteError, remote_errors
from ckpt_browser.remote.urls import public

VERSION_KEYS = ("ETag", "etag", "md5Hash", "blob_id", "LastModified", "last_modified",
                "updated", "mtime")
_CONTENT_RANGE = re.compile(r"bytes\s+\d+-\d+/(\d+)")


def _http(fs) -> bool:
    return type(fs).__name__ == "HTTPFileSystem"


def _hub(fs) -> bool:
    return type(fs).__name__ == "HfFileSystem"


def _cat(fs, path: str, start: int, end: int) -> bytes:
    """Bytes [start, end) in one ranged request. HfFileSystem's cat_file reads through a
    buffered file whose default 5 MiB read-ahead fetched 5 MiB for every 128 KiB header;
    opened with no cache, the file asks for exactly the range."""
    if not _hub(fs):
        return fs.cat_file(path, start=start, end=end)
    with fs.open(path, "rb", block_size=max(1, end - start), cache_type="none") as f:
        f.seek(start)
        return f.read(end - start)


def open_fs(url: str, timeout: float):

    shown = public(url)
    try:
        import fsspec
    except ImportError:
        raise RemoteError(shown, f"remote paths need fsspec: {EXTRA}") from None
    protocol = url.split("://", 1)[0].lower()
    options: dict = {}
    if protocol in ("http", "https"):
        import aiohttp

        options["client_kwargs"] = {"timeout": aiohttp.ClientTimeout(total=timeout)}
    elif protocol in ("s3", "s3a"):
        options["config_kwargs"] = {"connect_timeout": timeout, "read_timeout": timeout,
                                    "retries": {"max_attempts": 2}}
    elif protocol in ("gs", "gcs"):
        return _gcs(url, shown, protocol, timeout)
    with remote_errors(shown, timeout):
        try:
            fs, root = fsspec.core.url_to_fs(url, **options)
        except (ImportError, ValueError) as e:
            if isinstance(e, ValueError) and "protocol" not in str(e).lower():
                raise
            raise _not_installed(shown, protocol) from None
    if _http(fs):
        root = url  # HTTP paths are whole URLs
    return fs, root


def _not_installed(shown: str, protocol: str) -> RemoteError:
    return RemoteError(shown, f"{protocol}:// needs a filesystem that is not installed; "
                       f"install it with: {EXTRA}")


def _gcs(url: str, shown: str, protocol: str, timeout: float):
    """gs:// through gcsfs's GCSFileSystem: the JSON API every bucket serves (and the one
    STORAGE_EMULATOR_HOST redirects). The class fsspec would pick (gcsfs's experimental
    ExtendedGcsFileSystem, on by default) first asks the Storage Control gRPC API for each
    bucket's layout: against an emulator every call waited out 60 s of retries while grpc
    printed failed handshakes on stderr; header reads need none of what it adds."""
    import logging

    # gcsfs logs its last retry's traceback before raising; the error is ours to say, in one line
    log = logging.getLogger("gcsfs")
    if log.propagate:
        log.propagate = False
        log.addHandler(logging.NullHandler())  # not Python's last-resort handler either
    with remote_errors(shown, timeout):
        try:
            from gcsfs.core import GCSFileSystem
        except ImportError:
            raise _not_installed(shown, protocol) from None
        fs = GCSFileSystem(requests_timeout=timeout)
        return fs, fs._strip_protocol(url)


def version(info: dict) -> str | None:
    for key in VERSION_KEYS:
        if info.get(key) is not None:
            return f"{key}:{info[key]}"
    return None


def info(fs, path: str) -> tuple[int | None, str | None]:
    return _stat(fs.info(path))


def _stat(got: dict) -> tuple[int | None, str | None]:
    size = got.get("size")
    return (int(size) if size is not None else None), version(got)


def mtime(meta: dict) -> float | None:
    """When the store last changed an object, from its listing: S3's LastModified, GCS's
    updated, an mtime; None when the listing does not say (HTTP, the Hub's plain tree)."""
    import datetime

    for key in ("LastModified", "last_modified", "updated", "mtime"):
        v = meta.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v)
        if isinstance(v, str) and v:
            try:
                v = datetime.datetime.fromisoformat(v.replace("Z", "+00:00"))
            except ValueError:
                continue
        if isinstance(v, datetime.datetime):
            return (v if v.tzinfo else v.replace(tzinfo=datetime.timezone.utc)).timestamp()
    return None


def entries(fs, root: str, depth: int, cap: int) -> tuple[str, list, dict[str, float]]:
    """("folder", [(relative name, size, version)], times) or ("file", [(size, version)], {}),
    times being {relative name: remote mtime} for the files and folders whose time is known."""
    if _http(fs):
        return _http_entries(fs, root, depth, cap)
    got = fs.info(root)
    if got.get("type") != "directory":
        return "file", [_stat(got)], {}
    found = fs.find(root, withdirs=_hub(fs), detail=True)
    prefix = root.rstrip("/") + "/"
    out, times, folders = [], {}, []
    for path, meta in found.items():
        if path.rstrip("/") == prefix[:-1]:
            continue  # withdirs lists the folder itself
        rel = path[len(prefix):] if path.startswith(prefix) else path.rpartition("/")[2]
        if not rel or rel.count("/") >= depth:
            continue
        if meta.get("type") == "directory":
            folders.append(rel)
            continue
        size = meta.get("size")
        out.append((rel, int(size) if size is not None else None, version(meta)))
        if (t := mtime(meta)) is not None:
            times[rel] = t
    if len(out) > cap:
        raise RemoteError(root, f"holds more than {cap:,} files; name one checkpoint inside it")
    if _hub(fs):
        from ckpt_browser.producers.names import step_of

        named = [rel for rel, _, _ in out if "/" not in rel and step_of(rel)[1] is not None]
        if folders or named:
            times.update(_hub_times(fs, prefix, folders + named))
    return "folder", sorted(out), times


def _hub_times(fs, prefix: str, paths: list[str]) -> dict[str, float]:
    """The Hub's plain tree has no dates: one paths-info request per 1000 paths asks for the
    last commit of the folders and of the files named like checkpoints (for the timeline)."""
    from huggingface_hub import HfApi

    api = HfApi(endpoint=fs.endpoint, token=fs.token)
    resolved = fs.resolve_path(prefix)
    base = resolved.path_in_repo.strip("/")
    times = {}
    for i in range(0, len(paths), 1000):
        batch = paths[i:i + 1000]
        infos = api.get_paths_info(resolved.repo_id, [f"{base}/{f}" if base else f
                                                          for f in batch], expand=True,
                                       revision=resolved.revision,
                                       repo_type=resolved.repo_type)
        for info in infos:
            commit = getattr(info, "last_commit", None)
            if commit is not None and getattr(commit, "date", None) is not None:
                times[info.path[len(base) + 1:] if base else info.path] = commit.date.timestamp()
    return times


def _http_entries(fs, root: str, depth: int, cap: int) -> tuple[str, list]:
    if not root.endswith("/"):  # a folder answers with its HTML listing
        got = fs.info(root)
        if got.get("mimetype") != "text/html":
            return "file", [_stat(got)], {}
        root += "/"
    out, todo = [], [(root, 0)]
    while todo:
        folder, level = todo.pop()
        for e in fs.ls(folder, detail=True):
            name = e["name"]
            if not name.startswith(root):
                continue
            if e.get("type") == "directory" or name.endswith("/"):
                if level + 1 < depth:
                    todo.append((name if name.endswith("/") else name + "/", level + 1))
                continue
            out.append((name[len(root):], e.get("size"), version(e)))
            if len(out) > cap:
                raise RemoteError(root, f"holds more than {cap:,} files; name one checkpoint "
                                  "inside it")
    return "folder", sorted(out), {}  # an HTML listing carries no times


def read_range(fs, path: str, start: int, end: int,
               size: int | None) -> tuple[bytes, int, str | None]:
    """Bytes [start, end), the file's size, and its version when the answer says it."""
    if end <= start and size is not None:
        return b"", size, None
    if _http(fs):
        from fsspec.asyn import sync

        return sync(fs.loop, _http_range, fs, path, start, end)
    data = _cat(fs, path, start, end)
    if size is None:
        size = int(fs.size(path))
    return data, size, None


def read_bytes(fs, path: str, start: int, end: int) -> bytes:
    """Bytes [start, end), without asking for the file's size."""
    if _http(fs):
        from fsspec.asyn import sync

        return sync(fs.loop, _http_range, fs, path, start, end)[0]
    return _cat(fs, path, start, end)


def _version_of(headers) -> str | None:
    for key in ("ETag", "Last-Modified"):
        if headers.get(key):
            return f"{key}:{headers[key]}"
    return None


async def _http_range(fs, url: str, start: int, end: int) -> tuple[bytes, int, str | None]:
    session = await fs.set_session()
    headers = {"Range": f"bytes={start}-{max(start, end - 1)}"}
    async with session.get(fs.encode_url(url), headers=headers, **fs.kwargs) as r:
        if r.status == 404:
            raise FileNotFoundError(url)
        if r.status in (401, 403):
            raise PermissionError(f"HTTP {r.status}")
        if r.status == 416:  # asked past the end: an empty file
            total = re.search(r"/(\d+)", r.headers.get("Content-Range", ""))
            return b"", int(total.group(1)) if total else 0, _version_of(r.headers)
        r.raise_for_status()
        if r.status == 206:
            m = _CONTENT_RANGE.search(r.headers.get("Content-Range", ""))
            buf = bytearray()  # bytes += bytes would copy the body again on every chunk
            while len(buf) < end - start:
                more = await r.content.read(end - start - len(buf))
                if not more:
                    break
                buf += more
            data = bytes(buf)
            total = int(m.group(1)) if m else None
            if total is None:
                raise ValueError("range answer without Content-Range")
            return data, total, _version_of(r.headers)
        length = r.headers.get("Content-Length")
        if start == 0 and length is not None and int(length) <= end:
            return await r.read(), int(length), _version_of(r.headers)  # all that was asked
        raise ValueError("the server does not honour Range requests")
