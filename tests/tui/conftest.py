import os
import re
from pathlib import Path

import pytest

from ckpt_browser.producers.layout import open_layout
from ckpt_browser.tui.app import make_app

SAMPLES = Path(__file__).resolve().parents[2] / "sample_checkpoints"


@pytest.fixture
def sample_app(monkeypatch):
    """An app on a sample, opened by a relative path so no absolute path is on screen."""

    def make(name: str = "tiny-llama-run/checkpoint-6"):
        return app_on(monkeypatch, SAMPLES, name)

    return make


def app_on(monkeypatch, folder, name):
    """An app on `name` opened from `folder` (a relative path: nothing absolute on screen)."""
    monkeypatch.chdir(folder)
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")  # snapshots must not catch a fade
    return make_app(open_layout(name))


async def loaded(app, pilot, rounds: int = 50):
    """Wait until no worker runs and the screen has taken in what they read. One wait for
    the workers is not enough: the headers worker ends before its message is handled, and
    that handler starts the training read (a snapshot taken between showed half a screen)."""
    from textual.worker import WorkerFailed, WorkerState

    for _ in range(rounds):
        await pilot.pause()
        running = [w for w in app.workers if w.state in (WorkerState.PENDING,
                                                         WorkerState.RUNNING)]
        if not running and screen_current(app):
            break
        try:
            await app.workers.wait_for_complete(running)
        except WorkerFailed:
            pass  # the app reports it in words; the test looks at those
    await pilot.pause()


def screen_current(app) -> bool:
    """The first screen holds everything its workers were started to read (or says they
    stopped)."""
    first = getattr(app, "first", None)
    model = getattr(first, "model", None)
    if model is not None:  # the browser
        return bool(model.failed) or (model.loaded and model.training is not None)
    if hasattr(first, "result"):  # the diff
        return first.result is not None or first._load_error is not None
    return True


def plain(static) -> str:
    """The text a Static shows, without styles, rendered wide so nothing wraps."""
    from rich.console import Console

    console = Console(width=200, record=True, color_system=None, file=open(os.devnull, "w"))
    console.print(static.content)
    return console.export_text()


async def go_to(app, pilot, name: str):
    """Put the tree's cursor on the node of the file `name`; returns the node."""
    from ckpt_browser.tui.browse.tree import CheckpointTree

    tree = app.query_one(CheckpointTree)
    node = next(n for n in tree.root.children if n.data.shard == name)
    tree.move_cursor(node)
    await pilot.pause()
    return node


def alone(widget_class):
    """An App holding one `widget_class`, to drive a widget by itself."""
    from textual.app import App

    class Host(App):
        def compose(self):
            yield widget_class()

    return Host()


def count_drawn(monkeypatch, table_class) -> list:
    """The rows `table_class` formats from now on (a VTable formats only visible rows)."""
    drawn: list = []
    original = table_class.row_text
    monkeypatch.setattr(table_class, "row_text",
                        lambda self, r: drawn.append(r) or original(self, r))
    return drawn


def shows_numbers_and_leaf(shown: str, name: str) -> bool:
    """A shortened tensor name still says which tensor: every number of the name, in order,
    and the end of its leaf (`m.l.3.m.e.255.down_proj.weight`)."""
    leaf = shown.rsplit("…", 1)[-1].rsplit(".", 1)[-1]
    return re.findall(r"\d+", shown) == re.findall(r"\d+", name) and name.endswith(leaf)
