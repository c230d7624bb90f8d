"""UNSAFE is said UNSAFE, damage is said damaged, a file that is both says both, and only
the components an unsafe file holds are unsafe (README "Safety").

Cases from the malicious corpus (tests/malicious), run through `ckpt_browser.cli.main` from an
empty working folder: nothing in them is ever run, but a payload would write there.
"""

from __future__ import annotations

import json
import os

import pytest

from ckpt_browser.cli import main
from tests.malicious.make_corpus import CORPUS

UNSAFE_ONLY = CORPUS / "pickle-os-system/checkpoint-1"  # optimizer.pt calls os.system
DAMAGED_ONLY = CORPUS / "zip-bomb-lying-size/checkpoint-1"  # optimizer.pt cut short
BOTH = CORPUS / "zip-bad-crc/checkpoint-1"  # optimizer.pt calls os.system and fails its CRC
WEIGHTS_FILE = CORPUS / "file-model-pt/model.pt"  # one unsafe file holding only weights
LIGHTNING = CORPUS / "lightning-hparams/epoch=0-step=1.ckpt"  # no RNG, no data position


@pytest.fixture
def run(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)

    def go(*argv) -> tuple[int, str, str]:
        code = main([str(a) for a in argv])
        out, err = capsys.readouterr()
        assert os.listdir(tmp_path) == []
        return code, out, err

    return go


def test_inspect_of_an_unsafe_file_says_unsafe_never_damaged(run):
    code, out, err = run("inspect", UNSAFE_ONLY)
    assert code == 5
    assert "optimizer.pt        torch-zip            3         9     1.8 KiB  UNSAFE: its pickle " \
           "calls os.system" in out
    assert "  optimizer  UNSAFE      optimizer.pt" in out
    assert err.startswith(f"ckpt-browser: {UNSAFE_ONLY}: UNSAFE, 1 error(s); first: "
                          "optimizer.pt: unsafe: its pickle calls os.system")
    assert "damaged" not in (out + err).lower()


def test_check_of_an_unsafe_file_says_unsafe_never_damaged(run):
    code, out, err = run("check", UNSAFE_ONLY)
    assert code == 4 and err == ""
    assert out.startswith("WEIGHTS-ONLY: optimizer.pt is UNSAFE (would run code when loaded): "
                          "trust only the files that hold no code\n")
    assert "  optimizer  UNSAFE      optimizer.pt" in out
    assert "damaged" not in out.lower()


def test_a_damaged_file_says_damaged_never_unsafe(run):
    code, out, err = run("inspect", DAMAGED_ONLY)
    assert code == 5
    assert "DAMAGED: pickle ends early (truncated?)" in out
    assert "  optimizer  damaged     optimizer.pt" in out
    assert f"{DAMAGED_ONLY}: damaged, 1 error(s); first: optimizer.pt: pickle ends early" in err
    code, out_check, _ = run("check", DAMAGED_ONLY)
    assert code == 4 and "  optimizer  damaged     optimizer.pt" in out_check
    assert "unsafe" not in (out + err + out_check).lower()


def test_a_file_both_unsafe_and_damaged_says_both(run):
    code, out, err = run("inspect", BOTH)
    assert code == 5
    row = next(line for line in out.splitlines() if line.startswith("optimizer.pt "))
    assert "UNSAFE, DAMAGED: its pickle calls os.system" in row
    assert row.index("os.system") < row.index("fails its CRC-32 check")  # the unsafe one first
    assert f"{BOTH}: UNSAFE and damaged, 2 error(s); first: optimizer.pt: unsafe: its pickle " \
           "calls os.system" in err
    code, out, _ = run("check", BOTH)
    assert code == 4 and "  optimizer  UNSAFE      optimizer.pt" in out


def test_only_the_components_an_unsafe_file_holds_are_unsafe(run):
    code, out, _ = run("check", "--json", WEIGHTS_FILE)
    doc = json.loads(out)
    statuses = {k: c["status"] for k, c in doc["components"].items()}
    assert code == 5 and statuses == {"weights": "unsafe", "optimizer": "missing",
                                      "scheduler": "missing", "rng": "missing",
                                      "data": "missing", "progress": "missing",
                                      "scaler": "not-needed"}
    code, out, _ = run("check", WEIGHTS_FILE)
    assert out.startswith("BROKEN: the weights are UNSAFE: model.pt would run code when loaded; "
                          "nothing can resume from here\n")
    code, out, _ = run("inspect", "--json", LIGHTNING)
    statuses = {k: c["status"] for k, c in json.loads(out)["components"].items()}
    assert statuses == {"weights": "unsafe", "optimizer": "unsafe", "scheduler": "unsafe",
                        "rng": "missing", "data": "missing", "progress": "unsafe",
                        "scaler": "not-needed"}


def test_diff_says_unsafe_for_the_unsafe_side(run):
    code, out, err = run("diff", CORPUS / "control-hf/checkpoint-1", UNSAFE_ONLY)
    assert code == 1 and err == ""
    assert "  optimizer  ok -> UNSAFE  (differs)" in out
    assert "B is UNSAFE: 1 error(s); first: error: optimizer.pt: unsafe: its pickle calls " \
           "os.system" in out
    assert "damaged" not in out.lower()


def test_check_calls_an_unsafe_weight_file_unsafe(run):
    """epoch_2.pth holds weights too and would run code: the weights are UNSAFE, not damaged."""
    code, out, _ = run("check", CORPUS / "file-epochs-pth")
    assert code == 5
    assert out.startswith("BROKEN: the weights are UNSAFE: epoch_2.pth would run code when "
                          "loaded; nothing can resume from here\n")
    assert "  weights    UNSAFE      epoch_2.pth" in out
    assert "epoch_2.pth is UNSAFE (unsafe: its pickle calls subprocess.Popen" in out
    assert "damaged" not in out.lower()


def test_an_unsafe_dcp_item_is_found_on_the_component_it_makes_unsafe(run):
    """train_state.step would run code: the finding is the progress component's; the weights
    beside it in the same rank file stay ok (the verdict is weights-only, as before)."""
    code, out, err = run("check", CORPUS / "dcp-item-payload/step-1")
    assert code == 4 and err == ""
    assert "  weights    ok" in out and "  progress   UNSAFE" in out
    assert "  error   progress   __0_0.distcp: unsafe: item train_state.step asks to run " \
           "os.system" in out
    code, _, err = run("inspect", CORPUS / "dcp-item-payload/step-1")
    assert code == 5 and ": UNSAFE, 1 error(s); first: __0_0.distcp: unsafe: item " in err


def test_stats_names_the_file_of_each_tensor_unsafe_or_damaged(run):
    code, out, err = run("stats", UNSAFE_ONLY, "w", "state.0.exp_avg")
    assert code == 0 and err == ""
    assert "w  F32 [4]  (model.safetensors)\n" in out
    assert "state.0.exp_avg  F32 [4]  (optimizer.pt: UNSAFE)\n" in out
    code, out, _ = run("stats", BOTH, "state.0.exp_avg")
    assert "state.0.exp_avg  F32 [4]  (optimizer.pt: UNSAFE, DAMAGED)\n" in out
