"""`ckpt-browser A B` at 80x24: the diff screen driven by keys, on real checkpoints."""

from __future__ import annotations

import threading

import pytest
import torch
from safetensors.torch import save_file

from ckpt_browser.analysis.opened import open_path
from ckpt_browser.tui.app import CkptApp, make_diff_app
from ckpt_browser.tui.diff import rows as diff_rows
from ckpt_browser.tui.diff.panes import DiffDetails, DiffSummary
from ckpt_browser.tui.diff.table import DiffTable
from ckpt_browser.values.diff import Options, Row, side_of
from ckpt_browser.values.locate import TensorLoc
from ckpt_browser.values.read import Cancelled
from tests.tui.conftest import SAMPLES, alone, count_drawn, loaded, plain

SIZE = (80, 24)
RUN3, RUN6 = "tiny-llama-run/checkpoint-3", "tiny-llama-run/checkpoint-6"
RELEASE = "tiny-llama-release"


@pytest.fixture
def diff_app(monkeypatch):
    """A diff app on two samples, opened by relative paths (no absolute path on screen)."""

    def make(a: str, b: str, opts: Options | None = None) -> CkptApp:
        monkeypatch.chdir(SAMPLES)
        monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
        return make_diff_app(side_of(open_path(a)), side_of(open_path(b)), opts or Options())

    return make


