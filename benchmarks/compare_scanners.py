"""Which cases of the malicious corpus each pickle scanner flags: ckpt-browser, picklescan,
modelscan and fickling. A measurement, not a test: nothing in tests/ imports it.

The three scanners live in their own venv (never the project's, never pyproject.toml):

    python -m venv /tmp/scanners
    /tmp/scanners/bin/pip install picklescan modelscan fickling typing_extensions

(fickling 0.1.12 imports typing_extensions without declaring it.) Then, from the repository:

    python benchmarks/compare_scanners.py                  # every case, each offending file
    python benchmarks/compare_scanners.py --only gadget-   # cases whose name contains this
    python benchmarks/compare_scanners.py --folder         # scanners get the checkpoint folder
    python benchmarks/compare_scanners.py --bin DIR        # or CKPT_SCANNERS_BIN=DIR

How each tool is run, each from an empty temporary working folder (RLIMIT_AS 4 GiB, a timeout):
- ours: `python -m ckpt_browser inspect --json PATH` and `check --json PATH` on the case's path
  (what the corpus tests open). Flagged: inspect exits 2 or 5 (a damaged or unsafe file), or a
  problem or finding of either says "unsafe" (noted); "warned" when inspect exits 0 with a
  warning (a listing that may differ, an odd persistent id ...). Each of our commands runs under a
  wrapper that records its wall time and peak RSS; the summary gives the worst of each (the
  issue's bound: every case within 10 s and 1 GiB).
- picklescan: `picklescan -p FILE` (its default mode). Flagged: "Infected files" > 0 (suspicious
  globals alone leave its exit code 0, so they count as missed); exit 2 otherwise is an error.
- modelscan: `modelscan -p FILE -r json -o REPORT`. Flagged: any issue in the report; errors in
  the report (or exit 2) without an issue are an error; exit 3 (no supported file) is missed.
- fickling: its Python API, run by the scanner venv's python. `fickling --check-safety FILE`
  parses FILE as a raw pickle stream, so on a torch zip it only says "failed to parse"; the API
  is what fickling's own --huggingface mode uses: `scan_zip_archive` for zips, `scan_file` for raw
  pickles, chosen by the same extensions and by content (a zip, or a first byte PROTO; its own
  `fickling.polyglot` sniffing needs torch, which the scanner venv does not hold). fickling rates
  every torch pickle LIKELY_UNSAFE (torch._utils._rebuild_tensor_v2 is not standard library), the
  clean control included, so flagged here means rated above that (LIKELY_OVERTLY_MALICIOUS or
  OVERTLY_MALICIOUS); its own verdict (anything above LIKELY_SAFE) is counted in the summary.
  Not safe only through parse errors is an error.

The scanners read statically and never load a pickle; every working folder is still checked for
PWNED-* markers afterwards. The controls are clean: a scanner that flags one is a false positive.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.malicious.make_corpus import CASES, CORPUS, MARKER  # noqa: E402

TOOLS = ("ours", "picklescan", "modelscan", "fickling")
SCANNERS = TOOLS[1:]
MEMORY = 4 * 2**30

FICKLING = r"""
import json, os, sys, zipfile
from pathlib import PurePosixPath
from fickling import scan_file, scan_zip_archive
from fickling.analysis import Severity
from fickling.cli import HF_RAW_PICKLE_EXTENSIONS, HF_ZIP_PICKLE_EXTENSIONS

def files(path):
    if not os.path.isdir(path):
        yield path
        return
    for top, dirs, names in os.walk(path):
        dirs.sort()
        for name in sorted(names):
            yield os.path.join(top, name)

found, errors, scanned = [], [], 0
for path in files(sys.argv[1]):
    if not os.path.isfile(path):
        continue
    ext = PurePosixPath(path).suffix.lower()
    with open(path, "rb") as f:
        starts_as_pickle = f.read(1) == b"\x80"
    if zipfile.is_zipfile(path) or ext in HF_ZIP_PICKLE_EXTENSIONS:
        results = list(scan_zip_archive(path, graceful=True, json_output_path="f.json").values())
    elif starts_as_pickle or ext in HF_RAW_PICKLE_EXTENSIONS:
        results = [scan_file(path, graceful=True, json_output_path="f.json")]
    else:
        continue
    scanned += 1
    for r in results:
        errors += r.errors
        found += [a.severity.value[0] for a in r.results if a.severity > Severity.LIKELY_SAFE]
