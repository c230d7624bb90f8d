"""The tensor table (`l`): every tensor in columns that fit 80 columns, sorted with `s`,
filtered with `/`, the details and `v` on its highlighted row, and 94,000 rows drawn lazily."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file, save_file

from ckpt_browser.model import natural_key
from ckpt_browser.readers.safetensors import read_header
from ckpt_browser.report.words import size
from ckpt_browser.tui.browse.table import TensorTable, file_cell, shape_cell
from ckpt_browser.tui.browse.values_panel import ValuesPanel
from ckpt_browser.tui.common.cells import fit_name
from tests.tui.conftest import SAMPLES, alone, count_drawn, loaded, plain, shows_numbers_and_leaf

SIZE = (80, 24)
RUN6 = "tiny-llama-run/checkpoint-6"


def table(app) -> TensorTable:
    return app.query_one(TensorTable)


def screen_lines(t: TensorTable) -> list[str]:
    return [t.render_line(y).text for y in range(t.size.height)]


async def press(app, pilot, *keys):
    await pilot.press(*keys)
    await loaded(app, pilot)


async def test_l_shows_every_tensor_and_s_cycles_the_sort(sample_app):
    app = sample_app(RUN6)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await press(app, pilot, "l")
        t = table(app)
        everything = [x for f in app.screen.model.shards.values() for x in f.tensors]
        assert t.has_focus and len(t.rows) == len(everything) == 85  # weights and state
        assert [r.name for r in t.rows] == sorted((x.name for x in everything), key=natural_key)
        assert t.border_title == "all 85 tensors · sort: name (s)"

        await press(app, pilot, "s")  # size, largest first; ties by name
        assert "sort: size, largest first" in t.border_title
        sizes = [r.nbytes for r in t.rows]
        assert sizes == sorted(sizes, reverse=True) and t.cursor == 0
        assert t.current.name == "lm_head.weight"  # 16 KiB, first of the largest by name
        assert "lm_head.weight" in plain(app.query_one("#details-body"))

        await press(app, pilot, "s")  # dtype
        dtypes = [r.dtype for r in t.rows]
        assert dtypes == sorted(dtypes) and t.current.dtype == min(dtypes)

        await press(app, pilot, "s")  # file: the files' order, then by name
        files = [f for f in app.screen.model.layout.files if app.screen.model.shards[f].tensors]
        order = [files.index(r.file) for r in t.rows]
        assert order == sorted(order) and t.current.file == files[0]

        await press(app, pilot, "s")
        assert "sort: name" in t.border_title
        await press(app, pilot, "l")  # back to the tree
        assert app.query_one("#tree").has_focus and not t.display


async def test_columns_fit_80_columns_only_names_are_cut(sample_app):
    app = sample_app(RUN6)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await press(app, pilot, "l")
        t = table(app)
        lines = screen_lines(t)
        assert lines[0].split() == ["name", "dtype", "shape", "size", "file"]
        assert t.region.width == SIZE[0] and all(len(line) <= t.room for line in lines)
        shown = lines[1:]
        rows = t.rows[:len(shown)]
        cut = 0
        for line, row in zip(shown, rows):
            for cell in (row.dtype, shape_cell(row), size(row.nbytes)):
                assert f" {cell} " in line + " "  # whole, never cut
            name_w = t.sizes()[0]
            assert line[1:].startswith(fit_name(row.name, name_w))
            if len(row.name) > name_w:  # shortened: every number and the leaf stay
                cut += 1
                assert shows_numbers_and_leaf(fit_name(row.name, name_w), row.name)
        assert file_cell("model-00002-of-00003.safetensors", 12) == "2 of 3"
        await pilot.press("end")
        last = t.rows[-1]
        assert screen_lines(t)[-1].startswith(">" + fit_name(last.name, t.sizes()[0])[:10])


async def test_filter_narrows_the_table_and_esc_keeps_the_row(sample_app):
    app = sample_app(RUN6)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await press(app, pilot, "l", "s")  # by size
        await press(app, pilot, "slash", *"mlp", "enter")
        t = table(app)
        assert t.has_focus and t.rows and all("mlp" in r.name for r in t.rows)
        assert len(t.rows) == 6 and t.border_title.startswith("6 tensors matching 'mlp'")
        assert "filter 'mlp': 6 of" in plain(app.query_one("#summary"))
        await press(app, pilot, "n")  # n / N: the next and previous rows, wrapping around
        assert t.cursor == 1 and "match 2/6 (n/N)" in plain(app.query_one("#summary"))
        await press(app, pilot, "N", "N")
        assert t.cursor == 5 and "match 6/6" in plain(app.query_one("#summary"))
        await press(app, pilot, "n", "down", "down")
        here = t.current
        await press(app, pilot, "escape")
        assert len(t.rows) == 85 and t.current is here and t.has_focus
        assert here.name in plain(app.query_one("#details-body"))


async def test_v_reads_the_highlighted_rows_values(sample_app):
    app = sample_app("tiny-llama-release")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await press(app, pilot, "l", "s")  # largest first: lm_head.weight, embed_tokens
        await press(app, pilot, "down", "v")
        t, panel = table(app), app.query_one(ValuesPanel)
        assert t.current.name == "model.embed_tokens.weight"
        stats = panel.session.results[("weights", t.current.file, t.current.name)]
        want = load_file(SAMPLES / "tiny-llama-release" / t.current.file)[t.current.name]
        assert stats.numel == want.numel()
        assert stats.max == pytest.approx(float(want.max()))
        assert panel.has_class("-result")


# -- 94,000 rows ----------------------------------------------------------------------------
@pytest.fixture
def moe_rows(tmp_path):
    """94,000 TensorInfo rows: a real safetensors header's tensors, renamed as the experts of
    a 61-layer MoE model (the reader's own rows, copied)."""
    path = tmp_path / "model-00001-of-00002.safetensors"
    save_file({"w": torch.zeros(8, 4, dtype=torch.bfloat16)}, str(path))
    (info,) = read_header(str(path), path.name).tensors
    return [info._replace(name=f"model.layers.{i // 1541}.mlp.experts.{i % 1541}.down_proj"
                               f".weight") for i in range(94_000)]


async def test_94000_rows_scroll_and_draw_only_what_is_visible(moe_rows, monkeypatch):
    drawn = count_drawn(monkeypatch, TensorTable)
    app = alone(TensorTable)
    async with app.run_test(size=SIZE) as pilot:
        t = app.query_one(TensorTable)
        t.focus()
        t.set_rows(moe_rows)
        await pilot.pause()
        assert 0 < len(drawn) < 100
        drawn.clear()
        await pilot.press("pagedown", "pagedown")
        assert t.cursor == 2 * (SIZE[1] - 2) and len(drawn) < 100
        await pilot.press("end")
        assert t.current is moe_rows[-1] and len(drawn) < 200
        last = screen_lines(t)[-1]
        # the last row, 93,999 = 60 * 1541 + 1539: layer 60, expert 1539
        assert last.startswith(">m") and shows_numbers_and_leaf(last[1:].split()[0],
                                                                "model.layers.60.mlp.experts.1539"
                                                                ".down_proj.weight")
        assert "1 of 2" in last
        await pilot.press("home")
        assert t.current is moe_rows[0]


async def test_table_opened_while_reading_fills_in_when_every_file_is_read(sample_app,
                                                                           monkeypatch):
    """The headers' read is held after its first file (on an Event, not on time): l shows
    that file's tensors and says reading goes on; when the read ends, every tensor is there."""
    import threading

    from ckpt_browser.tui.browse import screen as browse_screen

    gate, real = threading.Event(), browse_screen.iter_tagged

    def held(layout, cancel, *size):
        files = [f for batch in real(layout, cancel, *size) for f in batch]
        yield files[:1]
        assert gate.wait(60), "the test never let the read go"
        yield files[1:]

    monkeypatch.setattr(browse_screen, "iter_tagged", held)
    app = sample_app(RUN6)
    async with app.run_test(size=SIZE) as pilot:
        model = app.first.model
        for _ in range(200):
            await pilot.pause()
            if model.done:
                break
        await pilot.press("l")
        t = table(app)
        for _ in range(200):
            await pilot.pause()
            if t.border_title:
                break
        first = [x.name for f in model.shards.values() for x in f.tensors]
        assert sorted(r.name for r in t.rows) == sorted(first)
        assert f"read 1/{model.total} files, more when all are" in t.border_title
        gate.set()
        await loaded(app, pilot)
        assert len(t.rows) == 85 and t.border_title == "all 85 tensors · sort: name (s)"


async def test_sorting_does_not_describe_the_whole_checkpoint(sample_app):
    """Textual names each worker by repr() of its arguments, on the UI thread: the table's
    worker gets the BrowseModel, whose dataclass repr listed every tensor (0.9 s at each `s`
    at 92,000 tensors). Its repr is one short line, however many tensors are read."""
    app = sample_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        model = app.screen.model
        assert sum(len(f.tensors) for f in model.shards.values()) == 85
        assert len(repr(model)) < 120, repr(model)
        await pilot.press("l", "s")
        await loaded(app, pilot)
        described = [w.description for w in app.workers if w.group == "table"]
        assert all(len(d) < 300 for d in described), described
