"""Check that `stats` on one tensor of the 688 GB sparse checkpoint reads that tensor and no more.

Usage: python benchmarks/bench_stats_sparse.py [--workdir DIR] [--tensor NAME] [--reps N] [--keep]

Uses the sparse DeepSeek-V3-shaped checkpoint of benchmarks/make_moe_checkpoint.py (163
shards, ~92,000 tensors; tensor bytes are holes, so they read back as zeros without touching
the disk). Each measurement is a fresh child that calls ckpt_browser.cli.main([...]) and then
reports its own /proc/self/io rchar (bytes passed by read-like syscalls: files, pipes, the
.py/.pyc files of every import) and wall time. Measured:
  - `stats CKPT NAME --json` on one large tensor (default the 132 MB FP8 dense MLP weight);
  - `stats CKPT model.norm.weight --json`: the same imports, the same opening of the
    checkpoint (index + every shard header), but a 14 KB tensor: the fair baseline;
  - `inspect --json` (opens the checkpoint), and the bare imports, for context.
extra bytes = rchar(stats NAME) - rchar(stats model.norm.weight), against the tensor's nbytes
minus the small tensor's (target: within a few percent). It reports; it does not assert. The
checkpoint (about 20 MB on disk) is deleted at the end only if this run built it, unless --keep.
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
SMALL = "model.norm.weight"
DEFAULT_TENSOR = "model.layers.0.mlp.gate_proj.weight"
TARGET = 0.03  # "within a few percent"

# argv: out_path, then ckpt_browser.cli.main's argv ("imports": only the imports stats makes).
# Prints {"rc", "rchar", "syscr", "wall", "rss" (KiB)} on stderr's last line; stdout goes to
# out_path.
PROBE = r"""
import json, os, resource, sys, time
t = time.perf_counter()
out = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
os.dup2(out, 1)
import ckpt_browser.cli
rc = None
if sys.argv[2] in ("stats", "imports"):
    import ckpt_browser.values.diff, ckpt_browser.values.stats  # what cmd_stats imports
if sys.argv[2] != "imports":
    try:
        rc = ckpt_browser.cli.main(sys.argv[2:])
    except SystemExit as e:
        rc = e.code
    sys.stdout.flush()
