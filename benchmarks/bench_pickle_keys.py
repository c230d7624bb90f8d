"""The restricted unpickler on a real big optimizer state_dict, against another checkout of
this repository: what the per-container bound on keys sharing a hash value costs where it
matters most (every key of 93,334 per-parameter dicts goes through it).

Usage: python benchmarks/bench_pickle_keys.py --baseline DIR [--reps N] [--params N]

  DIR: another checkout, e.g.  mkdir /tmp/base && git archive COMMIT | tar -x -C /tmp/base

Builds (once, with torch) $TMPDIR/ckpt-browser-bench/adamw-<N>.pt: torch.save of a real
AdamW state_dict after one step over N two-element parameters (3 tensors each: 280,002 for
the default N), and times unpickling its data.pkl (from memory) in fresh processes, this
checkout and the baseline alternately, median of N runs each. It also times two hostile
pickles of 50,000 keys sharing one hash value (a dict of ints k*(2**61-1) and a frozenset of
them) with this checkout only. It prints; it does not assert.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

BUILD = r"""
import sys, torch
n = int(sys.argv[2])
params = [torch.nn.Parameter(torch.zeros(2)) for _ in range(n)]
for p in params:
    p.grad = torch.ones(2)
opt = torch.optim.AdamW(params, foreach=True)
opt.step()
torch.save(opt.state_dict(), sys.argv[1])
"""

TIME = r"""
import io, sys, time
from ckpt_browser.readers.pickle_safe import unpickle
data = open(sys.argv[1], "rb").read()
start = time.perf_counter()
got = unpickle(io.BytesIO(data), "data.pkl")
took = time.perf_counter() - start
assert got.ok, got.problems
print(took, len(got.problems))
"""


def data_pkl(path: str) -> str:
    out = path + ".data.pkl"
    if not os.path.exists(out):
        with zipfile.ZipFile(path) as zf:
            name = next(n for n in zf.namelist() if n.endswith("/data.pkl"))
            with open(out, "wb") as f:
                f.write(zf.read(name))
    return out


def run(repo: str, pkl: str) -> tuple[float, int]:
    env = dict(os.environ, PYTHONPATH=repo)
    out = subprocess.run([sys.executable, "-c", TIME, pkl], env=env, cwd=repo,
                         capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), int(out[1])


def hostile(workdir: str) -> dict[str, str]:
    import pickle

    keys = [k * (2**61 - 1) for k in range(1, 50_001)]
    files = {}
    for name, obj in (("colliding-dict", dict.fromkeys(keys, 0)),
                      ("colliding-frozenset", frozenset(keys))):
        files[name] = os.path.join(workdir, f"{name}.pkl")
        with open(files[name], "wb") as f:
            f.write(pickle.dumps(obj, protocol=4))
    return files


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", required=True)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--params", type=int, default=93_334)
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(),
                                                      "ckpt-browser-bench"))
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    pt = os.path.join(args.workdir, f"adamw-{args.params}.pt")
    if not os.path.exists(pt):
        print(f"building {pt} ...", flush=True)
        subprocess.run([sys.executable, "-c", BUILD, pt, str(args.params)], check=True)
    pkl = data_pkl(pt)
    print(f"{pt}: data.pkl {os.path.getsize(pkl):,} bytes, {3 * args.params:,} tensors")
    ours, base = [], []
    for _ in range(args.reps):  # alternate, so a busy machine slows both alike
        ours.append(run(REPO, pkl)[0])
        base.append(run(os.path.abspath(args.baseline), pkl)[0])
    a, b = statistics.median(ours), statistics.median(base)
    print(f"unpickle, median of {args.reps}: this checkout {a:.3f} s, baseline {b:.3f} s, "
          f"ratio {a / b:.3f}")
    for name, path in hostile(args.workdir).items():
        took, problems = run(REPO, path)
        print(f"{name} (50,000 keys sharing one hash value): this checkout {took:.3f} s, "
              f"{problems} warning(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
