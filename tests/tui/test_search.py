"""Search that jumps: `/` opens the way to the matches and highlights the first, n and N walk
them (the summary says which of how many), Esc clears and leaves the cursor where it was,
y copies the highlighted name."""

import pytest
from safetensors import safe_open

from ckpt_browser.model import natural_key
from ckpt_browser.tui.browse.summary import Summary
from ckpt_browser.tui.browse.tree import CheckpointTree
from tests.tui.conftest import SAMPLES, loaded, plain

RUN = SAMPLES / "tiny-llama-run" / "checkpoint-6"


def matches_in_tree_order(needle: str) -> list[str]:
    """What a person would list by reading the shards top to bottom: the real headers."""
    found = []
    for shard in sorted(RUN.glob("*.safetensors"), key=lambda p: natural_key(p.name)):
        with safe_open(shard, "np") as f:
            found += sorted((k for k in f.keys() if needle in k), key=natural_key)
    return found


async def settle(app, pilot):
    """Workers done, then the cursor moves queued after the tree's next layout."""
    await loaded(app, pilot)
    await pilot.pause()


def cursor_name(app) -> str:
    node = app.query_one(CheckpointTree).cursor_node
    t = node.data.tensor
    return t if isinstance(t, str) else t.name


async def search(pilot, app, text: str):
    await pilot.press("slash", *text, "enter")
    await settle(app, pilot)


async def test_n_and_N_walk_the_matches_in_tree_order_and_wrap(sample_app):
    app = sample_app()
    expected = matches_in_tree_order("proj")
    assert len(expected) > 3
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        await search(pilot, app, "proj")
        assert cursor_name(app) == expected[0]  # the first one highlighted, its file open
        summary = plain(app.query_one(Summary))
        assert f"match 1/{len(expected)}" in summary
        await pilot.press("n", "n")
        await settle(app, pilot)
        assert cursor_name(app) == expected[2]
        assert f"match 3/{len(expected)}" in plain(app.query_one(Summary))
        await pilot.press("N", "N", "N")
        await settle(app, pilot)
        assert cursor_name(app) == expected[-1]  # back past the first: wraps to the last
        await pilot.press("n")
        await settle(app, pilot)
        assert cursor_name(app) == expected[0]


async def test_n_twice_before_the_tree_redraws_walks_two_matches(sample_app):
    """Over a slow SSH link two n's can arrive before the tree has laid out the first jump
    (the cursor moves after the next layout): the second n goes on from the first's target,
    not from the cursor still on the old match, which read as moved by hand."""
    app = sample_app()
    expected = matches_in_tree_order("proj")
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        await search(pilot, app, "proj")
        screen = app.screen
        screen.action_next_match()
        screen.action_next_match()  # no layout in between
        await settle(app, pilot)
        assert cursor_name(app) == expected[2]
        assert f"match 3/{len(expected)}" in plain(app.query_one(Summary))


async def test_n_goes_on_from_where_the_cursor_was_moved(sample_app):
    app = sample_app()
    expected = matches_in_tree_order("proj")
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        await search(pilot, app, "proj")
        await pilot.press("down", "down")  # by hand, in the filtered tree: matches only
        await settle(app, pilot)
        assert cursor_name(app) == expected[2]
        await pilot.press("n")
        await settle(app, pilot)
        assert cursor_name(app) == expected[3]
        assert f"match 4/{len(expected)}" in plain(app.query_one(Summary))


async def test_module_view_opens_the_matches_five_levels_deep(sample_app):
    app = sample_app()
    expected = sorted((n for n in matches_in_tree_order("q_proj")), key=natural_key)
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        await pilot.press("m")
        await search(pilot, app, "q_proj")
        tree = app.query_one(CheckpointTree)
        node = tree.cursor_node
        assert cursor_name(app) == expected[0]
        depth = 0
        while node.parent is not tree.root:
            node = node.parent
            assert node.is_expanded
            depth += 1
        assert depth == len(expected[0].split(".")) - 1  # model.layers.0.self_attn.q_proj
        # every match's way is open, not only the first one's
        leaves = [n for n in tree._tree_lines if n.node.data.kind == "tensor"]
        assert [line.node.data.tensor.name for line in leaves] == expected


async def test_escape_clears_the_filter_and_keeps_the_cursor_on_its_tensor(sample_app):
    app = sample_app()
    expected = matches_in_tree_order("proj")
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        await search(pilot, app, "proj")
        await pilot.press("n", "n", "n")
        await settle(app, pilot)
        assert cursor_name(app) == expected[3]
        await pilot.press("escape")
        await settle(app, pilot)
        tree = app.query_one(CheckpointTree)
        assert app.first.model.pattern == ""
        assert len(tree.root.children) == len(list(RUN.iterdir()))  # the whole tree again
        assert cursor_name(app) == expected[3]  # not the top of the tree
        assert "match" not in plain(app.query_one(Summary))


async def test_n_without_a_filter_says_what_to_do(sample_app):
    app = sample_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        await pilot.press("n")
        await pilot.pause()
        assert any("press /" in n.message for n in app._notifications)


async def test_y_copies_the_full_name_of_the_highlighted_tensor(sample_app):
    app = sample_app()
    expected = matches_in_tree_order("down_proj")
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        await search(pilot, app, "down_proj")
        await pilot.press("y")
        await pilot.pause()
        assert app.clipboard == expected[0]  # the whole name, though the row cuts it
        await pilot.press("escape", "m")
        await settle(app, pilot)
        tree = app.query_one(CheckpointTree)
        tree.move_cursor(next(n for n in tree.root.children if n.data.module.name == "model"))
        await pilot.pause()
        await pilot.press("y")
        await pilot.pause()
        assert app.clipboard == "model"


@pytest.mark.parametrize("columns, shown", [(80, ("KiB",)), (120, ("F32", "]", "KiB"))])
async def test_tensor_rows_fit_the_pane_with_the_size_whole(sample_app, columns, shown):
    """At 80 columns a row is the name and the size (the dtype and shape would leave the name
    too few cells: the details pane shows them); at 120 the dtype and shape are columns too."""
    app = sample_app()
    async with app.run_test(size=(columns, 24)) as pilot:
        await loaded(app, pilot)
        await search(pilot, app, "proj")
        tree = app.query_one(CheckpointTree)
        rows = [tree.render_line(y).text for y in range(tree.size.height)]
        tensor_rows = [r for r in rows if "proj" in r and "safetensors" not in r]
        assert tensor_rows
        for line in tensor_rows:
            assert len(line.rstrip()) <= tree.size.width
            assert line.rstrip().endswith(("KiB", " B"))  # the size is never cut
            assert all(word in line for word in shown)
            assert line.lstrip("├└│ ").startswith("m")  # model., or m. when shortened
        names = [line.lstrip("├└│ ").split("  ")[0] for line in tensor_rows]
        assert len(set(names)) == len(names), names  # each still tells which tensor it is
