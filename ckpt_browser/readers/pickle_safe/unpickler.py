"""SafeUnpickler: the opcode loop with its budgets, and the opcodes that could run code.

`find_class` never imports anything: a global is a tag from the allowlist, or an inert
stand-in (`UnsafeCall` for a name on the deny list, else one shared `Opaque` per name). A call
(REDUCE, NEWOBJ, INST, OBJ) goes to the allowlist's recorder, becomes a record of a data class,
an object rebuilt with a bare `__new__` (which imports its module: `imports`), or an unsafe call
(policy.py has the tiers).
"""

from __future__ import annotations

import pickle
from _compat_pickle import IMPORT_MAPPING, NAME_MAPPING
from typing import Any

from ckpt_browser import limits
from ckpt_browser.readers.pickle_safe.allowlist import EXACT_RECORDERS, TORCH_GLOBALS
from ckpt_browser.readers.pickle_safe.calls import (
    callable_slots,
    check_data_call,
    hazard,
    planted_slot,
)
from ckpt_browser.readers.pickle_safe.checks import BadCall, Reaches
from ckpt_browser.readers.pickle_safe.containers import HASHED, Containers
from ckpt_browser.readers.pickle_safe.limits import MAX_NOTES, Limit, elided, short
from ckpt_browser.readers.pickle_safe.numbers import Numbers
from ckpt_browser.readers.pickle_safe.policy import (
    inert_build,
    is_data,
    is_known_code,
    is_unsafe,
    user_allowed,
)
from ckpt_browser.readers.pickle_safe.torch_records import storage_ref
from ckpt_browser.standins import Opaque, UnsafeCall

_P = pickle._Unpickler  # the pure-Python unpickler: its opcodes can be hooked one by one
_MEMOIZE, _BINGET, _MARK = pickle.MEMOIZE[0], pickle.BINGET[0], pickle.MARK[0]
GETATTR = ("builtins.getattr", "__builtin__.getattr")
# mutable builtins whose __new__ ignores its arguments (their __init__ takes the items)
EMPTY_NEW = {"collections.OrderedDict": dict, "collections.Counter": dict,
             "collections.defaultdict": dict, "collections.deque": list, "builtins.set": set,
             "builtins.dict": dict, "builtins.list": list, "builtins.bytearray": bytearray}


