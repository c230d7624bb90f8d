"""Pilot tests: the training-state view and the checkpoint timeline."""

import json
import os

from textual.widgets import Static

from ckpt_browser.producers.layout import open_layout
from ckpt_browser.producers.recognise import find_checkpoints
from ckpt_browser.tui.app import make_app
from ckpt_browser.tui.browse.timeline import TimelineScreen
from ckpt_browser.tui.browse.tree import CheckpointTree
from tests.tui.conftest import SAMPLES, loaded, plain


def kinds(tree):
    return [n.data.component.kind for n in tree.root.children
            if n.data.kind == "component" and n.data.component]


async def test_training_view_lists_components_with_status_in_words(sample_app):
    app = sample_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(app, pilot)
        await pilot.press("t")
        tree = app.query_one(CheckpointTree)
        assert tree.mode == "state" and tree.border_title == "training state"
        assert kinds(tree) == ["weights", "optimizer", "scheduler", "rng", "data", "progress",
                               "scaler"]
        labels = {n.data.component.kind: str(n.label) for n in tree.root.children}
        assert "OK" in labels["optimizer"] and "optimizer.pt" in labels["optimizer"]
        assert "NOT-NEEDED" in labels["scaler"]  # fp32 run: no GradScaler


async def test_optimizer_state_is_browsable_down_to_a_tensor(sample_app):
    app = sample_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(app, pilot)
        # optimizer -> optimizer.pt -> state -> 0 -> (step, exp_avg, exp_avg_sq)
        await pilot.press("t", "down", "right", "down", "right", "down", "right", "down", "right")
        await pilot.press("down", "down")
        node = app.query_one(CheckpointTree).cursor_node
        assert node.data.kind == "value" and node.data.path == "state.0.exp_avg"
        body = plain(app.query_one("#details-body"))
        state = json.load(open(SAMPLES / "tiny-llama-run/checkpoint-6/trainer_state.json"))
        assert state["global_step"] == 6
        assert "F32" in body and "in file" in body and "optimizer.pt" in body


async def test_component_details_say_what_it_means(sample_app):
    app = sample_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(app, pilot)
        await pilot.press("t", "down", "down", "down")  # rng
        body = plain(app.query_one("#details-body"))
        assert "rng" in body and "rng_state.pth" in body
        # the facts as rows of key and value, nested ones indented, not raw JSON
        assert "\n  0   cpu, numpy, python\n" in body and "{" not in body and '"' not in body


