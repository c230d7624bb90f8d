"""Worker plumbing both screens share: failures go to the App's one handler, and a worker's
message about a checkpoint no longer on screen is dropped."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from textual.message import Message
from textual.worker import Worker, WorkerState


class ForwardsWorkerErrors:
    """Worker.StateChanged does not bubble, so each node that runs workers hands a failed
    one to the App (`CkptApp.worker_failed`). The node may define `recover(worker, why)`
    to repair its own view (say "stopped" where "reading…" was)."""

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            self.app.worker_failed(event.worker)  # type: ignore[attr-defined]


@dataclass
class ForLoad(Message):
    """A worker's message about one load: `load` is the token of the load it belongs to (a
    newer checkpoint may be on screen by the time it arrives)."""

    load: Any


def current_load(handler: Callable) -> Callable:
    """Run a ForLoad handler only when the message belongs to the load on screen now
    (`self.load` is the current token)."""

    @functools.wraps(handler)
    def guarded(self, message: ForLoad) -> Any:
        if message.load is not self.load:
            return None
        return handler(self, message)

    return guarded
