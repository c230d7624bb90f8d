"""A pickle reader that rebuilds data and never runs code (catalog sections 8 and 8.2).

`find_class` never imports anything. A global is either a value from the allowlist (a dtype
tag), or an inert stand-in: `Opaque(qualname)`, or `UnsafeCall(qualname)` for a callable that
could run code or touch the system. Calling a stand-in (REDUCE, NEWOBJ, INST, OBJ) goes through
the allowlist's local recorders (tensors become TensorRef, numpy arrays NumpyArray, OrderedDict a
dict ...); any other call yields `Opaque(qualname, args)`, filled in by BUILD.

Everything is bounded: the pickle's size, the opcodes it may run (each may allocate an object),
the memo, and how deep values nest. Hashing a tuple nested a million deep crashes CPython (no
recursion check), so tuples and call results record their depth as they are built, and anything
deeper than MAX_DEPTH is replaced by an elided marker. A BUILD state that is not a dict is kept
as a list, so a stand-in whose state changes after it was built can never be hashed. Bad content
becomes one-line Problems, never an exception.
"""

from __future__ import annotations

import io
import itertools
import pickle
import reprlib
import struct
from _compat_pickle import IMPORT_MAPPING, NAME_MAPPING
from dataclasses import dataclass, field, replace
from typing import Any, BinaryIO, Callable

from ckpt_browser.model import DTYPE_BITS, ERROR, WARNING, Problem
from ckpt_browser.readers.standins import NumpyArray, Opaque, TensorRef, UnsafeCall

MAX_PICKLE_BYTES = 64 * 2**20  # data.pkl or a plain pickle
MAX_DEPTH = 100  # nesting of containers and stand-ins in the result
MAX_OPS = 16_000_000  # opcodes in one pickle; a 280k-tensor optimizer's data.pkl runs ~7M
MAX_MEMO = 8_000_000
MAX_PATHS = 20_000_000  # paths the result expands to when shared references are followed
MAX_NOTES = 20  # distinct warnings kept per pickle; the rest are counted
PRUNED_NODES = 1_000_000  # what is kept of a graph that broke MAX_DEPTH or MAX_PATHS
U63 = 2**63

# torch.<dtype> -> tag, in safetensors spelling where safetensors has one.
TORCH_DTYPES = {
    "float32": "F32", "float": "F32", "float64": "F64", "double": "F64", "float16": "F16",
    "half": "F16", "bfloat16": "BF16", "int64": "I64", "long": "I64", "int32": "I32", "int": "I32",
    "int16": "I16", "short": "I16", "int8": "I8", "uint8": "U8", "uint16": "U16", "uint32": "U32",
    "uint64": "U64", "bool": "BOOL", "complex64": "C64", "cfloat": "C64",
    "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2", "float8_e4m3fnuz": "F8_E4M3FNUZ",
    "float8_e5m2fnuz": "F8_E5M2FNUZ", "float8_e8m0fnu": "F8_E8M0",
    # no safetensors spelling:
    "complex128": "C128", "cdouble": "C128", "complex32": "C32", "chalf": "C32",
    "float4_e2m1fn_x2": "F4_X2", "qint8": "QI8", "quint8": "QU8", "qint32": "QI32",
    "quint4x2": "QU4X2", "quint2x4": "QU2X4", "bits8": "B8", "bits16": "B16", "bits1x8": "B1X8",
    "bits2x4": "B2X4", "bits4x2": "B4X2",
}
# torch.<X>Storage -> tag. UntypedStorage counts bytes; _rebuild_tensor_v3 names the dtype.
STORAGE_TAGS = {
    "FloatStorage": "F32", "DoubleStorage": "F64", "HalfStorage": "F16", "BFloat16Storage": "BF16",
    "LongStorage": "I64", "IntStorage": "I32", "ShortStorage": "I16", "CharStorage": "I8",
    "ByteStorage": "U8", "BoolStorage": "BOOL", "ComplexFloatStorage": "C64",
    "ComplexDoubleStorage": "C128", "QInt8Storage": "QI8", "QUInt8Storage": "QU8",
    "QInt32Storage": "QI32", "QUInt4x2Storage": "QU4X2", "QUInt2x4Storage": "QU2X4",
    "UntypedStorage": "U8",
}
ITEMSIZE = {tag: bits // 8 for tag, bits in DTYPE_BITS.items() if bits % 8 == 0} | {
    "C128": 16, "C32": 4, "F4_X2": 1, "QI8": 1, "QU8": 1, "QI32": 4, "QU4X2": 1, "QU2X4": 1,
    "B8": 1, "B16": 2, "B1X8": 1, "B2X4": 1, "B4X2": 1,
}

