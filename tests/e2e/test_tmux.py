"""The real terminal: ckpt-browser in tmux, typed at like a person over SSH."""

import os
from pathlib import Path

import pytest

from tests.tmux import TMUX, Terminal

SAMPLES = Path(__file__).resolve().parents[2] / "sample_checkpoints"
pytestmark = pytest.mark.skipif(TMUX is None and not os.environ.get("CI"),
                                reason="tmux not installed (CI installs it)")


@pytest.fixture
def terminal(tmp_path):
    term = Terminal(tmp_path / "rc")
    yield term
    term.close()


def test_browse_expand_filter_quit(terminal):
    terminal.start(["tiny-llama-run/checkpoint-6"], cwd=SAMPLES)
    terminal.wait_for("read 11/11")
    terminal.wait_for("model-00003-of-00003.safetensors")
    # typed ahead in one burst, as over a slow link: the children must exist before Down
    # (config.json and generation_config.json come before the first shard)
    terminal.keys("Down", "Down", "Right", "Down", "Down")
    terminal.wait_for("lm_head.weight")
    screen = terminal.wait_for("shape   [128, 32]")
    assert "│ model.embed_tokens.weight" in screen  # details of the second tensor
    terminal.type("/q_proj")  # one burst: the filter must have focus before "q" (quit) lands
    # of every tensor: the weights, the optimizer's 63 and the RNG state
    screen = terminal.wait_for("filter 'q_proj': 2 of 85 tensors in 2 files")
    assert "model-00001-of-00003" not in screen  # no q_proj there
    terminal.keys("Escape")
    terminal.wait_for("filter 'q_proj'", present=False)
    terminal.wait_for("model-00001-of-00003")
    terminal.keys("q")
    assert terminal.exit_code() == 0


def test_damaged_checkpoint_shows_problems_in_app(terminal):
    terminal.start(["tiny-llama-damaged"], cwd=SAMPLES)
    terminal.wait_for("press p to list them")
    terminal.wait_for("MISSING model-00002-of-00003")
    terminal.keys("p")
    screen = terminal.wait_for("Problems (3)")
    assert "file does not exist" in screen
    terminal.keys("Escape")
    terminal.wait_for("Problems (3)", present=False)
    terminal.keys("q")
    assert terminal.exit_code() == 0


def test_bad_path_is_one_line_and_exit_2(terminal):
    terminal.start(["no-such-checkpoint"], cwd=SAMPLES)
    assert terminal.exit_code() == 2
    lines = [line for line in terminal.screen().splitlines() if line.strip()]
    assert lines == ["ckpt-browser: no-such-checkpoint: no such file or folder"]


def test_no_argument_opens_the_bundled_sample(terminal, tmp_path):
    # from an unrelated folder: in CI this is the non-editable install finding its own copy
    terminal.start([], cwd=tmp_path)
    screen = terminal.wait_for("read 11/11")
    assert "checkpoint-6" in screen and "21 tensors" in screen
    terminal.keys("q")
    assert terminal.exit_code() == 0


def test_malicious_checkpoint_in_a_real_terminal_runs_nothing(terminal, tmp_path):
    # run from tmp_path: the payload would `touch ckpt-browser-PWNED` in the current folder
    terminal.start([str(SAMPLES / "malicious")], cwd=tmp_path)
    terminal.wait_for("error(s)")
    terminal.keys("t")
    screen = terminal.wait_for("UNSAFE")
    assert "optimizer" in screen
    terminal.keys("q")
    assert terminal.exit_code() == 0
    assert not (tmp_path / "ckpt-browser-PWNED").exists()


def test_diff_of_two_steps_compares_values_and_quits(terminal):
    terminal.start(["tiny-llama-run/checkpoint-3", "tiny-llama-run/checkpoint-6"], cwd=SAMPLES)
    terminal.wait_for("not compared")
    screen = terminal.wait_for("q Quit")
    assert "step 3 -> 6" in screen
    terminal.keys("v")
    screen = terminal.wait_for("21 values changed")
    terminal.keys("s")  # largest difference first: the top row is a changed weight
    screen = terminal.wait_for("~ values")
    terminal.keys("q")
    assert terminal.exit_code() == 0


def test_values_key_shows_a_tensors_statistics(terminal):
    terminal.start(["tiny-llama-release"], cwd=SAMPLES)
    terminal.wait_for("read 6/6")
    terminal.keys("Down", "Down", "Right", "Down")  # the first shard's first tensor
    terminal.wait_for("shape   [128, 32]")
    terminal.keys("v")
    screen = terminal.wait_for("abs max", timeout=30)
    assert "NaN" in screen and "mean" in screen
    terminal.keys("q")
    assert terminal.exit_code() == 0


