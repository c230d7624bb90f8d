"""80x24 is the design size: below 100 columns the details pane goes under the tree (and grows
while it shows values), rows that cannot expand line up with those that can, the filter says
what it matched in tensors, params and bytes, and the quiz's keys stay in sight."""

from __future__ import annotations

import pytest
from safetensors import safe_open

from ckpt_browser.tui.browse.details import Details
from ckpt_browser.tui.browse.tree import CheckpointTree
from tests.tui.conftest import SAMPLES, loaded, plain

RUN = SAMPLES / "tiny-llama-run" / "checkpoint-6"
ITEMSIZE = {"F32": 4, "F16": 2, "BF16": 2}


def screen_lines(app) -> list[str]:
    return [strip.text for strip in app.screen._compositor.render_strips()]


@pytest.mark.parametrize("width, below", [(80, True), (99, True), (100, False), (160, False)])
async def test_the_details_go_under_the_tree_below_100_columns(sample_app, width, below):
    app = sample_app()
    async with app.run_test(size=(width, 30)) as pilot:
        await loaded(app, pilot)
        tree, details = app.query_one(CheckpointTree).region, app.query_one(Details).region
        if below:
            assert tree.width == details.width == width  # the tree has the whole width
            assert details.y >= tree.bottom
        else:
            assert details.x >= tree.right and details.y == tree.y


async def test_values_give_the_details_the_room_below_the_tree(sample_app):
    app = sample_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        tree, details = app.query_one(CheckpointTree), app.query_one(Details)
        assert details.region.height < tree.region.height
        await pilot.press("down", "down", "right", "down", "v")  # lm_head.weight's values
        await loaded(app, pilot)
        assert details.region.height > tree.region.height
        assert "abs max" in "\n".join(screen_lines(app))
        await pilot.press("down")  # another tensor, its values not read: the tree's room back
        await loaded(app, pilot)
        assert details.region.height < tree.region.height
        assert details.scroll_y == 0  # its facts from their top, not where the values were


async def test_rows_that_cannot_expand_line_up_with_those_that_can(sample_app):
    app = sample_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        rows = [r for r in screen_lines(app) if r.startswith("│") and ("json" in r or "▶" in r)]
        config = next(r for r in rows if "config.json" in r)
        shard = next(r for r in rows if "▶ model-00001" in r)
        assert config.index("config.json") == shard.index("model-00001")
        await pilot.press("t")  # the training state: components, a leaf among them
        await loaded(app, pilot)
        rows = [r for r in screen_lines(app) if r.startswith("│")]
        scaler = next(r for r in rows if "scaler" in r)
        weights = next(r for r in rows if "▶ weights" in r)
        assert scaler.index("scaler") == weights.index("weights")
        assert scaler.index("NOT-NEEDED") == weights.index("OK")


def summed(pattern: str) -> tuple[int, int, int]:
    """(tensors, params, bytes) of the sample's weights whose names hold `pattern`, read
    with safetensors itself."""
    tensors = params = nbytes = 0
    for path in RUN.glob("*.safetensors"):
        with safe_open(path, "pt") as f:
            for name in f.keys():
                if pattern in name:
                    s = f.get_slice(name)
                    n = 1
                    for d in s.get_shape():
                        n *= d
                    tensors, params, nbytes = tensors + 1, params + n, \
                        nbytes + n * ITEMSIZE[s.get_dtype()]
    return tensors, params, nbytes


async def test_the_filter_sums_what_it_matched(sample_app):
    from ckpt_browser.report.words import count, size

    tensors, params, nbytes = summed("mlp")
    assert tensors == 6
    app = sample_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        await pilot.press("slash", *"mlp", "enter")
        await loaded(app, pilot)
        sums = f"{count(params)} params, {size(nbytes)}"
        title = str(app.query_one(CheckpointTree).border_title)
        assert title == f"by file · {tensors} matches: {sums}"
        assert f"{tensors} of 85 tensors in 2 files" in plain(app.query_one("#summary"))
        await pilot.press("l")
        await loaded(app, pilot)
        assert f"{tensors} tensors matching 'mlp' ({sums})" in str(
            app.query_one("#table").border_title)


async def test_the_quiz_keys_stay_in_sight_over_a_notice(sample_app, tmp_path, monkeypatch):
    from ckpt_browser.tui.common.quiz import QuizScreen

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))  # the real bank, progress kept here
    app = sample_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        await pilot.press("y")  # "Copied config.json", a notice at the bottom right
        assert app._notifications
        await pilot.press("z")
        assert isinstance(app.screen, QuizScreen)
        await pilot.pause()
        assert not app._notifications
        assert "Esc close" in "\n".join(screen_lines(app))
