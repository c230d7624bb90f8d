"""NaN and Inf in a checkpoint's values, answered in the browser: `v` says so at the top of the
values, each tensor found is a problem of its file (named as found by reading values), and `!`
checks every weight tensor as `stats --check` does, with progress, Esc and one summary line."""

import pytest
import torch
from safetensors.torch import save_file

from ckpt_browser.producers.layout import open_layout
from ckpt_browser.tui.app import make_app
from ckpt_browser.tui.browse import values_check
from ckpt_browser.tui.browse.details import Details
from ckpt_browser.tui.browse.summary import Summary
from ckpt_browser.tui.browse.values_check import ProgressLine
from ckpt_browser.tui.browse.values_panel import ValuesPanel
from ckpt_browser.tui.common.problems import ProblemsScreen
from ckpt_browser.values import stats as values_stats
from tests.tui.conftest import loaded, plain
from tests.tui.test_values_pilot import cursor, down_to, notes


def write(folder, monkeypatch, clean: bool = False) -> None:
    """Two real shards: `a.nan` (3 NaN) and `a.ok` in one, `b.inf` (1 Inf) and `b.ok` in the
    other; clean: no NaN or Inf anywhere."""
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    torch.manual_seed(0)
    nan, inf = torch.randn(64, 64), torch.randn(4096)
    if not clean:
        nan[1, 2] = nan[5, 6] = nan[60, 0] = float("nan")
        inf[100] = float("inf")
    save_file({"a.nan": nan, "a.ok": torch.randn(32)}, str(folder / "a.safetensors"))
    save_file({"b.inf": inf, "b.ok": torch.randn(8, 8)}, str(folder / "b.safetensors"))


def app_on(tmp_path, monkeypatch, clean: bool = False):
    write(tmp_path, monkeypatch, clean)
    return make_app(open_layout(str(tmp_path)))


def values_text(app) -> str:
    return plain(app.query_one(ValuesPanel).query_one("#values-result"))


def problems_text(app) -> str:
    return plain(app.screen.query_one("#problems-list"))


async def highlight(pilot, name: str) -> None:
    """Open the file of `name` and put the cursor on the tensor."""
    await down_to(pilot, lambda d: d.kind == "shard" and d.shard == f"{name[0]}.safetensors")
    await pilot.press("right")
    await down_to(pilot, lambda d: d.kind == "tensor" and d.tensor.name == name)


async def test_v_says_nan_first_and_it_becomes_a_problem_of_its_file(tmp_path, monkeypatch):
    app = app_on(tmp_path, monkeypatch)
    async with app.run_test(size=(100, 40)) as pilot:
        await loaded(app, pilot)
        await pilot.press("p")
        assert "No problems found." in problems_text(app)
        await pilot.press("escape")

        await highlight(pilot, "a.nan")
        await pilot.press("v")
        await loaded(app, pilot)
        shown = values_text(app)
        assert shown.splitlines()[1].startswith("NOT FINITE: 3 NaN in 4,096 values.")
        assert "computes NaN" in shown
        assert any("a.nan: 3 NaN: press p" in n for n in notes(app))
        assert "(1 from reading values)" in plain(app.query_one(Summary))

        await pilot.press("p")
        assert isinstance(app.screen, ProblemsScreen)
        listed = problems_text(app)
        assert "a.safetensors: values of a.nan: 3 NaN (found by reading them)" in listed
        assert "b.safetensors" not in listed  # not read, so not known
        await pilot.press("escape")

        await pilot.press("left")  # the file's own details list it too
        await loaded(app, pilot)
        assert cursor(app).kind == "shard"
        details = plain(app.query_one("#details-body"))
        assert "No problems found." not in details and "values of a.nan: 3 NaN" in details


async def test_v_on_inf_and_on_a_constant_tensor(tmp_path, monkeypatch):
    write(tmp_path, monkeypatch)
    save_file({"c.zero": torch.zeros(16)}, str(tmp_path / "c.safetensors"))
    app = make_app(open_layout(str(tmp_path)))
    async with app.run_test(size=(100, 40)) as pilot:
        await loaded(app, pilot)
        await highlight(pilot, "b.inf")
        await pilot.press("v")
        await loaded(app, pilot)
        assert "NOT FINITE: 1 Inf in 4,096 values." in values_text(app)

        await highlight(pilot, "c.zero")
        await pilot.press("v")
        await loaded(app, pilot)
        assert "Note: 16 values, all zeros:" in values_text(app)
        listed = [p.message for p in app.screen.model.problems]
        assert listed == ["values of b.inf: 1 Inf (found by reading them)"]  # a note only


