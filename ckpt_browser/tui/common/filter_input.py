"""The `/` field of both screens."""

from __future__ import annotations

from collections.abc import Callable

from textual import events
from textual.widget import Widget
from textual.widgets import Input


class FilterInput(Input):
    """Enter gives the focus back (to `back()`) at once, and keys that were already queued
    here behind it ("Enter n n" arriving in one burst, as over a slow SSH link) go to the
    newly focused widget as fresh keys: they made the filter "projnn"."""

    def __init__(self, back: Callable[[], Widget], **kwargs) -> None:
        # typed-ahead text must not get selected and replaced
        super().__init__(placeholder="filter names: substring or glob (Esc clears)",
                         select_on_focus=False, **kwargs)
        self._back = back

    async def _on_key(self, event: events.Key) -> None:
        if self.screen.focused is not self:  # queued here before an Enter took the focus
            event.stop()
            event.prevent_default()
            self.app.post_message(events.Key(event.key, event.character))
            return
        if event.key == "enter":  # here, not as a binding run once the key bubbled to the app
            event.stop()
            event.prevent_default()
            await self.action_submit()
            return
        await super()._on_key(event)

    async def action_submit(self) -> None:
        await super().action_submit()
        self.screen.set_focus(self._back())
