"""The opcodes that fill containers and stand-ins: BUILD, APPEND(S), SETITEM(S), DICT, sets,
BYTEARRAY8 and tuples, as a mixin of SafeUnpickler.

Hashing a tuple nested a million deep crashes CPython (no recursion check), so tuples and call
results record their depth as they are built, and anything deeper than the depth cap is
replaced by an elided marker. A BUILD state that is not a dict is kept as a list, so a stand-in
whose state changes after it was built can never be hashed. Keys go through hashing.py's bound.

What our inert values cannot follow (items written into a tensor, a bytearray extended, the
state of a rebuilt object dropped) is a warning, so a listing that may differ from what
torch.load builds says so.
"""

from __future__ import annotations

import pickle
import struct
from typing import Any, ClassVar

from ckpt_browser import limits
from ckpt_browser.readers.pickle_safe.hashing import Hashing, fast_key
from ckpt_browser.readers.pickle_safe.limits import elided
from ckpt_browser.readers.pickle_safe.numpy_records import build_ndarray
from ckpt_browser.standins import NumpyArray, Opaque, TensorRef, UnsafeCall

_ATOMS = (str, int, float, bool, type(None), bytes)
HASHED = (tuple, Opaque, UnsafeCall)
_HASH_RUNS = (Opaque, tuple, frozenset)  # keys whose hashing may reach a rebuilt object
# what real pickle fails on as well (no __setitem__, append or __dict__): an error is faithful
_IMMUTABLE = (str, int, float, bool, type(None), bytes, tuple, frozenset, complex, slice)
DIFFERS = "torch.load would build something this listing does not show"


def _what(obj) -> str:
    kind = type(obj)
    if kind is TensorRef:
        return "a tensor"
    if kind is UnsafeCall:
        return f"an object returned by {obj.qualname}"
    return "a NumPy array" if kind is NumpyArray else f"a {kind.__name__}"


