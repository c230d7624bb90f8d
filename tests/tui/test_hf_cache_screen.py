"""The browser's top bar names a cached Hugging Face snapshot by its repo, not its blob paths."""

from ckpt_browser.producers.layout import open_layout
from ckpt_browser.tui.app import make_app
from ckpt_browser.tui.browse.summary import Summary
from tests.tui.conftest import loaded, plain
from tests.unit.test_hf_cache import REVISION, RUN, cache_of


async def test_top_bar_names_the_repo_and_revision(tmp_path):
    _, snap = cache_of(RUN, tmp_path / "hub")
    app = make_app(open_layout(str(snap)))
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        top = plain(app.query_one(Summary)).splitlines()[0]
        assert f"hf cache: org/tiny-llama @ main ({REVISION[:8]})" in top
        assert "snapshots" not in top
        assert "resume: EXACT" in plain(app.query_one(Summary))  # as the folder it mirrors
