"""Frame time of the tensor table at ~92,000 rows (the sparse DeepSeek-V3-shaped checkpoint).

Usage: python benchmarks/bench_table.py [--workdir DIR] [--reps N] [--no-datatable]

In one run, at 80x24 in Textual's headless driver:
  - one screen of rows drawn (every visible line through render_line, as the compositor asks)
    after pgdn, after end, and after each sort (the sort itself is timed apart: it runs in a
    worker, off the UI thread);
  - against two baselines measured in the same run: the same screen of an empty table (the
    floor: header and blank lines), and Textual's DataTable holding the same rows (add_rows,
    then its first screen), what the diff table used before it drew only visible rows.
And the whole frame, as a user waits for it: in the browser on the checkpoint, `l` opened, the
time from a key (pgdn, end, home, each `s` sort) to its frame drawn (the worker done, the
screen composed and rendered to the bytes a terminal gets), against the same keys on the
bundled 85-tensor sample in the same run (`--frames-only` runs this part alone).
It reports; it does not assert.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

SIZE = (80, 24)


def checkpoint(workdir: str) -> str:
    path = os.path.join(workdir, "deepseek-v3-sparse")
    subprocess.run([sys.executable, os.path.join(HERE, "make_moe_checkpoint.py"), path],
                   check=True, stdout=subprocess.DEVNULL)
    return path


def browse_model(path: str):
    from ckpt_browser.analysis.opened import iter_tagged
    from ckpt_browser.producers.layout import open_layout
    from ckpt_browser.tui.browse.model import BrowseModel

    model = BrowseModel(open_layout(path))
    for batch in iter_tagged(model.layout, threading.Event()):
        model.add(batch)
    return model


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def draw_screen(table) -> float:
    t = time.perf_counter()
    for y in range(table.size.height):
        table.render_line(y)
    return time.perf_counter() - t


async def measure_vtable(model, reps: int) -> dict[str, float]:
    from textual.app import App

    from ckpt_browser.tui.browse.table import SORTS, NameOrder, TensorTable, table_rows

    class Host(App):
        def compose(self):
            yield TensorTable()

    out: dict[str, float] = {}
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(TensorTable)
        table.focus()
        await pilot.pause()
        out["empty screen (floor)"] = median_ms([draw_screen(table) for _ in range(reps)])
        rows = table_rows(model, "", "name")
        table.set_rows(rows)
        await pilot.pause()
        out["rows"] = len(rows)
        for key, words in (("pagedown", "after pgdn"), ("end", "after end")):
            samples = []
            for _ in range(reps):
                table.action_move(-1e9) if key == "end" else None
                await pilot.pause()
                await pilot.press(key)
                samples.append(draw_screen(table))
            out[f"screen {words}"] = median_ms(samples)
        for key, words in SORTS:
            sort_s, set_s, draw_s = [], [], []
            for _ in range(reps):
                t = time.perf_counter()
                sorted_rows = table_rows(model, "", key)
                sort_s.append(time.perf_counter() - t)
                t = time.perf_counter()
                table.set_rows(sorted_rows, keep=table.current)  # the UI thread's part
                set_s.append(time.perf_counter() - t)
                await pilot.pause()
                draw_s.append(draw_screen(table))
            out[f"sort by {words} (worker)"] = median_ms(sort_s)
            if key != "file":  # what `s` costs once the name order is known
                order = NameOrder()
                table_rows(model, "", "name", order)
                again = []
                for _ in range(reps):
                    t = time.perf_counter()
                    table_rows(model, "", key, order)
                    again.append(time.perf_counter() - t)
                out[f"sort by {words}, names sorted (worker)"] = median_ms(again)
            out[f"set_rows after sort by {words}"] = median_ms(set_s)
            out[f"screen after sort by {words}"] = median_ms(draw_s)
    return out


async def measure_datatable(model) -> dict[str, float]:
    from textual.app import App
    from textual.widgets import DataTable

    from ckpt_browser.report.words import size
    from ckpt_browser.tui.browse.table import shape_cell, table_rows

    rows = [(t.name, t.dtype or "?", shape_cell(t), size(t.nbytes), t.file)
            for t in table_rows(model, "", "name")]

    class Host(App):
        def compose(self):
            yield DataTable()

    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(DataTable)
        table.add_columns("name", "dtype", "shape", "size", "file")
        t = time.perf_counter()
        table.add_rows(rows)
        await pilot.pause()
        for y in range(table.size.height):
            table.render_line(y)
        first = time.perf_counter() - t
        await pilot.press("pagedown")
        t = time.perf_counter()
        for y in range(table.size.height):
            table.render_line(y)
        page = time.perf_counter() - t
    return {"DataTable: add rows + first screen": first * 1000,
            "DataTable: screen after pgdn": page * 1000}


FRAME_KEYS = ("pagedown", "end", "home", "s", "s", "s", "s")  # s: size, dtype, file, name


async def key_to_frame(path: str, reps: int) -> dict[str, float]:
    """Median ms from each key to its frame rendered, in the browser's `l` table, and of the
    frame's rendering alone (compose and write), as "<key> (frame)"."""
    import io

    from rich.console import Console

    from ckpt_browser.producers.layout import open_layout
    from ckpt_browser.tui.app import make_app
    from ckpt_browser.tui.browse.table import SORTS

    names = iter([f"s: sort by {words}" for _, words in SORTS[1:] + SORTS[:1]])
    labels = [k if k != "s" else next(names) for k in FRAME_KEYS]
    samples: dict[str, list[float]] = {k: [] for k in labels}
    samples.update({f"{k} (frame)": [] for k in labels})
    app = make_app(open_layout(path))
    async with app.run_test(size=SIZE) as pilot:
        async def settle():
            await app.workers.wait_for_complete()
            await pilot.pause()

        await settle()
        await pilot.press("l")
        await settle()
        console = Console(width=SIZE[0], height=SIZE[1], file=io.StringIO(),
                          force_terminal=True, color_system="truecolor", legacy_windows=False)
        for _ in range(reps):
            for key, label in zip(FRAME_KEYS, labels):
                t = time.perf_counter()
                await pilot.press(key)
                await settle()
                drawn = time.perf_counter()
                console.file = io.StringIO()
                console.print(app.screen._compositor.render_update(full=True), end="")
                end = time.perf_counter()
                samples[label].append(end - t)
                samples[f"{label} (frame)"].append(end - drawn)
    return {k: median_ms(v) for k, v in samples.items()}


