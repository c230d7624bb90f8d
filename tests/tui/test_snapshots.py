"""How the browser looks at 80x24: the size of a small SSH window."""

from tests.tui.conftest import loaded


async def _wait_then(pilot, *keys):
    await loaded(pilot.app, pilot)
    await pilot.press(*keys)
    await loaded(pilot.app, pilot)


def test_shard_view_expanded_80x24(snap_compare, sample_app):
    app = sample_app()
    assert snap_compare(app, terminal_size=(80, 24),
                        run_before=lambda pilot: _wait_then(pilot, "down", "down", "right",
                                                            "down"))


def test_damaged_module_view_80x24(snap_compare, sample_app):
    app = sample_app("tiny-llama-damaged")
    assert snap_compare(app, terminal_size=(80, 24),
                        run_before=lambda pilot: _wait_then(pilot, "m", "down", "right"))


def test_help_screen_80x24(snap_compare, sample_app):
    app = sample_app()
    assert snap_compare(app, terminal_size=(80, 24),
                        run_before=lambda pilot: _wait_then(pilot, "question_mark"))


def test_problems_screen_80x24(snap_compare, sample_app):
    app = sample_app("tiny-llama-damaged")
    assert snap_compare(app, terminal_size=(80, 24),
                        run_before=lambda pilot: _wait_then(pilot, "p"))


def test_tensor_table_by_size_80x24(snap_compare, sample_app):
    """l then s: every tensor, largest first, the details of the first below."""
    app = sample_app()
    assert snap_compare(app, terminal_size=(80, 24),
                        run_before=lambda pilot: _wait_then(pilot, "l", "s"))
