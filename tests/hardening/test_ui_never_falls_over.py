"""The UI never falls over: every sample and every damaged input opened in the
browser, every screen walked (t, m, r, p, ?, z, c, v, Esc back), the terminal resized to 60x20
and 200x60; the app keeps running, no worker dies, and the problem is on screen in words.
The diff app gets the same on damaged pairs, and NO_COLOR=1 leaves every status readable.

Inputs open_layout refuses (an empty folder, a missing path, a garbage file) never reach a
screen: the CLI says why in one line, exit 2, before the terminal is taken.

Every screen of every sample *path* (nested folders too) is also walked by test_read_only.py;
here each sample is opened once and checked at three sizes.
"""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from ckpt_browser.tui.browse.tree import CheckpointTree
from tests.hardening.conftest import (
    DAMAGED,
    SAMPLES,
    SIZES,
    UNOPENABLE,
    Watch,
    alive,
    notes,
    open_browser,
    open_diff,
    root_ignores_permissions,
    screen_text,
    settle,
    top_samples,
    walk_browser,
    walk_diff,
)

PROBLEM_WORDS = ("DAMAGED", "MISSING", "UNSAFE", "BROKEN", "INCOMPLETE", "ERROR", "error(s)")
VERDICTS = ("EXACT", "INEXACT", "WEIGHTS-ONLY", "BROKEN")

# damaged input -> the words its main screen shows at 80x24 and 200x60 (for ckpt-broken-cd:
# once `c` opened its broken last.ckpt)
EXPECT = {
    "missing-shard": ("MISSING", "BROKEN"),
    "truncated-shard": ("DAMAGED", "BROKEN"),
    "truncated-header": ("DAMAGED", "BROKEN"),
    "garbage-shard": ("DAMAGED", "BROKEN"),
    "huge-header-shard": ("DAMAGED", "BROKEN"),
    "unreadable-shard": ("DAMAGED",),
    "index-all-missing": ("MISSING", "BROKEN"),
    "index-extra-missing": ("MISSING", "BROKEN"),
    "garbage-index": ("error(s)", "BROKEN"),
    "torch-zip-broken-cd": ("optimizer DAMAGED",),
    "torch-zip-truncated": ("scheduler DAMAGED",),
    "trainer-state-garbage": ("DAMAGED",),
    "ckpt-broken-cd": ("DAMAGED", "BROKEN"),
    "dcp-missing-rank": ("DAMAGED", "BROKEN"),
    "dcp-garbage-metadata": ("DAMAGED", "BROKEN"),
    "garbage-named-safetensors": ("DAMAGED", "BROKEN"),
    "tiny-llama-damaged": ("DAMAGED", "MISSING", "BROKEN"),
    "malicious": ("UNSAFE",),
}
# what the problems window (p) says, in words
PROBLEMS = {
    "missing-shard": "does not exist", "truncated-shard": "truncated",
    "index-all-missing": "does not exist", "index-extra-missing": "does not exist",
    "garbage-index": "not valid JSON", "dcp-missing-rank": "missing:",
    "garbage-named-safetensors": "header claims",
    "tiny-llama-damaged": "does not exist", "malicious": "posix.system",
}


def has_any(text: str, words) -> list[str]:
    return [w for w in words if w in text]


def verdict(text: str) -> str | None:
    m = re.search(r"resume: ([A-Z-]+)", text)
    return m.group(1) if m else None


async def quit_cleanly(app, pilot) -> None:
    await pilot.press("q")
    await pilot.pause()
    assert not app.is_running and app.return_code in (0, None)


async def laid_out(app, pilot, rounds: int = 100) -> None:
    """Wait until the screen is laid out at the app's size: the resize is taken in at once,
    the layout at the next refresh. Under two CPU hogs the 200x60 text was once read from the
    60x20 layout still on screen."""
    for _ in range(rounds):
        if app.screen._compositor.size == app.size:
            return
        await pilot.pause()
    raise AssertionError(f"the screen was not laid out at {app.size}")


async def at_sizes(app, pilot, texts: dict[str, str]) -> None:
    """Resize to each size; the problems window opens and closes at each, the resume
    window (the tallest) at 60x20."""
    for width, height in SIZES:
        await pilot.resize_terminal(width, height)
        await settle(app, pilot)
        await laid_out(app, pilot)
        alive(app)
        assert app.size == (width, height)
        texts[f"{width}x{height}"] = screen_text(app)
        for key in ("p", "r") if width < 80 else ("p",):
            await pilot.press(key)
            await pilot.pause()
            alive(app)
            texts[f"{width}x{height} {key}"] = screen_text(app)
            await pilot.press("escape")
            await pilot.pause()
            assert len(app.screen_stack) == 1, app.screen_stack


