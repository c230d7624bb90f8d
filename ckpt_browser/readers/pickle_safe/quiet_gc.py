"""Cyclic garbage collection paused while a pickle is read.

A pickle builds its objects all at once and keeps every one of them (the memo holds them), so
the collector's passes over a growing heap find nothing and cost a fifth of a big read. Reads
run in several threads at once (the browser's workers): the collector comes back when the last
one ends, and only if it was on before the first.
"""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager

_lock = threading.Lock()
_readers = 0
_was_on = False


@contextmanager
def gc_paused():
    global _readers, _was_on
    with _lock:
        if _readers == 0:
            _was_on = gc.isenabled()
            gc.disable()
        _readers += 1
    try:
        yield
    finally:
        with _lock:
            _readers -= 1
            if _readers == 0 and _was_on:
                gc.enable()
