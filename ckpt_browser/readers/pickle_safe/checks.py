"""Argument checks shared by the recorders. A recorder that refuses its arguments raises
BadCall, and the call is kept as an Opaque."""

from __future__ import annotations

from ckpt_browser.readers.pickle_safe.limits import short

U63 = 2**63


class BadCall(Exception):
    """A recorder refused its arguments; the call is kept as an Opaque (a warning), unless the
    arguments hold something that can run code (then it is unsafe)."""


class Reaches(BadCall):
    """The call would run code through its arguments (calls one, imports by name ...): unsafe.
    The message says how, after the callable's name."""


def arity(args: tuple, low: int, high: int) -> tuple:
    if not low <= len(args) <= high:
        raise BadCall(f"{len(args)} arguments")
    return args


def dims(value, what: str) -> tuple[int, ...]:
    if type(value) not in (tuple, list) or len(value) > 64:
        raise BadCall(f"{what} is {short(value)}")
    for d in value:
        if type(d) is not int or not 0 <= d < U63:
            raise BadCall(f"{what} is {short(value)}")
    return tuple(value)
