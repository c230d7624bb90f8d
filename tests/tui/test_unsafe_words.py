"""Pilot tests: a file that would run code is announced UNSAFE, never "Damaged"; a damaged
one is damaged, never UNSAFE; one that is both says both (README "Safety").

Cases from the malicious corpus, opened from an empty working folder (nothing in them runs,
but a payload would write there).
"""

import os

from ckpt_browser.producers.layout import open_layout
from ckpt_browser.tui.app import make_app
from ckpt_browser.tui.browse.tree import CheckpointTree
from tests.malicious.make_corpus import CORPUS
from tests.tui.conftest import loaded, plain


def corpus_app(monkeypatch, tmp_path, case: str):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    return make_app(open_layout(str(CORPUS / case)))


def notices(app) -> list[tuple[str, str]]:
    return [(n.title or "", str(n.message)) for n in app._notifications]


def row_of(app, name: str) -> str:
    tree = app.query_one(CheckpointTree)
    return next(str(n.label) for n in tree.root.children if n.data.shard == name)


async def problems_screen(app, pilot) -> tuple[str, str]:
    """The problems window's title and list, then closes it."""
    await pilot.press("p")
    await pilot.pause()
    title = str(app.screen.query_one(".modal-title").content)
    text = plain(app.screen.query_one("#problems-list"))
    await pilot.press("escape")
    await pilot.pause()
    return title, text


async def test_an_unsafe_file_is_announced_unsafe_not_damaged(monkeypatch, tmp_path):
    app = corpus_app(monkeypatch, tmp_path, "pickle-os-system/checkpoint-1")
    async with app.run_test(size=(120, 30)) as pilot:
        await loaded(app, pilot)
        said = notices(app)
        assert [title for title, _ in said] == ["UNSAFE"], said
        assert said[0][1].startswith("optimizer.pt would run code if loaded (nothing was run). ")
        assert "! UNSAFE optimizer.pt" in row_of(app, "optimizer.pt")
        assert "UNSAFE: 1 error(s)" in plain(app.query_one("#summary"))
        title, text = await problems_screen(app, pilot)
        assert title == "Problems (1) · UNSAFE"
        assert text.startswith("UNSAFE  optimizer.pt: its pickle calls os.system (runs a command)")
        await pilot.press("t")
        await loaded(app, pilot)
        rows = {n.data.component.kind: str(n.label)
                for n in app.query_one(CheckpointTree).root.children if n.data.component}
        assert "UNSAFE" in rows["optimizer"] and "UNSAFE" not in rows["rng"]  # rng: missing
        await pilot.press("r")
        await loaded(app, pilot)
        assert "optimizer.pt is UNSAFE" in plain(app.screen.query_one("#resume-verdict"))
        assert "UNSAFE" in plain(app.screen.query_one("#resume-components"))
        everything = " ".join(t + m for t, m in notices(app)) + text + str(rows)
        assert "damaged" not in everything.lower()
    assert os.listdir(tmp_path) == []


async def test_a_damaged_file_is_announced_damaged_not_unsafe(monkeypatch, tmp_path):
    app = corpus_app(monkeypatch, tmp_path, "zip-bomb-lying-size/checkpoint-1")
    async with app.run_test(size=(120, 30)) as pilot:
        await loaded(app, pilot)
        said = notices(app)
        assert said == [("Damaged", "1 error(s) found: press p to list them")], said
        assert "! DAMAGED optimizer.pt" in row_of(app, "optimizer.pt")
        title, text = await problems_screen(app, pilot)
        assert title == "Problems (1) · damaged"
        assert text.startswith("ERROR   optimizer.pt: pickle ends early (truncated?)")
        assert "unsafe" not in (title + text + row_of(app, "optimizer.pt")).lower()
    assert os.listdir(tmp_path) == []


async def test_a_file_both_unsafe_and_damaged_says_both(monkeypatch, tmp_path):
    app = corpus_app(monkeypatch, tmp_path, "zip-bad-crc/checkpoint-1")
    async with app.run_test(size=(120, 30)) as pilot:
        await loaded(app, pilot)
        assert [title for title, _ in notices(app)] == ["UNSAFE and damaged"], notices(app)
        assert "! UNSAFE, DAMAGED optimizer.pt" in row_of(app, "optimizer.pt")
        title, text = await problems_screen(app, pilot)
        assert title == "Problems (2) · UNSAFE and damaged"
        assert "UNSAFE  optimizer.pt: its pickle calls os.system" in text
        assert "ERROR   optimizer.pt: zip entry 'archive/data.pkl' fails its CRC-32 check" in text
    assert os.listdir(tmp_path) == []
