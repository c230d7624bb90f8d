"""Pilot tests: the Resume panel and the verdict in the top bar."""

import os

from ckpt_browser.producers.layout import open_layout
from ckpt_browser.report.resume import resume_text
from ckpt_browser.tui.app import make_app
from ckpt_browser.tui.browse.resume import ResumeScreen
from ckpt_browser.tui.browse.tree import CheckpointTree
from tests.tui.conftest import SAMPLES, loaded, plain


def app_on(monkeypatch, name):
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    return make_app(open_layout(str(SAMPLES / name)))


async def test_exact_checkpoint_says_so_in_words(monkeypatch):
    app = app_on(monkeypatch, "hf-multirank/checkpoint-4")
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(app, pilot)
        assert "resume: EXACT" in plain(app.query_one("#summary"))
        await pilot.press("r")
        assert isinstance(app.screen, ResumeScreen)
        headline = plain(app.screen.query_one("#resume-verdict")).strip()
        assert headline == "EXACT: resuming here continues the run as if it had never stopped"
        assert headline == resume_text(app.screen.report).splitlines()[0]  # the CLI's words
        table = plain(app.screen.query_one("#resume-components"))
        for kind in ("weights", "optimizer", "scheduler", "rng", "data", "progress", "scaler"):
            assert kind in table
        assert "rng_state_0.pth, rng_state_1.pth" in table
        await pilot.press("escape")
        assert not isinstance(app.screen, ResumeScreen)


async def test_choosing_a_finding_shows_its_file(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # the malicious payload would write here
    app = app_on(monkeypatch, "malicious")
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(app, pilot)
        await pilot.press("r")
        screen = app.screen
        assert "WEIGHTS-ONLY" in plain(screen.query_one("#resume-verdict"))
        first = screen.report.findings[0]
        assert first.component == "optimizer" and first.file == "optimizer.pt"
        await pilot.press("enter")
        await pilot.pause()
        tree = app.query_one(CheckpointTree)
        assert tree.mode == "file"  # every file is in the tree by file
        assert tree.cursor_node.data.shard == "optimizer.pt"
        assert "UNSAFE" in str(tree.cursor_node.label)
    assert not os.path.exists(tmp_path / "ckpt-browser-PWNED")


async def test_broken_weights_finding_jumps_to_the_shard(monkeypatch):
    app = app_on(monkeypatch, "tiny-llama-damaged")
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(app, pilot)
        assert "resume: BROKEN" in plain(app.query_one("#summary"))
        await pilot.press("r")
        findings = app.screen.report.findings
        index = next(i for i, f in enumerate(findings)
                     if f.file == "model-00002-of-00003.safetensors")
        await pilot.press(*["down"] * index, "enter")
        await pilot.pause()
        tree = app.query_one(CheckpointTree)
        assert tree.mode == "file"
        assert tree.cursor_node.data.shard == "model-00002-of-00003.safetensors"