async def test_malicious_file_is_shown_unsafe_and_never_run(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # the payload would create ckpt-browser-PWNED here
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    app = make_app(open_layout(str(SAMPLES / "malicious")))
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(app, pilot)
        await pilot.press("t", "down", "right", "down")
        tree = app.query_one(CheckpointTree)
        labels = [str(n.label) for n in tree.root.children]
        assert any("optimizer" in lab and "UNSAFE" in lab for lab in labels)
        file_node = tree.cursor_node
        assert "UNSAFE" in str(file_node.label)
        assert "posix.system" in plain(app.query_one("#details-body"))
        await pilot.press("p")
        assert "posix.system" in plain(app.screen.query_one("#problems-list"))
    assert not os.path.exists(tmp_path / "ckpt-browser-PWNED")


async def test_checkpoint_without_safetensors_lists_its_torch_files_and_their_tensors(
        monkeypatch):
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    app = make_app(open_layout(str(SAMPLES / "deepspeed-run")))
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(app, pilot)
        tree = app.query_one(CheckpointTree)
        assert tree.mode == "file"
        labels = {n.data.shard: str(n.label) for n in tree.root.children}
        assert "torch-zip  4 tensors" in labels["global_step4/mp_rank_00_model_states.pt"]
        assert "step 4" in plain(app.query_one("#summary"))
        await pilot.press("t")
        assert tree.mode == "state" and kinds(tree)


async def test_filter_in_training_view_lists_matching_values(sample_app):
    app = sample_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(app, pilot)
        await pilot.press("t", "slash", *"exp_avg_sq", "enter")
        await loaded(app, pilot)
        await pilot.press("down", "right", "down", "right")  # optimizer -> optimizer.pt
        file_node = app.query_one(CheckpointTree).cursor_node
        paths = [c.data.path for c in file_node.children]
        assert len(paths) == 21 and all(p.endswith("exp_avg_sq") for p in paths)


async def test_timeline_opens_newest_and_switches_checkpoint(monkeypatch):
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    folder = str(SAMPLES / "hf-run3")
    entries = find_checkpoints(folder)
    app = make_app(open_layout(entries[0].path), (folder, entries))
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(app, pilot)
        assert isinstance(app.screen, TimelineScreen)
        listing = app.screen.query_one("#timeline-list")
        assert listing.option_count == 3
        await pilot.press("down", "down", "enter")  # the oldest: checkpoint-2
        await loaded(app, pilot)
        assert not isinstance(app.screen, TimelineScreen)
        assert app.first.model.layout.path.endswith("checkpoint-2")
        assert app.first.model.training is not None and app.first.model.training.step == 2
        await pilot.press("c")
        assert isinstance(app.screen, TimelineScreen)
        await pilot.press("escape")
        assert app.first.model.layout.path.endswith("checkpoint-2")


async def open_optimizer_state(pilot, app):
    """t, then optimizer -> its part -> state, opened; returns (part node, state node)."""
    await loaded(app, pilot)
    await pilot.press("t", "down", "right", "down")
    tree = app.query_one(CheckpointTree)
    part = tree.cursor_node
    await pilot.press("right", "down", "right")
    return part, tree.cursor_node


async def test_each_optimizer_id_is_named_when_the_order_makes_it_certain(monkeypatch):
    """The tutorial's SGD was built from model.parameters(): id i is the i-th parameter of the
    state dict. The optimizer component opens at its key, not at the whole file."""
    import torch

    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    path = SAMPLES / "projects" / "tutorial" / "model.pt"
    saved = torch.load(path, weights_only=True)
    names = list(saved["model_state_dict"])  # the Net has no buffers
    assert saved["optimizer_state_dict"]["param_groups"][0]["params"] == list(range(len(names)))
    app = make_app(open_layout(str(path)))
    async with app.run_test(size=(100, 30)) as pilot:
        part, state = await open_optimizer_state(pilot, app)
        assert part.data.path == "optimizer_state_dict" and "in model.pt" in str(part.label)
        assert state.data.path == "optimizer_state_dict.state"
        for child in state.children:
            pid = int(child.data.path.rsplit(".", 1)[-1])
            assert str(child.label).endswith(names[pid]), str(child.label)


async def test_optimizer_ids_are_named_when_the_groups_merge_back_one_way_only(monkeypatch):
    """nanoGPT's configure_optimizers puts the 2-D weights in one group and the rest in
    another, each in named_parameters() order, so ids run group after group, not in model
    order; the shapes allow one merge back, and the names are nanoGPT's own grouping's."""
    import torch

    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    path = SAMPLES / "projects" / "nanogpt" / "ckpt.pt"
    saved = torch.load(path, weights_only=True)
    seen, params = set(), []
    for key, t in saved["model"].items():  # named_parameters(): a tied weight once
        if t.data_ptr() not in seen:
            seen.add(t.data_ptr())
            params.append((key.removeprefix("_orig_mod."), t))
    decay = [n for n, t in params if t.dim() >= 2]
    no_decay = [n for n, t in params if t.dim() < 2]
    groups = saved["optimizer"]["param_groups"]
    assert [len(g["params"]) for g in groups] == [len(decay), len(no_decay)]
    want = decay + no_decay  # id i is the i-th parameter of the groups, in group order
    app = make_app(open_layout(str(path)))
    async with app.run_test(size=(100, 30)) as pilot:
        part, state = await open_optimizer_state(pilot, app)
        assert part.data.path == "optimizer" and state.data.path == "optimizer.state"
        assert "by parameter name" in str(state.label)
        assert len(state.children) == len(want)
        for child in state.children:
            pid = int(child.data.path.rsplit(".", 1)[-1])
            assert str(child.label).endswith(want[pid]), str(child.label)


async def test_optimizer_ids_beside_safetensors_weights_stay_ids_and_say_why(sample_app):
    """HF Trainer's optimizer.pt beside safetensors shards: a header lists names sorted, not
    in parameter order, so no id is named; the state row says ids only, its details why, and
    each id shows its moment's shape to match by hand."""
    import torch

    app = sample_app()
    saved = torch.load(SAMPLES / "tiny-llama-run/checkpoint-6/optimizer.pt", weights_only=True)
    async with app.run_test(size=(80, 24)) as pilot:
        part, state = await open_optimizer_state(pilot, app)
        assert part.data.kind == "file" and state.data.path == "state"
        assert str(state.label).endswith("ids only")
        body = plain(app.query_one("#details-body"))
        assert "ids only: the weights are in safetensors files" in body
        for child in state.children:
            pid = int(child.data.path.rsplit(".", 1)[-1])
            shape = list(saved["state"][pid]["exp_avg"].shape)
            assert str(child.label).endswith(f"exp_avg {shape}"), str(child.label)


async def test_a_dict_value_shows_its_fields_not_reprs(sample_app):
    """The details of one id's state list its fields one per line, described like the tree's
    rows (dtype, shape, size), never TensorRef(...) text."""
    app = sample_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await open_optimizer_state(pilot, app)
        await pilot.press("down")  # state.0
        ref = app.query_one(CheckpointTree).cursor_node.data
        assert ref.path == "state.0"
        body = plain(app.query_one("#details-body"))
        assert "TensorRef" not in body and "Opaque" not in body
        lines = [line.split() for line in body.splitlines()]
        assert ["holds", "3", "keys"] in lines
        assert ["exp_avg", "F32", "[128,", "32]", "16.0", "KiB"] in lines
        assert "parameter" in body and "ids only" in body


async def test_a_folder_of_one_checkpoint_opens_it_without_the_picker(monkeypatch, tmp_path):
    import shutil

    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    shutil.copytree(SAMPLES / "tiny-llama-run" / "checkpoint-6", tmp_path / "run" / "checkpoint-6")
    folder = str(tmp_path / "run")
    entries = find_checkpoints(folder)
    app = make_app(open_layout(entries[0].path), (folder, entries))
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        assert not isinstance(app.screen, TimelineScreen)  # nothing to pick from
        await pilot.press("c")  # the list is still there, with its one row
        assert isinstance(app.screen, TimelineScreen)
        assert "1 checkpoint in" in plain(app.screen.query_one(Static))
