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
import stat
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
PROBE_SECONDS = 4 * STEP_SECONDS + 15  # inspect + check + stats + TUI, plus imports


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
    """Where test-time cases are built, commands run (one empty cwd each) and probes report:
    one folder for every xdist worker of the run, so a case is built and probed once."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = tmp_path_factory.getbasetemp().parent / "malicious"
        shared.mkdir(exist_ok=True)
        return shared
    return tmp_path_factory.mktemp("malicious")


def once(sandbox: Path, key: str, make, ready: Path, timeout: float) -> None:
    """`make()` in the first process of the run to ask for `key`; the others wait (at most
    `timeout` seconds) until `ready` exists, which `make` creates last, atomically."""
    claims = sandbox / "claims"
    claims.mkdir(exist_ok=True)
    claim = claims / key
    try:
        os.close(os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        deadline = time.monotonic() + timeout
        while not ready.exists():  # the other worker is making it
            failed = claim.read_text()
            assert not failed, f"{key}: {failed}"
            assert time.monotonic() < deadline, f"{key}: another worker never finished it"
            time.sleep(0.05)
        return
    try:
        make()
    except BaseException as e:
        claim.write_text(f"failed in the worker that made it: {type(e).__name__}: {e}")
        raise


@pytest.fixture(scope="session")
def corpus_before():
    """The corpus as committed before any test touched it: every file's bytes (compared once,
    at the end) and every entry's type, size, mtime and link target (compared after each
    test: a write changes the mtime, and this costs a walk, not reading 5 MB each time)."""
    before = {"content": snapshot(CORPUS), "stat": corpus_stat(CORPUS)}
    yield before
    # the session's last word (each xdist worker's): no test here changed a byte
    changed = sorted(set(snapshot(CORPUS).items()) ^ set(before["content"].items()))
    assert not changed, f"the corpus changed: {changed[:6]}"


def corpus_stat(root: Path) -> dict[str, tuple]:
    """relative path -> (file type, size, mtime in ns, link target or "")."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            link = os.readlink(p) if stat.S_ISLNK(st.st_mode) else ""
            out[os.path.relpath(p, root)] = (stat.S_IFMT(st.st_mode), st.st_size,
                                             st.st_mtime_ns, link)
    return out


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
        root = _built(tc, sandbox)
        t = Target(tc.name, root, root / tc.target, tc.words, tc.exits, None, False,
                   ("*",), False)
    _targets[case_id] = t
    return t


def _built(tc, sandbox: Path) -> Path:
    """The test-time case made once in the run (built aside, then renamed into place, so it
    is there complete or not at all); the path to open in it."""
    built = sandbox / "built"
    root = built / tc.name  # what build() makes, or a folder inside it
    if tc.kind == "hf-refs-fifo":
        root = root / "models--org--tiny" / "snapshots" / "0123abcd"

    def make():
        aside = sandbox / "building" / str(os.getpid())
        made = tc.build(aside)
        assert made == aside / root.relative_to(built), made
        built.mkdir(exist_ok=True)
        os.rename(aside / tc.name, built / tc.name)

    once(sandbox, f"build-{tc.name}", make, built / tc.name, timeout=60)
    return root


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
        self.home.mkdir(parents=True, exist_ok=True)
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


def _selected(items) -> list[str]:
    """Case ids of the tests here that will run (after -k and the like), in order."""
    here, known, out = Path(__file__).parent, set(all_ids()), []
    for item in items:
        cid = getattr(getattr(item, "callspec", None), "params", {}).get("case_id")
        if cid in known and cid not in out and here in Path(str(item.path)).parents:
            out.append(cid)
    return out


@pytest.fixture(scope="session", autouse=True)
def probes(request, sandbox):
    """Probes are child processes, and half their time a TUI session waits on its screen: two
    at a time in each worker, in the background from the session's start, each case claimed
    by the first worker to reach it (once()); each test waits for its own."""
    from concurrent.futures import ThreadPoolExecutor

    global _servers
    _servers = ProbeServers(sandbox / "probe-servers" / str(os.getpid()))
    pool = ThreadPoolExecutor(max_workers=2)
    for cid in _selected(request.session.items):
        pool.submit(probe, target(cid, sandbox), sandbox)
    yield
    pool.shutdown(wait=True, cancel_futures=True)
    _servers.close()
    _servers = None


def probe(t: Target, sandbox: Path) -> tuple[Run, dict, Path]:
    """inspect, check, stats and the TUI for one case, from its child process: once in the
    whole run, by whichever worker (or pool thread) asks first."""
    done = sandbox / "probes" / f"{t.id}.done.json"

    def make():
        run, steps, cwd = _probe_now(t, sandbox)
        tmp = done.with_name(f"{t.id}.done.tmp")
        tmp.write_text(json.dumps({"run": run.__dict__, "steps": steps, "cwd": str(cwd)}))
        os.replace(tmp, done)

    once(sandbox, f"probe-{t.id}", make, done, timeout=PROBE_SECONDS + 60)
    got = json.loads(done.read_text())
    return Run(**got["run"]), got["steps"], Path(got["cwd"])
