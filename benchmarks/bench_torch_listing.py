"""Listing a ~1 GB torch.save optimizer file: our restricted reader vs torch.load.

Usage: python benchmarks/bench_torch_listing.py [--workdir DIR] [--reps N]

Builds (once) $TMPDIR/ckpt-browser-bench/optimizer.pt: a real AdamW state_dict after one step over four
8192x4096 Linear layers (12 tensors, ~1.07 GB). Then, each run in a fresh process, median of N:
  - ours: ckpt_browser.readers.torchfile.read_pickle_file (no torch import)
  - torch.load(weights_only=True): the full load
  - torch.load(weights_only=True, mmap=True, map_location="meta"): torch's cheapest listing
for wall time (whole process, and the load call alone), peak RSS (RUSAGE_CHILDREN of a wrapper),
bytes read (/proc/self/io rchar at the end of the child: whole process, including the
interpreter's own files; and the load call's share alone), warm (file in the page cache) and cold
(page cache dropped for that file with posix_fadvise DONTNEED before each run), and the ratios.
It also checks that every method lists the same tensors. It prints; it does not assert.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PY = sys.executable
ENV = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))

BUILD = r"""
import sys, torch
torch.manual_seed(0)
model = torch.nn.Sequential(*[torch.nn.Linear(4096, 8192, bias=False) if i % 2 == 0 else
                              torch.nn.Linear(8192, 4096, bias=False) for i in range(4)])
opt = torch.optim.AdamW(model.parameters())
model(torch.randn(2, 4096)).sum().backward()
opt.step()
torch.save(opt.state_dict(), sys.argv[1])
"""

# The measured child: prints what it listed, the time of the load call and its rchar.
CHILD = r"""
import json, sys, time
def rchar():
    with open("/proc/self/io") as f:
        return int(dict(line.split(": ") for line in f.read().splitlines())["rchar"])
method, path = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
if method == "ours":
    from ckpt_browser.readers.torchfile import read_pickle_file
    t1, r1 = time.perf_counter(), rchar()
    pf = read_pickle_file(path, "optimizer.pt")
    t2, r2 = time.perf_counter(), rchar()
    listed = sorted([p, t.dtype, list(t.shape)] for p, t in pf.tensors)
    problems = [p.line() for p in pf.problems]
else:
    import torch
    t1, r1 = time.perf_counter(), rchar()
    extra = {"mmap": True, "map_location": "meta"} if method == "meta" else {}
    obj = torch.load(path, weights_only=True, **extra)
    t2, r2 = time.perf_counter(), rchar()
    tags = {torch.float32: "F32", torch.int64: "I64"}
    listed = sorted([f"state.{k}.{n}", tags[t.dtype], list(t.shape)]
                    for k, s in obj["state"].items() for n, t in s.items())
    problems = []
print(json.dumps({"import": t1 - t0, "load": t2 - t1, "rchar": rchar(), "load_rchar": r2 - r1,
                  "listed": listed, "problems": problems, "torch": "torch" in sys.modules}))
"""

# Runs the child once, optionally after dropping the file from the page cache, so that
# RUSAGE_CHILDREN holds only the child's peak RSS.
TIMER = r"""
import json, os, resource, subprocess, sys, time
cold, path, cmd = sys.argv[1] == "cold", sys.argv[2], sys.argv[3:]
if cold:
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
t = time.perf_counter()
p = subprocess.run(cmd, capture_output=True, text=True)
wall = time.perf_counter() - t
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
if p.returncode:
    sys.exit(p.stderr[-2000:])
print(json.dumps({"wall": wall, "rss_kb": rss, **json.loads(p.stdout)}))
"""

METHODS = {
    "ours": "ours: read_pickle_file (restricted unpickler, no torch)",
    "full": "torch.load(weights_only=True)",
    "meta": "torch.load(weights_only=True, mmap=True, map_location='meta')",
}


def build(path: str) -> None:
    if os.path.exists(path):
        return
    print(f"building {path} (one AdamW step over 4 Linear layers) ...", flush=True)
    tmp = path + ".tmp"
    subprocess.run([PY, "-c", BUILD, tmp], check=True, env=ENV)
    os.replace(tmp, path)


def run(method: str, path: str, cache: str) -> dict:
    p = subprocess.run([PY, "-c", TIMER, cache, path, PY, "-c", CHILD, method, path],
                       capture_output=True, text=True, env=ENV, cwd=REPO)
    if p.returncode:
        raise RuntimeError(f"{method} failed:\n{p.stderr[-2000:]}")
    return json.loads(p.stdout)


def median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def main() -> int:
    ap = argparse.ArgumentParser()
    # Outside the repository: a `cp -r` of the repo would turn the sparse files into
    # hundreds of GB of zeros.
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "ckpt-browser-bench"))
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    path = os.path.join(args.workdir, "optimizer.pt")
    build(path)
    size = os.path.getsize(path)
    print(f"file: {path} ({size / 2**30:.2f} GiB); median of {args.reps} fresh processes\n")

    results: dict[tuple[str, str], dict] = {}
    for cache in ("warm", "cold"):
        for method in METHODS:
            if cache == "warm":
                run(method, path, "warm")  # fill the page cache; not counted
            runs = [run(method, path, cache) for _ in range(args.reps)]
            results[method, cache] = {
                "wall": median(runs, "wall"), "load": median(runs, "load"),
                "rss": median(runs, "rss_kb") / 1024, "read": median(runs, "rchar") / 2**20,
                "load_read": median(runs, "load_rchar") / 2**20,
                "listed": runs[0]["listed"], "problems": runs[0]["problems"],
                "torch": runs[0]["torch"]}

    head = f"{'method':64} {'cache':5} {'process s':>9} {'load ms':>9} {'peak RSS MB':>11} " \
           f"{'read MB':>9} {'load read MB':>12} torch"
    print(head)
    print("-" * len(head))
    for (method, cache), r in results.items():
        print(f"{METHODS[method]:64} {cache:5} {r['wall']:9.3f} {r['load'] * 1e3:9.1f} "
              f"{r['rss']:11.1f} {r['read']:9.2f} {r['load_read']:12.4f} "
              f"{'yes' if r['torch'] else 'no'}")

    print("\nratios (torch method / ours; higher means ours is cheaper)")
    for cache in ("warm", "cold"):
        ours = results["ours", cache]
        for method in ("full", "meta"):
            r = results[method, cache]
            print(f"  {cache} {METHODS[method]:62} process {r['wall'] / ours['wall']:6.1f}x  "
                  f"load {r['load'] / ours['load']:8.1f}x  RSS {r['rss'] / ours['rss']:5.1f}x  "
                  f"read {r['read'] / max(ours['read'], 1e-9):6.1f}x  "
                  f"load read {r['load_read'] / max(ours['load_read'], 1e-9):9.1f}x")

    same = all(r["listed"] == results["ours", "warm"]["listed"] for r in results.values())
    print(f"\nall methods list the same {len(results['ours', 'warm']['listed'])} tensors "
          f"(path, dtype, shape): {'yes' if same else 'NO'}")
    problems = results["ours", "warm"]["problems"]
    print(f"problems reported by ours: {problems or 'none'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