# Globals that could run code or touch the system. Nothing is ever called; this only decides
# which names are reported in `unsafe`.
UNSAFE_MODULES = frozenset({
    "os", "posix", "nt", "subprocess", "_posixsubprocess", "sys", "shutil", "socket", "importlib",
    "runpy", "code", "codeop", "pty", "ctypes", "_ctypes", "pickle", "_pickle", "marshal",
    "webbrowser", "multiprocessing", "inspect",
    "pdb", "bdb", "timeit", "trace", "profile", "cProfile", "pydoc", "platform", "signal",
    "threading", "_thread", "asyncio", "tempfile", "glob", "zipimport", "site", "sysconfig",
    "gc", "mmap", "fcntl", "resource", "select", "http", "urllib", "ftplib", "smtplib",
    "telnetlib", "ssl", "_winapi", "winreg", "msvcrt", "setuptools", "distutils", "pip",
    "torch.hub", "torch.jit", "torch._C", "torch.ops", "torch.classes", "torch.package",
    "torch.utils.cpp_extension", "torch._dynamo", "numpy.f2py", "numpy.distutils",
    "numpy.testing", "numpy.ctypeslib", "numpy.lib.npyio",
})
UNSAFE_NAMES = frozenset({
    "builtins.eval", "builtins.exec", "builtins.compile", "builtins.__import__", "builtins.open",
    "builtins.getattr", "builtins.setattr", "builtins.delattr", "builtins.globals",
    "builtins.locals", "builtins.vars", "builtins.input", "builtins.breakpoint", "builtins.apply",
    "builtins.execfile", "builtins.file", "builtins.reload", "builtins.exit", "builtins.quit",
    "builtins.help", "io.open", "io.open_code", "io.FileIO", "_io.open", "_io.open_code",
    "_io.FileIO", "operator.attrgetter", "operator.methodcaller", "operator.call",
    "_operator.attrgetter", "_operator.methodcaller", "_operator.call", "types.FunctionType",
    "types.LambdaType", "types.CodeType", "types.MethodType", "torch.load", "torch.compile", "torch.serialization.load",
    "torch.storage._load_from_bytes",  # runs torch.load(weights_only=False)
    "numpy.load", "numpy.loadtxt", "numpy.genfromtxt", "numpy.fromfile", "numpy.memmap",
})


def is_unsafe(qualname: str) -> bool:
    if qualname in UNSAFE_NAMES:
        return True
    module = qualname
    while "." in module:
        module = module.rsplit(".", 1)[0]
        if module in UNSAFE_MODULES:
            return True
    return False


_short = reprlib.Repr()
_short.maxstring = _short.maxother = 60
_short.maxlevel = 3


def short(obj: Any) -> str:
    """A bounded one-line repr for messages."""
    try:
        text = _short.repr(obj)
    except Exception:  # noqa: BLE001 - a message must never fail
        text = f"<{type(obj).__name__}>"
    return text.replace("\n", " ")[:120]


def _elided() -> Opaque:
    return Opaque("<elided>")  # a fresh one each time: BUILD may set its state


class _BadCall(Exception):
    """A recorder refused its arguments; the call is kept as an Opaque."""


class _Limit(pickle.UnpicklingError):
    """A size limit was reached; reading stops."""


class CappedReader:
    """A file wrapper that refuses to read past `limit` bytes (for pickles read from a file)."""

    def __init__(self, f: BinaryIO, limit: int = MAX_PICKLE_BYTES):
        self._f, self._left, self.limit = f, limit, limit

    def read(self, n: int = -1) -> bytes:
        if n < 0 or n > self._left:
            raise _Limit(f"pickle is larger than the {self.limit:,}-byte limit")
        data = self._f.read(n)
        self._left -= len(data)
        return data

    def readline(self) -> bytes:
        line = self._f.readline(self._left + 1)
        if len(line) > self._left:
            raise _Limit(f"pickle is larger than the {self.limit:,}-byte limit")
        self._left -= len(line)
        return line


