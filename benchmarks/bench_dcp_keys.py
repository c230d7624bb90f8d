"""A DCP checkpoint with many keys: `inspect --json` against torch's own read of its .metadata.

Usage: python benchmarks/bench_dcp_keys.py [--keys N] [--kind tensors|values] [--reps R]

Builds (once, under $TMPDIR/ckpt-browser-bench) a checkpoint written by the real
torch.distributed.checkpoint.save from 2 gloo ranks on the CPU:
  - tensors: N model tensors of 4 floats (model.layers.<i // 10>.w<i % 10>), the .metadata
    holding N TensorStorageMetadata with their chunks and storage records (100,000: ~24 MB);
  - values: one tensor and N small Python values under one dict (a data loader's or a
    counter's state at scale), each a BytesStorageMetadata.
Then, each in a fresh process, median of R runs:
  - torch: `FileSystemReader(path).read_metadata()` (a plain pickle.load; torch imported);
  - ours: `ckpt-browser inspect --json PATH` (no torch), with the .metadata caps raised to
    fit (CKPT_BROWSER_MAX_DCP_METADATA_BYTES / _OPS), since 100,000 tensor keys exceed the
    defaults (12 MiB, 6,000,000 opcodes), which are said in the line printed before the runs;
wall time and peak RSS of the whole process, and the ratios ours / torch. It prints; it does
not assert (non-zero exit only if a run failed or the two disagree on the number of keys).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PY = sys.executable
ENV = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))

BUILD = r"""
import os, sys, torch, torch.distributed as dist, torch.distributed.checkpoint as dcp
import torch.multiprocessing as mp
OUT, N, KIND = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def work(rank):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29561")
    dist.init_process_group("gloo", rank=rank, world_size=2)
    if KIND == "tensors":
        sd = {f"model.layers.{i // 10}.w{i % 10}": torch.full((4,), float(i)) for i in range(N)}
    else:
        sd = {"model.w": torch.ones(4), "state": {f"k{i}": i for i in range(N)}}
    dcp.save(sd, checkpoint_id=OUT)
    dist.destroy_process_group()
if __name__ == "__main__":
    mp.spawn(work, nprocs=2)
"""

TORCH = r"""
import sys
from torch.distributed.checkpoint import FileSystemReader
meta = FileSystemReader(sys.argv[1]).read_metadata()
print(len(meta.state_dict_metadata))
"""


def build(path: str, keys: int, kind: str) -> None:
    if os.path.exists(os.path.join(path, ".metadata")):
        print(f"{path}: already built")
        return
    print(f"building {path} ({keys:,} {kind} keys, 2 ranks) ...", flush=True)
    with tempfile.TemporaryDirectory() as tmp:  # spawn re-imports the script: a real file
        script = os.path.join(tmp, "build_dcp.py")
        with open(script, "w") as f:
            f.write(BUILD)
        subprocess.run([PY, script, path, str(keys), kind], check=True, env=ENV)


# runs the command and reports its peak RSS (KiB) as the last line of stderr: RUSAGE_CHILDREN of
# a fresh wrapper is that one child's, not the maximum over every run so far
WRAP = r"""
import resource, subprocess, sys
code = subprocess.run(sys.argv[1:]).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)
sys.exit(code)
"""


def timed(cmd: list[str], env: dict) -> tuple[float, float, str]:
    """(wall seconds, peak RSS MiB, stdout) of one fresh process."""
    start = time.perf_counter()
    done = subprocess.run([PY, "-c", WRAP, *cmd], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(cmd)}\n{done.stderr[-2000:]}")
    return wall, int(done.stderr.strip().splitlines()[-1]) / 1024, done.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--kind", choices=("tensors", "values"), default="tensors")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(),
                                                      "ckpt-browser-bench"))
    args = ap.parse_args()
    path = os.path.join(args.workdir, f"dcp-{args.kind}-{args.keys}")
    os.makedirs(args.workdir, exist_ok=True)
    build(path, args.keys, args.kind)
    size = os.path.getsize(os.path.join(path, ".metadata"))
    ours_env = dict(ENV, CKPT_BROWSER_MAX_DCP_METADATA_BYTES=str(max(size * 2, 12 << 20)),
                    CKPT_BROWSER_MAX_DCP_METADATA_OPS=str(max(size, 6_000_000)))
    print(f".metadata {size:,} bytes; ours runs with the caps raised to "
          f"{ours_env['CKPT_BROWSER_MAX_DCP_METADATA_BYTES']} bytes and "
          f"{ours_env['CKPT_BROWSER_MAX_DCP_METADATA_OPS']} opcodes")
    runs: dict[str, list[tuple[float, float]]] = {"torch": [], "ours": []}
    keys: dict[str, int] = {}
    for _ in range(args.reps):  # interleaved, so a busy moment hits both
        wall, rss, out = timed([PY, "-c", TORCH, path], ENV)
        runs["torch"].append((wall, rss))
        keys["torch"] = int(out.strip())
        wall, rss, out = timed([PY, "-m", "ckpt_browser", "inspect", "--json", path], ours_env)
        runs["ours"].append((wall, rss))
        keys["ours"] = json.loads(out)["files"][0]["tensors"]  # the .metadata's tensors
    med = {k: (statistics.median(w for w, _ in v), max(r for _, r in v)) for k, v in runs.items()}
    print(f"{'':30}{'wall':>9}{'peak RSS':>12}")
    print(f"{'torch read_metadata (process)':30}{med['torch'][0]:8.2f}s{med['torch'][1]:9.0f} MiB")
    print(f"{'ckpt-browser inspect --json':30}{med['ours'][0]:8.2f}s{med['ours'][1]:9.0f} MiB")
    print(f"  wall ratio ours/torch   {med['ours'][0] / med['torch'][0]:.2f}x  (target <= 1.5x)")
    print(f"  RSS ratio ours/torch    {med['ours'][1] / med['torch'][1]:.2f}x")
    if args.kind == "tensors" and keys["ours"] != keys["torch"]:
        sys.exit(f"disagree: torch lists {keys['torch']:,} keys, ours {keys['ours']:,} tensors")


if __name__ == "__main__":
    main()
