"""Pilot tests: what a user does in the browser, checked on widget state."""

from safetensors import safe_open

from ckpt_browser.model import natural_key
from ckpt_browser.tui.browse.details import Details
from ckpt_browser.tui.browse.tree import CheckpointTree
from ckpt_browser.tui.common.help import HelpScreen
from ckpt_browser.tui.common.problems import ProblemsScreen
from tests.tui.conftest import SAMPLES, go_to, loaded, plain

RUN = SAMPLES / "tiny-llama-run" / "checkpoint-6"
SHARDS = sorted(p.name for p in RUN.glob("*.safetensors"))
FILES = sorted((p.name for p in RUN.iterdir()), key=natural_key)
ALL_TENSORS = 21 + 63 + 1  # the weights, optimizer.pt's moments and steps, the CPU RNG state


def labels(nodes):
    return [str(n.label) for n in nodes]


def text_of(widget) -> str:
    return plain(widget)


async def test_file_tree_lists_every_file_with_its_format_and_counts(sample_app):
    app = sample_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(app, pilot)
        tree = app.query_one(CheckpointTree)
        assert tree.border_title == "by file"
        nodes = {n.data.shard: n for n in tree.root.children}
        assert list(nodes) == FILES
        for name in SHARDS:
            with safe_open(RUN / name, "np") as f:
                assert f"{len(list(f.keys()))} tensors" in str(nodes[name].label)
            assert not nodes[name].children  # lazily filled on expand
        assert "torch-zip  63 tensors" in str(nodes["optimizer.pt"].label)
        assert "torch-zip  1 tensor  " in str(nodes["rng_state.pth"].label)  # not "1 tensors"
        # what holds no tensors has nothing to open
        assert "json" in str(nodes["config.json"].label)
        assert not nodes["config.json"].allow_expand and nodes["optimizer.pt"].allow_expand


async def test_expanding_a_shard_shows_tensors_in_natural_order(sample_app):
    app = sample_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(app, pilot)
        node = await go_to(app, pilot, SHARDS[1])  # layer 0 weights
        await pilot.press("right")
        assert node.is_expanded
        names = [c.data.tensor.name for c in node.children]
        with safe_open(RUN / node.data.shard, "np") as f:
            assert sorted(names) == sorted(f.keys())
        # natural order; check it on a run with two-digit layers too
        assert names == sorted(names, key=lambda n: [int(p) if p.isdigit() else p
                                                     for p in n.replace(".", " . ").split()])


async def test_details_show_tensor_dtype_shape_and_offsets(sample_app):
    app = sample_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(app, pilot)
        await go_to(app, pilot, SHARDS[0])
        await pilot.press("right", "down")  # first tensor of the first shard
        details = app.query_one(Details)
        t = details.ref.tensor
        body = plain(details.query_one("#details-body"))
        with safe_open(RUN / t.file, "pt") as f:
            sl = f.get_slice(t.name)
            assert list(sl.get_shape()) == list(t.shape)
        assert t.dtype in body and t.file in body
        assert f"{t.begin:,} - {t.end:,}" in body
        shard = app.first.model.shards[t.file]
        start = 8 + shard.header_bytes
        assert f"{start + t.begin:,} - {start + t.end:,}" in body


async def test_module_view_has_hierarchy_with_subtotals(sample_app):
    app = sample_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(app, pilot)
        await pilot.press("m")
        tree = app.query_one(CheckpointTree)
        assert tree.mode == "module" and tree.border_title == "by module"
        top = {n.data.module.name: n.data.module for n in tree.root.children}
        assert set(top) == {"lm_head", "model"}
        total = sum(m.totals.params for m in top.values())
        assert total == app.first.model.checkpoint.totals.params
        await pilot.press("down", "right")  # expand "model"
        model_node = tree.root.children[1]
        assert "layers" in [c.data.module.name for c in model_node.children
                            if c.data.kind == "module"]
        await pilot.press("m")
        assert tree.mode == "file" and len(tree.root.children) == len(FILES)


