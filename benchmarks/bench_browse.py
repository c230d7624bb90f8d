"""Benchmark ckpt-browser on a sparse DeepSeek-V3-shaped checkpoint (163 shards, ~92k tensors).

Usage: python benchmarks/bench_browse.py [--workdir DIR] [--reps N]

In one run, against benchmarks/baseline_inspect.py measured in the same run:
  - `inspect --json`: median wall time and peak RSS, ratio vs the baseline (target <= 1.5x),
    and whether both print the same JSON;
  - the TUI in a real terminal (tmux): time until the shard list and totals are on screen
    (target <= 1.5x the baseline's whole run) and until every header is read (target <= 2x);
  - that `inspect --json` read no tensor bytes (/proc/self/io rchar) and imported neither
    torch nor textual.
It reports; it does not assert. Exit code is non-zero only when something errored.
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
WEIGHT_KEYS = ("path", "format", "files", "tensors", "totals", "problems")
ENV = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
# As installed (pip compiles every module): with PYTHONDONTWRITEBYTECODE set, each run would
# compile the package's ~70 modules again, a cost no user pays; the warm-up run writes them.
ENV.pop("PYTHONDONTWRITEBYTECODE", None)

# Runs the command once in a fresh process so RUSAGE_CHILDREN holds only its peak RSS.
TIMER = r"""
import json, resource, subprocess, sys, time
with open(sys.argv[1], "wb") as out:
    t = time.perf_counter()
    rc = subprocess.run(sys.argv[2:], stdout=out).returncode
    wall = time.perf_counter() - t
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"rc": rc, "wall": wall, "rss_kb": rss}))
"""

# Reads /proc/self/io after importing the CLI and (optionally) running inspect --json.
PROBE = r"""
import json, os, sys
real = os.dup(1)
os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
import ckpt_browser.cli
# every module the inspect path imports, so the allowance counts their code, not tensor bytes
import ckpt_browser.analysis.opened, ckpt_browser.analysis.components, ckpt_browser.analysis.runs
import ckpt_browser.parts.content, ckpt_browser.analysis.resume
import ckpt_browser.report.json_report, ckpt_browser.report.text
rc = None
if len(sys.argv) > 1:
    try:
        rc = ckpt_browser.cli.main(["inspect", "--json", sys.argv[1]])
    except SystemExit as e:
        rc = e.code
    sys.stdout.flush()
io = dict(line.split(": ") for line in open("/proc/self/io").read().splitlines())
os.write(real, json.dumps({"rc": rc, "rchar": int(io["rchar"]),
                           "torch": "torch" in sys.modules,
                           "textual": "textual" in sys.modules}).encode())
