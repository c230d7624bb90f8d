"""Benchmark `inspect --json` on a remote checkpoint: the 163-shard sparse DeepSeek-V3-shaped
checkpoint served over HTTP (http://) and by a fake Hugging Face Hub (hf://), with 20 ms added
latency per request.

Usage: python benchmarks/bench_remote.py [--workdir DIR] [--reps N] [--latency S]
                                         [--scheme http,hf] [--concurrency 16,32,8]
                                         [--backlog N] [--nagle] [--keep]

The checkpoint comes from benchmarks/make_moe_checkpoint.py (reused if present; deleted at the
end only if this run built it, unless --keep). Both servers run in this process, with `latency`
seconds slept before every response, their listen queue raised to 128 and Nagle's algorithm
off, as in production servers (--backlog 0 keeps socketserver's 5, which adds 1 s SYN retries
above 5 simultaneous connects; --nagle, http only, keeps http.server's Nagle, up to 40 ms
delayed-ACK waits on small bodies; the fake Hub always sets TCP_NODELAY):
  - http (`--scheme http`): the URL of the folder on the counting, Range-honouring server of
    tests/remote/range_server.py (one HTML listing, then a ranged GET per file);
  - hf (`--scheme hf`): `hf://org/big` on the fake Hub of tests/remote/fake_hub.py, the folder
    added as repo org/big; the children get HF_ENDPOINT=<its endpoint>, HF_HOME and
    CKPT_BROWSER_CACHE in temp dirs, no HF_TOKEN (nor any other token or offline variable),
    NO_PROXY=127.0.0.1, HF_HUB_DISABLE_TELEMETRY=1. The Hub's API lists the repo (repo info,
    tree pages, paths-info), and, as the real Hub does, the fake answers a read of an LFS file
    (.safetensors, .bin ...) with a 302 from /{repo}/resolve/ to /cdn-lfs/...: each shard
    byte read costs 2 requests (redirect + read), small files (.json) are read directly.
`--scheme` defaults to both. In one run, for each scheme:
  - `inspect URL --json --no-cache` in fresh processes (CKPT_BROWSER_CACHE and TMPDIR in temp
    dirs), median of --reps runs after one warm-up, for each --concurrency: wall time; requests
    by method and status, and for hf by kind (API: repo info, tree pages, paths-info; resolve
    302 redirects; CDN byte reads; small files read directly; anything else); bytes the server
    sent; requests and bytes per shard against the shard's header size; any requested range
    that reaches into a shard's data section (the tensor bytes); the floor and wall / floor
    (target <= 2x). The floor for http is the issue's ceil(163 / concurrency) x 2 x latency; for
    hf it is ceil(163 / concurrency) x (redirect + read) x latency, one round of reads costing a
    redirect and a read, plus the API requests (measured) x latency;
  - the baseline measured in the same run (once, shared): the same `inspect --json` on the
    local folder (no server, pure parsing), so the network part (wall remote - wall local) can
    be set against the floor too;
  - reopening with the cache (no --no-cache): a first run fills a fresh cache, then --reps runs
    reuse it: requests (for hf by kind), bytes and wall;
  - that the remote JSON equals the local JSON except "path" (which must be the URL);
  - where the time goes: the server's request timeline (arrival times, same clock as the
    parent's spawn and exit), and one instrumented in-process run per concurrency timing the
    phases (imports, opening the filesystem, listing, fetching, parsing, training state, output).
With both schemes, a summary side by side and what the Hub API costs on top of http: the extra
requests (the listing's API requests against the one HTML listing, a redirect per byte read)
and the extra time (wall, when the first shard is asked for, how long the shard reads take).
`PYTHONPATH=/path/to/copy python benchmarks/bench_remote.py` measures a modified copy of
ckpt_browser (the header says which one ran). It reports; it does not assert. Exit code is
non-zero only when something errored.
"""

import argparse
import collections
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PY = sys.executable
# The caller's PYTHONPATH first: `PYTHONPATH=/tmp/copy python benchmarks/bench_remote.py`
# measures a modified copy of ckpt_browser (the header says which one ran). The children run
# outside the repository, since `python -m` and `-c` put their working folder first.
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(
    p for p in (os.environ.get("PYTHONPATH", ""), REPO) if p))
CWD = tempfile.gettempdir()
sys.path.insert(0, os.path.join(REPO, "tests", "remote"))
sys.path.insert(0, HERE)
from bench_browse import first_difference  # noqa: E402
from range_server import RangeServer  # noqa: E402

TARGET = 2.0

