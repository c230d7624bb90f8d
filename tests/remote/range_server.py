"""A counting HTTP file server on loopback that honours Range requests, for the remote tests and
the remote benchmark.

python's `http.server.SimpleHTTPRequestHandler` ignores `Range` (it always answers 200 with the
whole file), so this one is written out: `GET`/`HEAD` of files with `Range: bytes=a-b`, `a-` and
`-n` (206 with `Content-Range`, 416 past the end), `Accept-Ranges`, `Content-Length`, `ETag` and
`Last-Modified`, conditional requests (`If-None-Match` / `If-Modified-Since`: 304, `If-Range`);
HTML listings of folders (absolute links, sub-folders with a trailing slash), the
kind fsspec's HTTPFileSystem parses. Every request is counted per served path (thread-safe):
requests by method, body bytes actually written to the socket, the ranges asked for.

Failure modes, settable while the server runs (`server.configure(...)`, `server.reset_modes()`),
optionally limited to paths matching a glob (`only="*.safetensors"`):

- `ignore_range=True`: answer every GET with 200 and the whole body, as a server without range
  support does (and no `Accept-Ranges`);
- `drop_after=N`: close the connection after N bytes of a response body (the headers promise all
  of it);
- `latency=S`: sleep S seconds before each response;
- `stall=S`: sleep S seconds in the middle of each response (half-way through the body, or between
  two header lines of a response without a body), for timeouts;
- `forbidden=("glob", ...)`: answer 403 for matching paths.

Paths are relative to the served root, without a leading slash; folders end with "/" (the root is
"").  Bodies are written in small chunks through a small socket send buffer, so `bytes sent` stays
close to what a client that hangs up early actually received.

    with RangeServer(folder) as srv:
        url = srv.url_for("tiny-llama-release/")
        ...
        srv.counter("tiny-llama-release/model-00001-of-00003.safetensors").gets

Command line (for trying things by hand or a benchmark in another process):
`python tests/remote/range_server.py FOLDER [--port P] [--latency S]`.
"""

from __future__ import annotations

import dataclasses
import email.utils
import fnmatch
import html
import mimetypes
import os
import re
import socket
import threading
import time
import urllib.parse
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

CHUNK = 16 * 1024
SNDBUF = 32 * 1024
_RANGE = re.compile(r"^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$")


@dataclasses.dataclass
class Counter:
    """What one served path cost. `calls`: one (method, range) per request, the range as the client
    asked it: (first, last) inclusive byte positions (last None for `a-`, first None for `-n`), or
    None for a request without Range."""

    requests: int = 0
    gets: int = 0
    heads: int = 0
    bytes: int = 0
    calls: list = dataclasses.field(default_factory=list)
    statuses: list = dataclasses.field(default_factory=list)

    def copy(self) -> Counter:
        return dataclasses.replace(self, calls=list(self.calls), statuses=list(self.statuses))

    @property
    def get_ranges(self) -> list:
        """The ranges of the GET requests (None: the GET asked for the whole body)."""
        return [r for m, r in self.calls if m == "GET"]

    @property
    def full_gets(self) -> int:
        """GET requests that asked for no range (the whole body)."""
        return sum(1 for r in self.get_ranges if r is None)