@dataclass
class Unpickled:
    obj: Any = None
    ok: bool = False  # read to its STOP opcode
    unsafe: tuple[str, ...] = ()
    problems: tuple[Problem, ...] = ()
    storages: dict[str, tuple[str, int]] = field(default_factory=dict)  # key -> (tag, numel)


_P = pickle._Unpickler  # the pure-Python unpickler: its opcodes can be hooked one by one
_ATOMS = (str, int, float, bool, type(None), bytes)
_HASHED = (tuple, Opaque, UnsafeCall)


class SafeUnpickler(_P):
    """Restricted unpickler. `allow` maps dotted names to a dtype tag (a value global) or to a
    recorder `fn(unpickler, args) -> object`. `storage_ids`: None, "zip" or "legacy"."""

    dispatch = dict(_P.dispatch)

    def __init__(self, file, name: str, allow: dict | None = None, *,
                 storage_ids: str | None = "zip", max_ops: int = MAX_OPS):
        super().__init__(file)
        self.name = name
        self.allow = TORCH_GLOBALS if allow is None else allow
        self.storage_ids = storage_ids
        self.max_ops = max_ops
        self.unsafe: dict[str, None] = {}
        self.storages: dict[str, tuple[str, int]] = {}
        self.notes: list[str] = []
        self.note_count = 0
        self._depth: dict[int, int] = {}  # id -> nesting, for tuples and stand-ins that nest
        self._pins: list = []  # keeps those ids unique while we read
        self._unhashable = 0

    # -- the loop, with an opcode budget --------------------------------------------------
    def load(self):
        # A FRAME only announces that the next N bytes belong together; reading them straight
        # from the source gives the same bytes, one Python call per read fewer.
        self.read, self.readline = self._file_read, self._file_readline
        self.metastack, self.stack = [], []
        self.append = self.stack.append
        self.proto = 0
        read, get, memo = self.read, self.dispatch.get, self.memo
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
                if ops > self.max_ops:
                    raise _Limit(f"pickle runs more than {self.max_ops:,} opcodes")
                if len(memo) > MAX_MEMO:
                    raise _Limit(f"pickle memo holds more than {MAX_MEMO:,} objects")
        except pickle._Stop as stop:
            return stop.value

    def load_frame(self):
        self.read(8)  # the frame's length: nothing to do with it
    dispatch[pickle.FRAME[0]] = load_frame

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
        if spec is None and is_unsafe(qual):
            self.unsafe[qual] = None
            return UnsafeCall(qual)
        return Opaque(qual)

    def get_extension(self, code):
        raise pickle.UnpicklingError(f"extension code {code} (copyreg registry) is not supported")

    def persistent_load(self, pid):
        if type(pid) is tuple and pid and pid[0] == "storage" and self.storage_ids:
            ref = self._storage(pid)
            if ref is not None:
                return ref
        elif (self.storage_ids == "legacy" and type(pid) is tuple and len(pid) == 4
              and pid[0] == "module" and type(pid[1]) is Opaque):
            return pid[1]  # torch.save(model) in the legacy format: the module's class
        self.note(f"unexpected persistent id {short(pid)}; kept as an elided value")
        return _elided()

    def _storage(self, pid: tuple) -> TensorRef | None:
        legacy = self.storage_ids == "legacy"
        if len(pid) != (6 if legacy else 5):
            return None
        _, tag, key, location, numel = pid[:5]
        if (type(tag) is not str or tag not in ITEMSIZE or type(key) is not str
                or type(location) is not str or type(numel) is not int or not 0 <= numel < U63):
            return None
        offset = 0
        if legacy and pid[5] is not None:  # view_metadata: (view key, byte offset, view bytes)
            view = pid[5]
            if not (type(view) is tuple and len(view) == 3 and type(view[1]) is int
                    and 0 <= view[1] < U63):
                return None
            offset = view[1] // ITEMSIZE[tag]
        seen = self.storages.setdefault(key, (tag, numel))
        if seen != (tag, numel):
            self.note(f"storage {key} is declared as both {seen[1]:,} x {seen[0]} "
                      f"and {numel:,} x {tag}")
        return TensorRef(tag, (numel,), (1,), key, offset, numel)

    # -- calls ----------------------------------------------------------------------------
    def call(self, func, args) -> Any:
        """What REDUCE/NEWOBJ/INST/OBJ would build: a recorder's result or an inert stand-in."""
        if type(args) is list:
            args = tuple(args)
        if type(args) is not tuple:
            self.note(f"a call with arguments {short(args)} instead of a tuple")
            return _elided()
        if type(func) is UnsafeCall:
            return self._nested(UnsafeCall(func.qualname, args), args)
        if type(func) is not Opaque:
            self.note(f"the pickle calls a {type(func).__name__} ({short(func)})")
            return self._nested(Opaque(f"<not callable: {type(func).__name__}>", args), args)
        recorder = self.allow.get(func.qualname)
        if recorder is None:
            return self._nested(Opaque(func.qualname, args), args)
        try:
            result = recorder(self, args)
        except _BadCall as e:
            self.note(f"{func.qualname} called with unexpected arguments ({e}); kept as opaque")
            return self._nested(Opaque(func.qualname, args), args)
        # a hashable result may hold its args: count it as one level above them
        return self._nested(result, args) if type(result) in _HASHED else result

    def load_reduce(self):
        args = self.stack.pop()
        self.stack[-1] = self.call(self.stack[-1], args)
    dispatch[pickle.REDUCE[0]] = load_reduce

    def load_newobj(self):
        args = self.stack.pop()
        self.stack[-1] = self.call(self.stack[-1], args)
    dispatch[pickle.NEWOBJ[0]] = load_newobj

    def load_newobj_ex(self):
        kwargs = self.stack.pop()
        args = self.stack.pop()
        obj = self.call(self.stack[-1], args)
        if kwargs and type(obj) is Opaque:
            object.__setattr__(obj, "state", {"__kwargs__": kwargs})
        self.stack[-1] = obj
    dispatch[pickle.NEWOBJ_EX[0]] = load_newobj_ex

    def _instantiate(self, klass, args):  # INST and OBJ (protocols 0 and 1)
        self.append(self.call(klass, tuple(args)))

    # -- building ---------------------------------------------------------------------------
    def load_build(self):
        state = self.stack.pop()
        inst = self.stack[-1]
        kind = type(inst)
        if kind is Opaque:
            object.__setattr__(inst, "state", _merged(inst.state, state))
        elif kind is NumpyArray:
            _build_ndarray(self, inst, state)
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
        self._setitems(self.stack[-1], [key, value])
    dispatch[pickle.SETITEM[0]] = load_setitem

    def load_setitems(self):
        items = self.pop_mark()
        self._setitems(self.stack[-1], items)
    dispatch[pickle.SETITEMS[0]] = load_setitems

    def load_dict(self):
        items = self.pop_mark()
        d: dict = {}
        self._setitems(d, items)
        self.append(d)
    dispatch[pickle.DICT[0]] = load_dict

    def _setitems(self, target, items: list) -> None:
        if type(target) is Opaque:  # a dict subclass (defaultdict etc. are plain dicts already)
            extra: dict = {}
            self._setitems(extra, items)
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
        target.update(self._hashables(items))
    dispatch[pickle.ADDITEMS[0]] = load_additems

    def load_frozenset(self):
        items = self._hashables(self.pop_mark())  # pop_mark first: it switches self.append
        self.append(frozenset(items))
    dispatch[pickle.FROZENSET[0]] = load_frozenset

    def _hashables(self, items) -> list:
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
            if type(x) in _HASHED:
                d = get(id(x), 1) + 1
                if d > depth:
                    depth = d
        if depth > MAX_DEPTH:
            self.note(f"values nested deeper than {MAX_DEPTH} levels were elided (pickle bomb?)")
            return _elided()
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