async def test_check_finds_exactly_the_planted_tensors(tmp_path, monkeypatch):
    app = app_on(tmp_path, monkeypatch)
    async with app.run_test(size=(100, 40)) as pilot:
        await loaded(app, pilot)
        await pilot.press("exclamation_mark")
        await loaded(app, pilot)
        assert any("checked 4 tensor(s): 2 suspect (1 with NaN, 1 with Inf): press p" in n
                   for n in notes(app))
        found = {p.file: p.message for p in app.screen.model.problems}
        assert found == {"a.safetensors": "values of a.nan: 3 NaN (found by reading them)",
                         "b.safetensors": "values of b.inf: 1 Inf (found by reading them)"}
        assert all(p.severity == "warning" for p in app.screen.model.problems)
        assert not app.query_one(ProgressLine).has_class("-running")
        await pilot.press("p")
        listed = problems_text(app)
        assert "a.safetensors: values of a.nan" in listed
        assert "b.safetensors: values of b.inf" in listed
        await pilot.press("escape")

        await highlight(pilot, "a.nan")  # v on a tensor the check found: said once
        await pilot.press("v")
        await loaded(app, pilot)
        assert "NOT FINITE: 3 NaN" in values_text(app)
        assert len(app.screen.model.problems) == 2
        assert not any("press p to list problems" in n for n in notes(app))


async def test_check_on_a_clean_checkpoint(tmp_path, monkeypatch):
    app = app_on(tmp_path, monkeypatch, clean=True)
    async with app.run_test(size=(100, 40)) as pilot:
        await loaded(app, pilot)
        await pilot.press("exclamation_mark")
        await loaded(app, pilot)
        assert "checked 4 tensor(s): none holds NaN or Inf" in notes(app)
        assert list(app._notifications)[-1].severity == "information"
        assert app.screen.model.problems == ()


async def test_check_is_in_the_palette(tmp_path, monkeypatch):
    app = app_on(tmp_path, monkeypatch)
    async with app.run_test(size=(100, 40)) as pilot:
        await loaded(app, pilot)
        command = next(c for c in app.get_system_commands(app.screen)
                       if c.title == "Check values for NaN / Inf")
        command.callback()
        await loaded(app, pilot)
        assert len(app.screen.model.values_found) == 2


@pytest.fixture
def held(monkeypatch):
    """tensor_stats waits, after the first tensor, until the check is cancelled; every
    progress is shown (none merged by time)."""
    monkeypatch.setattr(values_check, "PROGRESS_EVERY", 0)
    real = values_stats.tensor_stats
    calls = []

    def holding(loc, cancel, progress, *args, **kwargs):
        calls.append(loc.name)
        if len(calls) > 1:
            progress(0, loc.numel)
            cancel.wait(30)
        return real(loc, cancel, progress, *args, **kwargs)

    monkeypatch.setattr(values_stats, "tensor_stats", holding)
    return calls


async def test_esc_cancels_the_check_keeping_what_was_found(tmp_path, monkeypatch, held):
    app = app_on(tmp_path, monkeypatch)
    async with app.run_test(size=(100, 40)) as pilot:
        await loaded(app, pilot)
        await pilot.press("exclamation_mark")
        bar = app.query_one(ProgressLine)
        job = app.screen._check
        for _ in range(3000):  # until the second tensor is being read (it waits there)
            if job.tensors == 1 and len(held) == 2:
                break
            await pilot.pause(0.01)
        else:
            raise AssertionError("the check did not reach its second tensor")
        assert bar.has_class("-running")
        assert "checking values: 1 of 4 tensors" in plain(bar) and "(Esc cancels)" in plain(bar)

        await pilot.press("escape")
        await loaded(app, pilot)
        assert app.screen._check is None and not bar.has_class("-running")
        assert held == ["a.nan", "a.ok"]  # stopped: the rest was not read
        said = [n for n in notes(app) if "cancelled (Esc) after" in n]
        assert said == ["cancelled (Esc) after 1 of 4 tensor(s); checked 1 tensor(s): 1 suspect "
                        "(1 with NaN): press p to list them"]
        assert list(app.screen.model.values_found) == [("a.safetensors", "a.nan")]
        assert app.query_one(Details).values.session.job is None


async def test_check_keeps_to_the_values_budget(tmp_path, monkeypatch):
    from dataclasses import replace

    from ckpt_browser import limits

    monkeypatch.setattr(limits, "LIMITS", replace(limits.LIMITS, values_tensors=3))
    read = []
    real = values_stats.tensor_stats
    monkeypatch.setattr(values_stats, "tensor_stats",
                        lambda loc, *a, **k: read.append(loc.name) or real(loc, *a, **k))
    app = app_on(tmp_path, monkeypatch)
    async with app.run_test(size=(100, 40)) as pilot:
        await loaded(app, pilot)
        await pilot.press("exclamation_mark")
        await loaded(app, pilot)
        assert read == []  # over the budget: none is read, as `stats` does
        said = [n for n in notes(app) if n.startswith("checked 0 tensor(s)")]
        assert len(said) == 1 and "values of 4 tensors" in said[0]
        assert "not read: over the values budget of 3 tensors" in said[0]
        assert list(app._notifications)[-1].severity == "warning"  # not a clean bill
