"""A fake of the Hugging Face Hub's HTTP API on loopback, for `huggingface_hub` through
`HF_ENDPOINT`: the requests `HfFileSystem` makes (huggingface_hub 2.x, read from its
hf_file_system.py, hf_api.py, file_download.py and utils/_http.py), answered as the Hub does.

- `GET /api/{models|datasets}/{repo}[/revision/{rev}]`: repo info (`id`, `sha`, `private`,
  `gated`, `lastModified`); what `resolve_path` asks first.
- `GET /api/{type}s/{repo}/tree/{rev}[/{path}]?recursive=&expand=`: the listing, paged as the Hub
  pages it (1000 entries, 50 with expand; a `Link: <...>; rel="next"` header with a cursor);
  files as `{"type": "file", "oid", "size", "path", "lfs": {"oid", "size", "pointerSize"}}`,
  folders as `{"type": "directory", "oid", "path"}`, `lastCommit` when expanded.
- `POST /api/{type}s/{repo}/paths-info/{rev}` (form fields `paths`, `expand`).
- `GET`/`HEAD` `/{repo}/resolve/{rev}/{path}` (`/datasets/{repo}/...` for datasets): small files
  served directly, LFS files (weights, pickles) redirected (302) to `/cdn-lfs/...` as the Hub
  sends them to its CDN, with `X-Repo-Commit`, `X-Linked-Size`, `X-Linked-Etag`; `Range:
  bytes=a-b` answered 206 with `Content-Range`.
- errors with the headers `hf_raise_for_status` reads: `X-Error-Code` `RepoNotFound` (401 without
  a token, 404 with one: a private repo is not told apart from a missing one), `RevisionNotFound`,
  `EntryNotFound`, `GatedRepo` (401 without a token, 403 with a token not granted), and 401 with
  `X-Error-Message: Invalid credentials in Authorization header` for a token the Hub does not know.

Repos are folders on disk (`add_repo(repo_id, folder)`), or files added by `commit()`; every commit
gets a 40-hex sha, branches and tags are refs to one. Blob ids are a hash of path, size and
mtime (never of the bytes: the benchmark serves a 641 GiB sparse checkpoint). Every request is
logged (method, path, status, body bytes, Range) for budgets; `latency` sleeps before each answer.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import socket
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

PAGE, PAGE_EXPANDED = 1000, 50
LFS_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".distcp", ".pkl", ".npy",
                ".msgpack", ".h5", ".gguf")
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")
EPOCH = 1_700_000_000.0  # commit dates start here, one minute apart


@dataclasses.dataclass
class Blob:
    size: int
    oid: str
    source: Path | bytes

    def read(self, start: int, end: int) -> bytes:
        if isinstance(self.source, bytes):
            return self.source[start:end]
        with open(self.source, "rb") as f:
            f.seek(start)
            return f.read(end - start)


@dataclasses.dataclass
class Commit:
    sha: str
    date: float
    title: str
    files: dict[str, Blob]


@dataclasses.dataclass
class Repo:
    repo_id: str
    kind: str = "model"
    private: bool = False
    gated: bool = False
    granted: set[str] = dataclasses.field(default_factory=set)  # tokens with access
    refs: dict[str, str] = dataclasses.field(default_factory=dict)  # branch or tag -> sha
    commits: dict[str, Commit] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Request:
    method: str
    path: str
    status: int
    sent: int  # body bytes written
    range: tuple[int, int] | None  # [start, end) asked for
    authorized: bool


def _oid(*parts) -> str:
    return hashlib.sha1(repr(parts).encode()).hexdigest()


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(t))


def blobs_of(folder: Path) -> dict[str, Blob]:
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts:
            st = p.stat()
            rel = p.relative_to(folder).as_posix()
            out[rel] = Blob(st.st_size, _oid(rel, st.st_size, st.st_mtime_ns), p)
    return out


class FakeHub:
    def __init__(self, host: str = "127.0.0.1", port: int = 0, latency: float = 0.0):
        self.repos: dict[tuple[str, str], Repo] = {}
        self.tokens: set[str] = set()  # tokens the Hub knows
        self.latency = latency
        self.log: list[Request] = []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer((host, port), _Handler)
        self.server.daemon_threads = True
        self.server.hub = self  # type: ignore[attr-defined]
        self.thread: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeHub:
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> FakeHub:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- repos -------------------------------------------------------------------------------

    def add_repo(self, repo_id: str, folder: Path | None = None, kind: str = "model",
                 **flags) -> Repo:
        repo = Repo(repo_id, kind, **flags)
        self.repos[(kind, repo_id)] = repo
        self.commit(repo_id, blobs_of(folder) if folder else {}, "initial commit", kind=kind)
        return repo

    def commit(self, repo_id: str, files: dict[str, Blob | bytes], title: str,
               branch: str = "main", kind: str = "model", replace: bool = False) -> str:
        """A new commit on `branch` adding or overwriting `files` (all of them if `replace`)."""
        repo = self.repos[(kind, repo_id)]
        with self.lock:
            parent = repo.commits.get(repo.refs.get(branch, ""))
            tree = {} if replace or parent is None else dict(parent.files)
            for rel, f in files.items():
                tree[rel] = f if isinstance(f, Blob) else Blob(len(f), _oid(rel, f), f)
            sha = _oid(repo_id, title, len(repo.commits), sorted(tree))
            sha = (sha + sha)[:40]
            repo.commits[sha] = Commit(sha, EPOCH + 60 * len(repo.commits), title, tree)
            repo.refs[branch] = sha
        return sha

    def tag(self, repo_id: str, name: str, sha: str, kind: str = "model") -> None:
        self.repos[(kind, repo_id)].refs[name] = sha

    # -- the log -----------------------------------------------------------------------------

    def requests(self) -> list[Request]:
        with self.lock:
            return list(self.log)

    def reset(self) -> None:
        with self.lock:
            self.log.clear()

    def byte_reads(self, repo_id: str) -> list[tuple[str, Request]]:
        """(path, request) of every answer that carried a file's bytes (a resolve answered
        directly, or the CDN after a redirect), in order."""
        out = []
        cdn = f"/cdn-lfs/model/{repo_id.replace('/', '--')}/"
        for r in self.requests():
            if r.method != "GET" or r.status not in (200, 206):
                continue
            if r.path.startswith(cdn):
                out.append((urllib.parse.unquote(r.path.split(":", 1)[1]), r))
            elif r.path.startswith(f"/{repo_id}/resolve/"):
                rel = r.path.split("/resolve/", 1)[1].split("/", 1)[1]
                out.append((urllib.parse.unquote(rel), r))
        return out

    def api_requests(self) -> list[Request]:
        """Requests to /api/ other than the agent-harness registry (which huggingface_hub asks
        for once a day when it runs under an AI agent's shell: not ours to count)."""
        return [r for r in self.requests()
                if r.path.startswith("/api/") and r.path != "/api/agent-harnesses"]

    def file_reads(self, repo_id: str) -> list[str]:
        """Paths in `repo_id` whose bytes were asked for (GET of resolve), in order."""
        prefixes = (f"/{repo_id}/resolve/", f"/datasets/{repo_id}/resolve/")
        out = []
        for r in self.requests():
            if r.method == "GET" and r.path.startswith(prefixes):
                out.append(urllib.parse.unquote(r.path.split("/resolve/", 1)[1].split("/", 1)[1]))
        return out


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the Hub and httpx's pool use it
    hub: FakeHub

    def log_message(self, format, *args):  # noqa: A002 - quiet: the log says it all
        pass

    def setup(self):
        super().setup()
        # no Nagle, as production servers: small answers must not wait for a delayed ACK
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.hub = self.server.hub  # type: ignore[attr-defined]

    # -- plumbing ----------------------------------------------------------------------------

    def _token(self) -> str | None:
        auth = self.headers.get("Authorization", "")
        return auth[7:] if auth.startswith("Bearer ") else None

    def _send(self, status: int, body: bytes = b"", headers: dict | None = None,
              head: bool = False, asked: tuple[int, int] | None = None,
              ctype: str = "application/json") -> None:
        if self.hub.latency:
            time.sleep(self.hub.latency)
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if not head and body:
            self.wfile.write(body)
        with self.hub.lock:
            self.hub.log.append(Request(self.command, urllib.parse.urlsplit(self.path).path,
                                        status, 0 if head else len(body), asked,
                                        self._token() is not None))

    def _json(self, status: int, doc, headers: dict | None = None, head: bool = False) -> None:
        self._send(status, json.dumps(doc).encode(), headers, head)

    def _error(self, status: int, code: str | None, message: str, head: bool = False) -> None:
        headers = {"X-Error-Message": message}
        if code:
            headers["X-Error-Code"] = code
        self._json(status, {"error": message}, headers, head)

    def _access(self, repo: Repo | None, head: bool = False, files: bool = False) -> bool:
        """Whether the caller may see `repo` (and, with `files`, read its files); else answer."""
        token = self._token()
        if token is not None and token not in self.hub.tokens:
            self._error(401, None, "Invalid credentials in Authorization header", head)
            return False
        if repo is None or (repo.private and token not in repo.granted):
            status = 401 if token is None else 404
            self._error(status, "RepoNotFound", "Repository not found", head)
            return False
        if files and repo.gated and token not in repo.granted:
            status = 401 if token is None else 403
            self._error(status, "GatedRepo", f"Access to model {repo.repo_id} is restricted. "
                        "You must have access to it and be authenticated to access it.", head)
            return False
        return True

    def _commit(self, repo: Repo, rev: str, head: bool = False) -> Commit | None:
        rev = urllib.parse.unquote(rev)
        sha = repo.refs.get(rev, rev)
        commit = repo.commits.get(sha)
        if commit is None:
            self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}", head)
        return commit

    def _repo(self, kind: str, parts: list[str]) -> Repo | None:
        return self.hub.repos.get((kind, "/".join(parts[:2])))

    # -- routes ------------------------------------------------------------------------------

    def do_GET(self):  # noqa: N802
        self._route(head=False)

    def do_HEAD(self):  # noqa: N802
        self._route(head=True)

    def do_POST(self):  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        form = urllib.parse.parse_qs(self.rfile.read(length).decode())
        parts = urllib.parse.urlsplit(self.path).path.strip("/").split("/")
        if len(parts) >= 6 and parts[0] == "api" and parts[4] == "paths-info":
            kind = parts[1].rstrip("s")
            repo = self._repo(kind, parts[2:])
            if not self._access(repo):
                return
            assert repo is not None
            commit = self._commit(repo, "/".join(parts[5:]))
            if commit is None:
                return
            expand = form.get("expand", ["False"])[0].lower() == "true"
            out = []
            for p in form.get("paths", []):
                entry = _entry(repo, commit, p.strip("/"), expand)
                if entry is not None:
                    out.append(entry)
            self._json(200, out)
            return
        self._error(404, None, "Not Found")

    def _route(self, head: bool) -> None:
        url = urllib.parse.urlsplit(self.path)
        parts = [urllib.parse.unquote(p) for p in url.path.strip("/").split("/")]
        query = urllib.parse.parse_qs(url.query)
        if parts[:1] == ["api"] and len(parts) >= 4 and parts[1] in ("models", "datasets"):
            self._api(parts[1].rstrip("s"), parts[2:], query, head)
        elif parts[:1] == ["cdn-lfs"] and len(parts) == 4:
            self._cdn(parts[1:], head)
        elif parts[:1] == ["datasets"] and len(parts) >= 5 and parts[3] == "resolve":
            self._resolve("dataset", parts[1:], head)
        elif len(parts) >= 5 and parts[2] == "resolve":
            self._resolve("model", parts, head)
        else:
            self._error(404, None, "Not Found", head)

    def _api(self, kind: str, parts: list[str], query: dict, head: bool) -> None:
        repo = self._repo(kind, parts)
        if not self._access(repo, head):
            return
        assert repo is not None
        rest = parts[2:]
        if not rest or rest[0] == "revision":
            commit = self._commit(repo, rest[1] if len(rest) > 1 else "main", head)
            if commit is not None:
                self._json(200, {"id": repo.repo_id, "sha": commit.sha, "private": repo.private,
                                 "gated": "manual" if repo.gated else False,
                                 "lastModified": _iso(commit.date), "disabled": False}, head=head)
            return
        if rest[0] == "tree" and len(rest) >= 2:
            commit = self._commit(repo, rest[1], head)
            if commit is not None:
                self._tree(repo, commit, "/".join(rest[2:]), query, head)
            return
        self._error(404, None, "Not Found", head)

    def _tree(self, repo: Repo, commit: Commit, path: str, query: dict, head: bool) -> None:
        recursive = query.get("recursive", ["False"])[0].lower() == "true"
        expand = query.get("expand", ["False"])[0].lower() == "true"
        names = _children(commit, path, recursive)
        if names is None:
            self._error(404, "EntryNotFound", f"{path} does not exist on {commit.sha}", head)
            return
        size = PAGE_EXPANDED if expand else PAGE
        start = int(query.get("cursor", ["0"])[0])
        page = [_entry(repo, commit, n, expand) for n in names[start:start + size]]
        headers = {}
        if start + size < len(names):
            q = {k: v[0] for k, v in query.items()}
            q["cursor"] = str(start + size)
            nxt = f"{self.hub.endpoint}{urllib.parse.urlsplit(self.path).path}?" \
                  f"{urllib.parse.urlencode(q)}"
            headers["Link"] = f'<{nxt}>; rel="next"'
        self._json(200, page, headers, head)

    def _resolve(self, kind: str, parts: list[str], head: bool) -> None:
        repo = self._repo(kind, parts)
        if not self._access(repo, head, files=True):
            return
        assert repo is not None
        commit = self._commit(repo, parts[3], head)
        if commit is None:
            return
        rel = "/".join(parts[4:])
        blob = commit.files.get(rel)
        if blob is None:
            self._error(404, "EntryNotFound", f"{rel} does not exist on {commit.sha}", head)
            return
        headers = {"X-Repo-Commit": commit.sha, "ETag": f'"{blob.oid}"'}
        if rel.endswith(LFS_SUFFIXES):
            where = f"{kind}/{repo.repo_id.replace('/', '--')}/{commit.sha}:" \
                    f"{urllib.parse.quote(rel, safe='')}"
            headers.update({"X-Linked-Size": str(blob.size), "X-Linked-Etag": f'"{blob.oid}"',
                            "Location": f"{self.hub.endpoint}/cdn-lfs/{where}"})
            self._send(302, b"", headers, head)
            return
        self._bytes(blob, headers, head)

    def _cdn(self, parts: list[str], head: bool) -> None:
        kind, repo_key, where = parts
        repo = self.hub.repos.get((kind, repo_key.replace("--", "/", 1)))
        sha, _, rel = where.partition(":")
        commit = repo.commits.get(sha) if repo else None
        blob = commit.files.get(urllib.parse.unquote(rel)) if commit else None
        if blob is None:
            self._send(403, b"<Error>AccessDenied</Error>", ctype="application/xml", head=head)
            return
        self._bytes(blob, {"ETag": f'"{blob.oid}"'}, head)

    def _bytes(self, blob: Blob, headers: dict, head: bool) -> None:
        headers = dict(headers, **{"Accept-Ranges": "bytes"})
        m = _RANGE.match(self.headers.get("Range", "").replace(" ", ""))
        if not m:
            self._send(200, b"" if head else blob.read(0, blob.size), headers, head,
                       ctype="application/octet-stream")
            return
        a, b = m.groups()
        if a == "":
            start, end = max(0, blob.size - int(b)), blob.size
        else:
            start, end = int(a), min(blob.size, int(b) + 1 if b else blob.size)
        if start >= blob.size:
            self._send(416, b"", dict(headers, **{"Content-Range": f"bytes */{blob.size}"}),
                       head)
            return
        headers["Content-Range"] = f"bytes {start}-{end - 1}/{blob.size}"
        self._send(206, b"" if head else blob.read(start, end), headers, head, (start, end),
                   ctype="application/octet-stream")