# -- recorders: (unpickler, args) -> object; _BadCall keeps the call as an Opaque ------------

def _dims(value, what: str) -> tuple[int, ...]:
    if type(value) not in (tuple, list) or len(value) > 64:
        raise _BadCall(f"{what} is {short(value)}")
    for d in value:
        if type(d) is not int or not 0 <= d < U63:
            raise _BadCall(f"{what} is {short(value)}")
    return tuple(value)


def _tensor(storage, offset, size, stride, requires_grad, dtype=None) -> TensorRef:
    if type(storage) is not TensorRef:
        raise _BadCall(f"storage is {short(storage)}")
    if type(offset) is not int or not 0 <= offset < U63:
        raise _BadCall(f"storage offset is {short(offset)}")
    shape, strides = _dims(size, "size"), _dims(stride, "stride")
    if len(shape) != len(strides):
        raise _BadCall(f"size {shape} and stride {strides} differ in length")
    base, numel = storage.storage_offset, storage.storage_numel
    if dtype is not None and dtype != storage.dtype:  # v3: an untyped (byte) storage
        if type(dtype) is not str or dtype not in ITEMSIZE:
            raise _BadCall(f"dtype is {short(dtype)}")
        unit, size_of = ITEMSIZE[storage.dtype], ITEMSIZE[dtype]
        base, numel = base * unit // size_of, numel * unit // size_of
    return TensorRef(dtype or storage.dtype, shape, strides, storage.storage_key, base + offset,
                     numel, requires_grad is True)


