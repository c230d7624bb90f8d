"""Benchmark `inspect --json` on a remote checkpoint: the 163-shard sparse DeepSeek-V3-shaped
checkpoint served over HTTP with 20 ms added latency per request.

Usage: python benchmarks/bench_remote.py [--workdir DIR] [--reps N] [--latency S]
                                         [--concurrency 16,32,8] [--backlog N] [--nagle] [--keep]

The checkpoint comes from benchmarks/make_moe_checkpoint.py (reused if present; deleted at the
end only if this run built it, unless --keep). It is served in this process by the counting,
Range-honouring server of tests/remote/range_server.py, with `latency` seconds slept before
every response; its listen queue is raised to 128 and Nagle's algorithm turned off, as in
production servers (--backlog 0 and --nagle keep http.server's defaults, which add 1 s SYN
retries above 5 simultaneous connects and up to 40 ms delayed-ACK waits on small bodies).
In one run:
  - `inspect URL --json --no-cache` in fresh processes (CKPT_BROWSER_CACHE and TMPDIR in temp
    dirs), median of --reps runs after one warm-up, for each --concurrency: wall time; requests
    by method; bytes the server sent; requests and bytes per shard against the shard's header
    size; any requested range that reaches into a shard's data section (the tensor bytes); the
    issue's floor ceil(163 / concurrency) x 2 x latency and wall / floor (target <= 2x);
  - the baseline measured in the same run: the same `inspect --json` on the local folder (no
    server, pure parsing), so the network part (wall remote - wall local) can be set against the
    floor too;
  - reopening with the cache (no --no-cache): a first run fills a fresh cache, then --reps runs
    reuse it: requests, bytes and wall;
  - that the remote JSON equals the local JSON except "path" (which must be the URL);
  - where the time goes: the server's request timeline (arrival times, same clock as the
    parent's spawn and exit), and one instrumented in-process run per concurrency timing the
    phases (imports, opening the filesystem, listing, fetching, parsing, training state, output).
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
import time

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
import ckpt_browser.readers as readers
import ckpt_browser.remote.fs as rfs
import ckpt_browser.remote.mirror as mirror
marks["imports (readers, mirror)"] = [marks["imports (cli)"][1], time.perf_counter() - t0
                                      - marks["imports (cli)"][1]]
timed(rfs, "open_fs", "open filesystem (fsspec, aiohttp)")
timed(mirror._Mirror, "listing", "listing")
timed(mirror._Mirror, "fetch", "fetch (headers, small files)")
timed(readers, "open_checkpoint", "parse (open_checkpoint)")
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


def run_inspect(target, out_path, cache, no_cache=True, concurrency=None, tmpdir=None):
    """One fresh `python -m ckpt_browser inspect TARGET --json`: (wall, monotonic start, end)."""
    cmd = [PY, "-m", "ckpt_browser", "inspect", target, "--json"]
    if no_cache:
        cmd.append("--no-cache")
    if concurrency is not None and concurrency != 16:  # 16: the default, left unsaid
        cmd += ["--concurrency", str(concurrency)]
    env = dict(ENV, CKPT_BROWSER_CACHE=cache)
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # Outside the repository: a `cp -r` of the repo would turn the sparse files into
    # hundreds of GB of zeros.
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "ckpt-browser-bench"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--latency", type=float, default=0.020,
                    help="seconds the server sleeps before each response (default 0.020)")
    ap.add_argument("--concurrency", default="16,32,8",
                    help="comma-separated --concurrency values (default 16,32,8)")
    ap.add_argument("--backlog", type=int, default=128,
                    help="the server's listen queue (default 128; 0 leaves socketserver's 5, "
                    "which drops connections when more than 5 arrive at once: the client "
                    "retries after 1 s)")
    ap.add_argument("--nagle", action="store_true",
                    help="leave Nagle's algorithm on in the server (http.server's default): a "
                    "small body written after the headers then waits for the client's delayed "
                    "ACK, up to 40 ms more per request; off by default, as real servers do")
    ap.add_argument("--keep", action="store_true",
                    help="keep the sparse checkpoint even if this run built it")
    args = ap.parse_args()
    if not args.latency > 0:
        ap.error("--latency must be above 0 (the floor is counted in round trips of it)")
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
    print(f"server       tests/remote/range_server.py in this process, latency {lat * 1000:.0f} ms "
          f"per request, listen queue {args.backlog or 5}, TCP_NODELAY "
          f"{'off' if args.nagle else 'on'}")
    print(f"python       {PY}")
    which = subprocess.run([PY, "-c", "import ckpt_browser; print(ckpt_browser.__file__)"],
                           capture_output=True, text=True, env=ENV, cwd=CWD).stdout.strip()
    print(f"ckpt_browser {os.path.dirname(which)}")
    print(f"             median of {args.reps} fresh processes after one warm-up; "
          f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f}")
    print()

    tmp = tempfile.mkdtemp(prefix="bench-remote-", dir=args.workdir)
    # Two settings of http.server that no production server shares, set on the classes
    # (tests/remote/range_server.py is left as it is).
    import range_server

    if args.backlog:
        range_server._Server.request_queue_size = args.backlog
    range_server._Handler.disable_nagle_algorithm = not args.nagle
    srv = RangeServer(ckpt).configure(latency=lat).start()
    overflows0 = listen_overflows()
    url = srv.url_for("")
    try:
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

        # -- remote, --no-cache, per concurrency -------------------------------------------------
        remote_out = os.path.join(tmp, "remote.json")
        results = {}
        for conc in concurrencies:
            floor = math.ceil(n / conc) * 2 * lat
            try:
                with tempfile.TemporaryDirectory(dir=tmp) as cache, \
                        tempfile.TemporaryDirectory(dir=tmp) as child_tmp:
                    run_inspect(url, remote_out, cache, concurrency=conc)  # warm-up
                    runs = []
                    leftover = 0
                    for _ in range(args.reps):
                        srv.reset_counters()
                        wall, start, end = run_inspect(url, remote_out, cache, concurrency=conc,
                                                       tmpdir=child_tmp)
                        a = analyse(srv.counters(), layout)
                        a["wall"] = wall
                        a["timeline"] = timeline(list(srv.log), start, end, lat, layout)
                        runs.append(a)
                        leftover += len(os.listdir(cache)) + len(os.listdir(child_tmp))
                remote_doc = json.load(open(remote_out))
                results[conc] = runs
                report_remote(conc, runs, floor, local_wall, layout, lat)
                print(f"  --no-cache left behind    {leftover} entries in CKPT_BROWSER_CACHE and "
                      f"TMPDIR   {'PASS' if not leftover else 'FAIL'}")
                if local_doc is not None:
                    diff = first_difference(strip_path(local_doc), strip_path(remote_doc))
                    print("  same JSON as local (except path): "
                          + ("yes" if diff is None else "NO, first at " + diff)
                          + f"; path {remote_doc.get('path')!r}"
                          + ("" if remote_doc.get("path") == url.rstrip("/") or
                             remote_doc.get("path") == url else "  (not the URL)"))
            except Exception as e:
                errors.append(f"remote, concurrency {conc}: {e}")
                print(f"remote, concurrency {conc}: ERROR {e}")
            print()

        # -- reopening with the cache ----------------------------------------------------------
        try:
            with tempfile.TemporaryDirectory(dir=tmp) as cache:
                srv.reset_counters()
                cold, _, _ = run_inspect(url, remote_out, cache, no_cache=False)
                cold_a = analyse(srv.counters(), layout)
                reopen = []
                for _ in range(args.reps):
                    srv.reset_counters()
                    wall, _, _ = run_inspect(url, remote_out, cache, no_cache=False)
                    a = analyse(srv.counters(), layout)
                    a["wall"] = wall
                    reopen.append(a)
                cached_doc = json.load(open(remote_out))
                cache_kb = int(subprocess.run(["du", "-sk", cache], capture_output=True,
                                              text=True, check=True).stdout.split()[0])
            med = statistics.median(r["wall"] for r in reopen)
            print("with the cache (no --no-cache; default concurrency 16)")
            def methods(a):
                return ", ".join(f"{m} {c}" for m, c in sorted(a["methods"].items()))

            print(f"  first run, empty cache   {cold:6.3f}s  {cold_a['requests']:>4} requests "
                  f"({methods(cold_a)}) {cold_a['bytes']:>12,} B")
            last = reopen[-1]
            print(f"  reopen (median)          {med:6.3f}s  {last['requests']:>4} requests "
                  f"({methods(last)}) {last['bytes']:>12,} B   (runs: "
                  + ", ".join(f"{r['wall']:.3f}" for r in reopen) + ")")
            refetched = sum(1 for v in last["shard_gets"].values() if v)
            print(f"  shards read again (GET) on reopen: {refetched} of {n}; other paths: "
                  + "; ".join(f"{k or '/'} {q} req {b:,} B"
                              for k, (q, b, _) in sorted(last["others"].items())))
            if local_wall:
                print(f"  reopen / local baseline  {med / local_wall:5.2f}x   "
                      f"(reopen - local: {med - local_wall:+.3f}s)")
            print(f"  cache on disk (du)       {cache_kb / 1024:.1f} MiB")
            if local_doc is not None:
                diff = first_difference(strip_path(local_doc), strip_path(cached_doc))
                print("  same JSON as local (except path): "
                      + ("yes" if diff is None else "NO, first at " + diff))
        except Exception as e:
            errors.append(f"cache: {e}")
            print(f"cache: ERROR {e}")
        print()

        # -- where the time goes: instrumented runs ----------------------------------------------
        try:
            print("where the time goes: one instrumented in-process run per concurrency "
                  "(phase: start, seconds; times from the child's first line)")
            for conc in concurrencies:
                marks = phases(url, conc, tmp)
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
                    floor = math.ceil(n / conc) * 2 * lat
                    print(f"    fetch / floor {floor:.3f}s                     "
                          f"{verdict(fetch / floor)}")
        except Exception as e:
            errors.append(f"phases: {e}")
            print(f"phases: ERROR {e}")
        if results:
            print(f"summary (medians; floor = ceil({n} / c) x 2 x {lat:.3f} s; network = remote "
                  f"- local baseline {local_wall or float('nan'):.3f} s)")
            print(f"  {'c':>3}{'wall':>8}{'floor':>7}{'wall/floor':>12}{'network':>9}"
                  f"{'net/floor':>11}{'requests':>10}{'bytes':>13}{'data ranges':>13}")
            for conc, runs in results.items():
                wall = statistics.median(r["wall"] for r in runs)
                floor = math.ceil(n / conc) * 2 * lat
                net = wall - local_wall if local_wall else float("nan")
                last = runs[-1]
                print(f"  {conc:>3}{wall:7.3f}s{floor:6.2f}s{wall / floor:11.2f}x{net:8.3f}s"
                      f"{net / floor:10.2f}x{last['requests']:>10}{last['bytes']:>13,}"
                      f"{len(last['into_data']):>13}")
        overflows = listen_overflows()
        if overflows is not None and overflows0 is not None:
            print()
            print(f"listen-queue overflows during this run (host-wide, /proc/net/netstat): "
                  f"{overflows - overflows0}")
    finally:
        srv.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    if errors:
        print("\nerrors:\n  " + "\n  ".join(errors), file=sys.stderr)
        return 1
    return 0


def report_remote(conc, runs, floor, local_wall, layout, lat):
    n = len(layout)
    wall = statistics.median(r["wall"] for r in runs)
    last = runs[-1]
    print(f"remote inspect --json --no-cache, concurrency {conc}"
          f"{' (default)' if conc == 16 else ''}")
    print(f"  wall (median)            {wall:6.3f}s   (runs: "
          + ", ".join(f"{r['wall']:.3f}" for r in runs) + ")")
    print(f"  floor                    {floor:6.3f}s   = ceil({n} / {conc}) x 2 x {lat:.3f} s")
    print(f"  wall / floor             {verdict(wall / floor)}")
    if local_wall:
        net = wall - local_wall
        print(f"  wall - local baseline    {net:6.3f}s   (the network part)")
        print(f"  (wall - local) / floor   {verdict(net / floor)}")
    print(f"  requests                 {last['requests']:>6}   by method: "
          + ", ".join(f"{m} {c}" for m, c in sorted(last["methods"].items()))
          + "; statuses: " + ", ".join(f"{s} x{c}" for s, c in sorted(last["statuses"].items()))
          + f"   (per run: {distribution(r['requests'] for r in runs)})")
    print(f"  bytes sent by server     {last['bytes']:>14,}   (shard headers "
          f"{sum(d for _, d in layout.values()):,})")
    reqs = last["shard_requests"]
    print(f"  requests per shard       max {max(reqs.values())}; shards by count: "
          f"{{{distribution(reqs.values())}}}")
    ratios = sorted(last["shard_bytes"][s] / layout[s][1] for s in layout)
    over = sum(max(0, last["shard_bytes"][s] - layout[s][1]) for s in layout)
    print(f"  bytes per shard / header min {ratios[0]:.2f}, median "
          f"{statistics.median(ratios):.2f}, max {ratios[-1]:.2f}; beyond the headers "
          f"{over:,} B in all")
    into = last["into_data"]
    print(f"  ranges reaching into a data section   {len(into)} of {sum(reqs.values())} shard "
          f"requests   {'PASS' if not into else 'FAIL'} (must be none)")
    if into:
        s, r, b = into[0]
        print(f"    {sum(x[2] for x in into):,} tensor bytes asked for in all, e.g. {s}: range "
              f"{r}, its data section starts at byte {layout[s][1]:,}: {b:,} B of it")
        print(f"    ranges starting in a data section: {last['starting_in_data']} (the rest is "
              f"the speculative first read running past a shorter header)")
    others = last["others"]
    print("  other paths              " + "; ".join(
        f"{k or '/'} {q} req {b:,} B {rs}" for k, (q, b, rs) in sorted(others.items())))
    tl = [r["timeline"] for r in runs if r["timeline"]]
    if tl:
        keys = ("first request", "first shard request", "last shard request", "last request",
                "exit")
        print("  request timeline, s from spawn (median; server clock): " + "; ".join(
            f"{k} {statistics.median(t[k] for t in tl):.3f}" for k in keys))
        others = tl[-1]["others"]
        print("    other paths requested at (last run): " + "; ".join(
            f"{k} {v:.3f}" for k, v in sorted(others.items(), key=lambda kv: kv[1])))
        print(f"    shard requests per {lat * 1000:.0f} ms after the first (last run; ideal "
              f"{conc} per slot, {math.ceil(n / conc)} slots): "
              + " ".join(str(x) for x in tl[-1]["per slot"]))


def phases(url, conc, tmp):
    out = os.path.join(tmp, "phases.json")
    argv = ["inspect", url, "--json", "--no-cache"] + (["--concurrency", str(conc)]
                                                       if conc != 16 else [])
    env = dict(ENV, CKPT_BROWSER_CACHE=os.path.join(tmp, "phases-cache"))
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
