"""A time-bounded fuzz run over every reader, with the strategies and properties of the tests.

    python tests/fuzz/run_fuzz.py --seconds 60            # all targets, time split evenly
    python tests/fuzz/run_fuzz.py --seconds 300 --targets torch pickle --jobs 2

Each target runs in its own worker process, in batches of hypothesis examples with a fresh seed
per batch. A failing case whose failure signature (call, exception or property, innermost
ckpt_browser frame) is not already covered by a file in tests/fuzz/regressions/ is saved there.
Before each case the worker writes it to a scratch file, so a case that kills the interpreter
(a segfault, an uncatchable hang) is saved too. Prints, per target: inputs tried, failing
inputs, distinct failures, files saved, the largest peak memory and call time.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.fuzz.cases import REGRESSIONS, TARGETS, load, regressions  # noqa: E402
from tests.fuzz.guards import HANG_LIMIT  # noqa: E402

BATCH = 25


def _known(out: Path) -> set:
    """Failure signatures the saved regressions already show (of every target: a CLI bug
    found through one target's files is not new through another's)."""
    from tests.fuzz.harness import check

    sigs = set()
    for p in regressions(out):
        sigs |= {f.signature for f in check(load(p))}
    return sigs


def worker(target: str, seconds: float, scratch: Path, out: Path, save: bool, seed0: int) -> dict:
    from hypothesis import HealthCheck, given, seed, settings

    from tests.fuzz import harness
    from tests.fuzz.strategies import STRATEGIES

    warnings.simplefilter("ignore")
    known = _known(out) if save else set()
    harness.PEAKS.clear()  # the summary's peaks are the fuzz cases', not the regressions'
    summary = {"target": target, "tried": 0, "failing": 0, "distinct": [], "saved": []}
    deadline = time.monotonic() + seconds

    def one(case) -> None:
        if time.monotonic() > deadline:
            return
        scratch.write_bytes(pickle.dumps(case))
        failures = harness.check(case)
        summary["tried"] += 1
        if not failures:
            return
        summary["failing"] += 1
        new = {f.signature for f in failures} - known
        if new:
            known.update(new)
            summary["distinct"].append(harness.explain(case, failures)[:2000])
            if save:
                summary["saved"].append(case.save(out).name)

    batch = 0
    while time.monotonic() < deadline:
        run = settings(max_examples=BATCH, database=None, deadline=None, derandomize=False,
                       suppress_health_check=list(HealthCheck))(given(STRATEGIES[target]())(one))
        try:
            seed(seed0 + batch)(run)()
        except Exception as e:  # noqa: BLE001 - a strategy's own bug: report it, go on
            summary["distinct"].append(f"strategy error (seed {seed0 + batch}): "
                                       f"{type(e).__name__}: {str(e)[:300]}")
        batch += 1
    summary["peaks"] = {call: peak for (t, call), peak in harness.PEAKS.items() if t == target}
    return summary


def _spawn(target: str, seconds: float, args, tmp: Path) -> tuple[subprocess.Popen, Path]:
    scratch = tmp / f"{target}.case"
    cmd = [sys.executable, __file__, "--worker", target, "--seconds", str(seconds),
           "--scratch", str(scratch), "--out", str(args.out), "--seed", str(args.seed)]
    if args.no_save:
        cmd.append("--no-save")
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=tmp), scratch


def _finish(target: str, proc: subprocess.Popen, scratch: Path, seconds: float, args) -> dict:
    try:
        stdout, _ = proc.communicate(timeout=seconds + HANG_LIMIT + 120)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, _ = proc.communicate()
    lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
    if proc.returncode == 0 and lines:
        return json.loads(lines[-1])
    why = f"worker died (exit {proc.returncode})"
    summary = {"target": target, "tried": None, "failing": 1, "distinct": [why], "saved": []}
    if scratch.exists():  # the case it was reading when it died
        case = pickle.loads(scratch.read_bytes())
        summary["distinct"] = [f"{why} on {case.describe()}"]
        if not args.no_save:
            summary["saved"].append(case.save(args.out).name)
    return summary


def _print(results: list[dict], elapsed: float) -> None:
    print(f"\nfuzz run: {elapsed:.0f} s")
    print(f"{'target':<12} {'tried':>7} {'failing':>8} {'distinct':>9} {'saved':>6}  "
          "largest peak / slowest call")
    for r in results:
        peaks = r.get("peaks") or {}
        worst = max(peaks.items(), key=lambda kv: kv[1][0], default=None)
        slow = max(peaks.items(), key=lambda kv: kv[1][1], default=None)
        note = (f"{worst[1][0] / 2**20:.1f} MiB ({worst[0]}) / {slow[1][1]:.2f} s ({slow[0]})"
                if worst else "")
        print(f"{r['target']:<12} {r['tried'] if r['tried'] is not None else '?':>7} "
              f"{r['failing']:>8} {len(r['distinct']):>9} {len(r['saved']):>6}  {note}")
    for r in results:
        for d in r["distinct"]:
            print(f"\n{d}")
        for name in r["saved"]:
            print(f"saved tests/fuzz/regressions/{name}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=60, help="total time (default 60)")
    p.add_argument("--targets", nargs="*", choices=TARGETS, default=list(TARGETS))
    p.add_argument("--jobs", type=int, default=1, help="workers at once (default 1)")
    p.add_argument("--seed", type=int, default=int(time.time()) % 100_000,
                   help="first hypothesis seed (default: from the clock)")
    p.add_argument("--out", type=Path, default=REGRESSIONS, help="where new failing cases go")
    p.add_argument("--no-save", action="store_true", help="report failures, save nothing")
    p.add_argument("--worker", choices=TARGETS, help=argparse.SUPPRESS)
    p.add_argument("--scratch", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.out = args.out.resolve()
    if args.worker:
        summary = worker(args.worker, args.seconds, args.scratch, args.out, not args.no_save,
                         args.seed)
        print(json.dumps(summary))
        return 0
    per = args.seconds * max(1, args.jobs) / len(args.targets)
    print(f"seed {args.seed}; {per:.0f} s per target; new failures go to {args.out}")
    t0 = time.monotonic()
    results = []
    with tempfile.TemporaryDirectory(prefix="ckpt-fuzz-run-") as tmp:
        pending = list(args.targets)
        running: list = []
        while pending or running:
            while pending and len(running) < max(1, args.jobs):
                target = pending.pop(0)
                running.append((target, *_spawn(target, per, args, Path(tmp))))
            target, proc, scratch = running.pop(0)
            results.append(_finish(target, proc, scratch, per, args))
    _print(results, time.monotonic() - t0)
    return 1 if any(r["failing"] for r in results) else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    sys.exit(main())
