"""`e` in the browser: the weights written as `ckpt-browser export` writes them, a damaged
checkpoint refused with its findings, and Esc removes what a cancelled export wrote."""

from __future__ import annotations

import threading

import torch
from safetensors.torch import load_file

from ckpt_browser.tui.common.modals import PathPrompt
from tests.tui.conftest import SAMPLES, loaded

RUN = SAMPLES / "tiny-llama-run" / "checkpoint-6"


async def type_folder(app, pilot, out) -> None:
    await pilot.press("e")
    assert isinstance(app.screen, PathPrompt)
    app.screen.query_one("Input").value = str(out)
    await pilot.press("enter")
    await loaded(app, pilot)


async def test_e_exports_the_weights_and_says_where(sample_app, tmp_path):
    app = sample_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        await type_folder(app, pilot, tmp_path / "out")
        told = [n.message for n in app._notifications]
    assert any(f"{tmp_path / 'out'}: 21 tensors" in m for m in told), told
    want = {k: v for f in sorted(RUN.glob("model-*.safetensors")) for k, v in load_file(f).items()}
    got = load_file(tmp_path / "out" / "model.safetensors")
    assert sorted(got) == sorted(want) and all(torch.equal(got[k], want[k]) for k in want)
    assert (tmp_path / "out" / "config.json").exists()


async def test_a_damaged_checkpoint_is_refused_with_its_findings(sample_app, tmp_path):
    app = sample_app("tiny-llama-damaged")
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        await type_folder(app, pilot, tmp_path / "out")
        told = [n.message for n in app._notifications]
    assert any("Not exported" in m and "file does not exist" in m for m in told), told
    assert not (tmp_path / "out").exists()


async def test_esc_cancels_and_leaves_nothing(sample_app, tmp_path, monkeypatch):
    """The export is held inside its first file until Esc has been pressed."""
    from ckpt_browser.export import write as writer

    started, release = threading.Event(), threading.Event()
    real = writer._write_file

    def held(path, items, step, cancel):
        started.set()
        release.wait(30)
        return real(path, items, step, cancel)

    monkeypatch.setattr(writer, "_write_file", held)
    app = sample_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        await pilot.press("e")
        app.screen.query_one("Input").value = str(tmp_path / "out")
        await pilot.press("enter")
        while not started.wait(0.01):
            await pilot.pause()
        assert "exporting to" in str(app.screen.query_one("#export-bar").render())
        await pilot.press("escape")
        release.set()
        await loaded(app, pilot)
        told = [n.message for n in app._notifications]
    assert any("cancelled: nothing left" in m for m in told), told
    assert not (tmp_path / "out").exists()


async def test_too_little_room_is_said_before_anything_is_written(sample_app, tmp_path,
                                                                  monkeypatch):
    import shutil
    from collections import namedtuple

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10**9, 10**9 - 1000, 1000))
    app = sample_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        await type_folder(app, pilot, tmp_path / "out")
        told = [n.message for n in app._notifications]
    assert any("it needs 104.6 KiB" in m and "1000 Bytes free" in m for m in told), told
    assert not (tmp_path / "out").exists()