# One instrumented `inspect --json` in a fresh process: wraps the phases' entry points with
# timers (no behaviour changes) and prints {phase: [start, seconds]} (start from the script's
# first line) on stderr's last line; stdout goes to argv[1]. argv[2:]: cli.main's argv.
PHASES = r"""
import json, os, sys, time
t0 = time.perf_counter()
marks = {}
def timed(owner, attr, key):
    f = getattr(owner, attr, None)
    if f is None:  # renamed since: that phase goes unmeasured
        return
    def wrapper(*a, **k):
        s = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            marks[key] = [s - t0, time.perf_counter() - s]
    setattr(owner, attr, wrapper)
os.dup2(os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 1)
import ckpt_browser.cli
marks["imports (cli)"] = [0.0, time.perf_counter() - t0]
import ckpt_browser.analysis.components as components
import functools
import ckpt_browser.analysis.opened as opened
import ckpt_browser.remote.fs as rfs
import ckpt_browser.remote.mirror as mirror
marks["imports (readers, mirror)"] = [marks["imports (cli)"][1], time.perf_counter() - t0
                                      - marks["imports (cli)"][1]]
timed(rfs, "open_fs", "open filesystem (fsspec, aiohttp)")
timed(mirror._Mirror, "listing", "listing")
timed(mirror._Mirror, "fetch", "fetch (headers, small files)")
# the opener reads every file on first use of Opened.checkpoint (a cached_property)
_read = opened.Opened.__dict__["checkpoint"].func
opened.Opened.checkpoint = functools.cached_property(
    lambda self: _time_read(self))
opened.Opened.checkpoint.__set_name__(opened.Opened, "checkpoint")
def _time_read(self):
    s = time.perf_counter()
    try:
        return _read(self)
    finally:
        marks["parse (Opened.checkpoint)"] = [s - t0, time.perf_counter() - s]
timed(components, "training_state", "training state")
s = time.perf_counter()
try:
    rc = ckpt_browser.cli.main(sys.argv[2:])
except SystemExit as e:
    rc = e.code
sys.stdout.flush()
marks["whole cli.main"] = [s - t0, time.perf_counter() - s]
sys.stderr.write("\n" + json.dumps({"rc": rc, "marks": marks}) + "\n")
"""


def shard_layout(ckpt):
    """{shard name: (file size, data section start = 8 + header length)}."""
    index = json.load(open(os.path.join(ckpt, "model.safetensors.index.json")))
    out = {}
    for s in sorted(set(index["weight_map"].values())):
        with open(os.path.join(ckpt, s), "rb") as f:
            out[s] = (os.path.getsize(os.path.join(ckpt, s)),
                      8 + int.from_bytes(f.read(8), "little"))
    return out


def reaches_data(rng, size, data_start):
    """Bytes of [data_start, size) that a GET range (as the server logged it) asked for."""
    if rng is None:
        first, last = 0, size - 1
    else:
        first, last = rng
        if first is None:
            first, last = max(0, size - (last or 0)), size - 1
        elif last is None or last >= size:
            last = size - 1
    lo = max(first, data_start)
    return max(0, last - lo + 1)


def analyse(counters, layout):
    """What one run cost, from the server's per-path counters."""
    methods = collections.Counter(m for c in counters.values() for m, _ in c.calls)
    per_shard_req = {s: counters[s].requests if s in counters else 0 for s in layout}
    per_shard_bytes = {s: counters[s].bytes if s in counters else 0 for s in layout}
    per_shard_gets = {s: counters[s].gets if s in counters else 0 for s in layout}
    into_data = []  # (shard, range, tensor bytes asked for)
    starting_in_data = 0
    for s, (size, data_start) in layout.items():
        for r in (counters[s].get_ranges if s in counters else []):
            n = reaches_data(r, size, data_start)
            if n:
                into_data.append((s, r, n))
                if r is not None and r[0] is not None and r[0] >= data_start:
                    starting_in_data += 1
    others = {k: (c.requests, c.bytes, c.get_ranges) for k, c in counters.items()
              if k not in layout}
    return {
        "requests": sum(c.requests for c in counters.values()),
        "methods": dict(methods),
        "bytes": sum(c.bytes for c in counters.values()),
        "shard_requests": per_shard_req,
        "shard_bytes": per_shard_bytes,
        "shard_gets": per_shard_gets,
        "into_data": into_data,
        "starting_in_data": starting_in_data,
        "others": others,
        "statuses": collections.Counter(st for c in counters.values() for st in c.statuses),
    }


def timeline(log, start, end, latency, layout):
    """When requests arrived, in seconds from the spawn of the process (the server logs
    time.monotonic() in this process, so the clocks agree): the first request (the listing),
    the first and last shard request, the last request, the exit, each other path's request,
    and the shard requests per `latency` slot after the first one."""
    if not log:
        return None
    shard_ts = sorted(e["t"] for e in log if e["path"] in layout) or [log[0]["t"]]
    slots = collections.Counter(int((t - shard_ts[0]) / latency) for t in shard_ts)
    return {"first request": log[0]["t"] - start,
            "first shard request": shard_ts[0] - start,
            "last shard request": shard_ts[-1] - start,
            "last request": log[-1]["t"] - start,
            "exit": end - start,
            "others": {e["path"] or "/": e["t"] - start for e in log if e["path"] not in layout},
            "per slot": [slots.get(i, 0) for i in range(max(slots) + 1)]}


def listen_overflows():
    """The kernel's count of connections dropped because a listen queue was full (host-wide;
    None where /proc/net/netstat is missing)."""
    try:
        lines = [line.split() for line in open("/proc/net/netstat")
                 if line.startswith("TcpExt:")]
        return int(dict(zip(lines[0], lines[1]))["ListenOverflows"])
    except (OSError, IndexError, KeyError, ValueError):
        return None


def distribution(values):
    c = collections.Counter(values)
    return ", ".join(f"{k}: {v}" for k, v in sorted(c.items()))


def strip_path(doc):
    return {k: v for k, v in doc.items() if k != "path"}


def verdict(ratio, target=TARGET):
    return f"{ratio:5.2f}x  (target <= {target}x)  {'PASS' if ratio <= target else 'FAIL'}"


HUB_REPO = "org/big"
# Variables that would give the hf:// children a token, the machine's cache or offline mode.
HF_UNSET = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH", "HF_HUB_OFFLINE",
            "TRANSFORMERS_OFFLINE", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE",
            "HF_HUB_ENABLE_HF_TRANSFER")
HUB_KINDS = ("API repo info", "API tree pages", "API paths-info", "resolve 302 redirects",
             "CDN byte reads", "small files read directly", "anything else")
