"""A checkpoint of thousands of files: the browser's work per batch of files read must not grow
with all the files read so far. 10,000 tiny shards took minutes before (every 8 files, each
file's state in the tree asked for every problem of every file: quadratic)."""

from __future__ import annotations

import json
import struct

from ckpt_browser.model import FileInfo, Layout, Problem, TensorInfo
from ckpt_browser.producers.layout import open_layout
from ckpt_browser.tui.app import make_app
from ckpt_browser.tui.browse.messages import HeadersRead
from ckpt_browser.tui.browse.model import BrowseModel
from tests.tui.conftest import loaded, plain

FILES = 2_000


def _shard(path, name: str) -> None:
    raw = json.dumps({name: {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * 4)


async def test_thousands_of_shards_load_in_a_bounded_number_of_batches(tmp_path, monkeypatch):
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    for i in range(FILES):
        _shard(tmp_path / f"part-{i:05d}.safetensors", f"layers.{i}.w")
    seen: list = []
    app = make_app(open_layout(str(tmp_path)))
    async with app.run_test(size=(100, 30), message_hook=seen.append) as pilot:
        await loaded(app, pilot)
        batches = list({id(m): m for m in seen if isinstance(m, HeadersRead)}.values())
        assert sum(len(m.batch) for m in batches) == FILES
        assert len(batches) <= 65  # was one per 8 files: 250, each redrawing all read so far
        assert f"read {FILES}/{FILES}" in plain(app.screen.query_one("Summary"))
        assert app.is_running


class _Counted(tuple):
    """A layout's problems that count how often they are gone through."""

    walks = 0

    def __iter__(self):
        _Counted.walks += 1
        return super().__iter__()


def test_each_files_state_does_not_gather_every_problem_again():
    names = tuple(f"part-{i:05d}.safetensors" for i in range(FILES))
    layout = Layout("x", "x", "safetensors-folder", names, shards=names,
                    problems=_Counted((Problem("warning", None, "a note on the folder"),)))
    model = BrowseModel(layout)
    model.add([FileInfo(n, n, 4, tensors=(TensorInfo(f"t{i}", "F32", (1,), n, 0, 4, 1),),
                        problems=(Problem("error", n, "bad"),) if i % 7 == 0 else ())
               for i, n in enumerate(names)])
    _Counted.walks = 0
    states = [model.shard_state(n) for n in names]
    assert states.count("damaged") == len(range(0, FILES, 7))
    assert _Counted.walks <= 1  # was once per file
    assert model.totals().tensors == FILES


async def test_file_rows_are_not_drawn_to_be_measured(tmp_path, monkeypatch):
    from ckpt_browser.tui.browse.tree import CheckpointTree

    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    for i in range(FILES):
        _shard(tmp_path / f"part-{i:05d}.safetensors", f"layers.{i}.w")
    drawn = []
    real = CheckpointTree.render_label
    monkeypatch.setattr(CheckpointTree, "render_label",
                        lambda self, node, *a: drawn.append(node) or real(self, node, *a))
    app = make_app(open_layout(str(tmp_path)))
    async with app.run_test(size=(100, 30), message_hook=[].append) as pilot:
        await loaded(app, pilot)
        assert len(drawn) < FILES // 4  # the rows on screen, not every row (was 4 per file)
        await pilot.press("m")
        await loaded(app, pilot)
        assert app.is_running


def test_the_problems_window_draws_the_first_thousand():
    from ckpt_browser.tui.common.problems import problems_text

    many = [Problem("error", f"model-{i:06d}.safetensors", "file does not exist")
            for i in range(5_000)]  # an index naming 100,000 missing files has 200,000
    lines = problems_text(many).plain.splitlines()
    assert len(lines) == 1_001
    assert lines[-1] == "... and 4,000 more (inspect --json lists them all)"
