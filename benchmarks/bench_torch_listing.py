"""Listing ~1 GB torch.save files: our restricted reader and `inspect --json` vs torch.load.

Usage: python benchmarks/bench_torch_listing.py [--workdir DIR] [--reps N]

Builds (once) two files under $TMPDIR/ckpt-browser-bench:
  - optimizer.pt: a real AdamW state_dict after one step over four 8192x4096 Linear layers
    (12 tensors, ~1.07 GB);
  - custom-run/ckpt_epoch3.pt: a single-file checkpoint as a custom training loop writes it,
    torch.save({"model": model.state_dict(), "optimizer": AdamW state_dict after one real step,
    "scheduler": OneCycleLR state_dict, "rng": {"torch": torch.get_rng_state(), "numpy":
    np.random.get_state(), "python": random.getstate()}, "epoch": 3, "step": 1200}), over three
    4096<->7168 Linear layers with biases (88M parameters: weights ~0.35 GB, exp_avg and
    exp_avg_sq ~0.70 GB; 25 tensors, ~1.06 GB).
Then, each run in a fresh process, median of N:
  - ours: ckpt_browser.readers.torchfile.read_pickle_file (no torch import)
  - ours, for the custom checkpoint also the whole product path: ckpt_browser.cli.main(["inspect",
    "--json", FILE]) (opens the file, classifies what it holds, prints the JSON; no torch import;
    its load call includes the modules the command imports on first use)
  - torch.load(weights_only=True): the full load
  - torch.load(weights_only=True, mmap=True, map_location="meta"): torch's cheapest listing
(for the custom checkpoint both torch loads run under torch.serialization.safe_globals with the
numpy globals that np.random.get_state() needs, as sample_checkpoints/README.md describes)
for wall time (whole process, and the load call alone), peak RSS (RUSAGE_CHILDREN of a wrapper),
bytes read (/proc/self/io rchar at the end of the child: whole process, including the
interpreter's own files; and the load call's share alone), warm (file in the page cache) and cold
(page cache dropped for that file with posix_fadvise DONTNEED before each run), and the ratios.
It also checks that every method lists the same tensors (path, dtype, shape), that `inspect`
ran without torch, and that it puts each tensor in the right component. It prints; it does not
assert (the exit status is non-zero only if something failed or disagreed).
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

BUILD_OPTIMIZER = r"""
import sys, torch
torch.manual_seed(0)
model = torch.nn.Sequential(*[torch.nn.Linear(4096, 8192, bias=False) if i % 2 == 0 else
                              torch.nn.Linear(8192, 4096, bias=False) for i in range(4)])
opt = torch.optim.AdamW(model.parameters())
model(torch.randn(2, 4096)).sum().backward()
opt.step()
torch.save(opt.state_dict(), sys.argv[1])
"""

# A custom loop's checkpoint after one real step (the counters are what such a loop would have
# saved at epoch 3, step 1200; the file's bytes are the same either way).
BUILD_CUSTOM = r"""
import random, sys
import numpy as np
import torch
random.seed(0); np.random.seed(0); torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4096, 7168), torch.nn.GELU(),
                            torch.nn.Linear(7168, 4096), torch.nn.GELU(),
                            torch.nn.Linear(4096, 7168))
opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-4, total_steps=4000)
x, y = torch.randn(2, 4096), torch.randn(2, 7168)
torch.nn.functional.mse_loss(model(x), y).backward()
opt.step()
sched.step()
np.random.rand(3); random.random()  # the loop drew from every generator
torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
            "scheduler": sched.state_dict(),
            "rng": {"torch": torch.get_rng_state(), "numpy": np.random.get_state(),
                    "python": random.getstate()},
            "epoch": 3, "step": 1200}, sys.argv[1])
"""

# The measured child: prints what it listed, the time of the load call and its rchar.
CHILD = r"""
import json, sys, time
def rchar():
    with open("/proc/self/io") as f:
        return int(dict(line.split(": ") for line in f.read().splitlines())["rchar"])
method, path, name, allow_numpy = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
extra_out = {}
t0 = time.perf_counter()
if method == "ours":
    from ckpt_browser.readers.torchfile import read_pickle_file
    t1, r1 = time.perf_counter(), rchar()
    pf = read_pickle_file(path, name)
    t2, r2 = time.perf_counter(), rchar()
    listed = sorted([p, t.dtype, list(t.shape)] for p, t in pf.tensors)
    problems = [p.line() for p in pf.problems]
