"""Running ckpt-browser on hostile input without letting it hurt the test session.

Three ways, each bounded in time and memory:
- `run_bounded`: a child process (`python -m ckpt_browser ...` or the probe) under RLIMIT_AS,
  in its own session (killed as a group on timeout), its peak memory taken from wait4;
- `run_inline`: `ckpt_browser.cli.main` in this process, under SIGALRM and a temporary
  RLIMIT_AS of what the process already maps plus 2 GiB;
- the probe (probe.py) for check, stats and a TUI session, run through `run_bounded`.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.malicious.make_corpus import CASES, CORPUS, MARKER, TEST_TIME_CASES, snapshot

REPO = Path(__file__).resolve().parents[2]
collect_ignore = ["corpus"]  # hostile files, not tests: never walk into them
GiB = 2**30
MEMORY_LIMIT = 2 * GiB  # address space of a child (RLIMIT_AS)
MAX_RSS_MB = 500  # peak resident memory allowed to one run
STEP_SECONDS = 20  # one command, or one TUI session
PROBE_SECONDS = 3 * STEP_SECONDS + 15  # check + stats + TUI, plus imports


@dataclass
class Run:
    rc: int | str  # exit code, or "hang" / "raised" / "killed by SIGSEGV" ...
    out: str
    err: str
    seconds: float
    maxrss_mb: float
    error: str = ""


def child_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("CKPT_BROWSER_DEBUG", None)
    env["TEXTUAL_ANIMATIONS"] = "none"
    env["NO_COLOR"] = "1"
    return env


def run_bounded(argv: list[str], cwd: Path, timeout: float = STEP_SECONDS,
                limit: int = MEMORY_LIMIT) -> Run:
    def preexec():
        os.setsid()
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    start = time.monotonic()
    p = subprocess.Popen(argv, cwd=cwd, env=child_env(), stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=preexec)
    chunks: dict[str, bytes] = {}

    def drain(name, stream):
        chunks[name] = stream.read()

    readers = [threading.Thread(target=drain, args=(n, s), daemon=True)
               for n, s in (("out", p.stdout), ("err", p.stderr))]
    for t in readers:
        t.start()
    hung = False
    while True:
        pid, status, usage = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() - start > timeout:
            hung = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            pid, status, usage = os.wait4(p.pid, 0)
            break
        time.sleep(0.01)
    p.returncode = os.waitstatus_to_exitcode(status)
    for t in readers:
        t.join(5)
    seconds = time.monotonic() - start
    rc: int | str = p.returncode
    if hung:
        rc = "hang"
    elif p.returncode < 0:
        rc = f"killed by {signal.Signals(-p.returncode).name}"
    return Run(rc, chunks.get("out", b"").decode("utf-8", "replace"),
               chunks.get("err", b"").decode("utf-8", "replace"), round(seconds, 2),
               round(usage.ru_maxrss / 1024, 1))


class Hang(BaseException):
    """Raised by the alarm; `except Exception` in the code under test cannot swallow it."""


def _mapped_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


@contextlib.contextmanager
def bounded_here(seconds: int = STEP_SECONDS, extra: int = MEMORY_LIMIT):
    def alarm(signum, frame):
        raise Hang(f"no answer after {seconds} s")

    old_handler = signal.signal(signal.SIGALRM, alarm)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = _mapped_bytes() + extra
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        signal.signal(signal.SIGALRM, old_handler)


def run_inline(argv: list[str], cwd: Path) -> Run:
    from ckpt_browser.cli import main

    out, err = io.StringIO(), io.StringIO()
    start = time.monotonic()
    rc: int | str
    error = ""
    old = os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), bounded_here():
            rc = main(argv)
    except Hang as e:
        rc, error = "hang", str(e)
    except BaseException as e:  # noqa: BLE001 - anything main() let out is a finding
        rc, error = "raised", f"{type(e).__name__}: {e}"
    finally:
        os.chdir(old)
    return Run(rc, out.getvalue(), err.getvalue(), round(time.monotonic() - start, 2),
               round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1), error)


# -- the cases as the tests see them ---------------------------------------------------------------

@dataclass
class Target:
    """One case, resolved to paths this session can open."""
    id: str
    path: Path  # what the commands open
    bad: Path  # the offending file
    words: str
    exits: dict
    forbid: str | None
    control: bool
    stats_names: tuple
    unsafe: bool  # the case must come out as "unsafe"


def all_ids() -> list[str]:
    return [c.name for c in CASES] + [c.name for c in TEST_TIME_CASES]


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory) -> Path:
    """Where test-time cases are built, commands run (one empty cwd each) and probes report."""
    return tmp_path_factory.mktemp("malicious")


@pytest.fixture(scope="session")
def corpus_before() -> dict:
    """The corpus as committed, with mtimes, before any test touched it."""
    snap = snapshot(CORPUS)
    for rel in list(snap):
        p = CORPUS / rel
        if not p.is_symlink():
            snap[rel] = snap[rel] + (p.stat().st_mtime_ns,)
    return snap


_targets: dict[str, Target] = {}


def target(case_id: str, sandbox: Path) -> Target:
    if case_id in _targets:
        return _targets[case_id]
    for c in CASES:
        if c.name == case_id:
            t = Target(c.name, CORPUS / c.path, CORPUS / c.bad, c.words, c.exits, c.forbid,
                       c.control, c.stats_names, c.words.startswith("unsafe"))
            break
    else:
        tc = next(c for c in TEST_TIME_CASES if c.name == case_id)
        root = tc.build(sandbox / "built")
        t = Target(tc.name, root, root / tc.target, tc.words, tc.exits, None, False,
                   ("*",), False)
    _targets[case_id] = t
    return t


def fresh_cwd(sandbox: Path, label: str) -> Path:
    d = sandbox / "cwd" / label
    d.mkdir(parents=True, exist_ok=False)
    return d


def markers_in(*folders: Path, recursive: tuple[Path, ...] = ()) -> list[str]:
    found = []
    for f in folders:
        if f.is_dir():
            found += [str(p) for p in f.glob(MARKER + "*")]
    for f in recursive:
        if f.is_dir():
            found += [str(p) for p in f.rglob(MARKER + "*")]
    return found


class ProbeServers:
    """Warm parents (probe_server.py) that fork one child per case: the imports are paid once
    per server, not once per case. One server per pool thread, handed out through a queue."""

    def __init__(self, home: Path):
        import queue

        self.home, self.free, self.all = home, queue.Queue(), []

    def _start(self) -> subprocess.Popen | None:
        self.home.mkdir(exist_ok=True)
        p = subprocess.Popen([sys.executable, "-m", "tests.malicious.probe_server"],
                             cwd=self.home, env=child_env(), stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
        self.all.append(p)
        return p if p.stdout.readline().strip() == '{"ready": true}' else None

    def run(self, request: dict) -> dict | None:
        """The server's answer, or None when no server could answer (then run it alone)."""
        server = None if self.free.empty() else self.free.get()
        server = server or self._start()
        if server is None:
            return None
        try:
            server.stdin.write(json.dumps(request) + "\n")
            server.stdin.flush()
            line = server.stdout.readline()
        except OSError:
            return None
        if not line:
            return None  # the server died: this one is not handed out again
        self.free.put(server)
        return json.loads(line)

    def close(self) -> None:
        for p in self.all:
            with contextlib.suppress(OSError):
                p.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(10)