API_KINDS = HUB_KINDS[:3]


class HttpTarget:
    """The folder on tests/remote/range_server.py."""

    scheme = "http"

    def __init__(self, ckpt, lat, backlog, nagle):
        # Two settings of http.server that no production server shares, set on the classes
        # (tests/remote/range_server.py is left as it is).
        import range_server

        if backlog:
            range_server._Server.request_queue_size = backlog
        range_server._Handler.disable_nagle_algorithm = not nagle
        self.lat = lat
        self.srv = RangeServer(ckpt).configure(latency=lat).start()
        self.url = self.srv.url_for("")
        self.about = (f"tests/remote/range_server.py in this process, latency {lat * 1000:.0f} "
                      f"ms per request, listen queue {backlog or 5}, TCP_NODELAY "
                      f"{'off' if nagle else 'on'}")

    def env(self, home):
        return dict(ENV)

    def reset(self):
        self.srv.reset_counters()

    def analyse(self, layout, start=None, end=None):
        a = analyse(self.srv.counters(), layout)
        a["api"] = 0
        if start is not None:
            a["timeline"] = timeline(list(self.srv.log), start, end, self.lat, layout)
        return a

    def stop(self):
        self.srv.stop()


class _Arrivals(list):
    """The fake Hub's request log, with the time each logged request arrived (set by the
    handler's parse_request in its thread, read when the answer is logged)."""

    local = threading.local()

    def __init__(self):
        super().__init__()
        self.times = []

    def append(self, r):
        self.times.append(getattr(self.local, "t", time.monotonic()))
        super().append(r)

    def clear(self):
        self.times.clear()
        super().clear()


class HubTarget:
    """Repo org/big on the fake Hub of tests/remote/fake_hub.py."""

    scheme = "hf"

    def __init__(self, ckpt, lat, backlog):
        import fake_hub

        handler = fake_hub._Handler
        if not getattr(handler, "_bench_timed", False):  # arrival times for the timeline
            parse = handler.parse_request

            def parse_request(self):
                _Arrivals.local.t = time.monotonic()
                return parse(self)

            handler.parse_request = parse_request
            handler._bench_timed = True
        self.lat = lat
        self.hub = fake_hub.FakeHub(latency=lat)
        if backlog:  # socketserver listened with 5; listen() again raises the queue
            self.hub.server.socket.listen(backlog)
        self.hub.log = _Arrivals()
        self.hub.add_repo(HUB_REPO, Path(ckpt))
        self.hub.start()
        self.url = f"hf://{HUB_REPO}"
        self.about = (f"tests/remote/fake_hub.py in this process ({self.hub.endpoint}, repo "
                      f"{HUB_REPO}), latency {lat * 1000:.0f} ms per request, listen queue "
                      f"{backlog or 5}, TCP_NODELAY on; LFS reads: 302 to /cdn-lfs/, then the "
                      "ranged read: 2 requests per shard read")

    def env(self, home):
        env = {k: v for k, v in ENV.items() if k not in HF_UNSET}
        env.update(HF_ENDPOINT=self.hub.endpoint, HF_HOME=home, NO_PROXY="127.0.0.1",
                   no_proxy="127.0.0.1", HF_HUB_DISABLE_TELEMETRY="1")
        return env

    def reset(self):
        self.hub.reset()

    def analyse(self, layout, start=None, end=None):
        with self.hub.lock:
            reqs, times = list(self.hub.log), list(self.hub.log.times)
        return hub_analyse(reqs, times, layout, HUB_REPO, start, end, self.lat)

    def stop(self):
        self.hub.stop()


def hub_kind(r, repo):
    """(kind of HUB_KINDS, the repo file it is about or None) of one fake Hub request."""
    api = f"/api/models/{repo}"
    resolve = f"/{repo}/resolve/"
    cdn = f"/cdn-lfs/model/{repo.replace('/', '--')}/"
    p = r.path
    data = r.method == "GET" and r.status in (200, 206)
    if p == api or p.startswith(api + "/revision/"):
        return "API repo info", None
    if p.startswith(api + "/tree/"):
        return "API tree pages", None
    if p.startswith(api + "/paths-info/"):
        return "API paths-info", None
    if p.startswith(resolve):
        rel = urllib.parse.unquote(p[len(resolve):].partition("/")[2])
        if r.method == "GET" and r.status == 302:
            return "resolve 302 redirects", rel
        return ("small files read directly" if data else "anything else"), rel
    if p.startswith(cdn) and ":" in p:
        rel = urllib.parse.unquote(p.split(":", 1)[1])
        return ("CDN byte reads" if data else "anything else"), rel
    return "anything else", None


