"""Benchmark `ckpt-browser diff A B --values --json` on two real ~2 GB sharded checkpoints.

Usage: python benchmarks/bench_diff.py [--workdir DIR] [--reps N] [--keep] [--impl DIR]

Builds the pair with benchmarks/make_diff_pair.py (unless already there), then in one run,
alternating the order, median of N runs after one untimed warm-up of each command (so every
command reads from the page cache):
  - wall time and peak RSS (os.wait4 on a fresh child per run) of `diff --values --json`,
    of benchmarks/baseline_diff.py (plain numpy, no bitwise shortcut) and of the same baseline
    with --shortcut (identical raw bytes are not converted), and the ratios;
  - peak RSS of ours on one small tensor, on the 1 GiB tensor alone and on everything;
  - that ours and the baselines give the same metrics per tensor (1e-5 relative), and that ours
    reports the dtype change, the rename (only_in_a + only_in_b), the perturbed tensors as
    values_changed and every other tensor unchanged, though B is sharded differently.
Targets: ours / baseline <= 1.0 and peak RSS < 300 MB. It reports PASS/FAIL; it does not
assert. Exit code is non-zero only when something errored. The ~4.3 GB pair is deleted at the
end unless --keep. --impl DIR measures the ckpt_browser package found in DIR instead of this
repository's (to try a change in a scratch copy).
"""

import argparse
import json
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
RSS_TARGET = 300 * 10**6
RATIO_TARGET = 1.0
METRICS = ("max_abs_diff", "mean_abs_diff", "rel_l2", "cosine")
RTOL = 1e-5


def env_for(impl):
    return dict(os.environ, PYTHONPATH=impl + os.pathsep + os.environ.get("PYTHONPATH", ""))


def run_measured(cmd, out_path, env, ok=(0,)):
    """Run cmd in a fresh child; its wall time and its own peak RSS (os.wait4's rusage)."""
    # cwd: the measured package's folder (`python -m` puts the cwd before PYTHONPATH)
    cwd = env["PYTHONPATH"].split(os.pathsep)[0]
    with open(out_path, "wb") as out:
        t = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE, env=env, cwd=cwd)
        err = p.stderr.read()
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    p.stderr.close()
    if p.returncode not in ok:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}: {err.decode()[-2000:]}")
    return {"wall": wall, "rss": ru.ru_maxrss * 1024}


def side_info(path):
    index = json.load(open(os.path.join(path, "model.safetensors.index.json")))
    shards = sorted(set(index["weight_map"].values()))
    dtypes, largest = {}, (0, "")
    for s in shards:
        with open(os.path.join(path, s), "rb") as f:
            header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
        header.pop("__metadata__", None)
        for name, t in header.items():
            n = t["data_offsets"][1] - t["data_offsets"][0]
            dtypes[t["dtype"]] = dtypes.get(t["dtype"], 0) + n
            largest = max(largest, (n, name))
    return {"shards": len(shards), "tensors": len(index["weight_map"]),
            "bytes": index["metadata"]["total_size"], "dtypes": dtypes, "largest": largest,
            "sizes": [os.path.getsize(os.path.join(path, s)) for s in shards]}