@pytest.fixture
def mixed(tmp_path, monkeypatch):
    """A and B with one tensor of each status; B names them with a "model." prefix."""
    g = torch.Generator().manual_seed(0)
    base = {n: torch.randn(4, 4, generator=g)
            for n in ("same.w", "moved.small", "moved.big", "retyped", "reshaped", "gone")}
    b = {k: v.clone() for k, v in base.items() if k != "gone"}
    b["moved.small"] += 0.01
    b["moved.big"] += 1.0
    b["retyped"] = b["retyped"].to(torch.float16)
    b["reshaped"] = torch.zeros(2, 8)
    b["new"] = torch.ones(3)
    for side, tensors in (("a", base), ("b", {"model." + k: v for k, v in b.items()})):
        (tmp_path / side).mkdir()
        save_file(tensors, str(tmp_path / side / "model.safetensors"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    return lambda: make_diff_app(side_of(open_path("a")), side_of(open_path("b")),
                                 Options(strip_b="model."))


def summary(app) -> str:
    return plain(app.query_one(DiffSummary))


def details(app) -> str:
    return plain(app.query_one(DiffDetails))


def names(app) -> list[str]:
    return [r.name for r in app.query_one(DiffTable).rows]


def screen_lines(table: DiffTable) -> list[str]:
    return [table.render_line(y).text for y in range(table.size.height)]


async def compare_all(app, pilot) -> None:
    await pilot.press("v")
    await loaded(app, pilot)


# -- opening --------------------------------------------------------------------------------
async def test_opens_with_paths_counts_and_state(diff_app):
    app = diff_app(RUN3, RUN6)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        text = summary(app)
        assert f"A  {RUN3}" in text and f"B  {RUN6}" in text
        assert "weights 21: 21 not compared" in text
        assert "state tensors 64: 64 not compared" in text
        assert "step 3 -> 6" in text
        table = app.query_one(DiffTable)
        assert len(table.rows) == 21 and table.has_focus
        assert "weights · filter: all · sort: name · 21 of 21" in table.border_title
        header, first = screen_lines(table)[:2]
        assert header.split() == ["status", "name", "dtype/shape", "max|diff|"]
        assert first.startswith(">? same") and "lm_head.weight" in first


async def test_footer_fits_80_columns_with_quit(diff_app):
    from textual.widgets._footer import FooterKey

    app = diff_app(RUN3, RUN6)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        keys = {k.key: k for k in app.query(FooterKey)}
        assert {"v", "f", "s", "t", "p", "question_mark", "q"} <= set(keys)
        assert keys["q"].region.right <= SIZE[0]
        assert "escape" not in keys  # Cancel shows only while comparing


async def test_palette_offers_every_action(diff_app):
    app = diff_app(RUN3, RUN6)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        titles = {c.title for c in app.get_system_commands(app.screen)}
        assert {"Compare values", "Compare this tensor", "Filter by status", "Sort",
                "Weights / state tensors", "Training state", "Show problems",
                "Help: keys"} <= titles


# -- values ---------------------------------------------------------------------------------
async def test_values_all_differ_between_steps(diff_app):
    app = diff_app(RUN3, RUN6)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await compare_all(app, pilot)
        assert all(r.status == "values_changed" for r in app.first.result.rows)
        assert all(r.status == "values_changed" for r in app.first.result.state_rows)
        text = summary(app)
        assert "weights 21: 21 values changed" in text
        assert "state tensors 64: 64 values changed" in text
        assert "not compared" not in text
        assert screen_lines(app.query_one(DiffTable))[1].startswith(">~ values")
        assert app.is_running


async def test_release_has_the_same_weights_as_the_run(diff_app):
    app = diff_app(RELEASE, RUN6)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await compare_all(app, pilot)
        assert {r.status for r in app.first.result.rows} == {"unchanged"}
        assert all(r.values.bitwise_equal for r in app.first.result.rows)
        assert "weights 21: 21 same" in summary(app)
        assert "state tensors 64: 64 only in B" in summary(app)
        assert {diff_rows.label(r) for r in app.query_one(DiffTable).rows} == {"= same"}
        await pilot.press("t")  # the optimizer moments etc. exist in B only
        assert app.query_one(DiffTable).border_title.startswith("state tensors")
        assert {diff_rows.label(r) for r in app.query_one(DiffTable).rows} == {"+ only B"}


async def test_compare_only_the_highlighted_row(diff_app):
    app = diff_app(RUN3, RUN6)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await pilot.press("down", "c")
        await loaded(app, pilot)
        compared = [r.name for r in app.first.result.rows if r.values is not None]
        assert compared == ["model.embed_tokens.weight"]
        assert "weights 21: 1 values changed · 20 not compared" in summary(app)
        assert "values differ · max|diff|" in details(app)


async def test_sort_puts_the_largest_difference_first(diff_app):
    app = diff_app(RUN3, RUN6)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await compare_all(app, pilot)
        await pilot.press("s")
        table = app.query_one(DiffTable)
        diffs = [r.values.max_abs_diff for r in table.rows]
        assert diffs == sorted(diffs, reverse=True)
        assert table.current.values.max_abs_diff == max(r.values.max_abs_diff
                                                        for r in app.first.result.rows)
        assert "sort: max|diff| first" in table.border_title
        await pilot.press("s", "s")  # relative change, then back to names
        assert names(app) == [r.name for r in app.first.result.rows]
        assert "sort: name" in table.border_title


async def test_sort_by_relative_change_puts_a_small_tensor_s_big_change_first(tmp_path,
                                                                              monkeypatch):
    """A running_var of large values moved a little, a small bias moved a lot: max|diff|
    puts the running_var first, the relative change (||a - b|| / ||a||) the bias."""
    a = {"bn.running_var": torch.full((8,), 1000.0), "fc.bias": torch.full((8,), 0.01)}
    b = {"bn.running_var": a["bn.running_var"] + 1.0, "fc.bias": a["fc.bias"] * 3}
    for side, tensors in (("a", a), ("b", b)):
        (tmp_path / side).mkdir()
        save_file(tensors, str(tmp_path / side / "model.safetensors"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    app = make_diff_app(side_of(open_path("a")), side_of(open_path("b")), Options())
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await compare_all(app, pilot)
        table = app.query_one(DiffTable)
        await pilot.press("s")
        assert names(app) == ["bn.running_var", "fc.bias"]
        await pilot.press("s")
        assert "sort: relative change first" in table.border_title
        assert names(app) == ["fc.bias", "bn.running_var"]
        rel = {r.name: r.values.rel_l2 for r in table.rows}
        assert rel["fc.bias"] > rel["bn.running_var"]


# -- filter and details ---------------------------------------------------------------------
async def test_filter_cycles_through_the_statuses_present(mixed):
    app = mixed()
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await compare_all(app, pilot)
        seen = {}
        for _ in range(len(diff_rows.FILTERS)):
            await pilot.press("f")
            seen[app.first.filter_key] = names(app)
            if app.first.filter_key == "all":
                break
        assert seen == {
            "changed": ["gone", "moved.big", "moved.small", "new", "reshaped", "retyped"],
            "only_in_a": ["gone"], "only_in_b": ["new"], "shape_changed": ["reshaped"],
            "dtype_changed": ["retyped"], "values_changed": ["moved.big", "moved.small"],
            "unchanged": ["same.w"],
            "all": ["gone", "moved.big", "moved.small", "new", "reshaped", "retyped", "same.w"]}
        assert ("weights 7: 1 only in A · 1 only in B · 1 shape changed · 1 dtype changed · "
                "2 values changed · 1 same") in summary(app)


async def test_filter_title_and_sort_together(mixed):
    app = mixed()
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await compare_all(app, pilot)
        await pilot.press("f", "s")  # changed, largest first
        table = app.query_one(DiffTable)
        assert "filter: changed · sort: max|diff| first · 6 of 7" in table.border_title
        assert names(app)[:3] == ["moved.big", "moved.small", "retyped"]


async def test_name_filter_counts_combines_with_status_and_esc_keeps_the_row(mixed):
    app = mixed()
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await compare_all(app, pilot)
        table = app.query_one(DiffTable)
        await pilot.press("slash", *"moved")
        assert names(app) == ["moved.big", "moved.small"]
        assert table.border_title.startswith("weights · 2 of 7 rows match 'moved' · filter: all")
        await pilot.press("enter", "down")  # back in the table, on moved.small
        assert table.has_focus and table.current.name == "moved.small"
        assert details(app).startswith("moved.small")
        await pilot.press("f")  # changed, still only the names that match
        assert names(app) == ["moved.big", "moved.small"]
        await pilot.press("slash", "ctrl+u", *"re*", "enter")  # a glob: retyped, reshaped
        assert names(app) == ["reshaped", "retyped"]
        await pilot.press("down", "escape")
        assert app.first.pattern == "" and len(table.rows) == 6  # the status filter stays
        assert table.current.name == "retyped" and table.has_focus
        assert "rows match" not in table.border_title
        assert details(app).startswith("retyped")
        await pilot.press("escape")  # nothing left to clear: no change
        assert table.current.name == "retyped"


async def test_name_column_keeps_layer_and_expert_at_80_columns(tmp_path, monkeypatch):
    """The name takes what one dtype/shape column leaves, cut in the middle."""
    name = "model.layers.61.mlp.experts.255.down_proj.weight"
    for side, shape in (("a", (4, 8)), ("b", (4, 8))):
        (tmp_path / side).mkdir()
        save_file({name: torch.zeros(shape, dtype=torch.bfloat16),
                   "model.embed_tokens.weight": torch.zeros(16, 8)},
                  str(tmp_path / side / "model.safetensors"))
    monkeypatch.chdir(tmp_path)
    app = make_diff_app(side_of(open_path("a")), side_of(open_path("b")), Options())
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await pilot.press("end")
        row = screen_lines(app.query_one(DiffTable))[2]
        assert "layers.61." in row and ".255.down_proj.weight" in row
        assert "BF16 [4,8]" in row
        assert name in details(app)  # the whole name below


def test_one_spec_cell_for_both_sides():
    def loc(dtype, shape):
        return TensorLoc("w", dtype, shape, "f.safetensors", "weights")

    def pair(a, b):
        return diff_rows.spec_pair(Row("w", "unchanged", a, b))

    assert pair(loc("F32", (4, 4)), loc("F32", (4, 4))) == "F32 [4,4]"
    assert pair(loc("F32", (4, 4)), loc("F32", (2, 8))) == "F32 [4,4] -> [2,8]"
    assert pair(loc("F32", (4, 4)), loc("F16", (4, 4))) == "F32 -> F16 [4,4]"
    assert pair(loc("F32", (4, 4)), loc("F16", (2, 8))) == "F32 [4,4] -> F16 [2,8]"
    assert pair(None, loc("F16", (3,))) == "F16 [3]"


async def test_details_show_both_sides_with_original_names(mixed):
    app = mixed()
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await pilot.press("down")  # moved.big
        text = details(app)
        assert text.startswith("moved.big  (same dtype and shape)")
        assert "A  F32 [4,4] · model.safetensors · weights" in text
        assert "B  F32 [4,4] · model.safetensors · weights · named model.moved.big" in text
        assert "values not compared" in text
        await compare_all(app, pilot)
        text = details(app)
        assert app.query_one(DiffTable).current.name == "moved.big"  # kept across the compare
        assert "values differ · max|diff| 1 · mean|diff| 1" in text
        assert "bitwise equal: no · NaN/Inf mismatched: 0 · 16 elements compared" in text
        await pilot.press("up")  # gone: only in A
        assert "A  F32 [4,4]" in details(app) and "B  absent" in details(app)


async def test_unreadable_tensor_and_problems_do_not_crash(diff_app):
    app = diff_app(RELEASE, "tiny-llama-damaged")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        assert "3 error(s), 0 warning(s) (p)" in summary(app)
        await compare_all(app, pilot)
        assert "weights 21: 9 only in A · 11 same · 1 unreadable" in summary(app)
        while app.first.filter_key != "unreadable":
            await pilot.press("f")
        text = details(app)
        assert text.startswith("model.layers.0.input_layernorm.weight  (values unreadable)")
        assert "values unreadable: " in text and "truncated?" in text
        await pilot.press("p")
        body = plain(app.screen.query_one(".text-body"))
        assert "B: tiny-llama-damaged (3 problem(s))" in body
        assert "file does not exist" in body
        await pilot.press("p")
        assert app.is_running and isinstance(app.focused, DiffTable)


async def test_help_and_state_windows_open_and_close(diff_app):
    app = diff_app(RELEASE, RUN6)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await pilot.press("question_mark")
        assert type(app.screen).__name__ == "DiffHelpScreen"
        await pilot.press("escape")
        await pilot.press("i")
        body = plain(app.screen.query_one(".text-body"))
        assert "step       ? -> 6" in body
        assert "optimizer" in body and "missing" in body
        await pilot.press("i")
        assert isinstance(app.focused, DiffTable)


# -- cancel and failure ---------------------------------------------------------------------
@pytest.fixture
def blocking_compare(monkeypatch):
    """compare() waits until cancelled: a comparison that is still running when Esc comes."""
    started = threading.Event()

    def compare(a, b, rtol=0.0, atol=0.0, cancel=None, progress=None, **_):
        started.set()
        if progress:
            progress(1, 2)
        cancel.wait(30)
        raise Cancelled()

    monkeypatch.setattr("ckpt_browser.values.compare.compare", compare)
    return started


async def test_escape_cancels_a_running_compare(diff_app, blocking_compare, monkeypatch):
    from textual.widgets._footer import FooterKey

    app = diff_app(RUN3, RUN6)
    notes = []
    monkeypatch.setattr(app, "notify", lambda message, **kw: notes.append(message))
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await pilot.press("v")
        assert blocking_compare.wait(10)
        await pilot.pause()
        assert app.first.comparing and app.query_one("#compare-bar").display
        keys = {k.key: k for k in app.query(FooterKey)}
        assert "escape" in keys and "v" not in keys  # Cancel takes the place of Values
        assert keys["q"].region.right <= SIZE[0]
        await pilot.press("escape")
        await loaded(app, pilot)
        assert app.is_running and not app.first.comparing
        assert not app.query_one("#compare-bar").display
        assert notes[-1] == "Cancelled: 0 of 85 tensor(s) compared. v compares the rest."
        assert "weights 21: 21 not compared" in summary(app)


async def test_a_failing_compare_is_reported_not_raised(diff_app, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr("ckpt_browser.values.diff.compare_values", broken)
    app = diff_app(RUN3, RUN6)
    notes = []
    monkeypatch.setattr(app, "notify", lambda message, **kw: notes.append(message))
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await compare_all(app, pilot)
        assert app.is_running and not app.first.comparing
        assert notes[-1] == "disk on fire (0 of 85 tensor(s) compared)"


async def test_a_failing_load_is_shown_not_raised(diff_app, monkeypatch):
    def broken(*args):
        raise OSError("no such shard")

    monkeypatch.setattr("ckpt_browser.tui.diff.screen.load_diff", broken)
    app = diff_app(RUN3, RUN6)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        assert "could not pair the tensor names: OSError: no such shard" in summary(app)
        await pilot.press("v", "f", "s", "t", "c")  # nothing to act on: no crash
        await pilot.pause()
        assert app.is_running and app.query_one(DiffTable).rows == []


# -- 94,000 rows ----------------------------------------------------------------------------
def _rows(n: int) -> list[Row]:
    """n rows as structure() makes them for two MoE checkpoints, every 7th one changed."""
    out = []
    for i in range(n):
        loc = TensorLoc(f"model.layers.{i // 1000}.mlp.experts.{i % 1000}.w", "BF16",
                        (1024, 512), "model-00001-of-00002.safetensors", "weights")
        out.append(Row(loc.name, "shape_changed" if i % 7 == 0 else "unchanged", loc, loc))
    return out


async def test_94000_rows_draw_only_what_is_visible(monkeypatch):
    """No timing assertion (benchmarks measure): the table formats the visible lines only,
    whatever the number of rows, and keys work on the whole list."""
    rows = _rows(94_000)
    drawn = count_drawn(monkeypatch, DiffTable)
    app = alone(DiffTable)
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(DiffTable)
        table.focus()
        table.set_rows(rows)
        await pilot.pause()
        assert 0 < len(drawn) < 100
        drawn.clear()
        await pilot.press("end")
        assert table.current is rows[-1] and len(drawn) < 100
        assert screen_lines(table)[-1].startswith(">? same")
        table.set_rows(diff_rows.view(rows, "changed", False))
        await pilot.pause()
        assert len(table.rows) == 13_429 and table.cursor == 0
