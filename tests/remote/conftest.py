"""Fixtures for remote checkpoints: real servers on loopback, started here.

- `range_server`: the counting HTTP server of `range_server.py` serving `served_root`, a
  session-wide copy of some of `sample_checkpoints/` plus three made-up checkpoints:
  `big/one.safetensors` (a 1 MiB tensor, then a small one past the first 128 KiB),
  `wide/wide.safetensors` (a header longer than 128 KiB) and `bigpt/pytorch_model.bin` (a torch
  zip over the 16 MiB "fetch whole" bound). `make_range_server(folder)` serves another folder.
- `s3_server`: moto's S3 API in server mode on 127.0.0.1 (once per session, in a thread), bucket
  `ckpts` holding every file of `sample_checkpoints/` under its relative path; per test it sets
  the standard AWS variables (endpoint, region, a fake key pair whose secret is `SECRET`).
  `.object_reads()` lists the keys read since the test started (from moto's request log).
- `store`: every object store of `STORES` (scheme -> fixture name) in turn, a `stores.Store`
  serving `sample_checkpoints/` with the environment its users would have; the test ids are
  the schemes. Today `s3_store` (`stores.S3Store` over `s3_server`).
- every test gets its own `CKPT_BROWSER_CACHE` (the `cache_dir` fixture), no proxy, no AWS
  config files, no instance metadata.

The CLI is run as a real process (`run_cli`) with the environment the fixtures set: fsspec keeps
filesystem instances per process, a new process starts clean. Each run is forked from a warm
parent (`cli_server.py`) that has imported the filesystems once. The local runs the remote ones are
compared with (`local_json`) run in this process, once per session.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import struct
import subprocess
import sys
import threading
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from .range_server import RangeServer
from .stores import S3Store, Store

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_checkpoints"
BUCKET = "ckpts"
ACCESS_KEY = "AKIACKPTBROWSERTEST1"
# Distinctive, so a leak shows up in a plain substring search of the output and the cache.
SECRET = "ckptTestSecret/Do+Not+Print/9f3b1c7e5a2d4086"
SPECULATIVE = 128 * 1024  # the first read of a safetensors shard, by the contract
SMALL_WHOLE = 16 * 1024 * 1024  # files up to this size may be fetched whole

# Folders of sample_checkpoints/ the session copy needs (dcp-ranks is generated lazily by
# another test module and not needed here).
SERVED_SAMPLES = ("tiny-llama-release", "tiny-llama-run", "lightning", "deepspeed-run",
                  "torchtitan-run", "hf-multirank")


# -- the CLI -------------------------------------------------------------------------------

class _CliServer:
    """One warm parent (cli_server.py) per test process that forks a child per CLI run: the
    imports are paid once, and each run still has a process of its own."""

    def __init__(self):
        import tempfile

        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._dir = Path(tempfile.mkdtemp(prefix="ckpt-cli-"))

    def _server(self) -> subprocess.Popen:
        if self._proc is None or self._proc.poll() is not None:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "tests.remote.cli_server"], cwd=REPO,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                env={k: v for k, v in os.environ.items() if not k.startswith("HF_")})
            assert self._proc.stdout.readline().strip() == '{"ready": true}'
        return self._proc

    def run(self, args: list[str], timeout: float, cwd: Path, env: dict):
        out, err = self._dir / "out", self._dir / "err"
        with self._lock:
            server = self._server()
            server.stdin.write(json.dumps({"args": args, "env": env, "cwd": str(cwd),
                                           "out": str(out), "err": str(err),
                                           "timeout": timeout}) + "\n")
            server.stdin.flush()
            line = server.stdout.readline()
            assert line, "the CLI server died"
            rc = json.loads(line)["rc"]
            if rc == "hang":
                raise subprocess.TimeoutExpired(["ckpt-browser", *args], timeout)
            return subprocess.CompletedProcess(["ckpt-browser", *args], rc,
                                               out.read_text(errors="replace"),
                                               err.read_text(errors="replace"))

    def close(self) -> None:
        if self._proc is not None:
            self._proc.stdin.close()
            self._proc.wait(30)
        shutil.rmtree(self._dir, ignore_errors=True)


_cli: _CliServer | None = None


@pytest.fixture(scope="session", autouse=True)
def _cli_server():
    global _cli
    _cli = _CliServer()
    yield
    _cli.close()


def run_cli(*args, timeout: float = 60, cwd: Path | None = None,
            env: dict | None = None) -> subprocess.CompletedProcess:
    """`ckpt-browser ARGS` in a process of its own with this process's environment (as
    monkeypatched), forked from the warm CLI server."""
    assert _cli is not None
    return _cli.run(list(map(str, args)), timeout, cwd or REPO,
                    dict(os.environ) if env is None else env)


def run_json(*args, ok=(0,), **kw) -> tuple[dict | list, subprocess.CompletedProcess]:
    """Run the CLI and parse its stdout as strict JSON; the exit code must be in `ok`."""
    proc = run_cli(*args, **kw)
    assert proc.returncode in ok, (args, proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, proc.stderr

    def refuse(token):
        raise AssertionError(f"{token} is not JSON")

    return json.loads(proc.stdout, parse_constant=refuse), proc


_LOCAL: dict[tuple, tuple[int, str]] = {}


def local_json(*args, ok=(0,)):
    """The same as run_json for local paths, in this process and remembered per session (the
    local samples do not change): the reference the remote runs are compared with."""
    import contextlib
    import io

    from ckpt_browser.cli import main

    key = tuple(map(str, args))
    if key not in _LOCAL:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(key))
        assert "Traceback" not in err.getvalue(), err.getvalue()
        _LOCAL[key] = (code, out.getvalue())
    code, text = _LOCAL[key]
    assert code in ok, (key, code)

    def refuse(token):
        raise AssertionError(f"{token} is not JSON")

    return json.loads(text, parse_constant=refuse), code


def assert_one_line_error(proc: subprocess.CompletedProcess, *words: str, code: int = 2) -> str:
    """Exit `code`, nothing on stdout, one line on stderr holding every word (case-insensitive
    for words given in lower case), no traceback. Returns the line."""
    err = proc.stderr
    assert proc.returncode == code, (proc.returncode, err[-2000:], proc.stdout[-500:])
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, f"stderr is not one line: {err!r}"
    for w in words:
        hay = err.lower() if w == w.lower() else err
        assert w in hay, (w, err)
    return lines[0]


def named_url(line: str) -> str:
    """The URL an error line `ckpt-browser: URL: message` names."""
    m = re.match(r"^ckpt-browser: ([a-z0-9]+://\S+?): ", line)
    assert m, f"the error does not start with 'ckpt-browser: URL: ': {line!r}"
    return m.group(1)


def assert_names(line: str, url: str) -> None:
    """The error names the URL given, or for a folder URL (ending in "/") a file inside it."""
    named = named_url(line)
    ok = named in (url, url.rstrip("/")) or (url.endswith("/") and named.startswith(url))
    assert ok, f"the error names {named!r}, not {url!r} or a file in it: {line!r}"


def without(doc, *keys: str):
    """A copy of a JSON document (or list of them) without the given top-level keys."""
    if isinstance(doc, list):
        return [without(d, *keys) for d in doc]
    return {k: v for k, v in doc.items() if k not in keys}


def header_len(path: Path) -> int:
    with open(path, "rb") as f:
        return struct.unpack("<Q", f.read(8))[0]


# -- isolation -----------------------------------------------------------------------------

@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch) -> Path:
    """A cache folder of this test's own, and nothing from the machine's AWS/HF setup."""
    cache = tmp_path / "ckpt-cache"
    monkeypatch.setenv("CKPT_BROWSER_CACHE", str(cache))
    monkeypatch.delenv("CKPT_BROWSER_DEBUG", raising=False)
    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ENDPOINT_URL",
                "AWS_ENDPOINT_URL_S3", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy",
                "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return cache


# -- served folders ------------------------------------------------------------------------

def write_big(folder: Path) -> Path:
    """big/one.safetensors: `big.weight` F32 [262144] (1 MiB) first, then `small.bias` F32 [16]
    at 1 MiB into the data section, far past a 128 KiB first read."""
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(7)
    path = folder / "one.safetensors"
    save_file({"big.weight": torch.randn(262144, generator=g),
               "small.bias": torch.randn(16, generator=g)}, str(path), metadata={"format": "pt"})
    return path


def write_wide(folder: Path) -> Path:
    """wide/wide.safetensors: 2,000 small tensors with long names, a header of ~190 KiB, longer
    than the 128 KiB first read; the data section is 32 KiB."""
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(11)
    tensors = {f"model.layers.{i:04d}.self_attention.query_key_value_projection.weight":
               torch.randn(4, generator=g) for i in range(2000)}
    path = folder / "wide.safetensors"
    save_file(tensors, str(path), metadata={"format": "pt"})
    assert 8 + header_len(path) > SPECULATIVE
    return path


def write_big_torch(folder: Path) -> Path:
    """bigpt/pytorch_model.bin: a torch zip over the 16 MiB "fetch whole" bound, a 18 MB tensor
    `w` then a small `b`."""
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(5)
    path = folder / "pytorch_model.bin"
    torch.save({"w": torch.randn(4_500_000, generator=g), "b": torch.randn(10, generator=g)},
               str(path))
    assert path.stat().st_size > SMALL_WHOLE
    return path


def write_two_big_tensors(folder: Path) -> Path:
    """bigpt2/model.pt: two tensors of 10 MB each, so the data descriptor torch writes after the
    first one lies far from the zip's head and tail reads."""
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "model.pt"
    torch.save({"w1": torch.ones(2_500_000), "w2": torch.ones(2_500_000) * 2,
                "b": torch.ones(10)}, str(path))
    assert path.stat().st_size > SMALL_WHOLE
    return path