print(json.dumps({"found": found, "errors": errors, "scanned": scanned}))
"""


@dataclass
class Verdict:
    word: str  # flagged | missed | error, and for ours warned
    note: str = ""
    unsafe_by_own_verdict: bool = False  # fickling: rated anything above LIKELY_SAFE
    seconds: float = 0.0  # ours: the slowest of its commands
    maxrss_mb: float = 0.0  # ours: the largest peak RSS of its commands

    def __str__(self) -> str:
        return self.word + (f" ({self.note})" if self.note else "")


def run(argv: list[str], cwd: Path, timeout: float) -> tuple[int | str, str, str]:
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))
    try:
        p = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL, preexec_fn=limit, errors="replace")
    except subprocess.TimeoutExpired:
        return "timeout", "", ""
    return p.returncode, p.stdout, p.stderr


MEASURED = r"""
import json, resource, subprocess, sys, time
t = time.perf_counter()
p = subprocess.run(sys.argv[2:], stdin=subprocess.DEVNULL)
took = time.perf_counter() - t
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
open(sys.argv[1], "w").write(json.dumps([took, rss]))
sys.exit(p.returncode)
"""


def run_measured(argv: list[str], cwd: Path, timeout: float):
    """run() for one of our commands, with (seconds, peak RSS in MB) of the command alone."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        where = f.name
    try:
        rc, out, err = run([sys.executable, "-c", MEASURED, where, *argv], cwd, timeout)
        took, rss = _json(Path(where).read_text() or "null") or (timeout, 0.0)
    finally:
        os.unlink(where)
    return rc, out, err, took, rss


def _json(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return None


def ours(path: Path, cwd: Path, timeout: float) -> Verdict:
    rc, out, err, t1, m1 = run_measured(
        [sys.executable, "-m", "ckpt_browser", "inspect", "--json", str(path)], cwd, timeout)
    if rc not in (0, 2, 5):  # a timeout, a crash, or exit 1 (a bug)
        return Verdict("error", f"inspect {rc}", seconds=t1, maxrss_mb=m1)
    doc = _json(out) or {}
    said = [p.get("message", "") for p in doc.get("problems") or [] if p.get("severity") == "error"]
    crc, cout, _, t2, m2 = run_measured(
        [sys.executable, "-m", "ckpt_browser", "check", "--json", str(path)], cwd, timeout)
    bounds = {"seconds": max(t1, t2), "maxrss_mb": max(m1, m2)}
    verdicts = _json(cout) or []
    for d in verdicts if isinstance(verdicts, list) else [verdicts]:
        said += [f.get("message", "") for f in (d or {}).get("findings") or []]
    unsafe = any(re.search(r"\bunsafe\b", s, re.I) for s in said)
    if rc in (2, 5) or unsafe:
        return Verdict("flagged", "unsafe" if unsafe else f"inspect {rc}", **bounds)
    if any(p.get("severity") == "warning" for p in doc.get("problems") or []):
        return Verdict("warned", **bounds)
    return Verdict("missed", f"check {crc}" if crc not in (0, 3, 4) else "", **bounds)


def picklescan(bin_dir: Path, path: Path, cwd: Path, timeout: float) -> Verdict:
    rc, out, err = run([str(bin_dir / "picklescan"), "-p", str(path)], cwd, timeout)
    infected = re.search(r"Infected files: (\d+)", out)
    if infected and int(infected.group(1)) > 0:
        return Verdict("flagged")
    if rc == 0:
        return Verdict("missed")
    return Verdict("error", str(rc))


def modelscan(bin_dir: Path, path: Path, cwd: Path, timeout: float) -> Verdict:
    report = cwd / "modelscan.json"
    rc, out, err = run([str(bin_dir / "modelscan"), "-p", str(path), "-r", "json", "-o",
                        str(report)], cwd, timeout)
    doc = _json(report.read_text()) if report.exists() else None
    if doc and doc.get("issues"):
        return Verdict("flagged")
    if rc == 0 or rc == 3:
        return Verdict("missed", "not a supported file" if rc == 3 else "")
    return Verdict("error", str(rc))


def fickling(bin_dir: Path, path: Path, cwd: Path, timeout: float) -> Verdict:
    rc, out, err = run([str(bin_dir / "python"), "-c", FICKLING, str(path)], cwd, timeout)
    doc = _json(out.strip().splitlines()[-1]) if rc == 0 and out.strip() else None
    if doc is None:
        return Verdict("error", str(rc))
    worst = max(doc["found"], default=0)
    if worst > 3:  # above LIKELY_UNSAFE
        return Verdict("flagged", unsafe_by_own_verdict=True)
    if worst:
        return Verdict("missed", f"rated {LEVELS[worst]}", unsafe_by_own_verdict=True)
    if doc["errors"]:
        return Verdict("error", "parse")
    return Verdict("missed", "" if doc["scanned"] else "nothing scanned")


SCAN = {"picklescan": picklescan, "modelscan": modelscan, "fickling": fickling}
LEVELS = ("LIKELY_SAFE", "POSSIBLY_UNSAFE", "SUSPICIOUS", "LIKELY_UNSAFE")  # fickling's Severity


def judge(case, bin_dir: Path, folder: bool, timeout: float) -> dict[str, Verdict]:
    target = CORPUS / (case.path if folder else case.bad)
    out = {}
    with tempfile.TemporaryDirectory(prefix="compare-scanners-") as tmp:
        for tool in TOOLS:
            cwd = Path(tmp) / tool
            cwd.mkdir()
            if tool == "ours":
                out[tool] = ours(CORPUS / case.path, cwd, timeout)
            else:
                out[tool] = SCAN[tool](bin_dir, target, cwd, timeout)
            ran = sorted(p.name for p in cwd.rglob(f"{MARKER}*"))
            if ran:
                out[tool] = Verdict("error", f"A PAYLOAD RAN: {ran}")
    return out


def table(rows: list[tuple[str, dict[str, Verdict]]]) -> str:
    width = max(len(name) for name, _ in rows)
    cols = [max(len(t), *(len(str(v[t])) for _, v in rows)) for t in TOOLS]

    def line(cells):
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, [width, *cols])) + " |"

    out = [line(["case", *TOOLS]), "|" + "|".join("-" * (w + 2) for w in [width, *cols]) + "|"]
    out += [line([name, *(str(v[t]) for t in TOOLS)]) for name, v in rows]
    return "\n".join(out)