class Containers(Hashing):
    """Mixed into a pickle._Unpickler that has `note(message)`; `dispatch` holds only the
    opcodes overridden here."""

    dispatch: ClassVar[dict[int, Any]] = {}

    def __init__(self, file):
        super().__init__(file)
        self._depth: dict[int, int] = {}  # id -> nesting, for tuples and stand-ins that nest
        self._pins: list = []  # keeps those ids unique while we read
        self._unhashable = 0
        self._mine: dict[int, object] = {}  # id -> the states and item lists we made
        self._max_depth = limits.LIMITS.depth  # read once per pickle: _nested runs per tuple

    # -- building ---------------------------------------------------------------------------
    def load_build(self):
        state = self.stack.pop()
        inst = self.stack[-1]
        kind = type(inst)
        if kind is Opaque:
            self.check_build(inst, state)  # the policy's part (unpickler.py)
            self._merge_state(inst, state)
        elif kind is NumpyArray:
            build_ndarray(self, inst, state)
        elif hasattr(kind, "_pickle_build"):  # the DCP reader's records
            kind._pickle_build(inst, state)
        elif kind is dict and type(state) is dict and state.keys() <= {"_metadata"}:
            pass  # an OrderedDict's attributes: a state_dict's _metadata changes no item
        elif state or kind is TensorRef:  # real pickle calls __setstate__ (a tensor's set_
            # takes even an empty state) or sets attributes; we drop the state
            self.note(f"the pickle sets the state of {_what(inst)} (BUILD on {_what(inst)}); "
                      f"{DIFFERS}")
    dispatch[pickle.BUILD[0]] = load_build

    # An Opaque's state and items are filled in place (pickle sends items in batches of 1,000
    # and may BUILD again): copying them each time would be quadratic.
    def _merge_state(self, inst: Opaque, state) -> None:
        new, old = _normal(state), inst.state
        if type(old) is dict or (old is None and type(new) is dict):
            own = self._own_state(inst)
            if type(new) is dict:
                self.setitems(own, [x for kv in new.items() for x in kv])
            else:
                own["__state__"] = new
        else:
            object.__setattr__(inst, "state", new)

    def _own_state(self, inst: Opaque) -> dict:
        """inst's state, None or a dict, as a dict of ours to fill in place."""
        state = inst.state
        if state is None or id(state) not in self._mine:
            state = {} if state is None else dict(state)
            self._mine[id(state)] = state
            object.__setattr__(inst, "state", state)
        return state

    def _part(self, inst: Opaque, key: str, empty):
        """inst's __dictitems__ or __items__, ours, to extend; None when its state is not a
        dict (the items then replace it)."""
        if inst.state is not None and type(inst.state) is not dict:
            object.__setattr__(inst, "state", None)  # a list or atom state: the items replace it
        state = self._own_state(inst)
        part = state.get(key)
        if id(part) not in self._mine:
            part = state[key] = empty
            self._mine[id(part)] = part
        return part

    def load_append(self):
        value = self.stack.pop()
        self._extend(self.stack[-1], [value])
    dispatch[pickle.APPEND[0]] = load_append

    def load_appends(self):
        items = self.pop_mark()
        self._extend(self.stack[-1], items)
    dispatch[pickle.APPENDS[0]] = load_appends

    def _extend(self, target, items: list) -> None:
        kind = type(target)
        if kind is list:
            target.extend(items)
        elif kind is Opaque:  # a list subclass: its items beside its attributes
            self.check_items(target, "appends items to it")
            self._part(target, "__items__", []).extend(items)
        elif kind in _IMMUTABLE or kind is dict or kind is set:
            raise pickle.UnpicklingError(f"APPEND to a {kind.__name__}")
        else:  # a bytearray, a tensor, whatever an unsafe call returns: real pickle extends it
            self.note(f"the pickle appends items to {_what(target)} (APPENDS on "
                      f"{_what(target)}); {DIFFERS}")

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
            self.check_items(target, "sets items of it")
            self.setitems(self._part(target, "__dictitems__", {}), items)
            return
        if type(target) is not dict:
            if type(target) in _IMMUTABLE or type(target) is set:
                raise pickle.UnpicklingError(f"SETITEM on a {type(target).__name__}")
            # a list (deque), a tensor, an array: real pickle calls its __setitem__
            self.note(f"the pickle writes items into {_what(target)} (SETITEM on "
                      f"{_what(target)}); {DIFFERS}")
            return
        crowded = self._placeholders
        for i in range(0, len(items) - 1, 2):
            key = items[i]
            try:
                if not fast_key(key):
                    if type(key) in _HASH_RUNS:
                        self.check_key(key)
                    key = self.admitted(target, key)
                target[key] = items[i + 1]
            except TypeError:
                self._unhashable += 1
                self.note(f"a {type(key).__name__} used as a dict key cannot be hashed; "
                          "shown under a placeholder key")
                target[f"<unhashable {type(key).__name__} #{self._unhashable}>"] = items[i + 1]
        if self._placeholders > crowded:
            self.flood_noted()

    def load_additems(self):
        items = self.pop_mark()
        target = self.stack[-1]
        if type(target) is not set:
            raise pickle.UnpicklingError(f"ADDITEMS on a {type(target).__name__}")
        target.update(self.hashables(items, target))
    dispatch[pickle.ADDITEMS[0]] = load_additems

    def load_frozenset(self):
        items = self.hashables(self.pop_mark())  # pop_mark first: it switches self.append
        self.append(frozenset(items))
    dispatch[pickle.FROZENSET[0]] = load_frozenset

    def hashables(self, items, target=None) -> list:
        """The items a set may hold: unhashable ones left out, crowded ones as placeholders.
        `target`: the set they go into (ADDITEMS comes in batches), else a new one."""
        out: list = []
        counts: dict | None = {} if target is None else None
        crowded = self._placeholders
        for x in items:
            try:
                if type(x) in _HASH_RUNS:
                    self.check_key(x)
                out.append(x if fast_key(x) else self.admitted(target, x, counts))
            except TypeError:
                self.note(f"an unhashable {type(x).__name__} in a set was left out")
        if self._placeholders > crowded:
            self.flood_noted()
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
        if depth > self._max_depth:
            self.note(f"values nested deeper than {self._max_depth} levels were elided "
                      "(pickle bomb?)")
            return elided()
        # the empty tuple is one object everywhere (torch.Size([]) rebuilds into it): it holds
        # nothing, so it never counts as nested, or each use would nest the next one deeper
        if depth > 1 and not (type(obj) is tuple and not obj):
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


def _normal(new):
    """A BUILD state as an Opaque keeps it. Non-dict states are kept as lists, so the Opaque
    stays unhashable (its nesting could change after it was hashed)."""
    if (type(new) is tuple and len(new) == 2 and (new[0] is None or type(new[0]) is dict)
            and type(new[1]) is dict):  # (state, slotstate): the object's attributes
        return {**(new[0] or {}), **new[1]}
    if type(new) is tuple:
        return list(new)
    if not isinstance(new, (dict, list) + _ATOMS):
        return [new]
    return new