_servers: ProbeServers | None = None


def _probe_now(t: Target, sandbox: Path) -> tuple[Run, dict, Path]:
    reports = sandbox / "probes"
    reports.mkdir(exist_ok=True)
    result = reports / f"{t.id}.json"
    cwd = fresh_cwd(sandbox, f"probe-{t.id}")
    out, err = reports / f"{t.id}.out", reports / f"{t.id}.err"
    got = _servers.run({"result": str(result), "path": str(t.path),
                        "names": list(t.stats_names), "cwd": str(cwd), "out": str(out),
                        "err": str(err), "timeout": PROBE_SECONDS,
                        "limit": MEMORY_LIMIT}) if _servers else None
    if got is not None:
        run = Run(got["rc"], out.read_text(errors="replace"), err.read_text(errors="replace"),
                  got["seconds"], got["maxrss_mb"])
    else:
        run = run_bounded([sys.executable, "-m", "tests.malicious.probe", str(result),
                           str(t.path), *t.stats_names], cwd, timeout=PROBE_SECONDS)
    try:
        steps = json.loads(result.read_text())
    except (OSError, ValueError):
        steps = {}
    return run, steps, cwd


_futures: dict = {}


def _selected(items) -> list[str]:
    """Case ids of the tests here that will run (after -k and the like), in order."""
    here, known, out = Path(__file__).parent, set(all_ids()), []
    for item in items:
        cid = getattr(getattr(item, "callspec", None), "params", {}).get("case_id")
        probed = item.name.startswith(("test_check", "test_stats", "test_tui", "test_in_"))
        if cid in known and cid not in out and probed and here in Path(str(item.path)).parents:
            out.append(cid)
    return out


@pytest.fixture(scope="session", autouse=True)
def probes(request, sandbox):
    """Probes are child processes: run them all in the background, a few at a time, as soon
    as the session starts; each test waits for its own."""
    from concurrent.futures import ThreadPoolExecutor

    global _servers
    _servers = ProbeServers(sandbox / "probe-servers")
    # one more than the cores: a TUI session spends part of its time waiting on its screen
    pool = ThreadPoolExecutor(max_workers=(os.cpu_count() or 2) + 1)
    for cid in _selected(request.session.items):
        _futures[cid] = pool.submit(_probe_now, target(cid, sandbox), sandbox)
    yield _futures
    pool.shutdown(wait=True, cancel_futures=True)
    _servers.close()
    _servers = None


def probe(t: Target, sandbox: Path) -> tuple[Run, dict, Path]:
    """check, stats and the TUI for one case, from its child process (one per session)."""
    if t.id not in _futures:
        from concurrent.futures import Future

        f: Future = Future()
        f.set_result(_probe_now(t, sandbox))
        _futures[t.id] = f
    return _futures[t.id].result()