def summary(rows, controls) -> str:
    n = len(rows)
    out = [f"{n} hostile cases, {len(controls)} clean controls", ""]
    for t in TOOLS:
        words = [v[t].word for _, v in rows]
        fp = [name for name, v in controls if v[t].word == "flagged"]
        out.append(f"{t:11s} flagged {words.count('flagged'):3d}/{n}, missed "
                   f"{words.count('missed'):3d}, error {words.count('error'):3d}"
                   + (f", warned {words.count('warned'):3d}" if t == "ours" else "") + "; "
                   f"false positives {len(fp)}/{len(controls)}" + (f": {fp}" if fp else ""))
    own = [name for name, v in rows if v["fickling"].unsafe_by_own_verdict]
    own_fp = [name for name, v in controls if v["fickling"].unsafe_by_own_verdict]
    out.append(f"(fickling's own verdict, anything above LIKELY_SAFE: {len(own)}/{n} cases, "
               f"false positives {len(own_fp)}/{len(controls)}"
               + (f": {own_fp})" if own_fp else ")"))
    slow = max(rows + controls, key=lambda r: r[1]["ours"].seconds)
    big = max(rows + controls, key=lambda r: r[1]["ours"].maxrss_mb)
    out.append(f"ours, slowest command: {slow[1]['ours'].seconds:.2f} s ({slow[0]}); largest "
               f"peak RSS: {big[1]['ours'].maxrss_mb:.0f} MB ({big[0]})")

    def theirs(v):
        return [t for t in SCANNERS if v[t].word == "flagged"]

    beat_us = [name for name, v in rows if theirs(v) and v["ours"].word != "flagged"]
    only_us = [name for name, v in rows if not theirs(v) and v["ours"].word == "flagged"]
    out += ["", f"flagged by any of the three but not by us: {len(beat_us)}"
            + "".join(f"\n  {name}: ours {v['ours']}, by {', '.join(theirs(v))}"
                      for name, v in rows if name in beat_us),
            f"missed by all three, flagged by us: {len(only_us)}"]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", type=Path,
                    default=Path(os.environ.get("CKPT_SCANNERS_BIN", "/tmp/scanners/bin")),
                    help="the scanner venv's bin folder (default $CKPT_SCANNERS_BIN or "
                         "/tmp/scanners/bin)")
    ap.add_argument("--only", default="", help="cases whose name contains this")
    ap.add_argument("--folder", action="store_true",
                    help="give the scanners the checkpoint folder instead of the offending file")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per command")
    ap.add_argument("--json", type=Path, help="also write the verdicts here")
    args = ap.parse_args(argv)
    missing = [n for n in ("picklescan", "modelscan", "python") if not (args.bin / n).exists()]
    if missing:
        print(f"{args.bin} has no {', '.join(missing)}: install the scanners as the docstring "
              "says", file=sys.stderr)
        return 2
    cases = [c for c in CASES if args.only in c.name]
    with ThreadPoolExecutor(args.jobs) as pool:
        verdicts = list(pool.map(lambda c: judge(c, args.bin, args.folder, args.timeout), cases))
    rows = [(c.name, v) for c, v in zip(cases, verdicts) if not c.control]
    controls = [(c.name, v) for c, v in zip(cases, verdicts) if c.control]
    if rows:
        print(table(rows))
    if controls:
        print("\nclean controls (flagged = a false positive):\n" + table(controls))
    print("\n" + summary(rows, controls))
    if args.json:
        args.json.write_text(json.dumps({name: {t: str(v[t]) for t in TOOLS}
                                         for name, v in rows + controls}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