def _args(args: tuple, low: int, high: int) -> tuple:
    if not low <= len(args) <= high:
        raise _BadCall(f"{len(args)} arguments")
    return args


def rebuild_tensor(u, args):  # _rebuild_tensor(storage, offset, size, stride)
    return _tensor(*_args(args, 4, 4), False)


def rebuild_tensor_v2(u, args):  # (storage, offset, size, stride, requires_grad, hooks[, metadata])
    storage, offset, size, stride, requires_grad = _args(args, 6, 7)[:5]
    return _tensor(storage, offset, size, stride, requires_grad)


def rebuild_tensor_v3(u, args):  # (..., requires_grad, hooks, dtype[, metadata])
    storage, offset, size, stride, requires_grad, _, dtype = _args(args, 7, 8)[:7]
    return _tensor(storage, offset, size, stride, requires_grad, dtype)


def rebuild_parameter(u, args):  # (data, requires_grad, hooks[, state])
    data, requires_grad = _args(args, 3, 4)[:2]
    if type(data) is not TensorRef:
        raise _BadCall(f"data is {short(data)}")
    return replace(data, requires_grad=requires_grad is True, is_parameter=True)


def rebuild_from_type(u, args):  # torch._tensor._rebuild_from_type_v2(func, new_type, args, state)
    func, new_type, inner, _ = _args(args, 4, 4)
    result = u.call(func, inner)
    if type(result) is TensorRef and type(new_type) is Opaque \
            and new_type.qualname.endswith(".Parameter"):
        result = replace(result, is_parameter=True)
    return result


def torch_size(u, args):
    return _dims(_args(args, 1, 1)[0], "size")


def torch_device(u, args):
    kind, *index = _args(args, 1, 2)
    if type(kind) is not str or (index and type(index[0]) not in (int, type(None))):
        raise _BadCall(short(args))
    return f"{kind}:{index[0]}" if index and index[0] is not None else kind


def torch_layout(u, args):  # torch.serialization._get_layout("torch.strided")
    name = _args(args, 1, 1)[0]
    if type(name) is not str:
        raise _BadCall(short(name))
    return name


def _from_items(args, low=0) -> list:
    _args(args, low, 1 if low == 0 else low + 1)
    items = args[-1] if len(args) > low else ()
    if type(items) in (list, tuple, set, frozenset):
        return list(items)
    raise _BadCall(f"items are {short(items)}")  # never iterate a range or a stand-in


def ordered_dict(u, args):  # OrderedDict([(k, v), ...]) or OrderedDict()
    if not args:
        return {}  # every tensor's backward_hooks: the hot case
    if type(args[0]) is dict:
        return dict(args[0])
    out: dict = {}
    pairs = _from_items(args)
    if not all(type(p) in (tuple, list) and len(p) == 2 for p in pairs):
        raise _BadCall("items are not (key, value) pairs")
    u._setitems(out, [x for p in pairs for x in p])
    return out


def default_dict(u, args):  # defaultdict(factory[, items]): the factory is dropped
    if len(args) == 2 and type(args[1]) is dict:
        return dict(args[1])
    _args(args, 0, 1)
    return {}


def counter(u, args):  # Counter(dict)
    return dict(args[0]) if len(args) == 1 and type(args[0]) is dict else ordered_dict(u, args)


def deque(u, args):  # deque(items[, maxlen])
    return _from_items(args[:1]) if args else []


def make_set(u, args):
    return set(u._hashables(_from_items(args)))


def make_frozenset(u, args):
    return frozenset(u._hashables(_from_items(args)))


def make_complex(u, args):
    if all(type(a) in (int, float, bool) for a in _args(args, 0, 2)):
        return complex(*args)
    raise _BadCall(short(args))


