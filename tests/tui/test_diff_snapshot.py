"""How the diff screen looks at 80x24, the size of a small SSH window."""

from ckpt_browser.analysis.opened import open_path
from ckpt_browser.tui.app import make_diff_app
from ckpt_browser.values.diff import Options, side_of
from tests.tui.conftest import SAMPLES, loaded


async def _compare_then_sort(pilot):
    app = pilot.app
    await loaded(app, pilot)
    await pilot.press("v")
    await loaded(app, pilot)
    await pilot.press("s", "down")
    app.clear_notifications()  # the "compared" toast would cover the details
    await pilot.pause()


def test_diff_values_sorted_80x24(snap_compare, monkeypatch):
    monkeypatch.chdir(SAMPLES)  # relative paths: no absolute path on screen
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    app = make_diff_app(side_of(open_path("tiny-llama-run/checkpoint-3")),
                  side_of(open_path("tiny-llama-run/checkpoint-6")), Options())
    assert snap_compare(app, terminal_size=(80, 24), run_before=_compare_then_sort)