def page_cache(paths):
    """Fraction of the files' bytes in the page cache, if util-linux fincore is there."""
    if shutil.which("fincore") is None:
        return None
    files = [os.path.join(p, n) for p in paths for n in os.listdir(p)]
    r = subprocess.run(["fincore", "--bytes", "--noheadings", "--raw", "-o", "RES,SIZE", *files],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None
    res = size = 0
    for line in r.stdout.split("\n"):
        if line.strip():
            a, b = line.split()
            res, size = res + int(a), size + int(b)
    return res / size if size else None


def close(x, y):
    if x is None or y is None:
        return x is y
    return x == y or abs(x - y) <= RTOL * max(abs(x), abs(y))


def check_metrics(ours_rows, base, label):
    """Lines describing disagreements between our per-tensor metrics and a baseline's."""
    bad = []
    for name, b in sorted(base["tensors"].items()):
        r = ours_rows.get(name)
        if r is None:
            bad.append(f"{name}: compared by {label} but not by ours")
            continue
        for m in METRICS:
            if not close(r[m], b[m]):
                bad.append(f"{name}: {m} ours {r[m]!r} vs {label} {b[m]!r}")
    for name, r in ours_rows.items():
        if r["a"] and r["b"] and r["a"]["shape"] == r["b"]["shape"] and name not in base["tensors"]:
            bad.append(f"{name}: compared by ours but not by {label}")
    return bad


def check_statuses(doc, expected):
    """Lines describing where our statuses differ from what make_diff_pair.py built."""
    got = {}
    for r in doc["tensors"]:
        got.setdefault(r["status"], []).append(r["name"])
    bad = []
    for status in sorted(set(got) | set(expected)):
        want, have = set(expected.get(status, [])), set(got.get(status, []))
        for n in sorted(want - have):
            bad.append(f"{n}: expected {status}")
        for n in sorted(have - want):
            bad.append(f"{n}: reported {status}, not expected")
    unchanged_not_bitwise = [r["name"] for r in doc["tensors"]
                             if r["status"] == "unchanged" and r["bitwise_equal"] is not True]
    bad += [f"{n}: unchanged but not bitwise_equal" for n in unchanged_not_bitwise]
    return got, bad


def exact_metrics(a, b, name, limit=64 * 2**20):
    """The four metrics of one tensor pair in float64 throughout, whole tensors in memory (only
    for tensors under limit bytes): the referee when ours and the baseline disagree."""
    import numpy as np

    def load(root, name):
        index = json.load(open(os.path.join(root, "model.safetensors.index.json")))
        with open(os.path.join(root, index["weight_map"][name]), "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            t = json.loads(f.read(n))[name]
            begin, end = t["data_offsets"]
            if end - begin > limit:
                return None
            f.seek(8 + n + begin)
            raw = f.read(end - begin)
        if t["dtype"] == "BF16":
            return (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(
                np.float32).astype(np.float64)
        return np.frombuffer(raw, {"F32": np.float32, "F16": np.float16}[t["dtype"]]).astype(
            np.float64)

    x, y = load(a, name), load(b, name)
    if x is None or y is None:
        return None
    d = x - y
    return {"max_abs_diff": float(np.abs(d).max()), "mean_abs_diff": float(np.abs(d).mean()),
            "rel_l2": float(np.sqrt(d @ d) / np.sqrt(x @ x)),
            "cosine": float((x @ y) / np.sqrt((x @ x) * (y @ y)))}


def verdict(ok):
    return "PASS" if ok else "FAIL"


def referee(bad, rows, doc, label, a, b):
    """For tensors where ours and a baseline disagree: which one float64 throughout agrees with."""
    names = sorted({line.split(":")[0] for line in bad if " vs " in line})
    for name in names[:10]:
        ex = exact_metrics(a, b, name)
        if ex is None:
            continue
        for m in ("rel_l2", "cosine"):
            o, x, e = rows[name][m], doc["tensors"][name][m], ex[m]
            print(f"    exact {name} {m} {e:.10g}: ours off by {abs(o - e) / abs(e):.1e}, "
                  f"{label} by {abs(x - e) / abs(e):.1e} (relative)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "ckpt-browser-bench"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--keep", action="store_true", help="keep the ~4.3 GB checkpoint pair")
    ap.add_argument("--impl", default=REPO, help="directory holding the ckpt_browser package "
                    "to measure (default: this repository)")
    args = ap.parse_args()
    errors = []
    pair = os.path.join(args.workdir, "diff-pair")
    a, b = os.path.join(pair, "a"), os.path.join(pair, "b")
    env = env_for(os.path.abspath(args.impl))
    try:
        t = time.perf_counter()
        subprocess.run([PY, os.path.join(HERE, "make_diff_pair.py"), pair], check=True,
                       env=env_for(REPO))
        print(f"pair ready in {time.perf_counter() - t:.1f}s")
        return measure(args, pair, a, b, env, errors)
    finally:
        if not args.keep and os.path.isdir(pair):
            shutil.rmtree(pair)
            print(f"deleted {pair} (--keep keeps it)")


def measure(args, pair, a, b, env, errors):
    expected = json.load(open(os.path.join(pair, "expected.json")))
    ia, ib = side_info(a), side_info(b)
    print(f"checkpoints  {pair}/{{a,b}}")
    for label, info in (("A", ia), ("B", ib)):
        mix = ", ".join(f"{d} {n / 1e9:.2f} GB" for d, n in sorted(info["dtypes"].items()))
        print(f"  {label}: {info['shards']} shards "
              f"({', '.join(f'{s / 1e6:.0f}' for s in info['sizes'])}"
              f" MB), {info['tensors']} tensors, {info['bytes'] / 1e9:.3f} GB ({mix}); largest "
              f"{info['largest'][1]} {info['largest'][0] / 2**30:.2f} GiB")
    print(f"python       {PY}; {os.cpu_count()} cores; measuring ckpt_browser from "
          f"{os.path.abspath(args.impl)}")
    print(f"load average at start {os.getloadavg()[0]:.2f} (other work on the machine skews "
          f"timings; runs are interleaved so it hits all commands alike)")

    outs = {k: os.path.join(args.workdir, f"diff-{k}.json") for k in ("ours", "base", "short")}
    cmds = {
        "ours": ([PY, "-m", "ckpt_browser", "diff", a, b, "--values", "--json"], (0, 1)),
        "base": ([PY, os.path.join(HERE, "baseline_diff.py"), a, b], (0,)),
        "short": ([PY, os.path.join(HERE, "baseline_diff.py"), "--shortcut", a, b], (0,)),
    }
    labels = {"ours": "diff --values --json", "base": "baseline_diff.py",
              "short": "baseline --shortcut"}
    runs = {k: [] for k in cmds}
    try:
        for k, (cmd, ok) in cmds.items():  # warm-up: fills the page cache, not timed
            run_measured(cmd, outs[k], env, ok)
        cached = page_cache([a, b])
        print("page cache   one untimed warm-up run of each command first, so all read from the "
              "page cache" + (f" ({cached:.0%} of both checkpoints resident after it)"
                              if cached is not None else ""))
        print(f"             median of {args.reps} runs, order alternating each round")
        print()
        order = list(cmds)
        for i in range(args.reps):
            for k in (order if i % 2 == 0 else order[::-1]):
                cmd, ok = cmds[k]
                runs[k].append(run_measured(cmd, outs[k], env, ok))
        med = {k: (statistics.median(r["wall"] for r in v), statistics.median(r["rss"] for r in v))
               for k, v in runs.items()}
        nbytes = json.load(open(outs["base"]))["bytes"]
        print(f"{'':24}{'wall':>9}{'peak RSS':>12}{'GB/s':>8}   (runs)")
        for k in cmds:
            walls = ", ".join(f"{r['wall']:.2f}" for r in runs[k])
            print(f"{labels[k]:24}{med[k][0]:8.2f}s{med[k][1] / 1e6:8.0f} MB"
                  f"{nbytes / 1e9 / med[k][0]:8.2f}   ({walls})")
        print(f"  ({nbytes / 1e9:.2f} GB of tensor bytes compared, both sides together)")
        ratio = med["ours"][0] / med["base"][0]
        print(f"  ours / baseline              {ratio:5.2f}x  (target <= {RATIO_TARGET}x)  "
              f"{verdict(ratio <= RATIO_TARGET)}")
        print(f"  ours / baseline --shortcut   {med['ours'][0] / med['short'][0]:5.2f}x  "
              f"(no target: the same bitwise shortcut in plain numpy)")
        print(f"  peak RSS ours                {med['ours'][1] / 1e6:5.0f} MB  (target < "
              f"{RSS_TARGET / 1e6:.0f} MB)  {verdict(med['ours'][1] < RSS_TARGET)}")
        print(f"  peak RSS over all runs       ours {max(r['rss'] for r in runs['ours']) / 1e6:.0f}"
              f" MB, baseline {max(r['rss'] for r in runs['base']) / 1e6:.0f} MB")
    except Exception as e:
        errors.append(f"timing: {e}")
        print(f"timing: ERROR {e}")
    print()

    # Peak RSS by scope: it should not grow with what is compared.
    try:
        print("peak RSS of diff --values by scope (--include), median of the same number of runs")
        scratch = os.path.join(args.workdir, "diff-scope.json")
        for label, glob in (("model.norm.weight (F32, 8 KB)", "model.norm.weight"),
                            ("model.embed_tokens.weight (1 GiB)", "model.embed_tokens.weight"),
                            ("all 109 pairs (4.3 GB)", None)):
            cmd = cmds["ours"][0] + (["--include", glob] if glob else [])
            rs = runs["ours"] if glob is None else [run_measured(cmd, scratch, env, (0, 1))
                                                    for _ in range(args.reps)]
            print(f"  {label:36}{statistics.median(r['rss'] for r in rs) / 1e6:7.0f} MB"
                  f"{statistics.median(r['wall'] for r in rs):7.2f}s")
    except Exception as e:
        errors.append(f"scope: {e}")
        print(f"scope: ERROR {e}")
    print()

    # Fixed costs, for reading the figures above: interpreter + imports + headers.
    try:
        fixed = {
            "python -c 'import numpy'": [PY, "-c", "import numpy"],
            "python -c 'import torch'": [PY, "-c", "import torch"],
            "diff --json (no --values)": [PY, "-m", "ckpt_browser", "diff", a, b, "--json"],
        }
        print("fixed costs (median of the same number of runs)")
        scratch = os.path.join(args.workdir, "diff-fixed.out")
        for label, cmd in fixed.items():
            rs = [run_measured(cmd, scratch, env, (0, 1)) for _ in range(args.reps)]
            print(f"  {label:30}{statistics.median(r['wall'] for r in rs):6.2f}s"
                  f"{statistics.median(r['rss'] for r in rs) / 1e6:7.0f} MB")
    except Exception as e:
        errors.append(f"fixed costs: {e}")
        print(f"fixed costs: ERROR {e}")
    print()

    try:
        ours = json.load(open(outs["ours"]))
        rows = {r["name"]: r for r in ours["tensors"]}
        base, short = json.load(open(outs["base"])), json.load(open(outs["short"]))
        got, bad_status = check_statuses(ours, expected)
        counts = ", ".join(f"{s} {len(v)}" for s, v in sorted(got.items()))
        print(f"our statuses: {counts}")
        for status in ("dtype_changed", "only_in_a", "only_in_b", "values_changed"):
            for n in got.get(status, []):
                r = rows[n]
                extra = (f"  rel_l2 {r['rel_l2']:.3g}  max|d| {r['max_abs_diff']:.3g}"
                         if r["rel_l2"] is not None else "")
                side = r["a"] or r["b"]
                dt = (f"{r['a']['dtype']} -> {r['b']['dtype']}" if r["a"] and r["b"]
                      else side["dtype"])
                print(f"  {status:15} {n}  {dt}{extra}")
        print(f"  statuses as built (dtype change, rename, perturbed, rest unchanged and "
              f"bitwise equal; sharding ignored)  {verdict(not bad_status)}")
        for line in bad_status[:20]:
            print(f"    {line}")
        renamed_ok = (sorted(base["only_in_a"]) == sorted(got.get("only_in_a", []))
                      and sorted(base["only_in_b"]) == sorted(got.get("only_in_b", [])))
        print(f"  only_in_a / only_in_b agree with the baseline            {verdict(renamed_ok)}")
        for label, doc in (("baseline", base), ("baseline --shortcut", short)):
            bad = check_metrics(rows, doc, label)
            print(f"  same metrics as {label:20} ({doc['compared']} tensors, {RTOL:g} relative)"
                  f"  {verdict(not bad)}")
            for line in bad[:20]:
                print(f"    {line}")
            referee(bad, rows, doc, label, a, b)
    except Exception as e:
        errors.append(f"checks: {e}")
        print(f"checks: ERROR {e}")
    print(f"\nload average at end {os.getloadavg()[0]:.2f}")
    if errors:
        print("\nerrors:\n  " + "\n  ".join(errors), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