def make_slice(u, args):
    if all(type(a) in (int, type(None)) for a in _args(args, 1, 3)):
        return slice(*args)
    raise _BadCall(short(args))


def _latin1(args) -> bytes:
    if not args:
        return b""
    if type(args[0]) is bytes and len(args) == 1:
        return args[0]
    if (len(args) == 2 and type(args[0]) is str
            and str(args[1]).lower() in ("latin1", "latin-1", "iso-8859-1", "iso8859-1")):
        try:
            return args[0].encode("latin-1")
        except UnicodeEncodeError:
            raise _BadCall("text outside latin-1") from None
    raise _BadCall(short(args))  # bytes(10**12) would allocate


def make_bytes(u, args):
    return _latin1(args)


def make_bytearray(u, args):
    return bytearray(_latin1(args))


def codecs_encode(u, args):  # how protocol 2 spells bytes: _codecs.encode(str, "latin1")
    if len(args) == 2:
        return _latin1(args)
    raise _BadCall(short(args))


def reconstructor(u, args):  # copyreg._reconstructor(cls, base, state): protocol 0/1 objects
    cls = _args(args, 3, 3)[0]
    if type(cls) is not Opaque:
        raise _BadCall(short(cls))
    return Opaque(cls.qualname)


# numpy --------------------------------------------------------------------------------------
NUMPY_CODES = {
    "b1": "bool", "i1": "int8", "u1": "uint8", "i2": "int16", "u2": "uint16", "i4": "int32",
    "u4": "uint32", "i8": "int64", "u8": "uint64", "f2": "float16", "f4": "float32",
    "f8": "float64", "f12": "float96", "f16": "float128", "c8": "complex64", "c16": "complex128",
    "c32": "complex256", "O4": "object", "O8": "object",
}
_SCALAR_FORMATS = {"b1": "?", "i1": "b", "u1": "B", "i2": "h", "u2": "H", "i4": "i", "u4": "I",
                   "i8": "q", "u8": "Q", "f2": "e", "f4": "f", "f8": "d"}
_NP_CLASS = {"Bool": "b1", "Int8": "i1", "UInt8": "u1", "Int16": "i2", "UInt16": "u2",
             "Int32": "i4", "UInt32": "u4", "Int64": "i8", "UInt64": "u8", "Float16": "f2",
             "Float32": "f4", "Float64": "f8", "Complex64": "c8", "Complex128": "c16",
             "Object": "O8", "Long": "i8", "ULong": "u8", "LongLong": "i8", "ULongLong": "u8",
             "Byte": "i1", "UByte": "u1", "Short": "i2", "UShort": "u2", "Int": "i4",
             "UInt": "u4", "Half": "f2", "Double": "f8"}


def _numpy_code(dtype) -> str | None:
    if type(dtype) is Opaque and dtype.qualname == "numpy.dtype" and dtype.args \
            and type(dtype.args[0]) is str:
        return dtype.args[0]
    return None


def _big_endian(dtype) -> bool:
    state = dtype.state if type(dtype) is Opaque else None
    return type(state) is list and len(state) > 1 and state[1] == ">"


def numpy_reconstruct(u, args):  # _reconstruct(ndarray, (0,), b"b"); BUILD fills it in
    _args(args, 3, 3)
    return NumpyArray("?", (0,))


def _build_ndarray(u, inst: NumpyArray, state) -> None:
    # (version, shape, dtype, is_fortran, raw) or, from old numpy, without the version
    if type(state) is tuple and len(state) == 4:
        state = (1, *state)
    if not (type(state) is tuple and len(state) == 5):
        u.note(f"numpy array state {short(state)} not understood")
        return
    code = _numpy_code(state[2])
    try:
        shape = _dims(state[1], "shape")
    except _BadCall as e:
        u.note(f"numpy array {e}")
        return
    name = NUMPY_CODES.get(code, code or "?") if code else "?"
    object.__setattr__(inst, "dtype", (">" + name) if code and _big_endian(state[2]) else name)
    object.__setattr__(inst, "shape", shape)  # the raw bytes are dropped with the state


def _dtype_class(qualname: str) -> Callable:
    stem = qualname.rsplit(".", 1)[1].removesuffix("DType")
    code = _NP_CLASS.get(stem)

    def record(u, args):  # numpy.dtypes.UInt32DType(...) -> the numpy.dtype stand-in
        return Opaque("numpy.dtype", args if args else ((code,) if code else ()))
    return record