"""


def run_timed(cmd, out_path):
    p = subprocess.run([PY, "-c", TIMER, out_path, *cmd], capture_output=True, text=True,
                       env=ENV, cwd=REPO, check=True)
    r = json.loads(p.stdout)
    if r["rc"] != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {r['rc']}")
    return r


def probe(path=None):
    p = subprocess.run([PY, "-c", PROBE] + ([path] if path else []), capture_output=True,
                       text=True, env=ENV, cwd=REPO)
    if p.returncode != 0:
        raise RuntimeError("probe failed:\n" + p.stderr[-2000:])
    return json.loads(p.stdout)


def first_difference(a, b, where="report"):
    if type(a) is not type(b):
        return f"{where}: {type(a).__name__} vs {type(b).__name__}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b), key=str):
            if k not in a or k not in b:
                return f"{where}.{k}: only in {'baseline' if k in a else 'cli'}"
            d = first_difference(a[k], b[k], f"{where}.{k}")
            if d:
                return d
    elif isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_difference(x, y, f"{where}[{i}]")
            if d:
                return d
        if len(a) != len(b):
            return f"{where}: length {len(a)} vs {len(b)}"
    elif a != b:
        return f"{where}: {a!r} vs {b!r}"
    return None


class Tmux:
    def __init__(self, tmp):
        # A private server on a socket in our temp dir: touches no other tmux, leaves nothing.
        self.sock = os.path.join(tmp, "tmux.sock")

    def __call__(self, *args, check=True):
        return subprocess.run(["tmux", "-S", self.sock, "-f", "/dev/null", *args],
                              capture_output=True, text=True, check=check)

    def kill_server(self):
        self("kill-server", check=False)


def tui_once(tmux, ckpt, n_files, tmp, shots, timeout=120.0):
    """One TUI launch; returns seconds from exec until (files shown, all headers read, load done).
    Stores the matching screens in shots so a human can check what was seen."""
    fifo = os.path.join(tmp, "go")
    if os.path.exists(fifo):
        os.remove(fifo)
    os.mkfifo(fifo)
    # The pane waits on the fifo so tmux's own start-up is not counted.
    inner = (f"read _ < {fifo}; exec env TERM=xterm-256color TEXTUAL_ANIMATIONS=none "
             f"PYTHONPATH={REPO} {PY} -m ckpt_browser {ckpt}")
    tmux("new-session", "-d", "-s", "b", "-x", "120", "-y", "40", "-c", REPO, f"sh -c '{inner}'")
    tmux("set-option", "-t", "b", "remain-on-exit", "on")  # keep the screen if it crashes
    first_text, all_text = f"{n_files} files", f"read {n_files}/{n_files}"
    t_first = t_all = t_done = None
    screen = ""
    # One tmux call per poll: the screen, then whether the program has exited.
    poll = ("capture-pane", "-p", "-t", "b", ";",
            "display-message", "-p", "-t", "b", "#{pane_dead}")
    try:
        end = time.perf_counter() + 10
        while True:  # wait until the pane is blocked reading the fifo
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
                break
            except OSError as err:  # ENXIO: no reader yet
                if time.perf_counter() > end:
                    raise RuntimeError("tmux pane never started") from err
                time.sleep(0.005)
        t0 = time.perf_counter()
        os.write(fd, b"go\n")
        os.close(fd)
        while time.perf_counter() - t0 < timeout:
            screen, _, dead = tmux(*poll).stdout.rstrip("\n").rpartition("\n")
            now = time.perf_counter() - t0  # after the capture: errs on the slow side
            if t_first is None and first_text in screen:
                t_first, shots["first"] = now, screen
            if t_all is None and all_text in screen:
                t_all, shots["all"] = now, screen
            # Informational: the summary line drops "reading…" once totals are final.
            line = next((row for row in screen.splitlines() if all_text in row), None)
            if line is not None and "reading" not in line:
                t_done, shots["done"] = now, screen
                break
            if dead == "1" or (t_all is not None and now - t_all > 30):
                break
            time.sleep(0.01)
        if t_all is not None:
            tmux("send-keys", "-t", "b", "q")
            end = time.perf_counter() + 10
            while time.perf_counter() < end:
                if tmux("display-message", "-p", "-t", "b", "#{pane_dead}").stdout.strip() == "1":
                    break
                time.sleep(0.05)
            else:
                print("  warning: TUI did not quit on 'q' within 10 s")
    finally:
        tmux("kill-session", "-t", "b", check=False)
    if t_first is None or t_all is None:
        raise RuntimeError(f"TUI never showed {first_text!r} / {all_text!r}; "
                           f"last screen:\n{screen.rstrip()}")
    return t_first, t_all, t_done


def verdict(ratio, target):
    return f"{ratio:5.2f}x  (target <= {target}x)  {'PASS' if ratio <= target else 'FAIL'}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # Outside the repository: a `cp -r` of the repo would turn the sparse files into
    # hundreds of GB of zeros.
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "ckpt-browser-bench"))
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    errors = []

    ckpt = os.path.join(args.workdir, "deepseek-v3-sparse")
    subprocess.run([PY, os.path.join(HERE, "make_moe_checkpoint.py"), ckpt], check=True)
    index_path = os.path.join(ckpt, "model.safetensors.index.json")
    index = json.load(open(index_path))
    shards = sorted(set(index["weight_map"].values()))
    tensor_bytes = index["metadata"]["total_size"]
    header_total = 0
    for s in shards:
        with open(os.path.join(ckpt, s), "rb") as f:
            header_total += 8 + int.from_bytes(f.read(8), "little")
    logical = sum(os.path.getsize(os.path.join(ckpt, n)) for n in os.listdir(ckpt))  # apparent size
    du_kb = int(subprocess.run(["du", "-sk", ckpt], capture_output=True, text=True,
                               check=True).stdout.split()[0])
    index_size = os.path.getsize(index_path)

    print(f"checkpoint   {ckpt}")
    print(f"             {len(shards)} shards; logical size {logical / 1e9:.1f} GB; "
          f"disk usage (du) {du_kb / 1024:.1f} MiB; headers {header_total / 1e6:.1f} MB")
    print(f"python       {PY}")
    print(f"             median of {args.reps} runs after one warm-up; {os.cpu_count()} cores")
    print()

    # (a, b) baseline vs inspect --json, interleaved so drift hits both alike.
    base_cmd = [PY, os.path.join(HERE, "baseline_inspect.py"), ckpt]
    cli_cmd = [PY, "-m", "ckpt_browser", "inspect", "--json", ckpt]
    base_out = os.path.join(args.workdir, "baseline.json")
    cli_out = os.path.join(args.workdir, "inspect.json")
    runs = {"base": [], "cli": []}
    base_wall = None
    try:
        for i in range(args.reps + 1):
            b = run_timed(base_cmd, base_out)
            c = run_timed(cli_cmd, cli_out)
            if i:
                runs["base"].append(b)
                runs["cli"].append(c)
        med = {k: (statistics.median(r["wall"] for r in v),
                   statistics.median(r["rss_kb"] for r in v)) for k, v in runs.items()}
        base_wall = med["base"][0]
        print(f"{'':24}{'wall':>9}{'peak RSS':>12}")
        print(f"{'baseline_inspect.py':24}{med['base'][0]:8.3f}s{med['base'][1] / 1024:9.1f} MiB")
        print(f"{'inspect --json':24}{med['cli'][0]:8.3f}s{med['cli'][1] / 1024:9.1f} MiB")
        print(f"  wall ratio        {verdict(med['cli'][0] / med['base'][0], 1.5)}")
        print(f"  peak RSS ratio    {verdict(med['cli'][1] / med['base'][1], 1.5)}")
        # the baseline prints the weights document; the CLI adds the training state beside it
        ours = {k: v for k, v in json.load(open(cli_out)).items() if k in WEIGHT_KEYS}
        diff = first_difference(json.load(open(base_out)), ours)
        print("  same JSON as baseline: " + ("yes" if diff is None else "NO, first at " + diff))
    except Exception as e:  # keep going: the other sections still say something
        errors.append(f"inspect timing: {e}")
        print(f"inspect timing: ERROR {e}")
    print()

    # (c) the TUI in tmux.
    if shutil.which("tmux") is None:
        errors.append("tmux not found")
        print("TUI: ERROR tmux not found")
    else:
        try:
            with tempfile.TemporaryDirectory() as tmp:
                tmux = Tmux(tmp)
                shots = {}
                try:
                    n_files = len([n for n in os.listdir(ckpt) if not n.startswith(".")])
                    times = [tui_once(tmux, ckpt, n_files, tmp, shots)
                             for _ in range(args.reps + 1)][1:]
                finally:
                    tmux.kill_server()
            for k, screen in shots.items():  # from the last run
                with open(os.path.join(args.workdir, f"tui_screen_{k}.txt"), "w") as f:
                    f.write(screen)
            first = statistics.median(t[0] for t in times)
            every = statistics.median(t[1] for t in times)
            print("TUI, measured in a real terminal: tmux 120x40, capture-pane every ~10 ms")
            print(f"  shard list + totals on screen  {first:6.3f}s")
            print(f"  all {n_files} files read           {every:6.3f}s")
            if all(t[2] is not None for t in times):
                done = statistics.median(t[2] for t in times)
                print(f"  totals final (no 'reading…')   {done:6.3f}s  (no target)")
            print(f"  (screens saved as {os.path.join(args.workdir, 'tui_screen_*.txt')})")
            if base_wall:
                print(f"  first screen / baseline run    {verdict(first / base_wall, 1.5)}")
                print(f"  all headers / baseline run     {verdict(every / base_wall, 2)}")
        except Exception as e:
            errors.append(f"TUI: {e}")
            print(f"TUI: ERROR {e}")
    print()

    # (d) no tensor bytes read, no torch, no textual.
    try:
        allowance = probe()["rchar"]
        r = probe(ckpt)
        if r["rc"] not in (0, None):
            raise RuntimeError(f"cli.main returned {r['rc']}")
        budget = header_total + index_size + allowance + 2**20
        print("inspect --json, in-process (ckpt_browser.cli.main)")
        print(f"  bytes read (rchar)      {r['rchar']:>14,}")
        print(f"  budget                  {budget:>14,}  = headers {header_total:,} + index "
              f"{index_size:,} + import allowance {allowance:,} + 1 MiB")
        print(f"  logical tensor data     {tensor_bytes:>14,}")
        print(f"  no tensor bytes read    {'PASS' if r['rchar'] < budget else 'FAIL'}")
        print(f"  torch not imported      {'PASS' if not r['torch'] else 'FAIL'}")
        print(f"  textual not imported    {'PASS' if not r['textual'] else 'FAIL'}")
    except Exception as e:
        errors.append(f"read check: {e}")
        print(f"read check: ERROR {e}")

    if errors:
        print("\nerrors:\n  " + "\n  ".join(errors), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