class SafeUnpickler(Numbers, Containers, _P):
    """Restricted unpickler. `allow` maps dotted names to a dtype tag (a value global) or to a
    recorder `fn(unpickler, args) -> object`. `storage_ids`: None, "zip" or "legacy".
    `ops`: the field of `limits.Limits` that caps the opcodes run (DCP metadata has its own)."""

    dispatch = {**_P.dispatch, **Containers.dispatch, **Numbers.dispatch}

    def __init__(self, file, name: str, allow: dict | None = None, *,
                 storage_ids: str | None = "zip", ops: str = "pickle_ops"):
        super().__init__(file)
        self.name = name
        self.allow = TORCH_GLOBALS if allow is None else allow
        self.storage_ids = storage_ids
        lim = limits.LIMITS  # read once: the loop and find_class check them often
        self.ops_cap = ops
        self.max_ops, self.max_memo = getattr(lim, ops), lim.pickle_memo
        self.max_globals = lim.pickle_globals
        self.unsafe: dict[str, None] = {}
        # other globals: qualname -> "object" (rebuilt with a bare __new__) or "reference"
        self.imports: dict[str, str] = {}
        self._globals: dict[str, Opaque] = {}  # one stand-in per name: "is this the global?"
        # functions named through getattr(Class, "name") (how protocols 2 and 3 pickle a
        # method): a reference is inert; calling one runs the class's code, which is unsafe
        self.references: dict[int, Opaque] = {}
        self.saw_getattr = False
        self.storages: dict[str, tuple[str, int]] = {}  # key -> (tag, numel)
        self.notes: list[str] = []
        self.note_count = 0

    # -- the loop, with an opcode budget --------------------------------------------------
    def load(self):
        # A FRAME only announces that the next N bytes belong together; reading them straight
        # from the source gives the same bytes, one Python call per read fewer.
        self.read, self.readline = self._file_read, self._file_readline
        self.metastack, self.stack = [], []
        self.append = self.stack.append
        self.proto = 0
        read, get, memo = self.read, self.dispatch.get, self.memo
        max_ops, max_memo = self.max_ops, self.max_memo
        ops = 0
        try:
            while True:
                for _ in range(1024):
                    key = read(1)
                    if not key:
                        raise EOFError
                    # the commonest opcodes of big pickles (DCP metadata, optimizer state),
                    # inline: exactly pickle's own, without a call each
                    code = key[0]
                    if code == _MEMOIZE:
                        memo[len(memo)] = self.stack[-1]
                    elif code == _BINGET:
                        i = read(1)[0]
                        if i not in memo:
                            raise pickle.UnpicklingError(f"Memo value not found at index {i}")
                        self.append(memo[i])
                    elif code == _MARK:
                        self.metastack.append(self.stack)
                        self.stack = []
                        self.append = self.stack.append
                    else:
                        op = get(code)
                        if op is None:
                            raise pickle.UnpicklingError(f"invalid opcode {key!r}")
                        op(self)
                ops += 1024
                if ops > max_ops:
                    raise Limit(f"pickle runs more than {max_ops:,} opcodes "
                                f"({limits.env(self.ops_cap)} raises it)")
                if len(memo) > max_memo:
                    raise Limit(f"pickle memo holds more than {max_memo:,} objects "
                                f"({limits.env('pickle_memo')} raises it)")
        except pickle._Stop as stop:  # type: ignore[attr-defined]  # pure-Python pickle's, untyped
            return stop.value

    def load_frame(self):
        self.read(8)  # the frame's length: nothing to do with it
    dispatch[pickle.FRAME[0]] = load_frame

    def release(self) -> None:
        """Drop what the read holds besides its result."""
        # None, not []: nothing runs an opcode after release(), and one that did would fail
        self.stack = self.metastack = None  # type: ignore[assignment]
        self.memo.clear()
        self._pins.clear()

    def note(self, message: str) -> None:
        if message in self.notes:
            return
        self.note_count += 1
        if len(self.notes) < MAX_NOTES:
            self.notes.append(message)

    # -- globals --------------------------------------------------------------------------
    def find_class(self, module: str, name: str):
        if self.proto < 3 and self.fix_imports:
            if (module, name) in NAME_MAPPING:
                module, name = NAME_MAPPING[(module, name)]
            elif module in IMPORT_MAPPING:
                module = IMPORT_MAPPING[module]
        qual = f"{module}.{name}"
        spec = self.allow.get(qual)
        if isinstance(spec, str):
            return spec
        if qual in GETATTR:
            self.saw_getattr = True
            return UnsafeCall("builtins.getattr")  # unsafe unless it names a method (call())
        # a dotted name is followed attribute by attribute (posixpath.os.system,
        # pathlib.Path.touch): any such reach past a class that we do not allow is unsafe
        if spec is None and (is_unsafe(qual) or "." in name or is_unsafe(name)):
            self.unsafe[qual] = None
            return UnsafeCall(qual)
        g = self._globals.get(qual)
        if g is None:
            if len(self._globals) >= self.max_globals:
                raise Limit(f"pickle names more than {self.max_globals:,} different globals")
            g = self._globals[qual] = Opaque(qual)
            if spec is None and not is_data(qual):
                self.imports[qual] = "reference"
        return g

    def is_global(self, obj) -> bool:
        """The stand-in of a global itself, not an object built from one."""
        return type(obj) is Opaque and self._globals.get(obj.qualname) is obj

    def rebuilt(self, cls: Opaque) -> Opaque:
        """cls.__new__(cls): an object the way pickle saves plain ones (its attributes follow
        in BUILD). Loading it imports the class's module."""
        if not is_data(cls.qualname):
            self.imports[cls.qualname] = "object"
        return Opaque(cls.qualname)

    def known(self, qual: str) -> bool:
        """A global on the allowlist: a value, a recorder or a data class."""
        return qual in self.allow or is_data(qual)

    def inert_class(self, qual: str) -> bool:
        return inert_build(qual)

    def user_allowed(self, qual: str) -> bool:
        return user_allowed(qual)

    def known_code(self, qual: str) -> bool:
        return is_known_code(qual)

    def check_build(self, inst: Opaque, state) -> None:
        """BUILD on a stand-in. Unsafe: setting attributes of a class or function itself (a
        monkey-patch), a state that plants __setstate__ or a dunder slot (the next BUILD calls
        it), and restoring with state an object of a class whose code we know (the standard
        library, torch, numpy) that is off the inert list: its __setstate__ runs with the
        file's data. A class on that list may still keep callables that it runs later (hooks,
        lambdas): those must be data. A class of any other module is not ours to read: its
        module is imported and its code runs, which the imports warning says."""
        qual = inst.qualname
        if self.is_global(inst) or id(inst) in self.references:
            self.unsafe[f"{qual} (its class attributes set)"] = None
            return
        slot = planted_slot(state)
        if slot:
            self.unsafe[f"{qual} (the file sets its {slot}, which the next BUILD calls)"] = None
        if not state or self.imports.get(qual) != "object":
            return
        if inert_build(qual):
            found = hazard(self, callable_slots(state))
            if found:
                self.unsafe[f"{qual} (its state holds {found}, which it would call)"] = None
        elif is_known_code(qual):
            self.unsafe[f"{qual} (rebuilt with state: its __setstate__ would run, and it is "
                        "not a class known to be inert)"] = None

    def check_items(self, target: Opaque, how: str) -> None:
        """APPEND(S) or SETITEM(S) on an object rebuilt from a class off the inert list: pickle
        calls its own append, extend or __setitem__."""
        qual = target.qualname
        if self.is_global(target) or id(target) in self.references:
            self.unsafe[f"{qual} (items added to the class or function itself)"] = None
        elif self.imports.get(qual) == "object" and not inert_build(qual):
            self.unsafe[f"{qual} (the file {how}: its own method runs)"] = None

    def check_key(self, key) -> None:
        """A dict key or set item is hashed and compared: an object rebuilt from a class off
        the inert list (alone or inside a tuple) runs its __hash__ and __eq__."""
        stack, budget = [key], 10_000
        while stack and budget:
            budget -= 1
            k = stack.pop()
            if type(k) in (tuple, frozenset):
                stack.extend(k)
            elif type(k) is Opaque and self.imports.get(k.qualname) == "object" \
                    and not self.is_global(k) and not inert_build(k.qualname):
                self.unsafe[f"{k.qualname} (an object used as a dict key or set item: its "
                            "__hash__ runs)"] = None
                return

    def unsafe_call(self, qual: str, args: tuple, why: str | None = None) -> UnsafeCall:
        self.unsafe[f"{qual} ({why})" if why else qual] = None
        return self._nested(UnsafeCall(qual, args), args)

    def get_extension(self, code):
        raise pickle.UnpicklingError(f"extension code {code} (copyreg registry) is not supported")

    def persistent_load(self, pid):
        if type(pid) is tuple and pid and pid[0] == "storage" and self.storage_ids:
            ref = storage_ref(self, pid)
            if ref is not None:
                return ref
        elif (self.storage_ids == "legacy" and type(pid) is tuple and len(pid) == 4
              and pid[0] == "module" and type(pid[1]) is Opaque):
            return pid[1]  # torch.save(model) in the legacy format: the module's class
        found = hazard(self, pid)
        if found:  # torch's persistent_load reads the storage type's and location's attributes
            self.unsafe[f"a persistent id holding {found} (torch's persistent_load reads its "
                        "attributes)"] = None
        self.note(f"unexpected persistent id {short(pid)}; kept as an elided value")
        return elided()

    # -- calls ----------------------------------------------------------------------------
    def call(self, func, args, new: bool = False) -> Any:
        """What REDUCE/NEWOBJ/INST/OBJ would build: a recorder's result or an inert stand-in.
        `new`: NEWOBJ (cls.__new__(cls, *args)) rather than a call."""
        if type(args) is list:
            args = tuple(args)
        if type(args) is not tuple:
            self.note(f"a call with arguments {short(args)} instead of a tuple")
            return elided()
        if type(func) is UnsafeCall:
            if func.qualname == "builtins.getattr" and not func.args:
                ref = self._method_reference(args)
                if ref is not None:
                    return ref
                self.unsafe[func.qualname] = None
            return self._nested(UnsafeCall(func.qualname, args), args)
        if type(func) is Opaque and id(func) in self.references:
            # a method called while loading: its code runs
            return self.unsafe_call(func.qualname, args)
        if type(func) is not Opaque:
            self.note(f"the pickle calls a {type(func).__name__} ({short(func)})")
            return self._nested(Opaque(f"<not callable: {type(func).__name__}>", args), args)
        qual = func.qualname
        if not self.is_global(func):  # the result of a call, called again: whatever it is runs
            return self.unsafe_call(f"a {qual} object", args)
        recorder = self.allow.get(qual)
        if new and qual in EMPTY_NEW:  # NEWOBJ runs only __new__, which ignores the arguments
            return EMPTY_NEW[qual]()
        if recorder is None and not is_data(qual):
            if new and not args:
                return self.rebuilt(func)
            return self.unsafe_call(qual, args)  # a call of a global we do not allow
        try:
            if recorder is None:
                check_data_call(self, qual, args)
                return self._nested(Opaque(qual, args), args)
            if qual not in EXACT_RECORDERS:
                found = hazard(self, args)
                if found:
                    raise Reaches(f"given {found}")
            result = recorder(self, args)
        except Reaches as e:
            return self.unsafe_call(qual, args, str(e))
        except BadCall as e:
            found = hazard(self, args)
            if found:  # what it was given may run: an allowed function is no shield
                return self.unsafe_call(qual, args, f"given {found}")
            self.note(f"{qual} called with unexpected arguments ({e}); kept as opaque")
            return self._nested(Opaque(qual, args), args)
        # a hashable result may hold its args: count it as one level above them
        return self._nested(result, args) if type(result) in HASHED else result

    def _method_reference(self, args) -> Opaque | None:
        """getattr(<a class we do not build>, "name"): a function by its qualified name, as
        pickle writes a method under protocols 2 and 3. None when it could reach more."""
        if len(args) != 2 or type(args[0]) is not Opaque or args[0].args or args[0].state:
            return None
        cls, attr = args[0], args[1]
        qual = f"{cls.qualname}.{attr}" if type(attr) is str else ""
        if (not attr.isidentifier() if type(attr) is str else True) or attr.startswith("_") \
                or is_unsafe(cls.qualname) or is_unsafe(qual):
            return None
        ref = Opaque(qual, (), {"__reference__": "a function, named but never called"})
        self.references[id(ref)] = ref
        return ref

    def load_reduce(self):
        args = self.stack.pop()
        self.stack[-1] = self.call(self.stack[-1], args)
    dispatch[pickle.REDUCE[0]] = load_reduce

    def load_newobj(self):
        args = self.stack.pop()
        self.stack[-1] = self.call(self.stack[-1], args, new=True)
    dispatch[pickle.NEWOBJ[0]] = load_newobj

    def load_newobj_ex(self):
        kwargs = self.stack.pop()
        args = self.stack.pop()
        if kwargs:  # keyword arguments reach the class's __new__: a call like any other
            args = (*args, kwargs) if type(args) in (tuple, list) else args
        obj = self.call(self.stack[-1], args, new=True)
        if kwargs and type(obj) is Opaque:
            object.__setattr__(obj, "state", {"__kwargs__": kwargs})
        self.stack[-1] = obj
    dispatch[pickle.NEWOBJ_EX[0]] = load_newobj_ex

    # INST and OBJ (protocols 0 and 1): Python 3 never writes them, and pickle calls the
    # callable itself when it is not a class or has arguments: a call
    def _instantiate(self, klass, args):
        self.append(self.call(klass, tuple(args)))