def hub_analyse(reqs, times, layout, repo, start, end, lat):
    """What one run cost on the fake Hub, with the keys of analyse() plus the kinds."""
    kinds = collections.Counter()
    strays = collections.Counter()  # (method, path, status) of "anything else"
    per = collections.defaultdict(lambda: {"requests": 0, "bytes": 0, "gets": 0, "ranges": []})
    shard_ts, log = [], []
    for r, t in zip(reqs, times):
        kind, rel = hub_kind(r, repo)
        kinds[kind] += 1
        if kind == "anything else":
            strays[(r.method, r.path, r.status)] += 1
        key = rel if rel is not None else r.path
        c = per[key]
        c["requests"] += 1
        c["bytes"] += r.sent
        if kind in ("CDN byte reads", "small files read directly"):
            c["gets"] += 1
            c["ranges"].append(None if r.range is None else (r.range[0], r.range[1] - 1))
        if key in layout:
            shard_ts.append(t)
        log.append({"t": t, "path": f"{key} ({kind})" if key not in layout else key})
    into_data, starting_in_data = [], 0
    for s, (size, data_start) in layout.items():
        for rng in per[s]["ranges"] if s in per else []:
            n = reaches_data(rng, size, data_start)
            if n:
                into_data.append((s, rng, n))
                if rng is not None and rng[0] >= data_start:
                    starting_in_data += 1
    a = {
        "requests": len(reqs),
        "methods": dict(collections.Counter(r.method for r in reqs)),
        "bytes": sum(r.sent for r in reqs),
        "shard_requests": {s: per[s]["requests"] if s in per else 0 for s in layout},
        "shard_bytes": {s: per[s]["bytes"] if s in per else 0 for s in layout},
        "shard_gets": {s: per[s]["gets"] if s in per else 0 for s in layout},
        "into_data": into_data,
        "starting_in_data": starting_in_data,
        "others": {k: (c["requests"], c["bytes"], c["ranges"]) for k, c in per.items()
                   if k not in layout},
        "statuses": collections.Counter(r.status for r in reqs),
        "kinds": {k: kinds.get(k, 0) for k in HUB_KINDS},
        "strays": dict(strays),
        "api": sum(kinds.get(k, 0) for k in API_KINDS),
    }
    if start is not None:
        a["timeline"] = timeline(log, start, end, lat, layout)
    return a


def kinds_text(a):
    k = a["kinds"]
    text = (f"API {a['api']} (repo info {k['API repo info']}, tree pages {k['API tree pages']}, "
            f"paths-info {k['API paths-info']}); resolve 302 redirects "
            f"{k['resolve 302 redirects']}; CDN byte reads {k['CDN byte reads']}; small files "
            f"read directly {k['small files read directly']}; anything else "
            f"{k['anything else']}")
    if a["strays"]:
        text += " (" + ", ".join(f"{m} {p} {s} x{c}" for (m, p, s), c in
                                 sorted(a["strays"].items())) + ")"
    return text


def floor_of(scheme, n, conc, lat, api=0):
    """The floor: ceil(n / c) rounds of reads, 2 latencies each (http: the issue's 2; hf: the
    redirect and the read), plus the hf listing's API requests, one after the other."""
    return math.ceil(n / conc) * 2 * lat + (api * lat if scheme == "hf" else 0)


def floor_text(scheme, n, conc, lat, api=0):
    if scheme == "hf":
        return (f"ceil({n} / {conc}) x (redirect + read) x {lat:.3f} s + {api} API x "
                f"{lat:.3f} s")
    return f"ceil({n} / {conc}) x 2 x {lat:.3f} s"


def median_of(runs, key):
    return statistics.median(r[key] for r in runs)


def run_inspect(target, out_path, cache, no_cache=True, concurrency=None, tmpdir=None,
                env=None):
    """One fresh `python -m ckpt_browser inspect TARGET --json`: (wall, monotonic start, end)."""
    cmd = [PY, "-m", "ckpt_browser", "inspect", target, "--json"]
    if no_cache:
        cmd.append("--no-cache")
    if concurrency is not None and concurrency != 16:  # 16: the default, left unsaid
        cmd += ["--concurrency", str(concurrency)]
    env = dict(env or ENV, CKPT_BROWSER_CACHE=cache)
    if tmpdir:
        env["TMPDIR"] = tmpdir
    with open(out_path, "wb") as out:
        start = time.monotonic()
        p = subprocess.run(cmd, stdout=out, stderr=subprocess.PIPE, env=env, cwd=CWD)
        end = time.monotonic()
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[1:])} exited {p.returncode}: "
                           f"{p.stderr.decode(errors='replace')[-1000:]}")
    return end - start, start, end


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # Outside the repository: a `cp -r` of the repo would turn the sparse files into
    # hundreds of GB of zeros.
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "ckpt-browser-bench"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--latency", type=float, default=0.020,
                    help="seconds the servers sleep before each response (default 0.020)")
    ap.add_argument("--scheme", default="http,hf",
                    help="comma-separated schemes to measure: http (range_server.py), hf (the "
                    "fake Hub of fake_hub.py); default http,hf")
    ap.add_argument("--concurrency", default="16,32,8",
                    help="comma-separated --concurrency values (default 16,32,8)")
    ap.add_argument("--backlog", type=int, default=128,
                    help="the servers' listen queue (default 128; 0 leaves socketserver's 5, "
                    "which drops connections when more than 5 arrive at once: the client "
                    "retries after 1 s)")
    ap.add_argument("--nagle", action="store_true",
                    help="leave Nagle's algorithm on in the http server (http.server's "
                    "default): a small body written after the headers then waits for the "
                    "client's delayed ACK, up to 40 ms more per request; off by default, as "
                    "real servers do (the fake Hub always turns it off)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the sparse checkpoint even if this run built it")
    args = ap.parse_args()
    if not args.latency > 0:
        ap.error("--latency must be above 0 (the floor is counted in round trips of it)")
    args.schemes = [s.strip().lower() for s in args.scheme.split(",") if s.strip()]
    if not args.schemes or set(args.schemes) - {"http", "hf"}:
        ap.error(f"--scheme takes http, hf or both, not {args.scheme!r}")
    args.schemes = list(dict.fromkeys(args.schemes))
    ckpt = os.path.join(args.workdir, "deepseek-v3-sparse")
    built = not os.path.exists(ckpt)
    subprocess.run([PY, os.path.join(HERE, "make_moe_checkpoint.py"), ckpt], check=True)
    try:
        return measure(args, ckpt)
    finally:
        if built and not args.keep:
            shutil.rmtree(ckpt)
            print(f"deleted {ckpt} (built by this run; --keep keeps it)")