def print_frames(path: str, reps: int) -> None:
    from ckpt_browser.samples import default_sample

    big = asyncio.run(key_to_frame(path, reps))
    small = asyncio.run(key_to_frame(default_sample(), reps))
    print(f"key to frame in the browser's l table, {SIZE[0]}x{SIZE[1]}, median of {reps} (ms; "
          "the pilot's own wait for idle is in each, ~0.1 s):")
    print(f"  {'key':<40} {'92k rows':>9} {'85 rows':>9}  ratio")
    for k in big:
        print(f"  {k:<40} {big[k]:9.1f} {small[k]:9.1f}  {big[k] / small[k]:5.2f}x")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(),
                                                      "ckpt-browser-bench"))
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--no-datatable", action="store_true", help="skip the slow baseline")
    ap.add_argument("--frames-only", action="store_true", help="only the key-to-frame part")
    args = ap.parse_args()
    os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")
    path = checkpoint(args.workdir)
    print_frames(path, args.reps)
    if args.frames_only:
        return 0
    model = browse_model(path)
    ours = asyncio.run(measure_vtable(model, args.reps))
    print(f"tensor table, {int(ours.pop('rows')):,} rows, {SIZE[0]}x{SIZE[1]}, "
          f"median of {args.reps} (ms):")
    floor = ours["empty screen (floor)"]
    for k, v in ours.items():
        drawn = k.startswith("screen")
        ratio = f"  ({v / floor:.1f}x floor)" if drawn else ""
        print(f"  {k:<52} {v:9.2f}{ratio}")
    if not args.no_datatable:
        base = asyncio.run(measure_datatable(model))
        print("baseline, Textual DataTable with the same rows (ms, one run):")
        for k, v in base.items():
            print(f"  {k:<52} {v:9.1f}")
        fill = ours["set_rows after sort by name"] + ours["screen after sort by name"]
        ratio = base["DataTable: add rows + first screen"] / max(fill, 1e-9)
        print(f"rows in and the first screen drawn: DataTable / this table = {ratio:,.0f}x")
        ratio = ours["screen after pgdn"] / max(base["DataTable: screen after pgdn"], 1e-9)
        print(f"a screen after pgdn: this table / DataTable (which caches its lines) = "
              f"{ratio:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