# -- every sample ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", top_samples())
async def test_sample_at_every_size(name, isolated, monkeypatch):
    monkeypatch.chdir(SAMPLES)  # relative paths on screen, as a person types them
    watch, texts = Watch(), {}
    app = open_browser(name)
    async with app.run_test(size=(80, 24), message_hook=watch) as pilot:
        await settle(app, pilot)
        if app.first.picker_first:
            await pilot.press("escape")  # the list of checkpoints opens first
            await pilot.pause()
        texts["main"] = texts["t"] = screen_text(app)
        # a checkpoint without safetensors files opens in the state view already
        if app.query_one(CheckpointTree).mode != "state":
            await pilot.press("t")
            await settle(app, pilot)
            texts["t"] = screen_text(app)
            await pilot.press("t")
        await at_sizes(app, pilot, texts)
        await quit_cleanly(app, pilot)
    assert watch.failed == []
    said = verdict(texts["main"])
    assert said in VERDICTS, texts["main"]
    assert said in texts["200x60"], texts["200x60"]
    # the resume window spells it out as `check` does: "WEIGHTS-ONLY: only a warm start ..."
    assert said + ":" in texts["60x20 r"], texts["60x20 r"]
    assert re.search(r"weights +(OK|MISSING|DAMAGED|INCOMPLETE|UNSAFE)", texts["t"]), texts["t"]
    assert "Problems" in texts["60x20 p"] and "Problems" in texts["200x60 p"]