def measure(args, ckpt):
    errors = []
    concurrencies = [int(c) for c in args.concurrency.split(",") if c.strip()]
    layout = shard_layout(ckpt)
    n = len(layout)
    headers = sum(d for _, d in layout.values())
    hsizes = sorted(d for _, d in layout.values())
    logical = sum(os.path.getsize(os.path.join(ckpt, x)) for x in os.listdir(ckpt))
    lat = args.latency
    print(f"checkpoint   {ckpt}")
    print(f"             {n} shards, {logical / 1e9:.1f} GB logical; shard headers "
          f"{headers:,} B (each {hsizes[0]:,} .. {hsizes[-1]:,} B; "
          f"{sum(h > 128 * 1024 for h in hsizes)} longer than 128 KiB)")
    print(f"python       {PY}")
    which = subprocess.run([PY, "-c", "import ckpt_browser; print(ckpt_browser.__file__)"],
                           capture_output=True, text=True, env=ENV, cwd=CWD).stdout.strip()
    print(f"ckpt_browser {os.path.dirname(which)}")
    if "hf" in args.schemes:
        hub_version = subprocess.run(
            [PY, "-c", "import huggingface_hub, fsspec; print(huggingface_hub.__version__, "
             "fsspec.__version__)"], capture_output=True, text=True, env=ENV,
            cwd=CWD).stdout.split()
        print(f"             huggingface_hub {' / fsspec '.join(hub_version) or '(missing)'}")
    print(f"             median of {args.reps} fresh processes after one warm-up; "
          f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f}")

    tmp = tempfile.mkdtemp(prefix="bench-remote-", dir=args.workdir)
    targets = {}
    overflows0 = listen_overflows()
    results = {}  # scheme -> {concurrency: runs}
    reopened = {}  # scheme -> (cold wall, cold analysis, reopen runs)
    try:
        for scheme in args.schemes:
            try:
                targets[scheme] = (HttpTarget(ckpt, lat, args.backlog, args.nagle)
                                   if scheme == "http" else HubTarget(ckpt, lat, args.backlog))
                print(f"server {scheme:5} {targets[scheme].about}")
                print(f"             URL {targets[scheme].url}")
            except Exception as e:
                errors.append(f"{scheme} server: {e}")
                print(f"server {scheme:5} ERROR {e}")
        print()

        # -- the baseline: the same command on the local folder --------------------------------
        local_out = os.path.join(tmp, "local.json")
        local_wall = None
        try:
            run_inspect(ckpt, local_out, tmp)  # warm-up: page cache, .pyc files
            local_wall = statistics.median(run_inspect(ckpt, local_out, tmp)[0]
                                           for _ in range(args.reps))
            local_doc = json.load(open(local_out))
            print(f"baseline: inspect --json on the local folder (no server)   "
                  f"{local_wall:6.3f}s")
        except Exception as e:
            errors.append(f"local baseline: {e}")
            print(f"local baseline: ERROR {e}")
            local_doc = None
        print()

        for scheme, target in targets.items():
            print(f"==== {scheme}: {target.url} " + "=" * max(0, 80 - len(target.url)))
            print()
            results[scheme] = measure_no_cache(args, target, concurrencies, layout, tmp,
                                               local_wall, local_doc, errors)
            reopened[scheme] = measure_cache(args, target, layout, tmp, local_wall, local_doc,
                                             errors)
            measure_phases(target, concurrencies, layout, lat, tmp, errors)
            print()

        if any(results.values()):
            summary(results, reopened, layout, lat, local_wall)
        if results.get("http") and results.get("hf"):
            hub_costs(results, reopened, layout, lat)
        overflows = listen_overflows()
        if overflows is not None and overflows0 is not None:
            print()
            print(f"listen-queue overflows during this run (host-wide, /proc/net/netstat): "
                  f"{overflows - overflows0}")
    finally:
        for target in targets.values():
            target.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    if errors:
        print("\nerrors:\n  " + "\n  ".join(errors), file=sys.stderr)
        return 1
    return 0


def same_json(local_doc, doc, url):
    diff = first_difference(strip_path(local_doc), strip_path(doc))
    return (("yes" if diff is None else "NO, first at " + diff) + f"; path {doc.get('path')!r}"
            + ("" if doc.get("path") in (url, url.rstrip("/")) else "  (not the URL)"))


def measure_no_cache(args, target, concurrencies, layout, tmp, local_wall, local_doc, errors):
    """`inspect --json --no-cache` per concurrency: {concurrency: [analysis per run]}."""
    remote_out = os.path.join(tmp, "remote.json")
    results = {}
    for conc in concurrencies:
        try:
            with tempfile.TemporaryDirectory(dir=tmp) as cache, \
                    tempfile.TemporaryDirectory(dir=tmp) as child_tmp, \
                    tempfile.TemporaryDirectory(dir=tmp) as home:
                env = target.env(home)
                run_inspect(target.url, remote_out, cache, concurrency=conc, env=env)  # warm-up
                runs = []
                leftover = 0
                for _ in range(args.reps):
                    target.reset()
                    wall, start, end = run_inspect(target.url, remote_out, cache,
                                                   concurrency=conc, tmpdir=child_tmp, env=env)
                    a = target.analyse(layout, start, end)
                    a["wall"] = wall
                    runs.append(a)
                    leftover += len(os.listdir(cache)) + len(os.listdir(child_tmp))
                home_entries = sorted(os.listdir(home))
            remote_doc = json.load(open(remote_out))
            results[conc] = runs
            report_remote(target.scheme, conc, runs, local_wall, layout, args.latency)
            print(f"  --no-cache left behind    {leftover} entries in CKPT_BROWSER_CACHE and "
                  f"TMPDIR   {'PASS' if not leftover else 'FAIL'}"
                  + (f"; HF_HOME holds {home_entries or 'nothing'}" if target.scheme == "hf"
                     else ""))
            if local_doc is not None:
                print("  same JSON as local (except path): "
                      + same_json(local_doc, remote_doc, target.url))
        except Exception as e:
            errors.append(f"{target.scheme}, concurrency {conc}: {e}")
            print(f"{target.scheme}, concurrency {conc}: ERROR {e}")
        print()
    return results