@pytest.fixture(scope="session")
def served_root(tmp_path_factory) -> Path:
    """A copy of the samples the remote tests use, plus big/, wide/ and bigpt/. Not to be modified:
    tests that change files copy what they need into their own tmp_path."""
    root = tmp_path_factory.mktemp("served")
    for name in SERVED_SAMPLES:
        shutil.copytree(SAMPLES / name, root / name, copy_function=shutil.copy2)
    write_big(root / "big")
    write_wide(root / "wide")
    write_big_torch(root / "bigpt")
    write_two_big_tensors(root / "bigpt2")
    return root


@pytest.fixture
def make_range_server():
    """make_range_server(folder) -> a started RangeServer, stopped at the end of the test."""
    servers: list[RangeServer] = []

    def make(folder) -> RangeServer:
        srv = RangeServer(folder).start()
        servers.append(srv)
        return srv

    yield make
    for srv in servers:
        srv.stop()


@pytest.fixture
def range_server(make_range_server, served_root) -> RangeServer:
    """The counting range server on `served_root`, modes off, counters at zero."""
    return make_range_server(served_root)


# -- S3 (moto) -----------------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # werkzeug colours the request line by status


class _RequestLog(logging.Handler):
    """Collects moto's request lines (werkzeug logs '"GET /bucket/key HTTP/1.1" 206 -')."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.requests: list[tuple[str, str, str]] = []
        self._guard = threading.Lock()

    def emit(self, record):
        args = record.args if isinstance(record.args, tuple) else ()
        line = _ANSI.sub("", args[0]) if args and isinstance(args[0], str) else ""
        if len(args) >= 2 and line.count(" ") >= 2:
            method, target, _ = line.split(" ", 2)
            with self._guard:
                self.requests.append((method, target, str(args[1])))


class Moto:
    def __init__(self, server, endpoint: str, log: _RequestLog):
        self.server = server
        self.endpoint = endpoint
        self._log = log

    @property
    def requests(self) -> list[tuple[str, str, str]]:
        """(method, path?query, status) of every request since the last reset."""
        with self._log._guard:
            return list(self._log.requests)

    def reset_requests(self) -> None:
        with self._log._guard:
            self._log.requests.clear()

    def object_reads(self) -> list[str]:
        """Keys read with GET (object bodies: no query string), in order."""
        prefix = f"/{BUCKET}/"
        return [urllib.parse.unquote(t[len(prefix):]) for m, t, _ in self.requests
                if m == "GET" and t.startswith(prefix) and "?" not in t]

    def client(self, service: str = "s3", key: str = ACCESS_KEY, secret: str = SECRET):
        import boto3

        return boto3.client(service, endpoint_url=self.endpoint, region_name="us-east-1",
                            aws_access_key_id=key, aws_secret_access_key=secret)

    def enforce_auth(self, on: bool) -> None:
        """Make moto check credentials and IAM policies (on) or accept anything (off)."""
        req = urllib.request.Request(f"{self.endpoint}/moto-api/reset-auth",
                                     data=b"0" if on else b"inf", method="POST",
                                     headers={"Content-Type": "text/plain"})
        with urllib.request.urlopen(req, timeout=10) as r:
            r.read()


@pytest.fixture(scope="session")
def _moto():
    from moto.server import ThreadedMotoServer

    log = _RequestLog()
    werkzeug = logging.getLogger("werkzeug")
    werkzeug.setLevel(logging.INFO)
    werkzeug.addHandler(log)
    werkzeug.propagate = False  # counted here, not printed
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    moto = Moto(server, f"http://{host}:{port}", log)
    s3 = moto.client()
    s3.create_bucket(Bucket=BUCKET)
    for path in sorted(SAMPLES.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            try:
                s3.upload_file(str(path), BUCKET, path.relative_to(SAMPLES).as_posix())
            except FileNotFoundError:  # dcp-ranks/ may be rewritten by make_training_samples.py
                pass
    moto.reset_requests()
    yield moto
    server.stop()
    werkzeug.removeHandler(log)


@pytest.fixture
def s3_server(_moto, monkeypatch) -> Moto:
    """moto's S3 on loopback with bucket `ckpts` = sample_checkpoints/, and the standard AWS
    variables pointing at it for this test. `.endpoint` is its URL."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", _moto.endpoint)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", _moto.endpoint)
    _moto.reset_requests()
    return _moto


@pytest.fixture
def s3_store(s3_server) -> S3Store:
    """`s3_server` as a `Store`: s3://ckpts/REL is sample_checkpoints/REL."""
    return S3Store(s3_server, BUCKET, SECRET)


# -- every store -----------------------------------------------------------------------------

# scheme -> the fixture that makes its Store; a new store is one entry here.
STORES = {"s3": "s3_store", "gs": "gs_store", "hf": "hf_store"}


@pytest.fixture(params=sorted(STORES))
def store(request) -> Store:
    """Each store of STORES in turn (the test id is its scheme)."""
    return request.getfixturevalue(STORES[request.param])


# gs:// (fake-gcs-server) and hf:// (the fake Hub) fixtures, registered here so every module
# sees them and each session fixture starts once
from .gcs import _gcs, gs_store  # noqa: E402, F401
from .hub import _hub, hf_store  # noqa: E402, F401