async def test_filter_narrows_tree_and_counts_matches(sample_app):
    app = sample_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(app, pilot)
        await pilot.press("slash")
        await pilot.press(*"q_proj")
        await loaded(app, pilot)  # matching runs in a worker
        tree = app.query_one(CheckpointTree)
        shards = tree.root.children
        # q_proj lives in shards 2 and 3 only (one per layer)
        assert [n.data.shard for n in shards] == SHARDS[1:]
        assert (f"filter 'q_proj': 2 of {ALL_TENSORS} tensors in 2 files"
                in text_of(app.query_one("#summary")))
        assert "1/9 tensors" in str(shards[0].label)
        await pilot.press("enter")  # back to the tree, filter kept
        await pilot.press("right")
        assert labels_contain(tree.root.children[0].children, "q_proj")
        await pilot.press("escape")
        await loaded(app, pilot)
        assert len(tree.root.children) == len(FILES)
        assert "filter" not in text_of(app.query_one("#summary"))


def labels_contain(nodes, needle):
    return nodes and all(needle in str(n.label) for n in nodes)


async def test_glob_filter(sample_app):
    app = sample_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(app, pilot)
        await pilot.press("slash", *"layers.1.*norm*")
        await loaded(app, pilot)
        # layers.1.input_layernorm sits in shard 2, post_attention_layernorm in shard 3
        assert f"2 of {ALL_TENSORS} tensors in 2 files" in text_of(app.query_one("#summary"))


async def test_damaged_checkpoint_stays_browsable_and_says_why(sample_app):
    app = sample_app("tiny-llama-damaged")
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(app, pilot)
        tree = app.query_one(CheckpointTree)
        by_name = {n.data.shard: str(n.label) for n in tree.root.children}
        assert "DAMAGED" in by_name["model-00001-of-00003.safetensors"]
        assert "MISSING" in by_name["model-00002-of-00003.safetensors"]
        assert "DAMAGED" not in by_name["model-00003-of-00003.safetensors"]
        assert "error(s)" in text_of(app.query_one("#summary"))
        # the missing shard still lists what the index says it should hold
        missing = await go_to(app, pilot, "model-00002-of-00003.safetensors")
        await pilot.press("right", "down")
        assert missing.children and "(no header)" in str(missing.children[0].label)
        body = plain(app.query_one("#details-body"))
        assert "does not exist" in body
        await pilot.press("p")
        assert isinstance(app.screen, ProblemsScreen)
        listing = plain(app.screen.query_one("#problems-list"))
        assert "model-00002-of-00003.safetensors" in listing and "truncated" in listing
        await pilot.press("escape")
        assert not isinstance(app.screen, ProblemsScreen)


async def test_help_and_palette_reach_every_action(sample_app):
    app = sample_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        titles = {c.title for c in app.get_system_commands(app.screen)}
        assert {"Switch view", "Filter names", "Clear filter", "Show problems",
                "Help: keys"} <= titles
        # at 80x24 the footer shows the tree's keys, where the rest are, and quit
        footer = app.screen._compositor.render_strips()[-1].text
        for word in ("/ Filter", "m View", "? All keys", "q Quit"):
            assert word in footer


async def test_quit_key_exits(sample_app):
    app = sample_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        await pilot.press("q")
    assert app.return_code == 0


async def test_filter_in_module_view_keeps_only_matching_modules(sample_app):
    app = sample_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(app, pilot)
        await pilot.press("m", "slash", *"lm_head")
        await loaded(app, pilot)
        tree = app.query_one(CheckpointTree)
        assert [n.data.module.name for n in tree.root.children] == ["lm_head"]
        await pilot.press("escape")
        await loaded(app, pilot)
        assert [n.data.module.name for n in tree.root.children] == ["lm_head", "model"]