def numpy_scalar(u, args):  # scalar(dtype, raw bytes) -> a Python number when simple
    dtype, raw = _args(args, 2, 2)
    code = _numpy_code(dtype)
    fmt = _SCALAR_FORMATS.get(code or "")
    if fmt is None or type(raw) is not bytes or len(raw) != struct.calcsize(fmt):
        raise _BadCall(f"a {code or short(dtype)} scalar")
    return struct.unpack((">" if _big_endian(dtype) else "<") + fmt, raw)[0]


def _torch_values() -> dict[str, Any]:
    values: dict[str, Any] = {f"torch.{k}": v for k, v in TORCH_DTYPES.items()}
    for cls, tag in STORAGE_TAGS.items():
        values[f"torch.{cls}"] = values[f"torch.cuda.{cls}"] = tag  # torch.cuda: old files
    values["torch.storage.UntypedStorage"] = "U8"
    return values


DTYPE_GLOBALS = {f"torch.{k}": v for k, v in TORCH_DTYPES.items()}

TORCH_GLOBALS: dict[str, Any] = {
    **_torch_values(),
    "torch._utils._rebuild_tensor": rebuild_tensor,
    "torch._utils._rebuild_tensor_v2": rebuild_tensor_v2,
    "torch._utils._rebuild_tensor_v3": rebuild_tensor_v3,
    "torch._utils._rebuild_parameter": rebuild_parameter,
    "torch._utils._rebuild_parameter_with_state": rebuild_parameter,
    "torch._tensor._rebuild_from_type_v2": rebuild_from_type,
    "torch.Size": torch_size,
    "torch.device": torch_device,
    "torch.serialization._get_layout": torch_layout,
    "collections.OrderedDict": ordered_dict,
    "collections.defaultdict": default_dict,
    "collections.Counter": counter,
    "collections.deque": deque,
    "builtins.set": make_set,
    "builtins.frozenset": make_frozenset,
    "builtins.complex": make_complex,
    "builtins.slice": make_slice,
    "builtins.bytes": make_bytes,
    "builtins.bytearray": make_bytearray,
    "_codecs.encode": codecs_encode,
    "copyreg._reconstructor": reconstructor,
    "numpy.core.multiarray._reconstruct": numpy_reconstruct,
    "numpy._core.multiarray._reconstruct": numpy_reconstruct,
    "numpy.core.multiarray.scalar": numpy_scalar,
    "numpy._core.multiarray.scalar": numpy_scalar,
    **{f"numpy.dtypes.{c}DType": _dtype_class(f"numpy.dtypes.{c}DType") for c in _NP_CLASS},
}
# numpy.ndarray and numpy.dtype need no recorder: Opaque("numpy.dtype", args) is the record.


# -- after reading: bound the whole graph --------------------------------------------------

def _children(node):
    kind = type(node)
    if kind is dict:
        return itertools.chain.from_iterable(node.items())
    if kind is list or kind is tuple:
        return iter(node)
    if kind is Opaque:
        return iter((node.args, node.state))
    if kind is UnsafeCall:
        return iter((node.args,))
    return None


_BRANCHES = (dict, list, tuple, Opaque, UnsafeCall)


def measure(root) -> tuple[int, int]:
    """(height, paths) of an object graph, iteratively; shared objects are measured once,
    cycles are cut. Stops early once height > MAX_DEPTH or paths > MAX_PATHS."""
    if type(root) not in _BRANCHES:
        return 0, 1
    done: dict[int, tuple[int, int]] = {}
    frames = [(root, _children(root), [0, 1])]
    onpath = {id(root)}
    while frames:
        node, kids, acc = frames[-1]
        for child in kids:
            if type(child) not in _BRANCHES:
                acc[1] += 1
                continue
            got = done.get(id(child))
            if got is None:
                if id(child) in onpath:
                    continue
                if len(frames) > MAX_DEPTH:
                    return len(frames) + 1, acc[1]
                frames.append((child, _children(child), [0, 1]))
                onpath.add(id(child))
                break
            acc[0] = max(acc[0], got[0])
            acc[1] += got[1]
        else:
            frames.pop()
            onpath.discard(id(node))
            result = (acc[0] + 1, acc[1])
            if result[1] > MAX_PATHS:
                return result
            done[id(node)] = result
            if frames:
                parent = frames[-1][2]
                parent[0] = max(parent[0], result[0])
                parent[1] += result[1]
            else:
                return result
    return 0, 1