def methods_text(a):
    return ", ".join(f"{m} {c}" for m, c in sorted(a["methods"].items()))


def measure_cache(args, target, layout, tmp, local_wall, local_doc, errors):
    """A first run into an empty cache, then --reps reopening it: (cold wall, its analysis,
    [analysis per reopen]), or None."""
    n = len(layout)
    remote_out = os.path.join(tmp, "remote.json")
    try:
        with tempfile.TemporaryDirectory(dir=tmp) as cache, \
                tempfile.TemporaryDirectory(dir=tmp) as home:
            env = target.env(home)
            target.reset()
            cold, _, _ = run_inspect(target.url, remote_out, cache, no_cache=False, env=env)
            cold_a = target.analyse(layout)
            reopen = []
            for _ in range(args.reps):
                target.reset()
                wall, _, _ = run_inspect(target.url, remote_out, cache, no_cache=False, env=env)
                a = target.analyse(layout)
                a["wall"] = wall
                reopen.append(a)
            cached_doc = json.load(open(remote_out))
            cache_kb = int(subprocess.run(["du", "-sk", cache], capture_output=True,
                                          text=True, check=True).stdout.split()[0])
        med = median_of(reopen, "wall")
        print(f"{target.scheme} with the cache (no --no-cache; default concurrency 16)")
        print(f"  first run, empty cache   {cold:6.3f}s  {cold_a['requests']:>4} requests "
              f"({methods_text(cold_a)}) {cold_a['bytes']:>12,} B")
        if "kinds" in cold_a:
            print(f"    by kind: {kinds_text(cold_a)}")
        last = reopen[-1]
        print(f"  reopen (median)          {med:6.3f}s  {last['requests']:>4} requests "
              f"({methods_text(last)}) {last['bytes']:>12,} B   (runs: "
              + ", ".join(f"{r['wall']:.3f}" for r in reopen) + ")")
        if "kinds" in last:
            print(f"    by kind: {kinds_text(last)}")
        refetched = sum(1 for v in last["shard_gets"].values() if v)
        print(f"  shards read again on reopen: {refetched} of {n}; other paths: "
              + ("; ".join(f"{k or '/'} {q} req {b:,} B"
                           for k, (q, b, _) in sorted(last["others"].items())) or "none"))
        if local_wall:
            print(f"  reopen / local baseline  {med / local_wall:5.2f}x   "
                  f"(reopen - local: {med - local_wall:+.3f}s)")
        print(f"  cache on disk (du)       {cache_kb / 1024:.1f} MiB")
        if local_doc is not None:
            print("  same JSON as local (except path): "
                  + same_json(local_doc, cached_doc, target.url))
        print()
        return cold, cold_a, reopen
    except Exception as e:
        errors.append(f"{target.scheme} cache: {e}")
        print(f"{target.scheme} cache: ERROR {e}")
        print()
        return None


def measure_phases(target, concurrencies, layout, lat, tmp, errors):
    n = len(layout)
    try:
        print(f"{target.scheme}: where the time goes: one instrumented in-process run per "
              "concurrency (phase: start, seconds; times from the child's first line)")
        for conc in concurrencies:
            with tempfile.TemporaryDirectory(dir=tmp) as home:
                marks = phases(target.url, conc, tmp, target.env(home))
            print(f"  concurrency {conc}")
            whole = marks.pop("whole cli.main")
            inside = [k for k in marks if not k.startswith("imports")]
            marks["rest of cli.main (pick, JSON output)"] = [
                max(s + d for s, d in (marks[k] for k in inside)),
                whole[1] - sum(marks[k][1] for k in inside)]
            for k, (s, d) in sorted(marks.items(), key=lambda kv: kv[1][0]):
                print(f"    {k:38}{s:7.3f}  {d:6.3f}s")
            print(f"    {'cli.main in all':38}{whole[0]:7.3f}  {whole[1]:6.3f}s")
            if "fetch (headers, small files)" in marks:
                fetch = marks["fetch (headers, small files)"][1]
                floor = floor_of("http", n, conc, lat)  # the read rounds, no listing
                what = "(redirect + read)" if target.scheme == "hf" else "2"
                print(f"    fetch / floor {floor:.3f}s (ceil({n} / {conc}) x {what} x "
                      f"{lat:.3f} s)   {verdict(fetch / floor)}")
            if target.scheme == "hf" and "listing" in marks:
                print(f"    listing: {marks['listing'][1]:.3f}s for the API requests "
                      f"(each {lat:.3f} s of latency)")
    except Exception as e:
        errors.append(f"{target.scheme} phases: {e}")
        print(f"{target.scheme} phases: ERROR {e}")