@dataclasses.dataclass
class Modes:
    ignore_range: bool = False
    drop_after: int | None = None
    latency: float = 0.0
    stall: float = 0.0
    forbidden: tuple = ()
    only: str | None = None  # glob: the modes above (but latency and forbidden) apply to these


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    owner: RangeServer

    def handle_error(self, request, client_address):
        """A client that hangs up is normal here (drop/ignore-range tests): no traceback."""
        import sys

        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError, BrokenPipeError)):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format, *args):  # noqa: A002 - quiet: the counters say it all
        pass

    def setup(self):
        super().setup()
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SNDBUF)
        except OSError:
            pass

    # -- plumbing ---------------------------------------------------------------------------

    def _rel(self) -> str | None:
        raw = urllib.parse.urlsplit(self.path).path
        rel = urllib.parse.unquote(raw).lstrip("/")
        parts = [p for p in rel.split("/") if p not in ("", ".")]
        if ".." in parts:
            return None
        return "/".join(parts) + ("/" if rel.endswith("/") and parts else "")

    def _wait(self, seconds: float) -> None:
        if seconds > 0:
            self.server.owner._stop.wait(seconds)

    def _write(self, data: bytes, key: str, limit: int | None = None) -> bool:
        """Write data (at most `limit` bytes of it) in chunks, counting what the socket took;
        True when all of data went out."""
        owner = self.server.owner
        view = memoryview(data)
        end = len(view) if limit is None else min(len(view), max(0, limit))
        pos = 0
        while pos < end:
            chunk = view[pos:min(pos + CHUNK, end)]
            try:
                self.wfile.write(chunk)
                self.wfile.flush()
            except OSError:
                self.close_connection = True
                return False
            owner._count_bytes(key, len(chunk))
            pos += len(chunk)
        return end == len(view)

    def do_GET(self):  # noqa: N802
        self._serve(head=False)

    def do_HEAD(self):  # noqa: N802
        self._serve(head=True)

    def _serve(self, head: bool):
        owner = self.server.owner
        modes = owner.modes
        rel = self._rel()
        method = "HEAD" if head else "GET"
        path = owner.root / rel if rel is not None else None
        is_dir = path is not None and path.is_dir()
        key = self.path if rel is None else rel + "/" if is_dir and rel and not rel.endswith("/") \
            else rel
        range_header = self.headers.get("Range")
        asked = _parse_range(range_header) if range_header else None
        owner._count_request(key, method, asked)
        if asked == (None, None):  # unreadable: ignored, as RFC 9110 says
            asked = None
        self._wait(modes.latency)
        if rel is None:
            return self._simple(HTTPStatus.FORBIDDEN, b"no\n", key, head)
        if any(fnmatch.fnmatchcase(key, pat) for pat in modes.forbidden):
            return self._simple(HTTPStatus.FORBIDDEN, b"<Error>AccessDenied</Error>\n", key, head)
        applies = modes.only is None or fnmatch.fnmatchcase(key, modes.only)
        if is_dir:
            body = _listing(owner.root, path)
            return self._body(HTTPStatus.OK, body, key, head, "text/html; charset=utf-8",
                              applies=applies, extra={})
        if not path.is_file():
            return self._simple(HTTPStatus.NOT_FOUND, b"not found\n", key, head)
        st = path.stat()
        size = st.st_size
        ctype = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        extra = {"ETag": f'"{size:x}-{st.st_mtime_ns:x}"',
                 "Last-Modified": email.utils.formatdate(st.st_mtime, usegmt=True)}
        if not (modes.ignore_range and applies):
            extra["Accept-Ranges"] = "bytes"
        if _not_modified(self.headers, extra["ETag"], st.st_mtime):
            return self._simple(HTTPStatus.NOT_MODIFIED, b"", key, head, extra=extra)
        if_range = self.headers.get("If-Range")
        if if_range is not None and if_range.strip() not in (extra["ETag"], extra["Last-Modified"]):
            asked = None  # the file changed since: the whole (new) file, 200
        if asked is not None and not (modes.ignore_range and applies):
            first, last = asked
            if first is None:  # bytes=-n: the last n bytes
                first, last = max(0, size - (last or 0)), size - 1
            if last is None or last >= size:
                last = size - 1
            if first >= size or first > last:
                extra["Content-Range"] = f"bytes */{size}"
                return self._simple(HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE, b"", key, head,
                                    extra=extra)
            with open(path, "rb") as f:
                f.seek(first)
                data = f.read(last - first + 1)
            extra["Content-Range"] = f"bytes {first}-{last}/{size}"
            return self._body(HTTPStatus.PARTIAL_CONTENT, data, key, head, ctype,
                              applies=applies, extra=extra)
        data = b"" if head else path.read_bytes()
        return self._body(HTTPStatus.OK, data, key, head, ctype, applies=applies, extra=extra,
                          length=size)

    def _simple(self, status, body: bytes, key: str, head: bool, extra: dict | None = None):
        self.server.owner._count_status(key, int(status))
        self.send_response(status)
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head and body:
            self._write(body, key, None)

    def _body(self, status, data: bytes, key: str, head: bool, ctype: str, applies: bool,
              extra: dict, length: int | None = None):
        owner = self.server.owner
        modes = owner.modes
        owner._count_status(key, int(status))
        stall = modes.stall if applies else 0.0
        drop = modes.drop_after if applies else None
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data) if length is None else length))
        for k, v in extra.items():
            self.send_header(k, v)
        if head or not data:
            if stall:  # mid-response: between two header lines
                self.wfile.write(b"".join(self._headers_buffer))
                self._headers_buffer = []
                self.wfile.flush()
                self._wait(stall)
            self.end_headers()
            return
        self.end_headers()
        if stall:
            half = max(1, len(data) // 2)
            if not self._write(data[:half], key, drop):
                return self._hang_up()
            self._wait(stall)
            if not self._write(data[half:], key, None if drop is None else drop - half):
                return self._hang_up()
            return
        if not self._write(data, key, drop):
            self._hang_up()

    def _hang_up(self) -> None:
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _not_modified(headers, etag: str, mtime: float) -> bool:
    """A conditional request (If-None-Match, else If-Modified-Since) the file still matches."""
    inm = headers.get("If-None-Match")
    if inm is not None:
        tags = [t.strip().removeprefix("W/") for t in inm.split(",")]
        return "*" in tags or etag in tags
    ims = headers.get("If-Modified-Since")
    if ims is not None:
        try:
            since = email.utils.parsedate_to_datetime(ims).timestamp()
        except (TypeError, ValueError):
            return False
        return int(mtime) <= since
    return False


def _parse_range(header: str):
    """(first, last) from 'bytes=a-b' (last None for 'a-'; first None and last n for '-n'), the
    first of several ranges; (None, None) when unreadable."""
    m = _RANGE.match(header.split(",")[0])
    if not m or (m.group(1) == "" and m.group(2) == ""):
        return (None, None)
    a, b = m.group(1), m.group(2)
    if a == "":
        return (None, int(b))
    return (int(a), int(b) if b != "" else None)


def _listing(root: Path, folder: Path) -> bytes:
    rel = folder.relative_to(root).as_posix()
    base = "/" if rel == "." else "/" + urllib.parse.quote(rel, safe="/=+@,:~") + "/"
    rows = []
    for child in sorted(folder.iterdir(), key=lambda p: p.name):
        name = child.name + ("/" if child.is_dir() else "")
        href = base + urllib.parse.quote(name, safe="/=+@,:~")
        rows.append(f'<li><a href="{html.escape(href, quote=True)}">{html.escape(name)}</a></li>')
    title = html.escape(base)
    text = (f"<!DOCTYPE HTML>\n<html><head><meta charset=\"utf-8\"><title>Index of {title}</title>"
            f"</head>\n<body>\n<h1>Index of {title}</h1>\n<hr>\n<ul>\n" + "\n".join(rows)
            + "\n</ul>\n<hr>\n</body></html>\n")
    return text.encode()


class RangeServer:
    """Serve `root` on 127.0.0.1 (a free port unless `port`), in daemon threads."""

    def __init__(self, root: str | os.PathLike, port: int = 0, host: str = "127.0.0.1"):
        self.root = Path(root).resolve()
        self.modes = Modes()
        self._lock = threading.Lock()
        self._counters: dict[str, Counter] = {}
        self.log: list[dict] = []
        self._stop = threading.Event()
        self._httpd = _Server((host, port), _Handler)
        self._httpd.owner = self
        self.host, self.port = self._httpd.server_address[:2]
        self._thread: threading.Thread | None = None

    # -- life -------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/"

    def url_for(self, rel: str = "") -> str:
        return self.url + urllib.parse.quote(str(rel).lstrip("/"), safe="/=+@,:~")

    def start(self) -> RangeServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True,
                                        name=f"range-server-{self.port}")
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()  # wakes stalled and delayed handlers
        if self._thread is not None:
            self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> RangeServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- modes ------------------------------------------------------------------------------

    def configure(self, **kw) -> RangeServer:
        for k, v in kw.items():
            if not hasattr(self.modes, k):
                raise TypeError(f"unknown mode {k!r}")
            if k == "forbidden" and isinstance(v, str):
                v = (v,)
            setattr(self.modes, k, v)
        return self

    def reset_modes(self) -> None:
        self.modes = Modes()

    # -- counters ---------------------------------------------------------------------------

    def _counter(self, key: str) -> Counter:
        c = self._counters.get(key)
        if c is None:
            c = self._counters[key] = Counter()
        return c

    def _count_request(self, key: str, method: str, asked) -> None:
        with self._lock:
            c = self._counter(key)
            c.requests += 1
            if method == "GET":
                c.gets += 1
            else:
                c.heads += 1
            c.calls.append((method, asked))
            self.log.append({"t": time.monotonic(), "method": method, "path": key,
                             "range": asked})

    def _count_status(self, key: str, status: int) -> None:
        with self._lock:
            c = self._counter(key)
            c.statuses.append(status)

    def _count_bytes(self, key: str, n: int) -> None:
        with self._lock:
            self._counter(key).bytes += n

    def reset_counters(self) -> None:
        with self._lock:
            self._counters.clear()
            self.log.clear()

    def counter(self, rel: str) -> Counter:
        """A snapshot of the counter of one path (zeros if it was never asked for)."""
        with self._lock:
            c = self._counters.get(rel)
            return c.copy() if c is not None else Counter()

    def counters(self) -> dict[str, Counter]:
        with self._lock:
            return {k: c.copy() for k, c in self._counters.items()}

    def total_requests(self) -> int:
        with self._lock:
            return sum(c.requests for c in self._counters.values())

    def total_bytes(self) -> int:
        with self._lock:
            return sum(c.bytes for c in self._counters.values())


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folder")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--latency", type=float, default=0.0)
    a = p.parse_args(argv)
    srv = RangeServer(a.folder, port=a.port).configure(latency=a.latency).start()
    print(f"serving {srv.root} at {srv.url} (ctrl-c stops)", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        srv.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