def pruned(obj, depth: int = MAX_DEPTH, budget: list | None = None, onpath: set | None = None):
    """A copy of obj cut at `depth` levels and PRUNED_NODES nodes, leaves included (so shared
    references cannot multiply). Recursion is bounded by `depth`."""
    budget = [PRUNED_NODES] if budget is None else budget
    onpath = set() if onpath is None else onpath
    budget[0] -= 1
    kind = type(obj)
    if kind not in _BRANCHES:
        return obj
    if depth <= 0 or budget[0] <= 0 or id(obj) in onpath:
        return _elided()
    onpath.add(id(obj))

    def sub(x):
        return pruned(x, depth - 1, budget, onpath)

    def each(items):
        for x in items:
            if budget[0] <= 0:
                return
            yield x
    try:
        if kind is dict:
            return {k: sub(v) for k, v in each(obj.items())}
        if kind is list:
            return [sub(x) for x in each(obj)]
        if kind is tuple:
            return tuple(sub(x) for x in each(obj))
        if kind is Opaque:
            return Opaque(obj.qualname, sub(obj.args), sub(obj.state))
        return UnsafeCall(obj.qualname, sub(obj.args))
    finally:
        onpath.discard(id(obj))


# -- entry points ---------------------------------------------------------------------------

def _message(e: BaseException) -> str:
    if isinstance(e, _Limit):
        return str(e)
    if isinstance(e, RecursionError):
        return "pickle nests too deeply to read (RecursionError)"
    if isinstance(e, MemoryError):
        return "ran out of memory while reading the pickle"
    if isinstance(e, EOFError):
        return "pickle ends early (truncated?)"
    text = " ".join(str(e).split())[:160]
    return f"cannot unpickle: {type(e).__name__}: {text}" if text else \
        f"cannot unpickle: {type(e).__name__}"


def _at_end(file) -> bool:
    try:
        return file.read(1) == b""
    except Exception:  # noqa: BLE001 - e.g. a CappedReader at its limit
        return False


def unpickle(file, name: str, allow: dict | None = None, *, storage_ids: str | None = "zip",
             max_ops: int = MAX_OPS) -> Unpickled:
    """Read one pickle from `file` (a BytesIO, or a CappedReader over a real file)."""
    u = SafeUnpickler(file, name, allow, storage_ids=storage_ids, max_ops=max_ops)
    problems: list[Problem] = []
    obj, ok = None, False
    try:
        obj, ok = u.load(), True
    except Exception as e:  # noqa: BLE001 - bad content of any kind becomes a Problem
        if not isinstance(e, (_Limit, MemoryError, RecursionError)) and _at_end(file):
            e = EOFError()  # an opcode cut short fails in many ways; say what happened
        problems.append(Problem(ERROR, name, _message(e)))
    finally:
        u.stack = u.metastack = None
        u.memo.clear()
        u._pins.clear()
    if ok:
        try:
            height, paths = measure(obj)
            if height > MAX_DEPTH or paths > MAX_PATHS:
                obj = pruned(obj)
                u.note(f"the object nests deeper than {MAX_DEPTH} levels or expands to more "
                       f"than {MAX_PATHS:,} paths; the excess is elided (pickle bomb?)")
        except (RecursionError, MemoryError) as e:
            obj, ok = None, False
            problems.append(Problem(ERROR, name, _message(e)))
    notes = [Problem(WARNING, name, n) for n in u.notes]
    if u.note_count > len(u.notes):
        more = u.note_count - len(u.notes)
        notes.append(Problem(WARNING, name, f"... and {more:,} more warnings like these"))
    problems[:0] = notes
    return Unpickled(obj, ok, tuple(u.unsafe), tuple(problems), u.storages)


def read_pickle_bytes(data: bytes, name: str) -> tuple[Any, tuple[str, ...], tuple[Problem, ...]]:
    """One pickle from memory, with the torch allowlist: (object, unsafe names, problems)."""
    if len(data) > MAX_PICKLE_BYTES:
        return None, (), (Problem(ERROR, name, f"pickle is {len(data):,} bytes, over the "
                                  f"{MAX_PICKLE_BYTES:,}-byte limit; not read"),)
    result = unpickle(io.BytesIO(data), name)
    return result.obj, result.unsafe, result.problems