def report_remote(scheme, conc, runs, local_wall, layout, lat):
    n = len(layout)
    wall = median_of(runs, "wall")
    api = round(median_of(runs, "api"))
    floor = floor_of(scheme, n, conc, lat, api)
    last = runs[-1]
    print(f"{scheme} inspect --json --no-cache, concurrency {conc}"
          f"{' (default)' if conc == 16 else ''}")
    print(f"  wall (median)            {wall:6.3f}s   (runs: "
          + ", ".join(f"{r['wall']:.3f}" for r in runs) + ")")
    print(f"  floor                    {floor:6.3f}s   = {floor_text(scheme, n, conc, lat, api)}")
    if scheme == "hf":
        print("                                     (each LFS byte read costs 2 requests: a 302 "
              "from /resolve/ to /cdn-lfs/, then the ranged read, as on the real Hub)")
    print(f"  wall / floor             {verdict(wall / floor)}")
    if local_wall:
        net = wall - local_wall
        print(f"  wall - local baseline    {net:6.3f}s   (the network part)")
        print(f"  (wall - local) / floor   {verdict(net / floor)}")
    print(f"  requests                 {last['requests']:>6}   by method: {methods_text(last)}"
          "; statuses: " + ", ".join(f"{s} x{c}" for s, c in sorted(last["statuses"].items()))
          + f"   (per run: {distribution(r['requests'] for r in runs)})")
    if "kinds" in last:
        print(f"    by kind: {kinds_text(last)}")
    print(f"  bytes sent by server     {last['bytes']:>14,}   (shard headers "
          f"{sum(d for _, d in layout.values()):,})")
    reqs = last["shard_requests"]
    print(f"  requests per shard       max {max(reqs.values())}; shards by count: "
          f"{{{distribution(reqs.values())}}}"
          + (f"; byte reads per shard {{{distribution(last['shard_gets'].values())}}}"
             if scheme == "hf" else ""))
    ratios = sorted(last["shard_bytes"][s] / layout[s][1] for s in layout)
    over = sum(max(0, last["shard_bytes"][s] - layout[s][1]) for s in layout)
    print(f"  bytes per shard / header min {ratios[0]:.2f}, median "
          f"{statistics.median(ratios):.2f}, max {ratios[-1]:.2f}; beyond the headers "
          f"{over:,} B in all")
    into = last["into_data"]
    print(f"  ranges reaching into a data section   {len(into)} of "
          f"{sum(last['shard_gets'].values())} shard reads   "
          f"{'PASS' if not into else 'FAIL'} (must be none)")
    if into:
        s, r, b = into[0]
        print(f"    {sum(x[2] for x in into):,} tensor bytes asked for in all, e.g. {s}: range "
              f"{r}, its data section starts at byte {layout[s][1]:,}: {b:,} B of it")
        print(f"    ranges starting in a data section: {last['starting_in_data']} (the rest is "
              f"the speculative first read running past a shorter header)")
    others = last["others"]
    print("  other paths              " + "; ".join(
        f"{k or '/'} {q} req {b:,} B {rs}" for k, (q, b, rs) in sorted(others.items())))
    tl = [r["timeline"] for r in runs if r.get("timeline")]
    if tl:
        keys = ("first request", "first shard request", "last shard request", "last request",
                "exit")
        print("  request timeline, s from spawn (median; arrivals, server clock): " + "; ".join(
            f"{k} {statistics.median(t[k] for t in tl):.3f}" for k in keys))
        others = tl[-1]["others"]
        print("    other paths requested at (last run): " + "; ".join(
            f"{k} {v:.3f}" for k, v in sorted(others.items(), key=lambda kv: kv[1])))
        per = 2 if scheme == "hf" else 1
        print(f"    shard requests per {lat * 1000:.0f} ms after the first (last run; ideal "
              f"{conc} per slot, {per * math.ceil(n / conc)} slots"
              + (": redirects and reads alternate" if scheme == "hf" else "") + "): "
              + " ".join(str(x) for x in tl[-1]["per slot"]))


def summary(results, reopened, layout, lat, local_wall):
    n = len(layout)
    headers = sum(d for _, d in layout.values())
    print(f"summary (medians; floor: http ceil({n} / c) x 2 x {lat:.3f} s, hf ceil({n} / c) x "
          f"(redirect + read) x {lat:.3f} s + API x {lat:.3f} s; network = remote - local "
          f"baseline {local_wall or float('nan'):.3f} s; headers {headers / n:,.0f} B per shard "
          "on average)")
    print(f"  {'scheme':<7}{'c':>3}{'wall':>8}{'local':>7}{'floor':>7}{'wall/fl':>9}"
          f"{'network':>9}{'net/fl':>8}{'requests':>9}{'API':>5}{'req/shard':>10}"
          f"{'B/shard':>9}{'B/header':>9}{'bytes':>12}{'data':>5}")
    for scheme, by_conc in results.items():
        for conc, runs in by_conc.items():
            wall = median_of(runs, "wall")
            api = round(median_of(runs, "api"))
            floor = floor_of(scheme, n, conc, lat, api)
            net = wall - local_wall if local_wall else float("nan")
            last = runs[-1]
            per_req = sum(last["shard_requests"].values()) / n
            per_b = sum(last["shard_bytes"].values()) / n
            print(f"  {scheme:<7}{conc:>3}{wall:7.3f}s{local_wall or float('nan'):6.3f}s"
                  f"{floor:6.3f}s{wall / floor:8.2f}x{net:8.3f}s{net / floor:7.2f}x"
                  f"{last['requests']:>9}{last['api']:>5}{per_req:>10.2f}{per_b:>9,.0f}"
                  f"{sum(last['shard_bytes'].values()) / headers:>8.2f}x"
                  f"{last['bytes']:>12,}{len(last['into_data']):>5}")
    for scheme, got in reopened.items():
        if got is None:
            continue
        cold, cold_a, reopen = got
        last = reopen[-1]
        print(f"  {scheme:<7}reopen with the cache: {median_of(reopen, 'wall'):.3f}s, "
              f"{last['requests']} requests, {last['bytes']:,} B"
              + (f" ({kinds_text(last)})" if "kinds" in last else f" ({methods_text(last)})")
              + f"; first run into an empty cache {cold:.3f}s, {cold_a['requests']} requests")
    print()


