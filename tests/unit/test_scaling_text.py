"""Text that scales: 163 shards listed in one short phrase, one detail sentence per cause, the
lone shard (no verdict), plurals, and `stats` saying how much it reads (and refusing too much)."""

from __future__ import annotations

import json
import shutil

import pytest

from ckpt_browser import cli as cli_module
from ckpt_browser.analysis.resume import resume_report
from ckpt_browser.analysis.resume.shard import shard_of
from ckpt_browser.cli import main
from ckpt_browser.commands import stats as stats_command
from ckpt_browser.report.resume import resume_text
from ckpt_browser.report.words import compacted, file_list, plural
from tests.moe import NAME
from tests.tui.conftest import SAMPLES

RELEASE = SAMPLES / "tiny-llama-release"
SHARD = "model-00002-of-00003.safetensors"


SENTENCE = "a weights-only folder: no training state, so this can only warm-start a run."


def run(capsys, *args) -> tuple[int, str, str]:
    code = main([*map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_run_of_shards_is_one_phrase_and_other_names_stay():
    names = [f"model-{k:05d}-of-000163.safetensors" for k in range(1, 164)]
    names.append("model.safetensors.index.json")
    assert file_list(names) == \
        "163 shards (model-00001 ... model-00163), model.safetensors.index.json"
    assert compacted(names)


def test_missing_shards_are_counted_against_the_total():
    names = [f"model-{k:05d}-of-00009.safetensors" for k in (1, 2, 3, 5, 9)]
    assert file_list(names) == "5 of 9 shards (model-00001 ... model-00009)"


def test_numbered_files_compact_in_numeric_order_and_few_files_are_named():
    rng = [f"rng_state_{r}.pth" for r in (10, 2, 0, 1, 11, 3)]
    assert file_list(rng + ["trainer_state.json"]) == \
        "6 files (rng_state_0.pth ... rng_state_11.pth), trainer_state.json"
    few = ["model-00001-of-00003.safetensors", "model-00003-of-00003.safetensors"]
    assert file_list(few) == ", ".join(few) and not compacted(few)
    assert file_list(["a", "b", "c", "d", "e"]) == "a, b, c and 2 more"
    assert file_list(["a", "b", "c", "d", "e"], None) == "a, b, c, d, e"


def test_plural():
    assert plural(1, "rank") == "1 rank" and plural(2, "rank") == "2 ranks"
    assert plural(1024, "file") == "1,024 files"


def test_one_rank_is_singular_in_inspect(capsys):
    code, out, _ = run(capsys, "inspect", SAMPLES / "accelerate-state" / "step_4")
    assert "1 rank)" in out and "1 ranks" not in out


def test_check_text_at_163_shards_is_short_and_says_each_cause_once(capsys, moe_checkpoint):
    code, out, _ = run(capsys, "check", moe_checkpoint)
    assert code == 4
    assert max(len(line) for line in out.splitlines()) < 400  # was one 5,758-character line
    assert "163 shards (model-00001 ... model-00163), model.safetensors.index.json" in out
    assert out.count(SENTENCE) == 2  # once among the components, once as the finding
    assert f"these 5: {SENTENCE}" in out
    finding = [line for line in out.splitlines() if line.startswith("  error")]
    assert len(finding) == 1 and "optimizer, scheduler, rng, data, progress" in finding[0]


def test_inspect_text_at_163_shards_lists_the_weights_compactly(capsys, moe_checkpoint):
    code, out, _ = run(capsys, "inspect", moe_checkpoint)
    weights = next(line for line in out.splitlines() if line.startswith("  weights"))
    assert weights.split(None, 2)[2] == \
        "163 shards (model-00001 ... model-00163), model.safetensors.index.json"
    assert out.count(SENTENCE) == 1


def test_json_keeps_every_file(capsys, moe_checkpoint):
    code, out, _ = run(capsys, "check", moe_checkpoint, "--json")
    files = json.loads(out)["components"]["weights"]["files"]
    assert len(files) == 164 and files[1] == "model-00002-of-000163.safetensors"


def test_a_lone_shard_gets_no_verdict_and_exits_2(capsys, tmp_path):
    shutil.copy(RELEASE / SHARD, tmp_path / SHARD)  # the folder holds neither index nor shards
    assert shard_of(str(tmp_path / SHARD)).folder_complete is False
    code, out, err = run(capsys, "check", tmp_path / SHARD)
    assert (code, out) == (2, "")
    assert err == f"ckpt-browser: {tmp_path / SHARD}: one shard of 3: open the folder for the " \
                  "resume check\n"
    assert "BROKEN" not in err
    code, out, _ = run(capsys, "inspect", tmp_path / SHARD)  # still a weights file to read
    assert code == 0 and "tensors  9" in out


def test_a_shard_in_its_complete_folder_is_checked_as_that_folder(capsys):
    code, out, err = run(capsys, "check", RELEASE / SHARD)
    assert code == 4 and out.startswith("WEIGHTS-ONLY")
    assert resume_text(resume_report(str(RELEASE))) in out
    assert "is one shard of 3: checking its folder" in err


def test_a_damaged_folder_missing_a_shard_is_still_broken_as_a_folder(capsys):
    folder = SAMPLES / "tiny-llama-damaged"
    code, _, err = run(capsys, "check", folder / "model-00003-of-00003.safetensors")
    assert code == 2 and "open the folder" in err  # the shard alone has no verdict ...
    code, out, _ = run(capsys, "check", folder)
    assert code == 5 and out.startswith("BROKEN")  # ... its folder has


def test_a_file_merely_named_like_a_shard_of_one_is_a_checkpoint():
    assert shard_of(str(SAMPLES / "malicious" / "model.safetensors")) is None


def test_stats_refuses_more_than_the_budget_before_reading(capsys, moe_checkpoint):
    code, out, err = run(capsys, "stats", moe_checkpoint)
    assert code == 2 and err.count("\n") == 1
    said = ("values of 91,991 tensors (641.3 GiB) not read: over the values budget of 50,000 "
            "tensors (CKPT_BROWSER_MAX_VALUES_TENSORS raises it) and of 64.0 GiB (--max-bytes "
            "642G or CKPT_BROWSER_MAX_VALUES_BYTES raises it)")
    assert said in err
    assert out.startswith(said + ": model.") and "91,971 more (--json lists them all)" in out
    assert "min " not in out  # nothing was read


def test_stats_max_bytes_sets_the_budget(capsys):
    code, out, err = run(capsys, "stats", RELEASE, "--max-bytes", "10K")
    assert code == 2 and "min " not in out
    assert "values of 21 tensors (104.6 KiB) not read: over the values budget of 10.0 KiB " \
           "(--max-bytes 105K or CKPT_BROWSER_MAX_VALUES_BYTES raises it)" in err
    code, out, err = run(capsys, "stats", RELEASE, "--max-bytes", "1M")
    assert code == 0 and out.count("min ") == 21 and err == ""
    code, _, err = run(capsys, "stats", RELEASE, "--max-bytes", "lots")
    assert code == 2 and "a number of bytes such as 700G" in err


def test_stats_says_how_much_it_reads_when_it_is_a_lot(capsys, monkeypatch):
    monkeypatch.setattr(stats_command, "SAY_READING", 1)
    code, _, err = run(capsys, "stats", RELEASE)
    assert code == 0 and err == "ckpt-browser: reading 104.6 KiB in 21 tensors\n"
    code, _, err = run(capsys, "stats", RELEASE, "model.norm.weight")
    assert code == 0 and err == ""  # one tensor: nothing to announce


@pytest.mark.parametrize("text, n", [("700G", 700 * 2**30), ("1024", 1024), ("2MiB", 2**21)])
def test_byte_counts(text, n):
    assert cli_module._parse_bytes(text) == n


def test_inspect_at_163_shards_shows_the_run_as_one_row(capsys, moe_checkpoint):
    code, out, _ = run(capsys, "inspect", moe_checkpoint)
    assert code == 0
    rows = [ln for ln in out.splitlines() if ln.startswith("163 shards (")]
    assert len(rows) == 1, out
    assert rows[0].split()[5:] == ["safetensors", "91,991", "684.5B", "641.3", "GiB", "ok"]
    assert "model-00002-of-000163" not in out
    assert "(163 of 165 files in 1 row: --files lists each)" in out
    assert len(out.splitlines()) < 30 and len(out) < 2500
    code, every, _ = run(capsys, "inspect", moe_checkpoint, "--files")
    assert all(f"model-{k:05d}-of-000163.safetensors" in every for k in range(1, 164))


def test_a_damaged_shard_among_163_has_its_own_row(capsys, moe_checkpoint, tmp_path):
    """The other 162 stay one row; the damaged one is listed with its problem."""
    folder = tmp_path / NAME
    folder.mkdir()
    bad = "model-00007-of-000163.safetensors"
    for f in moe_checkpoint.iterdir():
        if f.name == bad:
            with open(f, "rb") as src:
                (folder / bad).write_bytes(src.read(4000))  # the header cut short
        else:
            (folder / f.name).symlink_to(f)
    code, out, _ = run(capsys, "inspect", folder)
    assert code == 5
    lines = out.splitlines()
    run_row = "162 of 163 shards (model-00001 ... model-00163)"
    assert sum(ln.startswith(run_row) for ln in lines) == 1
    damaged = [ln for ln in lines if ln.startswith(bad)]
    assert len(damaged) == 1 and "DAMAGED" in damaged[0], out
    assert "(162 of 165 files in 1 row: --files lists each)" in out


def test_a_small_checkpoint_lists_every_file(capsys):
    """Rank files of a run with few files are rows of their own, as before."""
    code, out, _ = run(capsys, "inspect", SAMPLES / "hf-multirank" / "checkpoint-4")
    assert all(f"rng_state_{r}.pth" in out for r in range(2)) and "--files" not in out


def test_inspect_of_a_lone_shard_says_open_the_folder_and_nothing_else(capsys, tmp_path):
    """No 'cannot be loaded' beside 'can only warm-start': one line, as check says it."""
    shutil.copy(RELEASE / SHARD, tmp_path / SHARD)
    code, out, _ = run(capsys, "inspect", tmp_path / SHARD)
    assert code == 0
    assert out.rstrip().endswith("resume   one shard of 3: open the folder for the resume check")
    assert "warm-start" not in out and "cannot be loaded" not in out
    assert "training state" not in out