elif method == "cli":
    import contextlib, io
    from ckpt_browser.cli import main
    out = io.StringIO()
    t1, r1 = time.perf_counter(), rchar()
    with contextlib.redirect_stdout(out):
        code = main(["inspect", "--json", path])
    t2, r2 = time.perf_counter(), rchar()
    doc = json.loads(out.getvalue())
    listed = sorted([t["name"], t["dtype"], list(t["shape"])] for t in doc["tensors"])
    problems = [p if isinstance(p, str) else p.get("message", p) for p in doc["problems"]]
    def expected(n):
        return ("weights" if n.startswith("model.") else "optimizer" if n.startswith("optimizer.")
                else "rng" if n.startswith("rng.") else "?")
    extra_out = {
        "exit": code, "json_bytes": len(out.getvalue()),
        "misplaced": [[t["name"], t["component"], expected(t["name"])] for t in doc["tensors"]
                      if t["component"] != expected(t["name"])],
        "components": {k: c["status"] for k, c in doc["components"].items()},
        "details": {k: c["detail"] for k, c in doc["components"].items()},
        "framework": doc.get("framework"), "step": doc.get("step"), "epoch": doc.get("epoch")}
else:
    import torch
    allowed = []
    if allow_numpy:
        import numpy as np
        allowed = [np._core.multiarray._reconstruct, np.ndarray, np.dtype,
                   type(np.dtype(np.uint32))]
    t1, r1 = time.perf_counter(), rchar()
    extra = {"mmap": True, "map_location": "meta"} if method == "meta" else {}
    with torch.serialization.safe_globals(allowed):
        obj = torch.load(path, weights_only=True, **extra)
    t2, r2 = time.perf_counter(), rchar()
    tags = {torch.float32: "F32", torch.int64: "I64", torch.uint8: "U8", torch.float16: "F16",
            torch.bfloat16: "BF16", torch.float64: "F64", torch.int32: "I32"}
    def tensors(node, prefix):
        if isinstance(node, torch.Tensor):
            yield prefix, node
        elif isinstance(node, dict):
            for k, v in node.items():
                yield from tensors(v, f"{prefix}.{k}" if prefix else str(k))
        elif isinstance(node, (list, tuple)):
            for i, v in enumerate(node):
                yield from tensors(v, f"{prefix}.{i}" if prefix else str(i))
    listed = sorted([p, tags.get(t.dtype, str(t.dtype)), list(t.shape)]
                    for p, t in tensors(obj, ""))
    problems = []
print(json.dumps({"import": t1 - t0, "load": t2 - t1, "rchar": rchar(), "load_rchar": r2 - r1,
                  "listed": listed, "problems": problems, "torch": "torch" in sys.modules,
                  **extra_out}))
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
    "cli": "ours: inspect --json (the whole command, no torch)",
    "full": "torch.load(weights_only=True)",
    "meta": "torch.load(weights_only=True, mmap=True, map_location='meta')",
}

# name, file under the workdir, build script, what the build does, methods, numpy allowlist
CASES = [
    ("optimizer", "optimizer.pt", BUILD_OPTIMIZER, "one AdamW step over 4 Linear layers",
     ("ours", "full", "meta"), False),
    ("custom", os.path.join("custom-run", "ckpt_epoch3.pt"), BUILD_CUSTOM,
     "a custom loop's checkpoint: model, AdamW after one step, OneCycleLR, RNG, counters",
     ("ours", "cli", "full", "meta"), True),
]


def build(path: str, script: str, what: str) -> None:
    if os.path.exists(path):
        return
    print(f"building {path} ({what}) ...", flush=True)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    subprocess.run([PY, "-c", script, tmp], check=True, env=ENV)
    os.replace(tmp, path)


def run(method: str, path: str, cache: str, allow_numpy: bool) -> dict:
    p = subprocess.run([PY, "-c", TIMER, cache, path, PY, "-c", CHILD, method, path,
                        os.path.basename(path), "1" if allow_numpy else "0"],
                       capture_output=True, text=True, env=ENV, cwd=REPO)
    if p.returncode:
        raise RuntimeError(f"{method} failed:\n{p.stderr[-2000:]}")
    return json.loads(p.stdout)