def hub_costs(results, reopened, layout, lat):
    """What hf:// costs on top of http:// at each concurrency both measured."""
    n = len(layout)
    print("what the Hub API costs on top of http (medians; hf - http)")
    for conc in [c for c in results["hf"] if c in results["http"]]:
        hf, http = results["hf"][conc], results["http"][conc]
        a, b = hf[-1], http[-1]
        k = a["kinds"]
        listing_http = sum(q for key, (q, _, _) in b["others"].items()
                           if key in ("", "/") or key.endswith("/"))
        print(f"  concurrency {conc}")
        small_http = sum(q for key, (q, _, _) in b["others"].items()
                         if not (key in ("", "/") or key.endswith("/")))
        shard_http = sum(b["shard_requests"].values())
        small_hf = k["small files read directly"]
        print(f"    requests        {a['requests']} against {b['requests']}: "
              f"{a['requests'] - b['requests']:+d} = listing {a['api'] - listing_http:+d} "
              f"({a['api']} API requests: repo info {k['API repo info']}, tree pages "
              f"{k['API tree pages']}, paths-info {k['API paths-info']}; against "
              f"{listing_http} HTML listing)")
        print(f"                    + redirects +{k['resolve 302 redirects']} (a 302 per LFS "
              f"byte read) + shard reads {k['CDN byte reads'] - shard_http:+d} "
              f"({k['CDN byte reads']} on the CDN against {shard_http}) + small files "
              f"{small_hf - small_http:+d} ({small_hf} direct reads against {small_http}: the "
              f"Hub's listing gives sizes, the HTML one does not) + anything else "
              f"{k['anything else']:+d}")
        print(f"    bytes           {a['bytes']:,} against {b['bytes']:,}: "
              f"{a['bytes'] - b['bytes']:+,} (shards {sum(a['shard_bytes'].values()):,} "
              f"against {sum(b['shard_bytes'].values()):,})")
        wall_hf, wall_http = median_of(hf, "wall"), median_of(http, "wall")
        rounds = math.ceil(n / conc)
        expect = (rounds + max(0, a["api"] - listing_http)) * lat
        print(f"    wall            {wall_hf:.3f}s against {wall_http:.3f}s: "
              f"{wall_hf - wall_http:+.3f}s; the extra latency alone would be "
              f"{expect:.3f}s = ({rounds} read rounds x 1 redirect + "
              f"{max(0, a['api'] - listing_http)} more listing request(s), one after the "
              f"other) x {lat:.3f} s")
        tl_hf = [r["timeline"] for r in hf if r.get("timeline")]
        tl_http = [r["timeline"] for r in http if r.get("timeline")]
        if tl_hf and tl_http:
            def med(tls, key):
                return statistics.median(t[key] for t in tls)

            def span(tls):
                return statistics.median(t["last shard request"] - t["first shard request"]
                                         for t in tls)
            print(f"    first shard asked for at {med(tl_hf, 'first shard request'):.3f}s "
                  f"against {med(tl_http, 'first shard request'):.3f}s from spawn "
                  f"({med(tl_hf, 'first shard request') - med(tl_http, 'first shard request'):+.3f}"
                  f"s: the listing and the small files before the shards)")
            print(f"    shard requests span {span(tl_hf):.3f}s against {span(tl_http):.3f}s "
                  f"({span(tl_hf) - span(tl_http):+.3f}s; the redirects alone add "
                  f"{rounds} x {lat:.3f} = {rounds * lat:.3f}s)")
    got_hf, got_http = reopened.get("hf"), reopened.get("http")
    if got_hf and got_http:
        a, b = got_hf[2][-1], got_http[2][-1]
        print(f"  reopen with the cache: {median_of(got_hf[2], 'wall'):.3f}s against "
              f"{median_of(got_http[2], 'wall'):.3f}s, {a['requests']} requests against "
              f"{b['requests']} ({kinds_text(a)}; http: {methods_text(b)})")
    print()


def phases(url, conc, tmp, env=None):
    out = os.path.join(tmp, "phases.json")
    argv = ["inspect", url, "--json", "--no-cache"] + (["--concurrency", str(conc)]
                                                       if conc != 16 else [])
    env = dict(env or ENV, CKPT_BROWSER_CACHE=os.path.join(tmp, "phases-cache"))
    p = subprocess.run([PY, "-c", PHASES, out, *argv], capture_output=True, text=True, env=env,
                       cwd=CWD)
    if p.returncode != 0:
        raise RuntimeError(f"instrumented run failed:\n{p.stderr[-2000:]}")
    r = json.loads(p.stderr.strip().splitlines()[-1])
    if r["rc"] not in (0, None):
        raise RuntimeError(f"instrumented run returned {r['rc']}: {p.stderr[-1000:]}")
    return r["marks"]


if __name__ == "__main__":
    sys.exit(main())