def test_search_n_n_then_escape_keeps_the_place(terminal):
    """`/proj`, Enter, n, n, Esc: the summary counts the matches, the details follow the
    cursor to the third one, and clearing the filter leaves the cursor (and the details) on it."""
    from safetensors import safe_open

    from ckpt_browser.model import natural_key

    run = SAMPLES / "tiny-llama-run" / "checkpoint-6"
    matches = []
    for shard in sorted(run.glob("*.safetensors"), key=lambda p: natural_key(p.name)):
        with safe_open(shard, "np") as f:
            matches += sorted((k for k in f.keys() if "proj" in k), key=natural_key)
    third = matches[2][:26]  # the details pane wraps long names: its first line holds this
    terminal.start(["tiny-llama-run/checkpoint-6"], cwd=SAMPLES)
    terminal.wait_for("read 11/11")
    terminal.wait_for("all state ok")
    terminal.keys("/")
    terminal.type("proj")
    terminal.keys("Enter")
    terminal.wait_for(f"match 1/{len(matches)}")
    terminal.keys("n")
    terminal.wait_for(f"match 2/{len(matches)}")
    terminal.keys("n")
    terminal.wait_for(f"match 3/{len(matches)}")
    terminal.wait_for(third)  # the details follow once the cursor has moved
    terminal.keys("Escape")
    terminal.wait_for("match ", present=False)
    terminal.wait_for("config.json")  # the whole tree is back
    terminal.wait_for(third)  # and the cursor came back to the third match, not the top
    terminal.keys("q")
    assert terminal.exit_code() == 0


def test_resume_window_at_80x24_shows_a_finding_and_whole_file_names(terminal):
    terminal.start(["deepspeed-run"], cwd=SAMPLES)  # ZeRO-2, 2 ranks: long rank file names
    terminal.wait_for("global_step4")
    terminal.keys("r")
    screen = terminal.wait_for("WARNING rng")  # a finding, in the room the window gives them
    assert "Findings" in screen
    # file names break after a `/` or `_`, never inside a piece of the name
    lines = [line.strip("│ ") for line in screen.splitlines()]
    assert not any(line.startswith(("tates.pt", "ates.pt", "s.pt")) for line in lines), screen
    assert any("optim_states.pt" in line or line.endswith("optim_") for line in lines), screen
    terminal.keys("Escape")  # alone: Escape then q in one burst reads as Alt+q
    terminal.wait_for("Findings", present=False)
    terminal.keys("q")
    assert terminal.exit_code() == 0


def test_expert_rows_at_80x24_keep_the_layer_and_the_expert(terminal, moe_checkpoint):
    """The 163-shard DeepSeek-V3-shaped checkpoint: a search for one expert's tensors shows
    rows that still say which layer and which expert, in the tree and in the table."""
    import re

    # a row naming layer 3, expert 255 and the leaf, whatever is shortened around them
    row = re.compile(r"\bl(?:ayers)?\.3\.(?:\w+\.)*?e(?:xperts)?\.255\.down_proj\.weight\b")
    terminal.start([moe_checkpoint.name], cwd=moe_checkpoint.parent)
    terminal.wait_for("read 165/165")
    terminal.type("/experts.255.down")  # the tree opens the matches as the filter runs
    screen = terminal.wait_for("118 of 91,991 tensors")
    screen = terminal.wait_for("14.0 MiB")  # a down_proj row, with its size
    rows = [line.split("││")[0] for line in screen.splitlines() if "14.0 MiB" in line]
    assert any(row.search(r) for r in rows), screen  # the tree's rows, not the details
    terminal.keys("Escape")
    terminal.wait_for("filter '", present=False)  # cleared: the keys are the tree's again
    terminal.type("l")  # the table view, then the same search in it
    terminal.wait_for("all 91,991 tensors")
    terminal.type("/experts.255.down")
    screen = terminal.wait_for("118 tensors matching")
    screen = terminal.wait_for("F8_E4M3")
    rows = [line for line in screen.splitlines() if "F8_E4M3" in line]  # the table's rows
    assert any(row.search(r) for r in rows), screen
    terminal.keys("Escape")
    terminal.wait_for("filter '", present=False)
    terminal.type("q")
    assert terminal.exit_code() == 0


@pytest.mark.parametrize("how", ["one burst", "enter and n in a burst"])
def test_keys_typed_ahead_of_the_filters_enter_walk_the_matches(terminal, how):
    """Keys that arrive together (a paste, a slow SSH link): "/proj", Enter, "n", "n" made
    the filter "projnn" (each key was queued at the filter before its Enter ran)."""
    terminal.start(["tiny-llama-run/checkpoint-6"], cwd=SAMPLES)
    terminal.wait_for("all state ok")
    if how == "one burst":
        terminal.keys("/", "p", "r", "o", "j", "Enter", "n", "n")
    else:
        terminal.keys("/")
        terminal.type("proj")
        terminal.wait_for("filter 'proj'")
        terminal.keys("Enter", "n", "n")
    terminal.wait_for("match 3/14")
    assert "filter 'proj':" in terminal.screen()
    terminal.keys("q")
    assert terminal.exit_code() == 0