def median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def bench(path: str, methods: tuple, allow_numpy: bool, reps: int) -> dict:
    results: dict[tuple[str, str], dict] = {}
    for cache in ("warm", "cold"):
        for method in methods:
            if cache == "warm":
                run(method, path, "warm", allow_numpy)  # fill the page cache; not counted
            runs = [run(method, path, cache, allow_numpy) for _ in range(reps)]
            results[method, cache] = {
                "wall": median(runs, "wall"), "load": median(runs, "load"),
                "rss": median(runs, "rss_kb") / 1024, "read": median(runs, "rchar") / 2**20,
                "load_read": median(runs, "load_rchar") / 2**20,
                **{k: v for k, v in runs[0].items() if k not in ("wall", "load", "rss_kb",
                                                                "rchar", "load_rchar", "import")}}
    return results


def x(theirs: float, ours: float, width: int) -> str:
    """A ratio; below 1 (torch cheaper) with two decimals, so that it does not print as 0.0x."""
    r = theirs / max(ours, 1e-9)
    return f"{r:{width}.{2 if r < 1 else 1}f}x"


def report(results: dict, ours_methods: tuple) -> bool:
    head = f"{'method':64} {'cache':5} {'process s':>9} {'load ms':>9} {'peak RSS MB':>11} " \
           f"{'read MB':>9} {'load read MB':>12} torch"
    print(head)
    print("-" * len(head))
    for (method, cache), r in results.items():
        print(f"{METHODS[method]:64} {cache:5} {r['wall']:9.3f} {r['load'] * 1e3:9.1f} "
              f"{r['rss']:11.1f} {r['read']:9.2f} {r['load_read']:12.4f} "
              f"{'yes' if r['torch'] else 'no'}")

    for ours_method in ours_methods:
        print(f"\nratios (torch method / {METHODS[ours_method]}; higher means ours is cheaper)")
        for cache in ("warm", "cold"):
            ours = results[ours_method, cache]
            for method in ("full", "meta"):
                r = results[method, cache]
                print(f"  {cache} {METHODS[method]:62} process {x(r['wall'], ours['wall'], 6)}  "
                      f"load {x(r['load'], ours['load'], 8)}  RSS {x(r['rss'], ours['rss'], 5)}  "
                      f"read {x(r['read'], ours['read'], 6)}  "
                      f"load read {x(r['load_read'], ours['load_read'], 9)}")

    same = all(r["listed"] == results["ours", "warm"]["listed"] for r in results.values())
    print(f"\nall methods list the same {len(results['ours', 'warm']['listed'])} tensors "
          f"(path, dtype, shape): {'yes' if same else 'NO'}")
    if not same:
        for (method, cache), r in results.items():
            print(f"  {method} {cache}: {r['listed']}")
    problems = results["ours", "warm"]["problems"]
    print(f"problems reported by ours: {problems or 'none'}")
    ok = same
    if "cli" in ours_methods:
        cli = [r for (m, _), r in results.items() if m == "cli"]
        no_torch = not any(r["torch"] for r in cli)
        misplaced = [x for r in cli for x in r["misplaced"]]
        exits = sorted({r["exit"] for r in cli})
        c = cli[0]
        print(f"inspect --json: exit {exits}, {c['json_bytes']:,} bytes of JSON, torch imported: "
              f"{'NO (good)' if no_torch else 'YES'}; framework {c['framework']}, "
              f"step {c['step']}, epoch {c['epoch']}")
        print(f"  components: {', '.join(f'{k} {v}' for k, v in c['components'].items())}")
        for k, detail in c["details"].items():
            print(f"    {k}: {detail}")
        print(f"  tensors in the wrong component (name, reported, expected): {misplaced or 'none'}")
        print(f"  problems reported by inspect: {c['problems'] or 'none'}")
        ok = ok and no_torch and not misplaced and exits == [0]
    return ok


def main() -> int:
    ap = argparse.ArgumentParser()
    # Outside the repository: a `cp -r` of the repo would turn the sparse files into
    # hundreds of GB of zeros.
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "ckpt-browser-bench"))
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    paths = []
    for _, rel, script, what, _, _ in CASES:
        paths.append(os.path.join(args.workdir, rel))
        build(paths[-1], script, what)

    ok = True
    for (name, _, _, _, methods, allow_numpy), path in zip(CASES, paths):
        size = os.path.getsize(path)
        print(f"\n=== {name}: {path} ({size / 2**30:.2f} GiB); "
              f"median of {args.reps} fresh processes\n")
        results = bench(path, methods, allow_numpy, args.reps)
        ok = report(results, tuple(m for m in methods if m in ("ours", "cli"))) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
