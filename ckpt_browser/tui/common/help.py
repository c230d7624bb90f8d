"""`?`: the keys of the screen in front, in words, from its table in `tui/keys.py`."""

from __future__ import annotations

from rich.console import Group, RenderableType

from ckpt_browser.tui.common.modals import TextModal, keys_table
from ckpt_browser.tui.keys import BROWSE, Key


class HelpScreen(TextModal):
    def __init__(self, keys: tuple[Key, ...] = BROWSE, title: str = "ckpt-browser keys",
                 note: str = "Only v and ! read tensor bytes (one tensor at a time, in "
                             "blocks). Nothing here runs code from the checkpoint.",
                 extra: tuple[RenderableType, ...] = ()) -> None:
        super().__init__("", Group(keys_table(title, keys), *extra), closes=("question_mark",),
                         note=note, box_id="help-box")
