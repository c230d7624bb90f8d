"""The opcodes that fill containers and stand-ins: BUILD, APPEND(S), SETITEM(S), DICT, sets,
BYTEARRAY8 and tuples, as a mixin of SafeUnpickler.

Hashing a tuple nested a million deep crashes CPython (no recursion check), so tuples and call
results record their depth as they are built, and anything deeper than MAX_DEPTH is replaced
by an elided marker. A BUILD state that is not a dict is kept as a list, so a stand-in whose
state changes after it was built can never be hashed.
"""

from __future__ import annotations

import pickle
import struct

from ckpt_browser.readers.pickle_safe.limits import MAX_DEPTH, elided
from ckpt_browser.readers.pickle_safe.numpy_records import build_ndarray
from ckpt_browser.readers.standins import NumpyArray, Opaque, UnsafeCall

_ATOMS = (str, int, float, bool, type(None), bytes)
HASHED = (tuple, Opaque, UnsafeCall)


class Containers:
    """Mixed into a pickle._Unpickler that has `note(message)`; `dispatch` holds only the
    opcodes overridden here."""

    dispatch: dict = {}

    def __init__(self, file):
        super().__init__(file)
        self._depth: dict[int, int] = {}  # id -> nesting, for tuples and stand-ins that nest
        self._pins: list = []  # keeps those ids unique while we read
        self._unhashable = 0

    # -- building ---------------------------------------------------------------------------
    def load_build(self):
        state = self.stack.pop()
        inst = self.stack[-1]
        kind = type(inst)
        if kind is Opaque:
            self.check_build(inst, state)  # the policy's part (unpickler.py)
            object.__setattr__(inst, "state", _merged(inst.state, state))
        elif kind is NumpyArray:
            build_ndarray(self, inst, state)
        elif hasattr(kind, "_pickle_build"):  # the DCP reader's records
            kind._pickle_build(inst, state)
        # dicts (OrderedDict), TensorRef, UnsafeCall ...: the state changes nothing we show
    dispatch[pickle.BUILD[0]] = load_build

    def load_append(self):
        value = self.stack.pop()
        self._extend(self.stack[-1], [value])
    dispatch[pickle.APPEND[0]] = load_append

    def load_appends(self):
        items = self.pop_mark()
        self._extend(self.stack[-1], items)
    dispatch[pickle.APPENDS[0]] = load_appends

    def _extend(self, target, items: list) -> None:
        if type(target) is list:
            target.extend(items)
        elif type(target) is Opaque:  # a list subclass: its items beside its attributes
            object.__setattr__(target, "state", _merged(target.state, {"__items__": items}))
        else:
            raise pickle.UnpicklingError(f"APPEND to a {type(target).__name__}")

    def load_setitem(self):
        value = self.stack.pop()
        key = self.stack.pop()
        self.setitems(self.stack[-1], [key, value])
    dispatch[pickle.SETITEM[0]] = load_setitem

    def load_setitems(self):
        items = self.pop_mark()
        self.setitems(self.stack[-1], items)
    dispatch[pickle.SETITEMS[0]] = load_setitems

    def load_dict(self):
        items = self.pop_mark()
        d: dict = {}
        self.setitems(d, items)
        self.append(d)
    dispatch[pickle.DICT[0]] = load_dict

    def setitems(self, target, items: list) -> None:
        if type(target) is Opaque:  # a dict subclass (defaultdict etc. are plain dicts already)
            extra: dict = {}
            self.setitems(extra, items)
            object.__setattr__(target, "state", _merged(target.state, {"__dictitems__": extra}))
            return
        if type(target) is not dict:
            raise pickle.UnpicklingError(f"SETITEM on a {type(target).__name__}")
        for i in range(0, len(items) - 1, 2):
            key = items[i]
            try:
                target[key] = items[i + 1]
            except TypeError:
                self._unhashable += 1
                self.note(f"a {type(key).__name__} used as a dict key cannot be hashed; "
                          "shown under a placeholder key")
                target[f"<unhashable {type(key).__name__} #{self._unhashable}>"] = items[i + 1]

    def load_additems(self):
        items = self.pop_mark()
        target = self.stack[-1]
        if type(target) is not set:
            raise pickle.UnpicklingError(f"ADDITEMS on a {type(target).__name__}")
        target.update(self.hashables(items))
    dispatch[pickle.ADDITEMS[0]] = load_additems

    def load_frozenset(self):
        items = self.hashables(self.pop_mark())  # pop_mark first: it switches self.append
        self.append(frozenset(items))
    dispatch[pickle.FROZENSET[0]] = load_frozenset

    def hashables(self, items) -> list:
        out = []
        for x in items:
            try:
                hash(x)
            except TypeError:
                self.note(f"an unhashable {type(x).__name__} in a set was left out")
                continue
            out.append(x)
        return out

    def load_bytearray8(self):  # the stock one allocates the declared length before reading
        (n,) = struct.unpack("<Q", self.read(8))
        data = self.read(n)  # a BytesIO or CappedReader returns at most what is there
        if len(data) != n:
            raise EOFError
        self.append(bytearray(data))
    dispatch[pickle.BYTEARRAY8[0]] = load_bytearray8

    # -- tuples record how deep they nest (hashing a deep tuple crashes CPython) --------------
    def _nested(self, obj, items: tuple):
        depth = 1
        get = self._depth.get
        for x in items:
            if type(x) in HASHED:
                d = get(id(x), 1) + 1
                if d > depth:
                    depth = d
        if depth > MAX_DEPTH:
            self.note(f"values nested deeper than {MAX_DEPTH} levels were elided (pickle bomb?)")
            return elided()
        if depth > 1:
            self._depth[id(obj)] = depth
            self._pins.append(obj)
        return obj

    def load_tuple(self):
        items = tuple(self.pop_mark())
        self.append(self._nested(items, items))
    dispatch[pickle.TUPLE[0]] = load_tuple

    def load_tuple1(self):
        items = (self.stack[-1],)
        self.stack[-1] = self._nested(items, items)
    dispatch[pickle.TUPLE1[0]] = load_tuple1

    def load_tuple2(self):
        items = (self.stack[-2], self.stack[-1])
        del self.stack[-1]
        self.stack[-1] = self._nested(items, items)
    dispatch[pickle.TUPLE2[0]] = load_tuple2

    def load_tuple3(self):
        items = (self.stack[-3], self.stack[-2], self.stack[-1])
        del self.stack[-2:]
        self.stack[-1] = self._nested(items, items)
    dispatch[pickle.TUPLE3[0]] = load_tuple3


def _merged(old, new):
    """A BUILD state merged into an Opaque's state. Non-dict states are kept as lists, so the
    Opaque stays unhashable (its nesting could change after it was hashed)."""
    if (type(new) is tuple and len(new) == 2 and (new[0] is None or type(new[0]) is dict)
            and type(new[1]) is dict):  # (state, slotstate): the object's attributes
        new = {**(new[0] or {}), **new[1]}
    elif type(new) is tuple:
        new = list(new)
    elif not isinstance(new, (dict, list) + _ATOMS):
        new = [new]
    if old is None:
        return new
    if type(old) is dict and type(new) is dict:
        return {**old, **new}
    if type(old) is dict:
        return {**old, "__state__": new}
    return new
