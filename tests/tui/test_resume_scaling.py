"""The Resume panel at 163 shards (compact file lists, `f` lists every file) and a lone shard
(no verdict: the top bar and the panel say to open the folder)."""

from __future__ import annotations

import re
import shutil

from ckpt_browser.tui.browse.resume import ResumeScreen
from ckpt_browser.tui.browse.tree import CheckpointTree
from ckpt_browser.tui.common.modals import TextModal
from tests.moe import NAME
from tests.tui.conftest import SAMPLES, app_on, loaded, plain

SHARD = "model-00002-of-00003.safetensors"


async def test_r_lists_163_shards_in_one_line_and_f_lists_them_all(monkeypatch, moe_checkpoint):
    app = app_on(monkeypatch, moe_checkpoint.parent, NAME)
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        await pilot.press("r")
        await loaded(app, pilot)
        screen = app.screen
        assert isinstance(screen, ResumeScreen)
        table = plain(screen.query_one("#resume-components"))
        assert "163 shards (model-00001 ... model-00163), model.safetensors.index.json" in table
        assert "model-00002-of-000163" not in table
        assert "f lists all 164 files by name" in plain(screen.query_one("#resume-files-hint"))
        await pilot.press("f")
        files = app.screen
        assert isinstance(files, TextModal)
        body = plain(files.query_one("#resume-files-body"))
        assert "weights (164 files)" in body
        assert all(f"model-{k:05d}-of-000163.safetensors" in body for k in range(1, 164))
        await pilot.press("escape")
        assert app.screen is screen  # back in the Resume panel


def test_resume_panel_at_163_shards_80x24(snap_compare, monkeypatch, moe_checkpoint):
    app = app_on(monkeypatch, moe_checkpoint.parent, NAME)

    async def open_r(pilot):
        await loaded(pilot.app, pilot)
        await pilot.press("r")
        await loaded(pilot.app, pilot)

    assert snap_compare(app, terminal_size=(80, 24), run_before=open_r)


async def test_a_lone_shard_is_browsed_without_a_broken_verdict(monkeypatch, tmp_path):
    shutil.copy(SAMPLES / "tiny-llama-release" / SHARD, tmp_path / SHARD)
    app = app_on(monkeypatch, tmp_path, SHARD)
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        await loaded(app, pilot)
        top = plain(app.query_one("#summary"))
        assert "one shard of 3: open the folder for the resume check" in top
        assert "BROKEN" not in top and "resume:" not in top
        assert "9 tensors" in top  # its tensors are there to browse
        tree = app.query_one(CheckpointTree)
        rows = [tree.render_line(y).text for y in range(tree.size.height)]
        assert sum(bool(re.search(r"\bm(odel)?\.l(ayers)?\.\d", r)) for r in rows) == 9, rows
        await pilot.press("r")
        await loaded(app, pilot)
        verdict = plain(app.screen.query_one("#resume-verdict")).strip()
        assert verdict == "one shard of 3: open the folder for the resume check"


async def test_the_same_shard_inside_its_full_folder_still_says_open_the_folder(monkeypatch):
    app = app_on(monkeypatch, SAMPLES / "tiny-llama-release", SHARD)
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        await loaded(app, pilot)
        assert "one shard of 3: open the folder" in plain(app.query_one("#summary"))


async def test_one_rank_is_singular_in_the_panel(monkeypatch):
    app = app_on(monkeypatch, SAMPLES / "accelerate-state", "step_4")
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(app, pilot)
        await loaded(app, pilot)
        await pilot.press("r")
        await loaded(app, pilot)
        shown = " ".join(plain(s) for s in app.screen.query("Static"))
        assert "1 rank" in shown and "1 rank(s)" not in shown and "1 ranks" not in shown