wall = time.perf_counter() - t
io = dict(line.split(": ") for line in open("/proc/self/io").read().splitlines())
sys.stderr.write("\n" + json.dumps({"rc": rc, "rchar": int(io["rchar"]),
                                    "syscr": int(io["syscr"]), "wall": wall,
                                    "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss})
                 + "\n")
"""


def probe(out_path, *argv):
    p = subprocess.run([PY, "-c", PROBE, out_path, *argv], capture_output=True, text=True,
                       env=ENV, cwd=REPO)
    if p.returncode != 0:
        raise RuntimeError(f"probe {' '.join(argv)} failed:\n" + p.stderr[-2000:])
    r = json.loads(p.stderr.strip().splitlines()[-1])
    if r["rc"] not in (0, None):
        raise RuntimeError(f"cli.main({list(argv)}) returned {r['rc']}: {p.stderr[-2000:]}")
    return r


def tensor_info(ckpt, name):
    index = json.load(open(os.path.join(ckpt, "model.safetensors.index.json")))
    shard = index["weight_map"][name]
    with open(os.path.join(ckpt, shard), "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        t = json.loads(f.read(n))[name]
    return shard, t["dtype"], t["shape"], t["data_offsets"][1] - t["data_offsets"][0], 8 + n


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "ckpt-browser-bench"))
    ap.add_argument("--tensor", default=DEFAULT_TENSOR)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--keep", action="store_true",
                    help="keep the sparse checkpoint even if this run built it")
    args = ap.parse_args()
    ckpt = os.path.join(args.workdir, "deepseek-v3-sparse")
    built = not os.path.exists(ckpt)
    subprocess.run([PY, os.path.join(HERE, "make_moe_checkpoint.py"), ckpt], check=True)
    try:
        return measure(args, ckpt)
    finally:
        if built and not args.keep:
            import shutil

            shutil.rmtree(ckpt)
            print(f"deleted {ckpt} (built by this run; --keep keeps it)")


def measure(args, ckpt):
    errors = []
    index_path = os.path.join(ckpt, "model.safetensors.index.json")
    index = json.load(open(index_path))
    shards = sorted(set(index["weight_map"].values()))
    headers = 0
    for s in shards:
        with open(os.path.join(ckpt, s), "rb") as f:
            headers += 8 + int.from_bytes(f.read(8), "little")
    logical = sum(os.path.getsize(os.path.join(ckpt, s)) for s in shards)
    shard, dtype, shape, nbytes, header = tensor_info(ckpt, args.tensor)
    _, sdtype, sshape, small, _ = tensor_info(ckpt, SMALL)
    print(f"checkpoint   {ckpt}")
    print(f"             {len(shards)} shards, {len(index['weight_map']):,} tensors, "
          f"{logical / 1e9:.1f} GB logical; index {os.path.getsize(index_path):,} B; "
          f"all shard headers {headers:,} B")
    print(f"tensor       {args.tensor}  {dtype} {shape}  {nbytes:,} B  in {shard} "
          f"(its header {header:,} B)")
    print(f"small        {SMALL}  {sdtype} {sshape}  {small:,} B")
    print(f"             median of {args.reps} fresh processes each; load average "
          f"{os.getloadavg()[0]:.2f}")
    print()

    out = os.path.join(args.workdir, "stats-probe.json")
    runs = {"imports": [], "inspect": [], "small": [], "big": []}
    argv = {"imports": ["imports"],
            "inspect": ["inspect", "--json", ckpt],
            "small": ["stats", ckpt, SMALL, "--json"],
            "big": ["stats", ckpt, args.tensor, "--json"]}
    try:
        for k in runs:  # warm-up: the headers and the .pyc files into the page cache
            probe(out, *argv[k])
        for i in range(args.reps):
            for k in (list(runs) if i % 2 == 0 else list(runs)[::-1]):
                runs[k].append(probe(out, *argv[k]))
                if k == "big":
                    doc = json.load(open(out))["tensors"][0]
        med = {k: {m: statistics.median(r[m] for r in v) for m in ("rchar", "syscr", "wall", "rss")}
               for k, v in runs.items()}
        labels = {"imports": "imports only (cli, values.stats, numpy)",
                  "inspect": "inspect --json",
                  "small": f"stats {SMALL}",
                  "big": f"stats {args.tensor}"}
        print(f"{'':46}{'rchar (bytes)':>16}{'read calls':>12}{'wall':>9}{'peak RSS':>11}")
        for k in runs:
            print(f"{labels[k]:46}{med[k]['rchar']:>16,.0f}{med[k]['syscr']:>12,.0f}"
                  f"{med[k]['wall']:8.2f}s{med[k]['rss'] / 1024:7.0f} MiB")
        print()
        extra = med["big"]["rchar"] - med["small"]["rchar"]
        want = nbytes - small
        print(f"stats {args.tensor}:")
        print(f"  total rchar                          {med['big']['rchar']:>16,.0f}")
        print(f"  extra vs stats {SMALL:22}{extra:>16,.0f}")
        print(f"  tensor nbytes - small tensor nbytes  {want:>16,}")
        print(f"  extra / tensor bytes                 {extra / want:16.4f}  (target "
              f"{1 - TARGET:.2f}..{1 + TARGET:.2f})  "
              f"{'PASS' if abs(extra / want - 1) <= TARGET else 'FAIL'}")
        opened = med["small"]["rchar"] - med["imports"]["rchar"] - small
        print(f"  opening the checkpoint (stats {SMALL} - imports - its bytes): "
              f"{opened:,.0f} B; index + all headers = "
              f"{headers + os.path.getsize(index_path):,} B")
        vs_inspect = med["big"]["rchar"] - med["inspect"]["rchar"]
        print(f"  rchar(stats) - rchar(inspect --json) {vs_inspect:>16,.0f}  = tensor "
              f"{nbytes:,} + {vs_inspect - nbytes:,} (the values modules' and numpy's imports, "
              f"inspect's own reads differ)")
        print(f"  stats reported bytes_read            {doc['bytes_read']:>16,}  "
              f"{'PASS' if doc['bytes_read'] == nbytes else 'FAIL'} (= nbytes)")
        print(f"  wall time (median)                   {med['big']['wall']:15.2f}s  "
              f"({nbytes / 1e6 / med['big']['wall']:.0f} MB/s of tensor bytes; the bytes are "
              f"holes: no disk I/O)")
        print(f"  result: zeros {doc['zeros']:,} of {doc['numel']:,}, min {doc['min']}, max "
              f"{doc['max']}")
    except Exception as e:
        errors.append(str(e))
        print(f"ERROR {e}")
    if errors:
        print("\nerrors:\n  " + "\n  ".join(errors), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
