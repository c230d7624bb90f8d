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
from ckpt_browser.readers.pickle_safe.allowlist import TORCH_GLOBALS
from ckpt_browser.readers.pickle_safe.checks import BadCall
from ckpt_browser.readers.pickle_safe.containers import HASHED, Containers
from ckpt_browser.readers.pickle_safe.limits import MAX_NOTES, Limit, elided, short
from ckpt_browser.readers.pickle_safe.numbers import Numbers
from ckpt_browser.readers.pickle_safe.policy import is_data, is_stdlib, is_unsafe
from ckpt_browser.readers.pickle_safe.torch_records import storage_ref
from ckpt_browser.standins import Opaque, UnsafeCall

_P = pickle._Unpickler  # the pure-Python unpickler: its opcodes can be hooked one by one
GETATTR = ("builtins.getattr", "__builtin__.getattr")
# mutable builtins whose __new__ ignores its arguments (their __init__ takes the items)
EMPTY_NEW = {"collections.OrderedDict": dict, "collections.Counter": dict,
             "collections.defaultdict": dict, "collections.deque": list, "builtins.set": set,
             "builtins.dict": dict, "builtins.list": list, "builtins.bytearray": bytearray}
# recorders whose arguments are classes or tensors' state, never objects whose methods they call
TAKES_CLASSES = frozenset({"copyreg._reconstructor", "copyreg.__newobj__", "copyreg.__newobj_ex__",
                           "torch._tensor._rebuild_from_type_v2", "collections.defaultdict"})


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
                    op = get(key[0])
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

    def check_build(self, inst: Opaque, state) -> None:
        """BUILD on a stand-in: setting attributes of a class itself (a monkey-patch), or
        restoring a standard-library object that is not data (its __setstate__ runs), is
        unsafe; other rebuilt objects only import their module."""
        qual = inst.qualname
        if self.is_global(inst):
            self.unsafe[f"{qual} (its class attributes set)"] = None
        elif state and self.imports.get(qual) == "object" and is_stdlib(qual):
            self.unsafe[f"{qual} (rebuilt with state)"] = None

    def unsafe_call(self, qual: str, args: tuple) -> UnsafeCall:
        self.unsafe[qual] = None
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
        taken = self._object_argument(args)
        if taken is not None and qual not in TAKES_CLASSES:
            # a data constructor consuming a rebuilt object runs that object's methods
            return self.unsafe_call(f"{qual} of a {taken} object", args)
        if recorder is None:
            if is_data(qual):
                return self._nested(Opaque(qual, args), args)
            if new and not args:
                return self.rebuilt(func)
            return self.unsafe_call(qual, args)  # a call of a global we do not allow
        try:
            result = recorder(self, args)
        except BadCall as e:
            self.note(f"{func.qualname} called with unexpected arguments ({e}); kept as opaque")
            return self._nested(Opaque(func.qualname, args), args)
        # a hashable result may hold its args: count it as one level above them
        return self._nested(result, args) if type(result) in HASHED else result

    def _object_argument(self, args: tuple) -> str | None:
        """The class of an object among the arguments that was rebuilt from a class off the
        allowlist (its methods are the class's code), if any."""
        for a in args:
            if type(a) is Opaque and self.imports.get(a.qualname) == "object" \
                    and not self.is_global(a):
                return a.qualname
        return None

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
