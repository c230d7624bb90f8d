"""Numbers a file claims (sizes, counts, steps, learning rates) never crash or flood what is
printed: inf, nan, 1e308 and integers of up to 1,000 digits (longer ones are stand-ins already)
go through every formatting helper, and the places that once raised on them now answer."""

from __future__ import annotations

import asyncio
import json
import math
import os

from hypothesis import given, settings
from hypothesis import strategies as st

from ckpt_browser.cli import main
from ckpt_browser.parts import common
from ckpt_browser.report import words
from tests.malicious.make_corpus import TITAN_ITEMS, dcp_folder

from .helpers import save

NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-10**1000, 10**1000),
    st.integers(-2**70, 2**70),
    st.sampled_from([2**63, 2**64, 1024**10, 10**15, 10**21, 1e308, -1e308, 5e-324]),
)


@settings(max_examples=500, deadline=None)
@given(NUMBERS)
def test_sizes_and_counts_stay_short_whatever_the_number(x):
    for shown in (words.size(x), words.size_cell(x), words.count(x)):
        assert isinstance(shown, str) and 0 < len(shown) <= 40, shown
    for shown in (words.short_number(x), words.full_number(x), common.num(x)):
        assert isinstance(shown, str) and len(shown) <= 40, shown
    got = words.json_float(x)
    assert got is None or got == x
    json.dumps(common.jsonable(x), allow_nan=False)


def test_sizes_read_as_before_for_real_numbers():
    assert [words.size(n) for n in (0, 1, 2**20, 107_110, 696_000_000_000)] == [
        "0 Bytes", "1 Byte", "1.0 MiB", "104.6 KiB", "648.2 GiB"]
    assert [words.count(n) for n in (7, 7_200_000, 671_000_000_000)] == ["7", "7.2M", "671.0B"]
    assert words.size(10**999) == "a 1,000-digit number of bytes"
    assert (words.size(float("nan")), words.count(float("inf"))) == ("nan bytes", "inf")


def run(capsys, *args) -> tuple[int, str, str]:
    code = main([*map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_nan_in_the_trainers_log_is_not_damage(tmp_path, capsys):
    """transformers writes a NaN grad_norm or loss into trainer_state.json (json allows it) and
    resumes from it; the file was called unreadable, progress damaged."""
    ckpt = tmp_path / "checkpoint-3"
    ckpt.mkdir()
    import torch

    save(ckpt / "model.safetensors", {"w": torch.ones(4)})
    state = {"global_step": 3, "epoch": 1.0, "max_steps": 10, "log_history": [
        {"loss": float("nan"), "grad_norm": float("inf"), "learning_rate": 1e-3, "step": 3}]}
    (ckpt / "trainer_state.json").write_text(json.dumps(state))
    code, out, _ = run(capsys, "inspect", ckpt, "--json")
    doc = json.loads(out, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    progress = doc["components"]["progress"]
    assert progress["status"] == "ok" and "global step 3" in progress["detail"]
    assert progress["facts"]["last_log"]["loss"] == "nan"  # a string: JSON has no NaN


def test_a_dcp_rank_of_5000_digits(tmp_path, capsys):
    """dataloader.dp_rank_<5,000 digits>: int() refused to sort it (an internal error)."""
    meta, rank = dcp_folder({**TITAN_ITEMS, "dataloader.dp_world_size": 1,
                             "dataloader.dp_rank_" + "9" * 5000: {"x": 1}})
    step = tmp_path / "step-1"
    step.mkdir()
    (step / ".metadata").write_bytes(meta)
    (step / "__0_0.distcp").write_bytes(rank)
    code, out, err = run(capsys, "check", step)
    assert code in (0, 3, 4) and "internal error" not in err


def test_the_browser_opens_an_index_claiming_a_999_digit_total_size(tmp_path, monkeypatch):
    """The summary line showed index.total_size while the shards loaded: humanize turned the
    999-digit integer into a float and the app stopped (OverflowError)."""
    import torch

    from ckpt_browser.producers.layout import open_layout
    from ckpt_browser.tui.app import make_app

    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    names = [f"model-0000{i}-of-00002.safetensors" for i in (1, 2)]
    for i, name in enumerate(names):
        save(tmp_path / name, {f"t{i}": torch.ones(4)})
    (tmp_path / "model.safetensors.index.json").write_text(
        '{"metadata": {"total_size": ' + "9" * 999 + '}, "weight_map": {"t0": "' + names[0]
        + '", "t1": "' + names[1] + '"}}')

    async def session():
        app = make_app(open_layout(str(tmp_path)))
        async with app.run_test(size=(100, 30)) as pilot:
            await app.workers.wait_for_complete()
            await pilot.pause()
            for key in ("t", "p", "escape"):
                await pilot.press(key)
                await app.workers.wait_for_complete()
                await pilot.pause()
            return app.is_running

    assert asyncio.run(session())
    assert os.listdir(tmp_path)  # (nothing removed)
    assert math.isfinite(float(words.size(2**70).split()[0]))


def test_a_long_list_in_the_facts_says_how_much_is_left_out():
    """jsonable keeps 1,000 items of a list; the rest were dropped without a word."""
    got = common.jsonable(list(range(1500)))
    assert got[:3] == [0, 1, 2] and len(got) == 1001 and got[-1] == "... 500 more"
    assert common.jsonable((0.5, float("inf"))) == [0.5, "inf"]


def test_stats_of_values_spanning_more_than_a_float(tmp_path, capsys):
    """F64 values from -1.7e308 to 1.7e308: the histogram's edges overflowed to NaN and `stats
    --json` wrote NaN (not JSON); std was nan (inf * 0) where torch says inf."""
    import torch

    save(tmp_path / "model.safetensors", {"x": torch.tensor(
        [1.7e308, -1.7e308, 1e308, float("nan")], dtype=torch.float64)})
    code, out, _ = run(capsys, "stats", tmp_path, "--json")
    doc = json.loads(out, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    x = doc["tensors"][0]
    assert code == 0 and x["std"] is None and x["hist"] == [] and x["hist_range"] is None
    assert "no histogram" in x["note"] and (x["min"], x["max"], x["nan"]) == (-1.7e308, 1.7e308, 1)
    t = torch.tensor([1.7e308, -1.7e308, 1e308], dtype=torch.float64)
    assert math.isinf(float(t.std()))  # what torch says: inf, which JSON writes as null
    code, out, _ = run(capsys, "stats", tmp_path)
    assert "std inf" in out


def test_diff_values_whose_squares_pass_the_float_range(tmp_path, capsys):
    """[1e300, 2e300] against [1e300, 3e300]: the norms overflow, and inf / inf made a cosine of
    1.0 (nan clamped), as if the two were parallel."""
    import torch

    for side, last in (("a", 2e300), ("b", 3e300)):
        (tmp_path / side).mkdir()
        save(tmp_path / side / "model.safetensors",
             {"x": torch.tensor([1e300, last], dtype=torch.float64)})
    code, out, _ = run(capsys, "diff", tmp_path / "a", tmp_path / "b", "--values", "--json")
    row = json.loads(out)["tensors"][0]
    assert code == 1 and row["status"] == "values_changed"
    assert row["cosine"] is None and row["max_abs_diff"] == 1e300
