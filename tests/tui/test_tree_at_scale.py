"""The tree at 80x24 on the 163-shard checkpoint: every row fits its pane and what it shows is
whole, by file, by module, and after a search (when the scrollbar appears). A file's or module's
name stays whole and its counts are left out when they do not fit; a tensor's name is cut in
the middle and its size stays whole."""

from __future__ import annotations

import re

from tests.moe import NAME
from tests.tui.conftest import app_on, loaded

SIZE = re.compile(r"\d[\d.,]* (B|Bytes|KiB|MiB|GiB|TiB)$")
COUNT = re.compile(r"\d[\d.,/KMBT]* (params|tensors?)$")  # a row that left its size out
SCROLLBAR = set("▁▂▃▄▅▆▇█▔▕ ")


def tree_pane(app) -> list[str]:
    """The rows of the tree's box as drawn on screen (what a user sees, scrollbar included),
    without its border."""
    lines = [strip.text for strip in app.screen._compositor.render_strips()]
    top = next(i for i, line in enumerate(lines) if line.startswith("╭─ by "))
    right = lines[top].index("╮")  # the box's right border
    rows = []
    for line in lines[top + 1:]:
        if line.startswith("╰"):
            break
        rows.append(line[1:right])
    assert rows, "no tree pane on screen"
    return rows


FILE_VIEW_NAMES = ("model", "m.", "lm_head", "config", "generation")


def assert_rows_whole(rows: list[str], counted: str, starts: tuple = FILE_VIEW_NAMES) -> int:
    """Each row with text ends in a whole size, a whole count, or a whole name with nothing
    after it, before the scrollbar's two columns, which hold nothing of the row; rows naming
    `counted` hold it whole. Returns the rows checked."""
    checked = 0
    for row in rows:
        body, gutter = row[:-2], row[-2:]
        assert set(gutter) <= SCROLLBAR, f"the row runs into the scrollbar: {row!r}"
        text = body.rstrip()
        if not text.strip("├└│ "):
            continue
        whole_name = "…" not in text and "  " not in text.lstrip("├└│▶▼ ")
        assert SIZE.search(text) or COUNT.search(text) or whole_name, f"cut: {row!r}"
        name = text.lstrip("├└│▶▼ ")
        assert name.startswith(starts), f"the name's start is lost: {row!r}"
        if re.search(rf"\b{counted}\b", text):  # the word, not 'safetensors'
            assert re.search(rf"\d[\d,./KMBT]* {counted}", text), row
        checked += 1
    return checked


async def test_file_rows_and_tensor_rows_fit_80_columns(monkeypatch, moe_checkpoint):
    app = app_on(monkeypatch, moe_checkpoint.parent, NAME)
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        for key in ("down", "right", "down"):  # the first shard opened
            await pilot.press(key)
            await loaded(app, pilot)
        rows = tree_pane(app)
        # below 100 columns the tree has the width: the file's counts fit beside its name
        assert rows[1].rstrip() == "▼ model-00001-of-000163.safetensors  136 tensors  3.9 GiB"
        # the layer number and the leaf kept (the middle cut used to hide an expert's number)
        assert "model.layers.0.mlp.down_proj.weight" in "\n".join(rows)
        assert assert_rows_whole(rows, "tensors") >= 10


async def test_rows_stay_whole_after_a_search_and_escape(monkeypatch, moe_checkpoint):
    app = app_on(monkeypatch, moe_checkpoint.parent, NAME)
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        await pilot.press("slash", *"experts.255.down", "enter", "n", "n", "escape")
        await loaded(app, pilot)
        rows = tree_pane(app)
        # (its thumb may be reversed blanks, so asked of the widget, not read off the rows)
        assert app.query_one("#tree").show_vertical_scrollbar, "expected the scrollbar"
        assert assert_rows_whole(rows, "tensors") >= 10


async def test_module_rows_fit_80_columns(monkeypatch, moe_checkpoint):
    app = app_on(monkeypatch, moe_checkpoint.parent, NAME)
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        await pilot.press("m")
        await loaded(app, pilot)
        for key in ("down", "right", "down", "down", "right", "down", "right"):
            await pilot.press(key)  # model > layers > layer 0 opened
            await loaded(app, pilot)
        rows = tree_pane(app)
        assert assert_rows_whole(rows, "params", starts=("",)) >= 8