def _children(commit: Commit, path: str, recursive: bool) -> list[str] | None:
    """Paths under `path` (files and folders, the Hub's order: folders first), or None."""
    prefix = path + "/" if path else ""
    if path and path in commit.files:
        return None  # a file is not a tree
    below = [p for p in commit.files if p.startswith(prefix)]
    if path and not below:
        return None
    out: set[str] = set()
    for p in below:
        rest = p[len(prefix):].split("/")
        for depth in range(1, len(rest) + 1 if recursive else 2):
            out.add(prefix + "/".join(rest[:depth]))
    folders = sorted(p for p in out if p not in commit.files)
    return folders + sorted(p for p in out if p in commit.files)


def _entry(repo: Repo, commit: Commit, path: str, expand: bool) -> dict | None:
    blob = commit.files.get(path)
    if blob is None:
        if not any(p.startswith(path + "/") for p in commit.files):
            return None
        entry: dict = {"type": "directory", "oid": _oid(commit.sha, path), "path": path}
    else:
        entry = {"type": "file", "oid": blob.oid, "size": blob.size, "path": path}
        if path.endswith(LFS_SUFFIXES):
            entry["lfs"] = {"oid": hashlib.sha256(blob.oid.encode()).hexdigest(),
                            "size": blob.size, "pointerSize": 134}
    if expand:
        last = last_change(repo, commit, path)
        entry["lastCommit"] = {"id": last.sha, "title": last.title, "date": _iso(last.date)}
    return entry


def last_change(repo: Repo, commit: Commit, path: str) -> Commit:
    """The newest commit up to `commit` that changed `path` (a file, or anything in a folder)."""
    def state(c: Commit):
        return sorted((p, b.oid) for p, b in c.files.items()
                      if p == path or p.startswith(path + "/"))

    last, before = commit, None
    for c in repo.commits.values():  # in commit order (one branch)
        now = state(c)
        if now != before:
            last, before = c, now
        if c is commit:
            break
    return last


def main(argv: list[str] | None = None) -> int:
    """python tests/remote/fake_hub.py FOLDER org/name [--port P] [--latency S]"""
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("repo_id")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--latency", type=float, default=0.0)
    a = ap.parse_args(argv)
    hub = FakeHub(port=a.port, latency=a.latency)
    hub.add_repo(a.repo_id, Path(a.folder))
    print(f"HF_ENDPOINT={hub.endpoint} hf://{a.repo_id}", flush=True)
    hub.server.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
