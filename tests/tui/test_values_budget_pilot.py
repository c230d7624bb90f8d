"""`v` keeps the values budget of `stats` (values.budget): a tensor over it is not read, and the
panel says so in the same words, instead of reading (an 8 GiB sparse tensor took a minute)."""

import json
import os
from dataclasses import replace

from ckpt_browser import limits
from ckpt_browser.producers.layout import open_layout
from ckpt_browser.tui.app import make_app
from ckpt_browser.values import read as values_read
from tests.tui.conftest import loaded, plain
from tests.tui.test_values_pilot import panel

MiB = 2**20


def _shard(path, tensors: dict[str, int]) -> None:
    """F32 tensors of the given byte sizes, all holes on disk past the header."""
    header, at = {}, 0
    for name, n in tensors.items():
        header[name] = {"dtype": "F32", "shape": [n // 4], "data_offsets": [at, at + n]}
        at += n
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(len(raw).to_bytes(8, "little") + raw)
    os.truncate(path, 8 + len(raw) + at)


async def test_v_on_a_tensor_over_the_budget_says_why_and_reads_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    _shard(tmp_path / "model.safetensors", {"big": 160 * MiB, "small": 4096})
    asked = []
    real = os.preadv
    monkeypatch.setattr(values_read.os, "preadv",
                        lambda fd, bufs, off, *r: asked.append(off) or real(fd, bufs, off, *r))
    app = make_app(open_layout(str(tmp_path)))
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(app, pilot)
        await pilot.press("right", "down")
        assert app.screen.focused.cursor_node.data.tensor.name == "big"
        await pilot.press("v")
        await loaded(app, pilot)
        errors = [str(n.message) for n in app._notifications if n.severity == "error"]
        assert errors and errors[0].startswith(
            "values of 1 tensor (160.0 MiB) not read: they would read 160.0 MiB from "
            "model.safetensors, which holds")
        assert "not read" in plain(panel(app).query_one("#values-status"))
        assert asked == [] and app.is_running and panel(app).session.job is None

        monkeypatch.setattr(limits, "LIMITS", replace(limits.LIMITS, values_bytes=1024))
        await pilot.press("down", "v")  # 4 KiB, over a budget of 1 KiB
        await loaded(app, pilot)
        errors = [str(n.message) for n in app._notifications if n.severity == "error"]
        assert errors[-1] == ("values of 1 tensor (4.0 KiB) not read: over the values budget "
                              "of 1.0 KiB (CKPT_BROWSER_MAX_VALUES_BYTES raises it)")
        assert asked == []
