"""`ckpt-browser export` of a 2 GB torch checkpoint against torch.load + safetensors' save_file.

Usage: python benchmarks/bench_export.py [--gib 2] [--reps 3] [--workdir DIR]

Builds (once, under $TMPDIR/ckpt-browser-bench) a `torch.save` of a training dict the way a
custom loop writes one: {"model": a state_dict of 32 fp32 tensors of GIB/32 each, "step": 1000}.
Then, each in a fresh process, interleaved, median of R runs:
  - torch: `torch.load(PATH, weights_only=True)` then `safetensors.torch.save_file` of its
    "model" (what a user writes by hand today; the whole checkpoint in memory);
  - ours: `ckpt-browser export PATH OUT` (streamed, every file fsynced and read back);
wall time and peak RSS of the whole process, and the ratios ours / torch. Both outputs are
compared byte for byte once. It prints; it does not assert (non-zero exit only if a run failed
or the two outputs differ).
"""

import argparse
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
ENV = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
TENSORS = 32

BUILD = r"""
import sys, torch
path, gib, n = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
numel = int(gib * 2**30 / 4 / n)
g = torch.Generator().manual_seed(0)
sd = {f"layers.{i}.weight": torch.randn(numel, generator=g).reshape(-1, 1024)[:, :]
      for i in range(n)}
torch.save({"model": sd, "step": 1000}, path)
"""

TORCH = r"""
import sys, torch
from safetensors.torch import save_file
ckpt = torch.load(sys.argv[1], weights_only=True, map_location="cpu")
save_file(ckpt["model"], sys.argv[2], metadata={"format": "pt"})
"""

# runs the command and reports its peak RSS (KiB) as the last line of stderr: RUSAGE_CHILDREN of
# a fresh wrapper is that one child's, not the maximum over every run so far
WRAP = r"""
import resource, subprocess, sys
code = subprocess.run(sys.argv[1:], stdin=subprocess.DEVNULL).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)
sys.exit(code)
"""


def timed(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS MiB) of one fresh process."""
    start = time.perf_counter()
    done = subprocess.run([PY, "-c", WRAP, *cmd], env=ENV, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(cmd)}\n{done.stderr[-2000:]}")
    return wall, int(done.stderr.strip().splitlines()[-1]) / 1024


def same_tensors(a: str, b: str) -> bool:
    from safetensors import safe_open

    with safe_open(a, "np") as fa, safe_open(b, "np") as fb:
        if sorted(fa.keys()) != sorted(fb.keys()):
            return False
        return all((fa.get_tensor(k).tobytes() == fb.get_tensor(k).tobytes())
                   for k in fa.keys())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gib", type=float, default=2.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(),
                                                      "ckpt-browser-bench"))
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    src = os.path.join(args.workdir, f"export-{args.gib:g}g.pt")
    if not os.path.exists(src):
        print(f"building {src} ({args.gib:g} GiB, {TENSORS} tensors) ...", flush=True)
        subprocess.run([PY, "-c", BUILD, src, str(args.gib), str(TENSORS)], check=True)
    print(f"{src}: {os.path.getsize(src):,} bytes")
    theirs = os.path.join(args.workdir, "export-torch.safetensors")
    ours = os.path.join(args.workdir, "export-ours")
    runs: dict[str, list[tuple[float, float]]] = {"torch": [], "ours": []}
    for rep in range(args.reps):  # interleaved, so a busy moment hits both
        for path in (theirs, ours):
            if os.path.isdir(path):
                shutil.rmtree(path)
            elif os.path.exists(path):
                os.remove(path)
        runs["torch"].append(timed([PY, "-c", TORCH, src, theirs]))
        runs["ours"].append(timed([PY, "-m", "ckpt_browser", "export", src, ours]))
        if rep == 0 and not same_tensors(theirs, os.path.join(ours, "model.safetensors")):
            sys.exit("the two exports differ")
    med = {k: (statistics.median(w for w, _ in v), max(r for _, r in v)) for k, v in runs.items()}
    print(f"{'':36}{'wall':>9}{'peak RSS':>12}")
    print(f"{'torch.load + save_file (process)':36}{med['torch'][0]:8.2f}s"
          f"{med['torch'][1]:9.0f} MiB")
    print(f"{'ckpt-browser export':36}{med['ours'][0]:8.2f}s{med['ours'][1]:9.0f} MiB")
    print(f"  wall ratio ours/torch   {med['ours'][0] / med['torch'][0]:.2f}x  (target <= 1.0x)")
    print(f"  RSS ratio ours/torch    {med['ours'][1] / med['torch'][1]:.2f}x  (target < 0.25x)")
    print("  outputs: the same tensors, byte for byte")


if __name__ == "__main__":
    main()
