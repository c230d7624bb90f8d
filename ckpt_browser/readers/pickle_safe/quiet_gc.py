"""Cyclic garbage collection paused while a big graph of acyclic objects is built.

A pickle builds its objects all at once and keeps every one of them (the memo holds them);
94,000 safetensors headers make ~100,000 small records: the collector's passes over a growing
heap find nothing and cost a fifth to a third of such a read. Reads run in several threads at
once (the browser's workers): the collector comes back when the last one ends, and only if it
was on before the first. (readers/load.py names it paused_gc.)
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
