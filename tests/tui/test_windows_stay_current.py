"""`p` and `r` pressed while the training state is still being read open at once, say that
reading goes on, and fill in when it ends (they used to show "Problems (0)" for good, and r did
nothing). The read is held on an Event, so the test waits on the app, never on time."""

from __future__ import annotations

import threading

import pytest

from ckpt_browser.tui.browse.resume import ResumeScreen
from ckpt_browser.tui.common.problems import ProblemsScreen
from tests.tui.conftest import loaded, plain


@pytest.fixture
def held(monkeypatch):
    """The training state's read waits until the test lets it go."""
    from ckpt_browser.analysis import components

    gate = threading.Event()
    real = components.training_state

    def slow(ckpt, *args, **kwargs):
        assert gate.wait(60), "the test never let the read go"
        return real(ckpt, *args, **kwargs)

    monkeypatch.setattr(components, "training_state", slow)
    return gate


async def headers_in(app, pilot):
    """Until the headers are read (the training read is held, so its worker still runs)."""
    for _ in range(200):
        await pilot.pause()
        if app.first.model.loaded:
            return
    raise AssertionError("the headers were never read")


async def test_r_before_the_training_state_is_read_fills_in(sample_app, held):
    app = sample_app("malicious")
    async with app.run_test(size=(80, 24)) as pilot:
        await headers_in(app, pilot)
        await pilot.press("r")
        assert isinstance(app.screen, ResumeScreen)
        assert "Reading the training state" in plain(app.screen.query_one("#resume-verdict"))
        held.set()
        await loaded(app, pilot)
        screen = app.screen
        assert isinstance(screen, ResumeScreen) and screen.report is not None
        assert plain(screen.query_one("#resume-verdict")).startswith("WEIGHTS-ONLY")
        assert "optimizer.pt" in plain(screen.query_one("#resume-components"))


async def test_p_before_the_training_state_is_read_fills_in(sample_app, held):
    app = sample_app("malicious")
    async with app.run_test(size=(80, 24)) as pilot:
        await headers_in(app, pilot)
        await pilot.press("p")
        assert isinstance(app.screen, ProblemsScreen)
        title = plain(app.screen.query_one(".modal-title"))
        assert "still reading" in title
        held.set()
        await loaded(app, pilot)
        screen = app.screen
        assert isinstance(screen, ProblemsScreen)
        title = plain(screen.query_one(".modal-title"))
        assert "still reading" not in title and f"Problems ({len(screen.problems)})" in title
        assert "optimizer.pt" in plain(screen.query_one("#problems-list"))  # the unsafe pickle


async def test_t_before_the_training_state_is_read_fills_in(sample_app, held):
    from ckpt_browser.tui.browse.tree import CheckpointTree

    app = sample_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await headers_in(app, pilot)
        await pilot.press("t")
        tree = app.query_one(CheckpointTree)
        assert tree.border_title == "training state"
        assert [str(n.label) for n in tree.root.children] == ["reading the training state…"]
        held.set()
        await loaded(app, pilot)
        kinds = [n.data.component.kind for n in tree.root.children if n.data.component]
        assert "optimizer" in kinds and "rng" in kinds  # the view filled in, without a key