# -- damaged inputs that open ------------------------------------------------------------------
def build(name: str, tmp_path: Path, monkeypatch) -> str:
    """A damaged input (or a copy of a sample) in tmp_path, which becomes the cwd."""
    if name in DAMAGED:
        DAMAGED[name](tmp_path / name)
    else:
        shutil.copytree(SAMPLES / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    return name


@pytest.mark.parametrize("name", [*DAMAGED, "tiny-llama-damaged", "malicious"])
async def test_damaged_input_walk_and_resize(name, tmp_path, isolated, monkeypatch):
    if name == "unreadable-shard" and root_ignores_permissions():
        pytest.skip("running as root: chmod 000 does not stop root from reading")
    path = build(name, tmp_path, monkeypatch)
    watch, texts = Watch(), {}
    app = open_browser(path)
    async with app.run_test(size=(80, 24), message_hook=watch) as pilot:
        await walk_browser(app, pilot, texts, help_too=False)  # ? is the same everywhere
        await at_sizes(app, pilot, texts)
        await quit_cleanly(app, pilot)
    assert watch.failed == [], "a worker died instead of reporting the damage"
    main = texts["c-opened" if name == "ckpt-broken-cd" else "main"]
    for shown in (main, texts["200x60"]):
        missing = [w for w in EXPECT[name] if w not in shown]
        assert missing == [], f"the screen lacks {missing}:\n{shown}"
    assert has_any(texts["60x20"], PROBLEM_WORDS), texts["60x20"]
    # the windows, read at 200 columns where a phrase is not wrapped (and, for ckpt-broken-cd,
    # on its broken checkpoint, opened by c)
    assert has_any(texts["60x20 p"], ("ERROR", "UNSAFE")), texts["60x20 p"]
    assert ("UNSAFE" if name == "malicious" else "ERROR") in texts["200x60 p"], texts["200x60 p"]
    assert PROBLEMS.get(name, "ERROR") in texts["200x60 p"], texts["200x60 p"]
    assert has_any(texts["60x20 r"], PROBLEM_WORDS), texts["60x20 r"]
    if name != "unreadable-shard":
        assert any("error" in n.lower() for n in notes(app)), notes(app)


# -- found while walking: every shard of an index gone, yet "weights OK" ----------------------
async def test_state_view_does_not_call_absent_weights_ok(tmp_path, isolated, monkeypatch):
    """Every shard the index names is gone: the resume window says BROKEN / weights
    INCOMPLETE and the problems window lists 6 errors, but the training-state view (t) says
    "weights OK · model.safetensors.index.json holds the model weights"."""
    path = build("index-all-missing", tmp_path, monkeypatch)
    app = open_browser(path)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        await pilot.press("t")
        await settle(app, pilot)
        text = screen_text(app)
    row = next(line for line in text.splitlines() if "weights" in line and "│" in line)
    assert not re.search(r"weights +OK", row), text


def test_inspect_does_not_call_absent_weights_ok(tmp_path, isolated, monkeypatch, capsys):
    """The same in `inspect --json`: components.weights.status is "ok" while `check` says
    "incomplete" and the problems say every file is missing."""
    import json

    from ckpt_browser.cli import main

    path = build("index-all-missing", tmp_path, monkeypatch)
    main(["check", path, "--json"])
    check = json.loads(capsys.readouterr().out)
    main(["inspect", path, "--json"])
    inspect = json.loads(capsys.readouterr().out)
    assert check["components"]["weights"]["status"] == "incomplete"
    assert inspect["components"]["weights"]["status"] != "ok", inspect["components"]["weights"]


# -- inputs the CLI refuses before any screen --------------------------------------------------
@pytest.mark.parametrize("name", UNOPENABLE)
@pytest.mark.parametrize("argv", [[], ["browse"], ["inspect"], ["check"]])
def test_unopenable_refused_in_one_line(name, argv, tmp_path, isolated, capsys):
    from ckpt_browser.cli import main
    from ckpt_browser.errors import CheckpointError
    from ckpt_browser.producers.layout import open_layout

    path = str(UNOPENABLE[name](tmp_path / name))
    with pytest.raises(CheckpointError) as refused:  # so `browse` never takes the terminal
        open_layout(path)
    assert "\n" not in str(refused.value).strip()
    code = main([*argv, path])
    out, err = capsys.readouterr()
    assert code == 2, (code, out, err)
    assert out == "" and err.count("\n") == 1 and err.startswith("ckpt-browser: "), err
    assert "Traceback" not in err and "internal error" not in err


# -- the diff app on damaged pairs -------------------------------------------------------------
DIFF_PAIRS = {  # A (damaged), B (intact), what A's problems say
    "truncated-and-missing": ("tiny-llama-damaged", "tiny-llama-release", "does not exist"),
    "broken-zip": ("torch-zip-broken-cd", "hf-run3/checkpoint-2", "optimizer.pt"),
    "missing-rank": ("dcp-missing-rank", "dcp-ranks/ranks-2", "__1_0.distcp"),
    "unsafe": ("malicious", "hf-run3/checkpoint-2", "posix.system"),
}


@pytest.mark.parametrize("pair", DIFF_PAIRS)
async def test_diff_app_on_damaged_pair(pair, tmp_path, isolated, monkeypatch):
    a, b, word = DIFF_PAIRS[pair]
    a, b = build(a, tmp_path, monkeypatch), build(b, tmp_path, monkeypatch)
    watch, texts = Watch(), {}
    app = open_diff(a, b)
    async with app.run_test(size=(80, 24), message_hook=watch) as pilot:
        await walk_diff(app, pilot, texts)
        for width, height in SIZES:
            await pilot.resize_terminal(width, height)
            await settle(app, pilot)
            await laid_out(app, pilot)
            alive(app)
            texts[f"{width}x{height}"] = screen_text(app)
        await quit_cleanly(app, pilot)
    assert watch.failed == []
    assert "error(s)" in texts["main"], texts["main"]  # A's problems, in the summary
    said = "UNSAFE" if pair == "unsafe" else "ERROR"  # an unsafe problem says UNSAFE
    assert said in texts["p"] and word in texts["p"], texts["p"]
    for size in ("60x20", "200x60"):
        assert "error(s)" in texts[size], texts[size]


# -- NO_COLOR=1: words, not colours ----------------------------------------------------------
def colours(app) -> set[str]:
    """Every foreground and background colour on screen that is not a shade of grey."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor", legacy_windows=False, safe_box=False)
    found = set()
    for segment in console.render(app.screen._compositor.render_update(
            full=True, screen_stack=app._background_screens)):
        style = segment.style
        for colour in (style.color, style.bgcolor) if style else ():
            if colour is None or colour.is_default:
                continue
            r, g, b = colour.get_truecolor()
            if not (r == g == b):
                found.add(f"#{r:02x}{g:02x}{b:02x}")
    return found


@pytest.mark.parametrize("name", ["tiny-llama-damaged", "malicious"])
async def test_no_color_keeps_statuses_in_words(name, tmp_path, isolated, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    path = build(name, tmp_path, monkeypatch)
    app = open_browser(path)
    texts = {}
    async with app.run_test(size=(100, 30)) as pilot:
        assert app.no_color
        await walk_browser(app, pilot, texts)
        await pilot.press("r")
        await pilot.pause()
        grey_modal = colours(app)
        await pilot.press("escape")
        await pilot.pause()
        grey_main = colours(app)
        await quit_cleanly(app, pilot)
    assert grey_main == set() and grey_modal == set(), "NO_COLOR=1 still shows colours"
    for word in EXPECT[name]:
        assert word in texts["main"], texts["main"]
    assert verdict(texts["main"]) == "BROKEN" or name == "malicious", texts["main"]
    assert re.search(r"(OK|MISSING|DAMAGED|INCOMPLETE|UNSAFE)", texts["t"]), texts["t"]
    assert ("UNSAFE" if name == "malicious" else "ERROR") in texts["p"], texts["p"]
    assert re.search(r"\b(RIGHT|WRONG)\b", texts["z"]), texts["z"]  # the quiz says it in words


async def test_colour_check_sees_colour(tmp_path, isolated, monkeypatch):
    """Without NO_COLOR the same screen has colours: the check above is not vacuous."""
    app = open_browser(build("tiny-llama-damaged", tmp_path, monkeypatch))
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        assert not app.no_color and colours(app)


async def test_no_color_diff_statuses_in_words(tmp_path, isolated, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    a = build("tiny-llama-damaged", tmp_path, monkeypatch)
    app = open_diff(a, build("tiny-llama-release", tmp_path, monkeypatch))
    texts = {}
    async with app.run_test(size=(100, 30)) as pilot:
        assert app.no_color
        await walk_diff(app, pilot, texts)
        assert colours(app) == set()
        await quit_cleanly(app, pilot)
    for word in ("same", "only B", "error", "unreadable"):
        assert word in texts["v"], texts["v"]
